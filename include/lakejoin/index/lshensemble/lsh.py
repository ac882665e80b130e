"""Dynamic MinHash LSH: an LSH Forest whose (b, r) is chosen at query time (thesis §2.4.7).

LSH Forest (Bawa et al.) stores each band's hash values in a prefix tree, so a query can stop
at depth ``r`` (the effective band width) and visit ``b`` trees (the effective band count).
Here every tree is a *sorted array of packed prefixes*, the trie-equivalent the Go reference
uses (sorted keys searched by prefix binary search):

- the key of set ``X`` in tree ``j`` packs slots ``j, j+1, .., j+MAX_DEPTH-1`` of its signature,
  ``LEVEL_BITS`` bits per slot, first slot in the high bits. Sorting the keys sorts the sets
  lexicographically by that slot sequence, so the sets sharing a depth-``r`` prefix with the
  query form one contiguous run. Its start is found by guessing the rank from the key (keys
  are mixed hashes, close to uniform) and galloping from the guess, its end by galloping from
  the start: a few nearby reads instead of two binary searches' scattered cache misses;
- there is one tree per signature slot ``j = 0..m-1``. Bands of width ``r`` are the trees at
  ``j = 0, r, 2r, ..``, so every ``b r <= m`` with ``r <= MAX_DEPTH`` is reachable: the same
  parameter space as a separate banded index per r (datasketch's ``MinHashLSHEnsemble``), at
  the memory of one key and one id per slot and set.

Slots are re-mixed (MurmurHash3 finalizer) before keeping ``LEVEL_BITS`` bits, so two different
values collide at one level with probability 2^-16; this adds at most ``b / 65536`` to the
collision probability of a non-matching set at ``r = 1`` and is negligible for ``r >= 2``.

All partitions live in one forest: their sets occupy consecutive column ranges (segments) of
the key matrix and each segment is sorted on its own, so one small numba kernel serves every
(partition, tree) pair a query touches (one call per query).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lakejoin.index.lshensemble.minhash import fmix32

LEVEL_BITS = 16
MAX_DEPTH = 64 // LEVEL_BITS  # the largest r the packed keys can answer
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def prefix_keys(signatures: np.ndarray) -> np.ndarray:
    """Packed prefix keys ``(num_perm, n)``: row ``j`` is tree ``j`` (slots j..j+MAX_DEPTH-1, cyclic)."""
    levels = (fmix32(signatures.astype(np.uint32, copy=False)) >> np.uint32(32 - LEVEL_BITS)).astype(np.uint64)
    num_perm = levels.shape[1]
    copies = 1 + -(-(MAX_DEPTH - 1) // max(num_perm, 1))  # enough to wrap even when num_perm < 4
    cyclic = np.concatenate([levels] * copies, axis=1)
    keys = np.zeros(levels.shape, dtype=np.uint64)
    for depth in range(MAX_DEPTH):
        keys = (keys << np.uint64(LEVEL_BITS)) | cyclic[:, depth : depth + num_perm]
    return np.ascontiguousarray(keys.T)


def prefix_mask(r: np.ndarray) -> np.ndarray:
    """The bits of the first ``r`` levels of a packed key."""
    low_bits = (MAX_DEPTH - np.asarray(r, dtype=np.uint64)) * np.uint64(LEVEL_BITS)
    return ~((np.uint64(1) << low_bits) - np.uint64(1)) & _ALL_ONES


class PrefixForest:
    """Prefix trees over signatures whose rows are grouped by partition.

    ``segments[p]:segments[p+1]`` are the rows of partition ``p``.
    """

    def __init__(self, signatures: np.ndarray, segments: np.ndarray) -> None:
        self.num_perm = signatures.shape[1]
        self.num_sets = signatures.shape[0]
        self.segments = np.asarray(segments, dtype=np.int64)
        keys = prefix_keys(signatures)
        self.keys = np.empty_like(keys)
        self.ids = np.empty(keys.shape, dtype=np.int32)
        for start, end in zip(self.segments[:-1], self.segments[1:]):
            order = np.argsort(keys[:, start:end], axis=1, kind="stable")
            self.keys[:, start:end] = np.take_along_axis(keys[:, start:end], order, axis=1)
            self.ids[:, start:end] = order + start

    def query(self, signature: np.ndarray, partitions: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Rows that share a depth-``r[i]`` prefix with the query in one of the first ``b[i]``
        bands of partition ``partitions[i]`` (the union over partitions, Alg. 1), sorted, unique."""
        if len(partitions) == 0:
            return np.empty(0, dtype=np.int64)
        query_keys = prefix_keys(signature[None, :])[:, 0]
        tree_counts = np.asarray(b, dtype=np.int64)
        part = np.repeat(partitions, tree_counts)
        width = np.repeat(np.asarray(r, dtype=np.int64), tree_counts)
        band = np.arange(len(part)) - np.repeat(np.cumsum(tree_counts) - tree_counts, tree_counts)
        tree = band * width  # bands of width r start at slots 0, r, 2r, ..
        mask = prefix_mask(width)
        prefix = query_keys[tree] & mask
        lo = self.segments[part]
        hi = self.segments[part + 1]
        return _probe(self.keys, self.ids, tree, lo, hi, prefix, prefix | ~mask)


