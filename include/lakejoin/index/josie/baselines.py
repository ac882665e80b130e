"""The thesis's exact baselines (§3.2, §3.5.4), with distinct-list reads like JOSIE-D.

- **MergeList-D** (§3.2.1, cost Eq. 3.1): read every distinct posting list of Q, count how
  often each set appears (a skipped duplicate counts too), keep the k largest counts.
- **ProbeSet-D** (§3.2.2–3.2.3, Xiao et al.; cost Eq. 3.3): read lists in the global order;
  read every new candidate that passes the position filter (Eq. 3.2) at once, from its first
  match on; stop when the prefix filter says no unseen set can reach |Q ∩ X_k|.

Both take the same bundles as JOSIE (the searcher's ``arrays.IndexArrays``, and ``reads.Scratch``
and ``reads.TopK``) and return the same ``(n_results)`` into ``top.sets``/``top.overlaps``, with
read counts in ``top.stats`` (lists read, sets read, posting entries read, set tokens read).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lakejoin.index.josie.arrays import IndexArrays
from lakejoin.index.josie.reads import Scratch, TopK, count_suffix, heap_push, is_group_end, kth_overlap, scan_list


@njit(cache=True)
def mergelist(q: np.ndarray, k: int, index: IndexArrays, scratch: Scratch, top: TopK, n: int = 0) -> int:
    """MergeList-D. ``scratch.counts`` is a zeroed per-set array, left zeroed on return. ``n``:
    the entries of ``top`` it starts from (a floor's placeholders, ``kernels.josie``)."""
    list_indptr, post_set, group = index.list_indptr, index.post_set, index.group
    counts, touched, out_sets, out_overlaps, stats = scratch.counts, scratch.touched, top.sets, top.overlaps, top.stats
    n_touched = 0
    skipped = 0
    for i in range(q.shape[0]):
        if not is_group_end(q, group, i):
            skipped += 1
            continue
        token = q[i]
        n_touched = scan_list(list_indptr, post_set, token, skipped + 1, counts, touched, n_touched)
        stats[0] += 1
        stats[2] += list_indptr[token + 1] - list_indptr[token]
        skipped = 0
    for t in range(n_touched):
        s = touched[t]
        n = heap_push(out_overlaps, out_sets, n, k, counts[s], s)
        counts[s] = 0
    return n


@njit(cache=True)
def timed_merge_reads(tokens: np.ndarray, repeats: int, index: IndexArrays, scratch: Scratch) -> None:
    """MergeList's list reads as the cost fit times them (``cost.fit_read_cost``, the ``m`` of
    Eq. 3.1 JOSIE weighs when it may finish MergeList's way): ``tokens`` counted, the counts
    reset after each repeat."""
    counts, touched = scratch.counts, scratch.touched
    for _ in range(repeats):
        n_touched = 0
        for t in tokens:
            n_touched = scan_list(index.list_indptr, index.post_set, t, 1, counts, touched, n_touched)
        for m in range(n_touched):
            counts[touched[m]] = 0


@njit(cache=True)
def probeset(q: np.ndarray, k: int, index: IndexArrays, scratch: Scratch, top: TopK, n: int = 0) -> int:
    """ProbeSet-D with the position filter. ``scratch.counts``, its seen flags, is a zeroed per-set
    array, left zeroed on return. ``n``: the entries of ``top`` it starts from (as :func:`mergelist`)."""
    list_indptr, post_set, post_pos, group = index.list_indptr, index.post_set, index.post_pos, index.group
    set_indptr, set_tokens = index.set_indptr, index.set_tokens
    mark, seen, touched = scratch.mark, scratch.counts, scratch.touched
    out_sets, out_overlaps, stats = top.sets, top.overlaps, top.stats
    nq = q.shape[0]
    n_touched = 0
    skipped = 0
    for i in range(nq):
        if not is_group_end(q, group, i):
            skipped += 1
            continue
        theta = kth_overlap(out_overlaps, n, k)
        if theta >= nq - i + skipped:  # prefix filter: no unseen set can beat X_k
            break
        token = q[i]
        stats[0] += 1
        stats[2] += list_indptr[token + 1] - list_indptr[token]
        for e in range(list_indptr[token], list_indptr[token + 1]):
            s = post_set[e]
            if seen[s]:
                continue
            seen[s] = 1
            touched[n_touched] = s
            n_touched += 1
            size = set_indptr[s + 1] - set_indptr[s]
            position = post_pos[e]
            bound = skipped + 1 + min(nq - 1 - i, size - 1 - position)  # Eq. 3.2
            if bound <= kth_overlap(out_overlaps, n, k):
                continue
            overlap = skipped + 1 + count_suffix(set_indptr, set_tokens, mark, s, position + 1)
            stats[1] += 1
            stats[3] += size - 1 - position
            n = heap_push(out_overlaps, out_sets, n, k, overlap, s)
        skipped = 0
    for t in range(n_touched):
        seen[touched[t]] = 0
    return n
