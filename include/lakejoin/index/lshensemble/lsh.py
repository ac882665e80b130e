"""Dynamic MinHash LSH: an LSH Forest whose (b, r) is chosen at query time (thesis §2.4.7).

LSH Forest (Bawa et al.) stores each band's hash values in a prefix tree, so a query can stop
at depth ``r`` (the effective band width) and visit ``b`` trees (the effective band count).
Here every tree is a *sorted array of packed prefixes*, the trie-equivalent the Go reference
uses (sorted keys searched by prefix):

- the key of set ``X`` in tree ``j`` packs slots ``j, j+1, .., j+MAX_DEPTH-1`` of its signature,
  ``LEVEL_BITS`` bits per slot, first slot in the high bits. Sorting the keys sorts the sets
  lexicographically by that slot sequence, so the sets sharing a depth-``r`` prefix with the
  query form one contiguous run;
- the run is looked up in a *directory* (the trie's top levels, flattened): per tree and
  partition, the position of the first key of each of ``2^d`` buckets of the keys' top ``d``
  bits, ``d`` giving about ``DIRECTORY_SPAN`` keys per bucket. The run's bounds are then
  searched among its bucket's keys: about three reads (directory, keys, ids) per probed tree,
  at 4 bytes per ``DIRECTORY_SPAN`` sets and tree;
- there is one tree per signature slot ``j = 0..m-1``. Bands of width ``r`` are the trees at
  ``j = 0, r, 2r, ..``, so every ``b r <= m`` with ``r <= MAX_DEPTH`` is reachable: the same
  parameter space as a separate banded index per r (datasketch's ``MinHashLSHEnsemble``), at
  the memory of one key and one id per slot and set.

Slots are re-mixed (MurmurHash3 finalizer) before keeping ``LEVEL_BITS`` bits, so two different
values collide at one level with probability 2^-16; this adds at most ``b / 65536`` to the
collision probability of a non-matching set at ``r = 1`` and is negligible for ``r >= 2``.

All partitions live in one forest: their sets occupy consecutive column ranges (segments) of
the key matrix and each segment is sorted on its own, so one numba kernel serves every
(partition, tree) pair a query touches (one call per query).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lakejoin.index.lshensemble.minhash import fmix32

LEVEL_BITS = 16
MAX_DEPTH = 64 // LEVEL_BITS  # the largest r the packed keys can answer
DIRECTORY_SPAN = 8  # keys per directory bucket on average: 8 uint64 keys are one cache line


@njit(cache=True)
def prefix_keys(signatures: np.ndarray) -> np.ndarray:
    """Packed prefix keys ``(num_perm, n)`` of uint32 signatures ``(n, num_perm)``: row ``j`` is
    tree ``j`` (slots j..j+MAX_DEPTH-1, cyclic)."""
    n, num_perm = signatures.shape
    keys = np.empty((num_perm, n), dtype=np.uint64)
    for row in range(n):
        for tree in range(num_perm):
            key = np.uint64(0)
            for depth in range(MAX_DEPTH):
                level = fmix32(signatures[row, (tree + depth) % num_perm]) >> np.uint32(32 - LEVEL_BITS)
                key = (key << np.uint64(LEVEL_BITS)) | np.uint64(level)
            keys[tree, row] = key
    return keys


def directory_bits(num_keys: int) -> int:
    """Top-bit count ``d`` of a segment's directory: ``2^d`` buckets of about DIRECTORY_SPAN keys,
    ``d <= LEVEL_BITS`` so that a bucket never splits a run (a depth-1 prefix fixes the top
    ``LEVEL_BITS`` bits)."""
    return min(LEVEL_BITS, max(1, int(np.ceil(np.log2(max(num_keys, 1) / DIRECTORY_SPAN)))))


class PrefixForest:
    """Prefix trees over signatures whose rows are grouped by partition.

    ``segments[p]:segments[p+1]`` are the rows of partition ``p``.
    """

    def __init__(self, signatures: np.ndarray, segments: np.ndarray) -> None:
        self.num_perm = signatures.shape[1]
        self.num_sets = signatures.shape[0]
        self.segments = np.asarray(segments, dtype=np.int64)
        keys = prefix_keys(signatures.astype(np.uint32, copy=False))
        self.keys = np.empty_like(keys)
        self.ids = np.empty(keys.shape, dtype=np.int32)
        for start, end in zip(self.segments[:-1], self.segments[1:]):
            order = np.argsort(keys[:, start:end], axis=1, kind="stable")
            self.keys[:, start:end] = np.take_along_axis(keys[:, start:end], order, axis=1)
            self.ids[:, start:end] = order + start
        self.bits = np.array([directory_bits(n) for n in np.diff(self.segments)], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum((1 << self.bits) + 1)]).astype(np.int64)
        self.directory = _directory(self.keys, self.segments, self.bits, self.offsets)

    @classmethod
    def from_arrays(
        cls,
        num_perm: int,
        segments: np.ndarray,
        keys: np.ndarray,
        ids: np.ndarray,
        bits: np.ndarray,
        offsets: np.ndarray,
        directory: np.ndarray,
    ) -> PrefixForest:
        """The forest whose attributes are these arrays (as a forest built over ``num_perm``-slot
        signatures made them): nothing is sorted again."""
        forest = cls.__new__(cls)
        forest.num_perm, forest.num_sets = num_perm, keys.shape[1]
        forest.segments, forest.keys, forest.ids, forest.bits, forest.offsets, forest.directory = (
            segments,
            keys,
            ids,
            bits,
            offsets,
            directory,
        )
        return forest

    def query(
        self, signature: np.ndarray, partitions: np.ndarray, b: np.ndarray, r: np.ndarray, min_row: int = 0
    ) -> np.ndarray:
        """Rows ``>= min_row`` that share a depth-``r[i]`` prefix with the query in one of the
        first ``b[i]`` bands of partition ``partitions[i]`` (the union over partitions, Alg. 1),
        sorted, unique."""
        query_keys = prefix_keys(signature.astype(np.uint32, copy=False)[None, :])[:, 0]
        probes = _probes(
            self.bits,
            self.offsets,
            query_keys,
            np.asarray(partitions, dtype=np.int64),
            np.asarray(b, dtype=np.int64),
            np.asarray(r, dtype=np.int64),
        )
        return _union(self.keys, self.ids, self.directory, *probes, min_row)


@njit(cache=True)
def _directory(keys: np.ndarray, segments: np.ndarray, bits: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``directory[tree, offsets[p] + c]``: the first position of segment ``p`` in row ``tree``
    whose key's top ``bits[p]`` bits are >= ``c`` (``c = 0..2^bits[p]``; the last is the end)."""
    directory = np.empty((keys.shape[0], offsets[-1]), dtype=np.int32)
    for tree in range(keys.shape[0]):
        for p in range(len(bits)):
            shift = np.uint64(64 - bits[p])
            bucket = 0
            for pos in range(segments[p], segments[p + 1]):
                top = np.int64(keys[tree, pos] >> shift)
                while bucket <= top:
                    directory[tree, offsets[p] + bucket] = pos
                    bucket += 1
            while bucket <= 1 << bits[p]:
                directory[tree, offsets[p] + bucket] = segments[p + 1]
                bucket += 1
    return directory


