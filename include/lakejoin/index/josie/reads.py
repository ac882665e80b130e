"""The two reads every algorithm of thesis Ch. 3 is made of, and the running top-k heap.

JOSIE, MergeList and ProbeSet differ only in *which* posting lists and set suffixes they
read (thesis §3.2–3.3); the set read and the storage live here, shared. A list read differs
by what it records per set: MergeList's is :func:`scan_list` (a count), ProbeSet's a seen
flag, JOSIE's (``kernels._read_list``) the candidate state of Eqs. 3.2–3.6, which is what the
cost model (``cost.py``) times.

Storage is CSR over int32 arrays held in memory (the "storage layer" of §3.4.3):

- posting list of token ``t``: ``post_set[list_indptr[t]:list_indptr[t+1]]`` (dense set
  index) with ``post_pos`` (0-based position of ``t`` in that set) and ``post_size`` (the
  set's size), the three fields of Example 3.2.3 read sequentially with the list.
- integer set ``X``: ``set_tokens[set_indptr[X]:set_indptr[X+1]]``, token ids ascending in
  the global order.
- the query is a ``mark`` byte per token id (1 = in Q), so reading ``n`` tokens of a set
  costs ``n`` lookups whatever |Q| is: ``S(n)`` linear in ``n`` as Eq. 3.15 assumes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class Scratch(NamedTuple):
    """A searcher's per-query working memory, one bundle for the compiled algorithms (numba
    takes a named tuple of arrays as one argument). Every array is left as a query found it."""

    mark: np.ndarray  # uint8 per list: 1 = its token is in Q
    hot: np.ndarray  # (3, sets) int32: JOSIE's per-set state (``kernels``)
    counts: np.ndarray  # int32 per set: MergeList's counts, ProbeSet's seen flags
    touched: np.ndarray  # int32 per set: the sets a query touched, to reset
    cand: np.ndarray  # (sets, 4) int32: JOSIE's candidate table

    @classmethod
    def allocate(cls, n_sets: int, n_lists: int) -> Scratch:
        """Zeroed scratch for an index of ``n_sets`` sets and ``n_lists`` posting lists."""
        return cls(
            np.zeros(n_lists, np.uint8),
            np.zeros((3, n_sets), np.int32),
            np.zeros(n_sets, np.int32),
            np.empty(n_sets, np.int32),
            np.empty((n_sets, 4), np.int32),
        )


class TopK(NamedTuple):
    """The running top-k (:func:`heap_push`, ascending) and the read counters of one query."""

    overlaps: np.ndarray  # int64, k
    sets: np.ndarray  # int64, k: set index, -1 for a floor's placeholder
    stats: np.ndarray  # int64: lists read, sets read, posting entries read, set tokens read, plan (JOSIE's)


@njit(cache=True, inline="always")
def is_group_end(q: np.ndarray, group: np.ndarray, i: int) -> bool:
    """True when query position ``i`` holds the last list of its duplicate group (§3.4.1)."""
    return i + 1 == q.shape[0] or group[q[i + 1]] != group[q[i]]


@njit(cache=True, inline="always")
def note_list_read(stats: np.ndarray, list_indptr: np.ndarray, token: int) -> None:
    """Count the posting list of ``token`` as read in a query's stats (lists, entries)."""
    stats[0] += 1
    stats[2] += list_indptr[token + 1] - list_indptr[token]


@njit(cache=True)
def count_suffix(set_indptr: np.ndarray, set_tokens: np.ndarray, mark: np.ndarray, s: int, start: int) -> int:
    """Read ``X[start:]`` of set ``s`` and return ``|X[start:] ∩ Q|``."""
    hits = 0
    for e in range(set_indptr[s] + start, set_indptr[s + 1]):
        hits += mark[set_tokens[e]]
    return hits


@njit(cache=True)
def scan_list(
    list_indptr: np.ndarray,
    post_set: np.ndarray,
    token: int,
    weight: int,
    counts: np.ndarray,
    touched: np.ndarray,
    n_touched: int,
) -> int:
    """Read the posting list of ``token``: add ``weight`` to the count of every set in it,
    append sets counted for the first time to ``touched``; return the new touched count."""
    for e in range(list_indptr[token], list_indptr[token + 1]):
        s = post_set[e]
        if counts[s] == 0:
            touched[n_touched] = s
            n_touched += 1
        counts[s] += weight
    return n_touched


@njit(cache=True)
def heap_push(values: np.ndarray, ids: np.ndarray, n: int, k: int, overlap: float, set_index: float) -> int:
    """Offer ``(overlap, set)`` to the running top-k and return its new size (compiled for
    integers, and for floats where JOSIE keeps its k best estimates, ``kernels._merge_is_cheaper``).

    The heap is kept as an ascending array, so ``values[0]`` is |Q ∩ X_k| once full and
    ``values[1]`` is |Q ∩ X_{k-1}| (both needed by Eq. 3.5); k is small (tens), so sorted
    insertion costs less than a binary heap's bookkeeping.
    """
    if n < k:
        j = n
        n += 1
        while j > 0 and values[j - 1] > overlap:
            values[j] = values[j - 1]
            ids[j] = ids[j - 1]
            j -= 1
    elif overlap > values[0]:
        j = 0
        while j + 1 < k and values[j + 1] < overlap:
            values[j] = values[j + 1]
            ids[j] = ids[j + 1]
            j += 1
    else:
        return n
    values[j] = overlap
    ids[j] = set_index
    return n


@njit(cache=True, inline="always")
def kth_overlap(values: np.ndarray, n: int, k: int) -> int:
    """|Q ∩ X_k|, the pruning threshold: 0 until k sets are in the running top-k."""
    return values[0] if n == k else 0
