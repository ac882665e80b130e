"""Embedding models behind one small interface, each loaded from an installed package.

Every model turns already-normalized strings into raw vectors; ``lakejoin.embed.embed`` does
the normalization before and the L2 normalization after, so a model module holds only what
is specific to it. Models are located on disk without importing their packages (several have
import-time side effects: downloads, thread pools, logging set-up) and never touch a model hub.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

# Belt and braces: nothing below may reach a hub, even if a library is asked to.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class EmbeddingModel(Protocol):
    """What ``lakejoin.embed`` needs from a model."""

    name: str
    dim: int

    def encode(self, values: Sequence[str]) -> np.ndarray:
        """Return a ``(len(values), dim)`` float32 array; rows need not be unit length."""
        ...


def package_dir(package: str) -> Path:
    """The installed directory of ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {package!r} is not installed; it ships the model's files")
    return Path(next(iter(spec.submodule_search_locations)))


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Scale every row to unit length (rows that are all zero stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _glove() -> EmbeddingModel:
    from lakejoin.embed.models.glove import GloveModel

    return GloveModel()


def _minilm_onnx() -> EmbeddingModel:
    from lakejoin.embed.models.minilm_onnx import MiniLMOnnxModel

    return MiniLMOnnxModel()


def _minilm() -> EmbeddingModel:
    from lakejoin.embed.models.minilm import MiniLMModel

    return MiniLMModel()


def _char_ngram() -> EmbeddingModel:
    from lakejoin.embed.models.char_ngram import CharNgramModel

    return CharNgramModel()


# name -> loader; a loader imports its module only when the model is first used.
LOADERS: dict[str, Callable[[], EmbeddingModel]] = {
    "glove-50": _glove,
    "minilm-onnx": _minilm_onnx,
    "minilm": _minilm,
    "char-ngram": _char_ngram,
}