@njit(cache=True, nogil=True)
def _probes(
    bits: np.ndarray, offsets: np.ndarray, query_keys: np.ndarray, partitions: np.ndarray, b: np.ndarray, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per probed tree (partition ``partitions[i]``, bands ``0..b[i]-1`` of width ``r[i]``): the
    tree, the directory cell of the query's prefix and the key range ``[low_key, high_key]`` of
    the run."""
    n_probes = 0
    for i in range(len(partitions)):
        n_probes += b[i]
    tree = np.empty(n_probes, dtype=np.int64)
    cell = np.empty(n_probes, dtype=np.int64)
    low_key = np.empty(n_probes, dtype=np.uint64)
    high_key = np.empty(n_probes, dtype=np.uint64)
    k = 0
    for i in range(len(partitions)):
        p = partitions[i]
        suffix = (np.uint64(1) << np.uint64((MAX_DEPTH - r[i]) * LEVEL_BITS)) - np.uint64(1)  # levels below r
        for band in range(b[i]):
            tree[k] = band * r[i]  # bands of width r start at slots 0, r, 2r, ..
            low_key[k] = query_keys[tree[k]] & ~suffix
            high_key[k] = low_key[k] | suffix
            cell[k] = offsets[p] + np.int64(low_key[k] >> np.uint64(64 - bits[p]))
            k += 1
    return tree, cell, low_key, high_key


@njit(cache=True, nogil=True)
def _union(
    keys: np.ndarray,
    ids: np.ndarray,
    directory: np.ndarray,
    tree: np.ndarray,
    cell: np.ndarray,
    low_key: np.ndarray,
    high_key: np.ndarray,
    min_row: int,
) -> np.ndarray:
    """The rows ``>= min_row`` of every probe's run, sorted and unique.

    Probes are independent, so each pass issues one scattered read for every probe before any
    is waited on (memory-level parallelism; probing tree by tree stalls on each read in turn):
    1. the run's directory bucket, which holds the whole run (buckets split keys by at most the
    top level's bits); 2. the run's bounds within it (:func:`_bounds`); 3. the run's first id;
    4. the runs' ids, set in a bitmap of rows (the union: 1 bit per set, cache resident, set
    without testing, so no branch to mispredict); 5. the bitmap's set bits from ``min_row`` on,
    ascending.
    """
    n_probes = len(tree)
    first = np.empty(n_probes, dtype=np.int64)
    last = np.empty(n_probes, dtype=np.int64)
    for k in range(n_probes):
        first[k], last[k] = directory[tree[k], cell[k]], directory[tree[k], cell[k] + 1]
    first = _bounds(keys, tree, first, last, low_key, False)
    last = _bounds(keys, tree, first, last, high_key, True)
    head = np.zeros(n_probes, dtype=np.int64)
    for k in range(n_probes):
        if first[k] < last[k]:
            head[k] = ids[tree[k], first[k]]
    seen = np.zeros(ids.shape[1] // 64 + 1, dtype=np.uint64)
    for k in range(n_probes):
        if first[k] < last[k]:
            seen[head[k] >> 6] |= np.uint64(1) << np.uint64(head[k] & 63)
        for pos in range(first[k] + 1, last[k]):
            set_row = ids[tree[k], pos]
            seen[set_row >> 6] |= np.uint64(1) << np.uint64(set_row & 63)
    seen[: min_row >> 6] = 0
    seen[min_row >> 6] &= ~((np.uint64(1) << np.uint64(min_row & 63)) - np.uint64(1))
    count = 0
    for word in seen:
        count += _popcount(word)
    found = np.empty(count, dtype=np.int64)
    count = 0
    for word in range(min_row >> 6, len(seen)):
        bits = seen[word]
        while bits:
            lowest = bits & (~bits + np.uint64(1))
            found[count] = word * 64 + _DE_BRUIJN_INDEX[(lowest * _DE_BRUIJN) >> np.uint64(58)]
            count += 1
            bits ^= lowest
    return found


@njit(cache=True, nogil=True)
def _bounds(
    keys: np.ndarray, tree: np.ndarray, lo: np.ndarray, hi: np.ndarray, target: np.ndarray, inclusive: bool
) -> np.ndarray:
    """For every ``k``, the first position in sorted ``keys[tree[k], lo[k]:hi[k]]`` whose key is
    > ``target[k]`` (``inclusive``) or >= it.

    The binary searches run in lock step, one halving of every unfinished search per round,
    without branches on the keys read: a round's reads are independent, so they overlap.
    """
    pos = lo.copy()
    length = hi - lo
    active = np.flatnonzero(length > 0)
    n_active = len(active)
    while n_active:
        kept = 0
        for j in range(n_active):
            k = active[j]
            half = length[k] // 2
            key = keys[tree[k], pos[k] + half]
            right = np.int64((key < target[k]) | (inclusive & (key == target[k])))
            pos[k] += right * (half + 1)
            length[k] = half + right * (length[k] - 2 * half - 1)
            active[kept] = k
            kept += length[k] > 0
        n_active = kept
    return pos


@njit(cache=True, nogil=True)
def _popcount(word: np.uint64) -> int:
    """Set bits of a word (the SWAR bit count)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2)) & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * np.uint64(0x0101010101010101)) >> np.uint64(56))  # type: ignore[return-value]  # numba: the count as a machine int


# A de Bruijn sequence: the top 6 bits of _DE_BRUIJN << i are distinct for i = 0..63, so they
# index the position of a single set bit (one multiplication instead of a search).
_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DE_BRUIJN_INDEX = np.zeros(64, dtype=np.int64)
_DE_BRUIJN_INDEX[(_DE_BRUIJN << np.arange(64, dtype=np.uint64)) >> np.uint64(58)] = np.arange(64)