@njit(cache=True, nogil=True)
def _bound(row: np.ndarray, lo: int, hi: int, target: np.uint64, inclusive: bool) -> int:
    """First position in sorted ``row[lo:hi]`` whose key is > target (``inclusive``) or >= target."""
    while lo < hi:
        mid = (lo + hi) // 2
        if row[mid] < target or (inclusive and row[mid] == target):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _run_start(row: np.ndarray, lo: int, hi: int, target: np.uint64) -> int:
    """First position in sorted ``row[lo:hi]`` whose key is >= target.

    Keys are mixed hashes, close to uniform on [0, 2^64), so the target's rank is guessed from
    its value and found by galloping from the guess: a few reads near one place instead of a
    binary search's ~log2(n) scattered cache misses.
    """
    guess = lo + np.int64(((target >> np.uint64(40)) * np.uint64(hi - lo)) >> np.uint64(24))
    if guess < hi and row[guess] < target:  # the start lies right of the guess
        known, step = guess, 1
        while guess + step < hi and row[guess + step] < target:
            known = guess + step
            step *= 2
        return _bound(row, known + 1, min(guess + step, hi), target, False)
    known, step = guess, 1  # row[known] >= target, or known == hi
    while guess - step >= lo and row[guess - step] >= target:
        known = guess - step
        step *= 2
    return _bound(row, max(guess - step + 1, lo), known, target, False)


@njit(cache=True, nogil=True)
def _run_end(row: np.ndarray, start: int, hi: int, target: np.uint64) -> int:
    """First position from ``start`` whose key is > target: runs are short, so gallop from
    ``start`` (reads stay near it) before the binary search."""
    step = 1
    while start + step < hi and row[start + step - 1] <= target:
        step *= 2
    return _bound(row, start + step // 2, min(start + step, hi), target, True)


@njit(cache=True, nogil=True)
def _probe(keys, ids, tree, lo, hi, low_key, high_key) -> np.ndarray:
    """The union, sorted, of the id runs whose keys lie in ``[low_key[i], high_key[i]]`` within
    ``keys[tree[i], lo[i]:hi[i]]`` (two galloping searches per probed tree)."""
    seen = np.zeros(keys.shape[1], dtype=np.bool_)
    found = np.empty(keys.shape[1], dtype=np.int64)
    count = 0
    for i in range(len(tree)):
        row = keys[tree[i]]
        start = _run_start(row, lo[i], hi[i], low_key[i])
        end = _run_end(row, start, hi[i], high_key[i])
        for pos in range(start, end):
            set_row = ids[tree[i], pos]
            if not seen[set_row]:
                seen[set_row] = True
                found[count] = set_row
                count += 1
    if count * 16 < len(seen):  # few: sorting them beats scanning every set
        return np.sort(found[:count])
    return np.flatnonzero(seen)
