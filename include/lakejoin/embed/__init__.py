"""Embeddings of cell values, one vector per distinct normalized value and model.

``embed(values, model)`` normalizes every value with ``lakejoin.normalize.normalize_value``,
encodes it with the named model and returns float32 rows of unit L2 norm, so that Euclidean
distance is a metric monotone in cosine (``‖a−b‖² = 2 − 2cos``), as PEXESO's pivot lemmas need
(the PEXESO paper's metric-space requirement, §III). Models load from installed packages only, never from a hub,
once per process (``load_model`` caches them).

Models (``MODELS``):

- ``glove-50``: GloVe 6B 50-d, mean of the value's known words; an out-of-vocabulary value
  gets a hash-seeded random unit vector (see ``lakejoin.embed.models.glove``).
- ``minilm-onnx``: all-MiniLM-L6-v2, int8 ONNX, 384-d; onnxruntime + tokenizers, no torch.
- ``minilm``: the same model in fp32 via sentence-transformers (optional extra, needs torch).
- ``char-ngram``: hashed character 3-grams, 256-d, no dependency: spelling, not meaning.

Default model for PEXESO: ``minilm-onnx`` (``PEXESO_MODEL``). Why:

- It embeds every string. Its WordPiece vocabulary splits unseen codes and names into
  sub-words, while GloVe knows only whole lower-case words, so on open-data key columns
  (codes, tail numbers, personal and place names) a large share of values would fall back to
  GloVe's equi-join-like random vectors and PEXESO would find nothing semantic there.
- It is a sentence model: multi-word values ("korea, rep." vs "south korea") are encoded in
  context, not as a bag of word vectors.
- It runs anywhere the lake runs: torch-free, 23 MB, within 0.999 cosine of the fp32 model.
- The price is dimension: 384 against GloVe's 50 makes PEXESO's verify step (exact distances)
  about 8x costlier per pair, and embedding is slower (see ``tests/benchmarks/bench_embed.py``).
  Pivot-space blocking does not depend on the dimension, and each value is embedded once per
  model (``embed/values``), so the one-off cost buys recall. Choose ``glove-50`` to reproduce
  the paper's web-table setup; PEXESO's τ must be re-calibrated for whichever model is used.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np

from lakejoin.embed.models import LOADERS, EmbeddingModel, l2_normalize
from lakejoin.normalize import normalize_value

MODELS: tuple[str, ...] = tuple(LOADERS)
PEXESO_MODEL = "minilm-onnx"

_loaded: dict[str, EmbeddingModel] = {}
_lock = threading.Lock()


def load_model(model: str) -> EmbeddingModel:
    """The process's instance of ``model``, loaded on first use."""
    if model not in LOADERS:
        raise ValueError(f"unknown embedding model {model!r}; choose one of {', '.join(MODELS)}")
    with _lock:
        if model not in _loaded:
            _loaded[model] = LOADERS[model]()
        return _loaded[model]


def model_dim(model: str) -> int:
    """The vector length of ``model``."""
    return load_model(model).dim


def value_hash(value: str) -> str:
    """The key of a value in ``embed/values``: hex SHA-256 of its UTF-8 bytes.

    Equal to Spark's ``sha2(value, 256)``, so the query side can look up vectors the Spark
    build stored.
    """
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _normalized(values: Sequence[str]) -> list[str]:
    if isinstance(values, str):
        raise ValueError("embed() takes a list of values, not a single string")
    normalized = []
    for position, raw in enumerate(values):
        value = normalize_value(raw)
        if value is None:
            raise ValueError(
                f"value {position} ({raw!r}) is null-like after normalization; drop nulls before embedding"
            )
        normalized.append(value)
    return normalized


def embed(values: Sequence[str], model: str) -> np.ndarray:
    """Embed ``values`` with ``model``: a ``(len(values), model_dim(model))`` float32 array of unit rows."""
    encoder = load_model(model)
    normalized = _normalized(values)
    if not normalized:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return l2_normalize(encoder.encode(normalized))
