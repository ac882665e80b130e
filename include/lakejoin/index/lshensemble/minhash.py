"""MinHash signatures (thesis §2.3.1), compiled, bit-identical to ``datasketch.MinHash``.

``sig_i(X) = min_{x in X} h_i(x)`` for ``i = 1..m``. The hash family is datasketch's default
("affine32" scheme, datasketch >= 2.0): ``h(x)`` is the first 4 bytes of SHA-1 of the UTF-8
value read little-endian, pre-mixed with the MurmurHash3 32-bit finalizer, then permuted by
``h_i(x) = a_i * h(x) + b_i mod 2^32`` with ``(a_i, b_i)`` drawn from
``numpy.random.RandomState(seed)``. So a signature computed here equals
``datasketch.MinHash(num_perm, seed)`` updated with the same values, and sketches can be mixed
with datasketch's indexes.

Only hashing one value is a Python call (hashlib); the permutations and the minimum run in
one numba pass over the values, so executors (Spark ``mapInArrow``), the in-memory build and
queries share this code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from numba import njit

EMPTY = np.uint32(0xFFFFFFFF)  # the empty set's slot value (datasketch's max hash)


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


@njit(cache=True, nogil=True)
def fmix32(h: np.uint32) -> np.uint32:
    """MurmurHash3's 32-bit finalizer, an avalanching bijection on uint32 (wraps on purpose).

    Scalar, for the kernels; compiled on first use (an eager numba ufunc would cost every
    import of the package about a second)."""
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    return np.uint32(h ^ (h >> np.uint32(16)))


def hash_values(values: Iterable[str]) -> np.ndarray:
    """``sha1_hash32`` of each value's UTF-8 bytes, as uint32."""
    digest = b"".join(hashlib.sha1(v.encode("utf-8")).digest()[:4] for v in values)
    return np.frombuffer(digest, dtype="<u4").astype(np.uint32)


def signatures_from_hashes(
    hashes: np.ndarray, set_index: np.ndarray, num_sets: int, num_perm: int, seed: int
) -> np.ndarray:
    """Signatures ``(num_sets, num_perm)`` uint32 of sets given as flat value hashes.

    ``set_index[v]`` is the row (set) of value ``v``.
    """
    a, b = permutations(num_perm, seed)
    out = np.full((num_sets, num_perm), EMPTY, dtype=np.uint32)
    _permuted_minima(hashes.astype(np.uint32, copy=False), np.asarray(set_index, dtype=np.int64), a, b, out)
    return out


@njit(cache=True, nogil=True)
def _permuted_minima(hashes: np.ndarray, set_index: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[set_index[v], i] = min(out[..], a_i fmix32(hashes[v]) + b_i mod 2^32)`` for every value."""
    for v in range(len(hashes)):
        mixed = fmix32(hashes[v])
        row = out[set_index[v]]
        for i in range(len(a)):
            row[i] = min(row[i], np.uint32(a[i] * mixed + b[i]))


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


@njit(cache=True, nogil=True)
def equal_slots(signatures: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Slots of each ``signatures[rows[i]]`` equal to the query's, read in place (no
    ``signatures[rows]`` copy); over ``num_perm``, the unbiased MinHash estimate of Jaccard (§2.3.1)."""
    out = np.zeros(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        row = signatures[rows[i]]
        for j in range(len(query)):
            out[i] += row[j] == query[j]
    return out
