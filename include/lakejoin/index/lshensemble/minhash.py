"""MinHash signatures (thesis §2.3.1), vectorized, bit-identical to ``datasketch.MinHash``.

``sig_i(X) = min_{x in X} h_i(x)`` for ``i = 1..m``. The hash family is datasketch's default
("affine32" scheme, datasketch >= 2.0): ``h(x)`` is the first 4 bytes of SHA-1 of the UTF-8
value read little-endian, pre-mixed with the MurmurHash3 32-bit finalizer, then permuted by
``h_i(x) = a_i * h(x) + b_i mod 2^32`` with ``(a_i, b_i)`` drawn from
``numpy.random.RandomState(seed)``. So a signature computed here equals
``datasketch.MinHash(num_perm, seed)`` updated with the same values, and sketches can be mixed
with datasketch's indexes.

Only hashing one value is a Python call (hashlib); the permutations and the minimum run in
numpy over blocks of values, so executors (Spark ``mapInArrow``) and the in-memory build share
this code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from numba import njit

EMPTY = np.uint32(0xFFFFFFFF)  # the empty set's slot value (datasketch's max hash)
_BLOCK_VALUES = 1 << 14  # values permuted at once: block x num_perm x 4 bytes of scratch


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The permutation parameters ``(a, b)`` (uint32, odd ``a``) that datasketch draws for ``seed``."""
    if num_perm < 1:
        raise ValueError(f"num_perm must be positive, got {num_perm}")
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, an avalanching bijection on uint32 (wraps on purpose)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def hash_values(values: Iterable[str]) -> np.ndarray:
    """``sha1_hash32`` of each value's UTF-8 bytes, as uint32."""
    digest = b"".join(hashlib.sha1(v.encode("utf-8")).digest()[:4] for v in values)
    return np.frombuffer(digest, dtype="<u4").astype(np.uint32)


def signatures_from_hashes(
    hashes: np.ndarray, set_index: np.ndarray, num_sets: int, num_perm: int, seed: int
) -> np.ndarray:
    """Signatures ``(num_sets, num_perm)`` uint32 of sets given as flat value hashes.

    ``set_index[v]`` is the row (set) of value ``v``; it must be non-decreasing, so each set is
    a run of values. Runs longer than a block are reduced block by block.
    """
    a, b = permutations(num_perm, seed)
    out = np.full((num_sets, num_perm), EMPTY, dtype=np.uint32)
    mixed = fmix32(hashes.astype(np.uint32, copy=False))
    for start in range(0, len(mixed), _BLOCK_VALUES):
        block = mixed[start : start + _BLOCK_VALUES]
        rows = set_index[start : start + _BLOCK_VALUES]
        permuted = block[:, None] * a + b  # uint32 arithmetic: mod 2^32
        run_starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        run_rows = rows[run_starts]
        out[run_rows] = np.minimum(out[run_rows], np.minimum.reduceat(permuted, run_starts, axis=0))
    return out


def minhash_signatures(sets: Sequence[Iterable[str]], num_perm: int = 256, seed: int = 1) -> np.ndarray:
    """One signature row per set (values taken as given: distinct, already normalized)."""
    values: list[str] = []
    lengths = np.zeros(len(sets), dtype=np.int64)
    for i, tokens in enumerate(sets):
        before = len(values)
        values.extend(tokens)
        lengths[i] = len(values) - before
    set_index = np.repeat(np.arange(len(sets)), lengths)
    return signatures_from_hashes(hash_values(values), set_index, len(sets), num_perm, seed)


def jaccard_estimates(signatures: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The fraction of slots of ``signatures[rows]`` equal to the query's, the unbiased MinHash
    estimate of Jaccard (§2.3.1)."""
    return _equal_slots(signatures, np.asarray(rows, dtype=np.int64), query) / max(signatures.shape[1], 1)


@njit(cache=True, nogil=True)
def _equal_slots(signatures: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Equal slots per row, reading the rows in place (no ``signatures[rows]`` copy)."""
    out = np.zeros(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        row = signatures[rows[i]]
        for j in range(len(query)):
            out[i] += row[j] == query[j]
    return out
