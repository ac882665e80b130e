"""Character n-gram feature hashing: the dependency-free model.

A value becomes the bag of its character 3-grams, with a space marking both ends so that
prefixes and suffixes count ("ua" -> " ua", "ua "). Each n-gram is hashed (CRC-32, stable
across processes unlike Python's ``hash``) to one of ``dim`` buckets with a hash-derived
sign (the "hashing trick" of Weinberger et al., 2009, which keeps inner products unbiased).
Cosine similarity then measures shared spelling, so misspellings and format variants
("n14228" vs "n-14228") are near while meaning is not captured at all.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from typing_extensions import override

from lakejoin.embed.models import EmbeddingModel

DIM = 256
N = 3


class CharNgramModel(EmbeddingModel):
    """Hashed character 3-grams: the dependency-free model (shared spelling, not meaning)."""

    name = "char-ngram"
    dim = DIM

    @override
    def encode(self, values: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(values), self.dim), dtype=np.float32)
        for row, value in enumerate(values):
            padded = f" {value} "
            for start in range(max(1, len(padded) - N + 1)):
                code = zlib.crc32(padded[start : start + N].encode("utf-8"))
                vectors[row, code % self.dim] += 1.0 if (code >> 31) & 1 else -1.0
        return vectors
