"""JOSIE: exact top-k overlap set similarity search (thesis Ch. 3, Algorithm 2).

Given a query set Q and the lake's sets Ω, return at most k sets X with |Q ∩ X| > 0 such
that the k-th overlap is ≥ that of every set left out (Definition 3.1.1). Ranking by
overlap equals ranking by containment |Q ∩ X| / |Q| for a fixed query.

The algorithm reads Q's posting lists in the global order (rarest first) and keeps, for
every unread candidate X, ``i_{X,0}`` (query position of first sight), ``j_{X,0}`` and
``j_X`` (first and latest matched positions in X) and ``|Q[1:i] ∩ X|`` (partial overlap).
Once per batch of λ distinct lists it compares the net cost (Eq. 3.13) of reading the best
candidate's remaining suffix (benefit Eq. 3.7, new threshold Eq. 3.5, estimate Eq. 3.4)
with that of reading the next batch of lists (benefit Eqs. 3.9–3.12), and does the cheaper.
The prefix filter (§3.2.2) stops new candidates, the position filter (Eqs. 3.2, 3.6)
drops candidates that cannot reach |Q ∩ X_k|, and only the last list of each duplicate
group is read, the skipped lists adding to every partial overlap in it (§3.4.1; the bug
the note's Part B flags in the published code, which overwrote instead of adding, is
what ``partial[s] += skipped + 1`` avoids). The read costs S and L are fitted to this
process's arrays when the index is loaded (``cost.py``).

[D] In memory a decision is not free next to the reads it weighs: it scans every unread
candidate (the note's pitfall 5, "estimation overhead"). So the per-set state a posting
entry updates is two int32 arrays (partial overlap and latest position: MergeList's
counter plus one field; every entry tests the first, as ProbeSet's seen flag; a third holds
i_{X,0} of the sets matched once, below), the fields only a decision needs sit in a
candidate table scanned sequentially, a decision makes
one pass over U, sums Eq. 3.7's elimination term by integer upper bound instead of
sorting U, and keeps only the candidates estimated above |Q ∩ X_k| (the only ones it may
read) in a max-heap, as the reading usually stops after a few of them; its
cost per candidate, ``d``, is timed on load with the read costs (:func:`fit_decision_cost`),
and a decision point is skipped when ``d·|U|`` exceeds the cost of all posting lists still
unread, i.e. when no outcome could pay for it. λ is chosen per query
(:func:`_query_batch`) so that every query has about 24 decision points: the thesis's λ = 20
for Open Data fits a query of ~480 lists, but a web-table query of a dozen lists would never
decide (i.e. run MergeList), and a 3,000-list query would pay ~150 decision passes (on
bench_josie's open data, λ = ⌈lists/24⌉ instead of 20 for the large queries took p95 from
7.5 to 6.1 ms and sets read from 69 to 41 per query). Past the prefix, where lists only
resolve U, a decision whose next batch has NetCost(B) ≥ 0 (Eq. 3.13: the batch costs more
than the set reads it is estimated to save) reads all of U instead; the released code
only ever reads the candidates estimated above |Q ∩ X_k| and so keeps reading lists to
prune the rest. ``L`` is fitted on JOSIE's own list read (:func:`_timed_list_reads`),
candidate bookkeeping included, not on MergeList's cheaper count.

[D] Algorithm 2 reads Best(u) whenever NetCost(X) ≤ NetCost(B) (or |h| < k); the released
code instead stops at the first candidate estimated at or below |Q ∩ X_k|, so a candidate
too cheap to matter is never read and the k-th overlap rises late (on web tables, where a
set read costs little next to the long lists past the prefix, that costs lists). Since
Benefit(X) ≥ 0 (Eq. 3.7), NetCost(X) ≤ S(|X[j_X+1:]|), so a decision also reads every
candidate with S ≤ NetCost(B), estimated or not, and a set seen after a decision whose
whole read is at most that decision's NetCost(B) is read in the list scan (``_read_list``;
at its second match, below) instead of becoming a candidate: a candidate row and a second
visit at the next decision point cost more, and leave |Q ∩ X_k| low for the lists in
between.

[D] A set is neither read nor made a candidate at its first match; it waits (three int32
stores) for its second. A set with one match has no estimate (Eq. 3.4 needs a rate); if it
matches again, it is resolved then, with a shorter suffix (the second term of Eq. 3.12) and
two matches in its rate; if it does not, it is pruned unread once the search is one list
past the prefix filter, where its bound 1 + (unread lists) is ≤ |Q ∩ X_k|, and it never
costs a decision pass. Most sets the position filter lets through match only once: on
bench_josie's web-table lake JOSIE reads 1,334 sets per query instead of ProbeSet's 3,141,
for one more list; on its open-data lake 69 sets instead of 99 (41 once λ is chosen per
query, above). A first sight that counts a skipped duplicate group already has two matches
and is resolved at once.

Errata followed (see ../shared/notes/josie-lshensemble-autojoin.md, Part B): the batch
overlap rate uses the observed window ``|Q[1:i] ∩ X| / (i − i_{X,0} + 1)`` (consistent with
Eq. 3.4) rather than the printed Eq. 3.9 denominator; positions are 0-based.

Memory: the searcher holds per posting entry 16 bytes (``post_set``, ``post_pos`` and
``post_size``, int32, plus the entry's token id in its integer set, int32); per token about
17 bytes of arrays (list offset int64, group int64, query mark) plus a Python dict entry for
the token text (about 100 bytes + the text); per set 52 bytes (id and set offset int64,
12 bytes of state, a 16-byte candidate row and two int32 scratch slots). The Arrow tables
passed to ``load`` are not kept; a decision allocates 12 bytes per unread candidate and 8
per query token while it runs. So N entries, T tokens and M sets take about
``16·N + (117 + mean text length)·T + 52·M`` bytes; tests/benchmarks/bench_josie.py prints
the arrays' size (dict left out), about 19 B per entry on its 100,000-set lakes. On a 24 GiB
machine, leaving ~8 GiB to the OS, Spark-free serving and the load peak, about 16 GiB serve
e.g. 800 M posting entries with 20 M tokens and 1 M sets; on a lake with many distinct
values the token dictionary, not the postings, runs out first.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numba import njit

from lakejoin.index.josie.baselines import mergelist, probeset
from lakejoin.index.josie.cost import ReadCost, fit_read_cost
from lakejoin.index.josie.reads import (
    count_suffix,
    heap_push,
    is_group_end,
    kth_overlap,
)
from lakejoin.index.josie.tokens import duplicate_groups
from lakejoin.index.values import ValueDictionary
from lakejoin.normalize import normalize_set

# The columns ``load`` reads of the sharded tables (``lakejoin.query.family.load_columns``): the
# dataset ids a shard's rows carry for the pipeline are not needed to search, and each set's
# tokens are rebuilt from its postings.
LOAD_COLUMNS = {"sets": ["set_id", "size"], "postings": ["token_id", "set_id", "position", "set_size"]}
# What a searcher holds besides scratch space (``JosieSearcher.arrays``), and the version of that
# layout: a shard's arrays cached on disk under another version are rebuilt, never read
# (``lakejoin.query.shard_arrays``). Bump it when what these arrays mean changes.
ARRAYS = (
    "set_ids",
    "set_indptr",
    "token_of",
    "list_indptr",
    "post_set",
    "post_pos",
    "post_size",
    "set_tokens",
    "group",
)
ARRAYS_FORMAT = 1
DECISIONS_PER_QUERY = 24  # λ per query = ⌈distinct lists / 24⌉ (24 and ⌈⌉: bench_josie, both lakes)
MIN_BATCH_SIZE = 2  # estimates (Eq. 3.4) need two lists since first sight to be a rate at all
MATCHED_SAMPLE = 5

# Per-set state ``hot[_PARTIAL, s]`` and ``hot[_LAST, s]`` (|Q[1:i] ∩ X| and j_X), the only
# memory a posting entry touches. They are two int32 arrays, not one 8-byte row per set:
# every entry loads ``partial`` (MergeList's counter, ProbeSet's seen flag) but only a
# candidate's entry stores ``j_X``, so the array every entry hits is half the size and
# stays in cache better (about 4% faster on both bench_josie lakes). ``partial`` is > 0 for an
# unread candidate, 0 for an unseen set, _ONCE for a set matched once (``hot[_LAST, s]``
# is then j_{X,0} and ``hot[_ONCE_AT, s]`` i_{X,0}, written only for such sets) and _DONE
# once read or pruned, which a list read then only loads. The fields read only at decision
# points sit in the candidate table, one row per candidate, scanned sequentially.
_PARTIAL, _LAST, _ONCE_AT = 0, 1, 2
_SET, _FIRST_I, _FIRST_J, _SIZE = range(4)  # X, i_{X,0}, j_{X,0}, |X|
_UNSEEN, _DONE, _ONCE = 0, -(1 << 30), -1


@njit(cache=True)
def _matched_samples(sets, set_indptr, set_tokens, mark, limit):
    """``out[i]``: the first ``limit`` tokens of set ``sets[i]`` that the query holds (``mark``),
    in the set's order (rarest first), -1 after the last. It stops at ``limit``: a shard's top k
    are each sampled, and most are dropped by the merge, so a sample must not cost a scan of a
    large set's every token."""
    out = np.full((len(sets), limit), -1, np.int32)
    for i in range(len(sets)):
        found = 0
        for p in range(set_indptr[sets[i]], set_indptr[sets[i] + 1]):
            if mark[set_tokens[p]] == 1:
                out[i, found] = set_tokens[p]
                found += 1
                if found == limit:
                    break
    return out


@njit(cache=True)
def _new_threshold(values, n, k, estimate):
    """|Q ∩ X'_k|_est after reading a candidate estimated at ``estimate`` (Eq. 3.5)."""
    if n < k - 1:
        return 0.0
    if n == k - 1:
        return min(float(values[0]), estimate) if n > 0 else estimate
    if estimate <= values[0]:
        return float(values[0])
    if k == 1:
        return estimate
    return min(estimate, float(values[1]))


@njit(cache=True)
def _query_batch(q, group):
    """λ for this query: its distinct lists split into ``DECISIONS_PER_QUERY`` batches."""
    distinct = 0
    for i in range(q.shape[0]):
        distinct += is_group_end(q, group, i)
    return max(MIN_BATCH_SIZE, -(-distinct // DECISIONS_PER_QUERY))


@njit(cache=True)
def _next_batch_end(q, group, i, batch):
    """Query position of the last list of the next batch of λ distinct lists after ``i``."""
    nq = q.shape[0]
    end = i
    distinct = 0
    while end + 1 < nq and distinct < batch:
        end += 1
        if is_group_end(q, group, end):
            distinct += 1
    return end


@njit(cache=True)
def _read_candidate(nq, i, k, set_indptr, set_tokens, mark, hot, s, n_unread, heap_values, heap_ids, n_heap, stats):
    """Resolve set ``s`` if it is an unread candidate: drop it if its upper bound (Eq. 3.6)
    cannot beat |Q ∩ X_k|, else read its suffix and offer its overlap to the top-k."""
    partial = hot[_PARTIAL, s]
    if partial <= 0:
        return n_unread, n_heap
    last = hot[_LAST, s]
    suffix = set_indptr[s + 1] - set_indptr[s] - 1 - last
    hot[_PARTIAL, s] = _DONE
    if partial + min(nq - 1 - i, suffix) > kth_overlap(heap_values, n_heap, k):
        overlap = partial + count_suffix(set_indptr, set_tokens, mark, s, last + 1)
        stats[1] += 1
        stats[3] += suffix
        n_heap = heap_push(heap_values, heap_ids, n_heap, k, overlap, s)
    return n_unread - 1, n_heap


@njit(cache=True)
def _sift_down(keys, rows, n, root):
    """Restore the max-heap order of ``keys[:n]`` (``rows`` moving with them) below ``root``."""
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        if child + 1 < n and keys[child + 1] > keys[child]:
            child += 1
        if keys[root] >= keys[child]:
            return
        keys[root], keys[child] = keys[child], keys[root]
        rows[root], rows[child] = rows[child], rows[root]
        root = child


@njit(cache=True)
def _decide(
    q,
    group,
    i,
    k,
    batch,
    s0,
    s1,
    list_cost,
    set_indptr,
    set_tokens,
    mark,
    hot,
    cand,
    n_cand,
    n_unread,
    heap_values,
    heap_ids,
    n_heap,
    stats,
):
    """One decision point after reading the list at query position ``i``.

    One pass over the candidate table prunes unread candidates with the position filter
    (Eq. 3.6), compacts the survivors, sums the next batch's benefit (Eq. 3.12) and buckets
    each survivor's read cost by its upper bound, an integer in [0, |Q|], so the
    candidate-elimination term of Eq. 3.7 is a prefix sum instead of a sort. Then
    candidates are read, best estimate (Eq. 3.4) first, while a candidate's net cost
    (Eq. 3.13) is no more than the next batch's. The reading stops at the first estimate
    ≤ |Q ∩ X_k|, so only the candidates estimated above it are kept, in a max-heap popped
    best first. ``list_cost[m]`` is the summed L(f) of the distinct lists before query
    position m. Returns
    (n_cand, n_unread, n_heap, NetCost(B)).
    """
    nq = q.shape[0]
    theta = kth_overlap(heap_values, n_heap, k)
    end = _next_batch_end(q, group, i, batch)
    width = end - i
    cost_batch = list_cost[end + 1] - list_cost[i + 1]

    # Eq. 3.7's elimination term is only weighed with a full heap, at θ' ≤ |Q ∩ X_{k-1}|
    # (Eq. 3.5), so bounds above that cap are never summed: the buckets stop there rather
    # than at |Q|, which would cost O(|Q|) per decision on a long query.
    cap = (min(nq, heap_values[1]) if k > 1 else nq) if n_heap == k else 0
    pruned_cost = np.zeros(cap + 1)  # Σ S(|Y[j_Y+1:]|) of the unread Y with ub(Y) = b ≤ cap
    hopeful = np.empty(n_cand, np.int32)  # rows of the candidates estimated above θ
    hopeful_estimate = np.empty(n_cand)
    n_hopeful = 0
    benefit_batch = 0.0
    cheapest = np.inf  # the least S(|X[j_X+1:]|) over U
    kept = 0
    for c in range(n_cand):
        s = cand[c, _SET]
        partial = hot[_PARTIAL, s]
        if partial <= 0:  # read at the previous decision point
            continue
        size = cand[c, _SIZE]
        last = hot[_LAST, s]
        suffix = size - 1 - last
        bound = partial + min(nq - 1 - i, suffix)
        if bound <= theta:  # Eq. 3.6
            hot[_PARTIAL, s] = _DONE
            n_unread -= 1
            continue
        for field in range(4):  # not ``cand[kept] = cand[c]``: row views cost 4x the rest of the pass
            cand[kept, field] = cand[c, field]
        c = kept
        kept += 1
        read_cost = s0 + s1 * suffix
        cheapest = min(cheapest, read_cost)
        if bound <= cap:
            pruned_cost[bound] += read_cost
        seen_for = i - cand[c, _FIRST_I] + 1
        if seen_for < batch:  # too few lists since first sight for a stable estimate
            continue
        rate = partial / seen_for
        remaining = nq - cand[c, _FIRST_I]
        estimate = min(rate * remaining, bound)  # Eq. 3.4
        if estimate > theta:
            hopeful[n_hopeful] = c
            hopeful_estimate[n_hopeful] = estimate
            n_hopeful += 1
        if width == 0:
            continue
        next_j = last + width / remaining * (size - cand[c, _FIRST_J])  # Eq. 3.10
        next_bound = partial + rate * width + min(nq - 1 - end, size - 1 - next_j)  # Eq. 3.11
        if next_bound <= theta:
            benefit_batch += read_cost  # Eq. 3.12, first term: X pruned by the batch
        else:
            benefit_batch += s1 * max(0.0, min(next_j, size - 1.0) - last)  # shorter suffix
    n_cand = kept
    net_batch = cost_batch - benefit_batch if width > 0 else np.inf
    for b in range(1, cap + 1):
        pruned_cost[b] += pruned_cost[b - 1]

    for h in range(n_hopeful // 2 - 1, -1, -1):
        _sift_down(hopeful_estimate, hopeful, n_hopeful, h)
    while n_hopeful > 0:  # best estimate first
        c = hopeful[0]
        estimate = hopeful_estimate[0]
        n_hopeful -= 1
        hopeful[0], hopeful_estimate[0] = hopeful[n_hopeful], hopeful_estimate[n_hopeful]
        _sift_down(hopeful_estimate, hopeful, n_hopeful, 0)
        theta = kth_overlap(heap_values, n_heap, k)
        if estimate <= theta:
            break
        s = cand[c, _SET]
        suffix = cand[c, _SIZE] - 1 - hot[_LAST, s]
        bound = hot[_PARTIAL, s] + min(nq - 1 - i, suffix)
        if bound > theta and n_heap == k:
            read_cost = s0 + s1 * suffix
            new_theta = _new_threshold(heap_values, n_heap, k, estimate)  # Eq. 3.5
            prefix = min(nq - theta + 1, nq)
            new_prefix = max(nq - int(new_theta) + 1, i + 1)
            benefit = list_cost[prefix] - list_cost[new_prefix] if prefix > new_prefix else 0.0
            benefit += pruned_cost[min(int(new_theta), cap)] - (read_cost if bound <= new_theta else 0.0)  # Eq. 3.7
            if read_cost - benefit > net_batch:  # Eq. 3.13: the batch is cheaper
                break
        n_unread, n_heap = _read_candidate(
            nq, i, k, set_indptr, set_tokens, mark, hot, s, n_unread, heap_values, heap_ids, n_heap, stats
        )
    # Algorithm 2 reads Best(u) while |h| < k or NetCost(X) ≤ NetCost(B). Benefit(X) ≥ 0
    # (Eq. 3.7), so NetCost(X) ≤ S(|X[j_X+1:]|): a candidate whose read costs no more than
    # the batch's net cost is the cheaper action whatever its estimate, including one seen
    # too recently to be estimated at all.
    for c in range(n_cand if n_heap < k or cheapest <= net_batch else 0):
        s = cand[c, _SET]
        if hot[_PARTIAL, s] > 0 and (n_heap < k or s0 + s1 * (cand[c, _SIZE] - 1 - hot[_LAST, s]) <= net_batch):
            n_unread, n_heap = _read_candidate(
                nq, i, k, set_indptr, set_tokens, mark, hot, s, n_unread, heap_values, heap_ids, n_heap, stats
            )
    if kth_overlap(heap_values, n_heap, k) >= nq - 1 - i and net_batch >= 0.0:
        # Past the prefix no list brings a new candidate; the lists only resolve U, and
        # the next batch is estimated to cost more than the set reads it saves (Eq. 3.13
        # with NetCost(B) ≥ 0), so reading all of U now is the cheaper way to finish.
        for c in range(n_cand):
            n_unread, n_heap = _read_candidate(
                nq,
                i,
                k,
                set_indptr,
                set_tokens,
                mark,
                hot,
                cand[c, _SET],
                n_unread,
                heap_values,
                heap_ids,
                n_heap,
                stats,
            )
    return n_cand, n_unread, n_heap, net_batch


@njit(cache=True, inline="always")
def _read_list(
    token,
    i,
    skipped,
    nq,
    k,
    admit,
    read_below,
    s0,
    s1,
    list_indptr,
    post_set,
    post_pos,
    post_size,
    set_indptr,
    set_tokens,
    mark,
    hot,
    touched,
    n_touched,
    cand,
    n_cand,
    n_unread,
    heap_values,
    heap_ids,
    n_heap,
    stats,
    n_once,
):
    """Read the posting list of ``token`` at query position ``i`` (the last of a duplicate
    group of ``skipped + 1`` lists): add to the partial overlap and latest position of every
    unread candidate (read and pruned sets are left alone), and, while ``admit`` (inside the
    prefix), record each new set the position filter (Eq. 3.2) lets through as matched once
    (``n_once`` counts them).

    A set matched for the second time, or first seen with a skipped duplicate group (two
    matches at once), is resolved: pruned by Eq. 3.2, read now if its read S(|X[j+1:]|) is
    at most ``read_below`` (NetCost(B) at the latest decision point: Benefit(X) ≥ 0,
    Eq. 3.7, so NetCost(X) ≤ S and Algorithm 2 would pick it over the batch, and reading it
    now lifts |Q ∩ X_k| for the rest of the batch), or else made a candidate.
    Returns (n_touched, n_cand, n_unread, n_heap, n_once)."""
    for e in range(list_indptr[token], list_indptr[token + 1]):
        s = post_set[e]
        partial = hot[_PARTIAL, s]
        if partial > 0:  # the MergeList count plus the latest position
            hot[_PARTIAL, s] = partial + skipped + 1
            hot[_LAST, s] = post_pos[e]
            continue
        if partial == _ONCE:
            n_once -= 1
            position, size = post_pos[e], post_size[e]
            matched, first_i, first_j = skipped + 2, hot[_ONCE_AT, s], hot[_LAST, s]
        elif partial == _UNSEEN and admit:  # first sight
            position, size = post_pos[e], post_size[e]
            touched[n_touched] = s
            n_touched += 1
            if skipped + 1 + min(nq - 1 - i, size - 1 - position) <= kth_overlap(heap_values, n_heap, k):  # Eq. 3.2
                hot[_PARTIAL, s] = _DONE
                continue
            if skipped == 0:
                hot[_PARTIAL, s] = _ONCE
                hot[_LAST, s] = position
                hot[_ONCE_AT, s] = i
                n_once += 1
                continue
            matched, first_i, first_j = skipped + 1, i - skipped, max(0, position - skipped)
        else:  # read or pruned, or unseen past the prefix
            continue
        suffix = size - 1 - position
        if matched + min(nq - 1 - i, suffix) <= kth_overlap(heap_values, n_heap, k):  # Eq. 3.2
            hot[_PARTIAL, s] = _DONE
        elif s0 + s1 * suffix <= read_below:
            hot[_PARTIAL, s] = _DONE
            stats[1] += 1
            stats[3] += suffix
            overlap = matched + count_suffix(set_indptr, set_tokens, mark, s, position + 1)
            n_heap = heap_push(heap_values, heap_ids, n_heap, k, overlap, s)
        else:
            hot[_PARTIAL, s] = matched
            hot[_LAST, s] = position
            cand[n_cand, _SET] = s
            cand[n_cand, _FIRST_I] = first_i
            cand[n_cand, _FIRST_J] = first_j
            cand[n_cand, _SIZE] = size
            n_cand += 1
            n_unread += 1
    return n_touched, n_cand, n_unread, n_heap, n_once


@njit(cache=True)
def _timed_list_reads(
    tokens, repeats, list_indptr, post_set, post_pos, post_size, set_indptr, set_tokens, mark, hot, touched, cand
):
    """JOSIE's list reads as the cost fit times them (``cost.fit_read_cost``): ``tokens``
    read as the first lists of a long query, so every set in them is recorded at its first
    match and becomes a candidate at its second (none is read: no decision has priced a
    read yet), the bookkeeping a list read pays inside the prefix; state is reset after
    each repeat."""
    heap_values, heap_ids, stats = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(4, np.int64)
    for _ in range(repeats):
        n_touched = 0
        for t in tokens:
            n_touched = _read_list(
                t,
                0,
                0,
                1 << 30,
                1,
                True,
                -np.inf,
                0.0,
                0.0,
                list_indptr,
                post_set,
                post_pos,
                post_size,
                set_indptr,
                set_tokens,
                mark,
                hot,
                touched,
                n_touched,
                cand,
                0,
                0,
                heap_values,
                heap_ids,
                0,
                stats,
                0,
            )[0]
        for m in range(n_touched):
            hot[_PARTIAL, touched[m]] = _UNSEEN


@njit(cache=True)
def josie(
    q,
    k,
    batch,
    s0,
    s1,
    l0,
    l1,
    d,
    list_indptr,
    post_set,
    post_pos,
    post_size,
    group,
    set_indptr,
    set_tokens,
    mark,
    hot,
    touched,
    cand,
    out_sets,
    out_overlaps,
    stats,
    floor,
):
    """JOSIE (Algorithm 2) over the query's token ids ``q`` (ascending, all in the index),
    with batches of ``batch`` distinct lists (λ; 0: :func:`_query_batch` chooses it).

    ``floor`` (> 1) is an overlap known to be reached by k sets elsewhere (other shards of the
    index: the k-th overlap merged so far). The running top-k starts as k placeholders (set -1)
    at ``floor - 1``, so |Q ∩ X_k| starts there and every filter (prefix, position, Eq. 3.6)
    prunes what cannot reach ``floor``; sets that reach it, ties included, are still found.

    ``hot`` (three rows of one int32 per set) must have row ``_PARTIAL`` zeroed and is left
    so; ``touched`` and ``cand`` (the candidate table) are scratch of one row per set. Results go to
    ``out_sets``/``out_overlaps`` (ascending overlap); returns their count. ``stats`` gets
    lists read, sets read, posting entries read, set tokens read.
    """
    nq = q.shape[0]
    batch = batch if batch > 0 else _query_batch(q, group)
    list_cost = np.zeros(nq + 1)
    for m in range(nq):
        read = l0 + l1 * (list_indptr[q[m] + 1] - list_indptr[q[m]]) if is_group_end(q, group, m) else 0.0
        list_cost[m + 1] = list_cost[m] + read
    n_heap = 0
    if floor > 1:
        out_overlaps[:k] = floor - 1
        out_sets[:k] = -1
        n_heap = k
    n_touched = 0
    n_cand = 0
    n_unread = 0
    skipped = 0
    since_decision = 0
    read_below = -np.inf  # NetCost(B) at the latest decision point
    all_read = True
    n_once = 0
    for i in range(nq):
        if not is_group_end(q, group, i):
            skipped += 1
            continue
        theta = kth_overlap(out_overlaps, n_heap, k)
        best_unseen = nq - i + skipped  # a set first seen now matches at most this many
        # Past the prefix with nothing left to resolve; a set waiting for its second match
        # can still reach 1 + best_unseen, so while any waits the search reads one list more.
        if n_unread == 0 and theta >= best_unseen + (n_once > 0):
            all_read = False
            break
        admit = theta < best_unseen
        token = q[i]
        stats[0] += 1
        stats[2] += list_indptr[token + 1] - list_indptr[token]
        n_touched, n_cand, n_unread, n_heap, n_once = _read_list(
            token,
            i,
            skipped,
            nq,
            k,
            admit,
            read_below,
            s0,
            s1,
            list_indptr,
            post_set,
            post_pos,
            post_size,
            set_indptr,
            set_tokens,
            mark,
            hot,
            touched,
            n_touched,
            cand,
            n_cand,
            n_unread,
            out_overlaps,
            out_sets,
            n_heap,
            stats,
            n_once,
        )
        skipped = 0
        since_decision += 1
        if i == nq - 1 or n_unread == 0 or since_decision < batch:
            continue
        if n_heap < k and n_unread < k:
            continue
        if n_heap == k and d * n_unread > list_cost[nq] - list_cost[i + 1]:
            continue  # the decision would cost more than all the lists it could save
        since_decision = 0
        n_cand, n_unread, n_heap, read_below = _decide(
            q,
            group,
            i,
            k,
            batch,
            s0,
            s1,
            list_cost,
            set_indptr,
            set_tokens,
            mark,
            hot,
            cand,
            n_cand,
            n_unread,
            out_overlaps,
            out_sets,
            n_heap,
            stats,
        )
    if all_read:  # every list was read: partial overlaps of unread candidates are exact
        for c in range(n_cand):
            s = cand[c, _SET]
            if hot[_PARTIAL, s] > 0:
                n_heap = heap_push(out_overlaps, out_sets, n_heap, k, hot[_PARTIAL, s], s)
        for t in range(n_touched if n_once > 0 and n_heap < k else 0):  # sets matched once: overlap 1
            if hot[_PARTIAL, touched[t]] == _ONCE:
                n_heap = heap_push(out_overlaps, out_sets, n_heap, k, 1, touched[t])
    for t in range(n_touched):
        hot[_PARTIAL, touched[t]] = _UNSEEN
    return n_heap


def fit_decision_cost(
    set_indptr: np.ndarray, set_tokens: np.ndarray, cost: ReadCost, *, samples: int = 1000, seed: int = 0
) -> float:
    """Seconds per unread candidate of one decision point (:func:`_decide`), fitted like the
    read costs: time decisions over growing candidate counts (up to ``4·samples``) and take
    the least-squares slope. Every candidate is estimated (Eqs. 3.4, 3.9–3.12) and survives
    the position filter but none beats θ: the pass over U that every decision makes; the
    few candidates above θ, heaped and weighed one by one, are not per-candidate costs."""
    n_sets = set_indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    nq, i, k = 64, 31, 10  # estimate 1/32·64 = 2 = θ for each candidate below
    q = np.arange(nq, dtype=np.int32)
    group = np.arange(nq, dtype=np.int64)
    list_cost = np.zeros(nq + 1)
    mark = np.zeros(1, np.uint8)
    counts, times = [], []
    for n in np.unique(np.minimum(n_sets, samples * np.arange(1, 5))):
        table = np.zeros((n, 4), np.int32)  # seen once, at query position 0 and set position 0
        table[:, _SET] = rng.choice(n_sets, size=n, replace=False)
        table[:, _SIZE] = np.diff(set_indptr)[table[:, _SET]]  # sets of < 3 tokens get pruned: a negligible share
        hot = np.zeros((3, n_sets), np.int32)
        best = np.inf
        for _ in range(4):
            cand = table.copy()
            hot[_PARTIAL, table[:, _SET]] = 1
            started = time.perf_counter()
            _decide(
                q,
                group,
                i,
                k,
                20,
                cost.s0,
                cost.s1,
                list_cost,
                set_indptr,
                set_tokens,
                mark,
                hot,
                cand,
                n,
                n,
                np.full(k, 2, np.int64),
                np.zeros(k, np.int64),
                k,
                np.zeros(4, np.int64),
            )
            best = min(best, time.perf_counter() - started)
        counts.append(n)
        times.append(best)
    if len(counts) < 2:
        return 0.0
    slope = np.polyfit(np.array(counts, float), np.array(times), 1)[0]
    return max(float(slope), 0.0)


@dataclasses.dataclass
class TokenDictionary:
    """What every searcher over shards of one JOSIE index shares: the global token dictionary
    (token -> TokenID, the global order) and the read costs fitted by the first of them. Built
    once per process and index (``lakejoin.query.family.load_searcher``), so loading a shard reads
    and builds only that shard's sets and postings; the costs steer JOSIE's reads, never its
    answer, and the shards of one lake have the same shape. The tokens stay in Arrow's buffers
    (``lakejoin.index.values``), not in a ``dict``: 22 M tokens of a 1,000,000-set lake are
    about 0.6 GiB that way, over 4 GiB as Python strings."""

    tokens: ValueDictionary  # the ``tokens`` table's tokens, in its row order
    ids: np.ndarray  # each row's TokenID (int64)
    n_tokens: int
    read_cost: ReadCost | None = None

    def found(self, values: Iterable[str]) -> dict[int, str]:
        """TokenID -> value of each of ``values`` that the dictionary holds, in their order."""
        values = list(values)
        rows = self.tokens.get_indexer(values)
        return {int(self.ids[r]): v for r, v in zip(rows.tolist(), values) if r >= 0}


def token_dictionary(tokens: pa.Table) -> TokenDictionary:
    """The :class:`TokenDictionary` of a ``tokens`` table (no read cost fitted yet)."""
    ids = tokens["token_id"].to_numpy().astype(np.int64)
    return TokenDictionary(ValueDictionary(tokens["token"]), ids, int(ids.max()) + 1 if len(ids) else 1)


def shared(tables: Mapping[str, pa.Table]) -> TokenDictionary:
    """The family's state shared by every shard's searcher (family shape, ``lakejoin.index``),
    from the global tables."""
    if "tokens" not in tables:
        raise ValueError(f"JOSIE index is missing tables: ['tokens'], got {sorted(tables)}")
    return token_dictionary(tables["tokens"])


@dataclasses.dataclass
class PreparedQuery:
    """A query's distinct normalized values and their TokenIDs in one index's token dictionary
    (``JosieSearcher.prepare``)."""

    values: set[str]
    dictionary: TokenDictionary  # the dictionary they were looked up in
    found: dict[int, str]  # TokenID -> value, for the values the dictionary holds
    global_ids: np.ndarray  # found's TokenIDs


class JosieSearcher:
    """Exact top-k joinable-column search over one loaded JOSIE index.

    ``search`` runs JOSIE; ``search_mergelist`` and ``search_probeset`` run the thesis's
    baselines on the same arrays (for benchmarks and cross-checks). All three return the
    same result shape. One searcher serves one query at a time (a lock guards the shared
    scratch arrays); ``last_stats`` describes the latest query's reads.
    """

    def __init__(
        self,
        tables: Mapping[str, pa.Table],
        *,
        batch_size: int | None = None,
        read_cost: ReadCost | None = None,
        fit_samples: int = 1000,
        shared: TokenDictionary | None = None,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        missing = {"sets", "postings", *(() if shared is not None else ("tokens",))} - set(tables)
        if missing:
            raise ValueError(f"JOSIE index is missing tables: {sorted(missing)}")
        shared = shared if shared is not None else token_dictionary(tables["tokens"])
        self._load_sets(tables["sets"])
        self._load_postings(tables["postings"], shared.n_tokens)
        self._group = duplicate_groups(self._list_indptr, self._post_set)
        self._ready(shared, batch_size, read_cost, fit_samples)

    @classmethod
    def from_arrays(
        cls,
        arrays: Mapping[str, np.ndarray],
        *,
        shared: TokenDictionary,
        batch_size: int | None = None,
        read_cost: ReadCost | None = None,
        fit_samples: int = 1000,
    ) -> JosieSearcher:
        """The searcher whose :meth:`arrays` are ``arrays`` (e.g. memory-mapped from a shard's
        cache, ``lakejoin.query.shard_arrays``): nothing is sorted or grouped again. Raises
        ``ValueError`` when they do not have the shape of one searcher's arrays (a missing one, a
        wrong dtype, lengths or end offsets that disagree, a token past the dictionary)."""
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        _check_arrays(arrays, shared.n_tokens)
        searcher = cls.__new__(cls)
        for name in ARRAYS:
            setattr(searcher, name if name == "set_ids" else f"_{name}", arrays[name])
        searcher._ready(shared, batch_size, read_cost, fit_samples)
        return searcher

    def arrays(self) -> dict[str, np.ndarray]:
        """What this searcher holds besides its scratch space (:data:`ARRAYS`): writing them and
        :meth:`from_arrays` give the same searcher back."""
        return {name: getattr(self, name if name == "set_ids" else f"_{name}") for name in ARRAYS}

    def _ready(
        self, shared: TokenDictionary, batch_size: int | None, read_cost: ReadCost | None, fit_samples: int
    ) -> None:
        """The scratch arrays, the lock and the read costs, once the index arrays are set."""
        self.batch_size = batch_size
        self._dictionary = shared
        self._mark = np.zeros(len(self._group), np.uint8)
        n_sets = len(self.set_ids)
        self._hot = np.zeros((3, n_sets), np.int32)
        self._counts = np.zeros(n_sets, np.int32)  # MergeList counts, ProbeSet seen flags
        self._touched = np.empty(n_sets, np.int32)
        self._cand = np.empty((n_sets, 4), np.int32)
        self._lock = threading.Lock()
        self._last_held: tuple[PreparedQuery | None, np.ndarray] = (
            None,
            np.empty(0, np.int32),
        )  # _prepare's latest answer
        read_cost = read_cost or shared.read_cost
        if read_cost is None:
            read_cost = fit_read_cost(
                self._time_list_reads,
                np.diff(self._list_indptr),
                self._set_indptr,
                self._set_tokens,
                samples=fit_samples,
            )
            read_cost = dataclasses.replace(
                read_cost, d=fit_decision_cost(self._set_indptr, self._set_tokens, read_cost, samples=fit_samples)
            )
            shared.read_cost = read_cost  # the other shards' searchers of this index reuse it
        self.read_cost = read_cost
        self.last_stats: dict[str, object] = {}

    def _time_list_reads(self, tokens: np.ndarray, repeats: int) -> None:
        _timed_list_reads(
            tokens,
            repeats,
            self._list_indptr,
            self._post_set,
            self._post_pos,
            self._post_size,
            self._set_indptr,
            self._set_tokens,
            self._mark,
            self._hot,
            self._touched,
            self._cand,
        )

    def _load_sets(self, sets: pa.Table) -> None:
        """Set ids, ascending, and the sets' CSR offsets (their tokens come from the postings)."""
        sets = sets.sort_by("set_id")
        self.set_ids = sets["set_id"].to_numpy()
        if len(np.unique(self.set_ids)) != len(self.set_ids):
            raise ValueError("JOSIE sets table has duplicate set_id")
        self._set_indptr = np.concatenate(([0], np.cumsum(sets["size"].to_numpy(), dtype=np.int64)))

    def _load_postings(self, postings: pa.Table, n_tokens: int) -> None:
        """Posting lists in CSR form over *local* token ids: the position of each TokenID among
        the loaded lists' TokenIDs (``_token_of``, ascending, so the global order is kept). The
        arrays are sized by the tokens these shards hold, not by the whole lake's dictionary.
        Each set's tokens are its postings put at their positions, so the ``sets`` table's own
        token lists are not read (a shard loads about half the bytes)."""
        token_id = postings["token_id"].to_numpy()
        set_index = pd.Index(self.set_ids).get_indexer(postings["set_id"].to_numpy())  # a hash lookup: -1 when missing
        if np.any(set_index < 0):
            raise ValueError("JOSIE postings table names a set_id missing from the sets table")
        if len(token_id) and (token_id.max() >= n_tokens or token_id.min() < 0):
            raise ValueError("JOSIE postings table names a token_id missing from the tokens table")
        # each list by set: one sort of a unique key, several times faster than a stable sort by token
        order = (
            np.argsort(token_id * len(self.set_ids) + set_index)
            if n_tokens * len(self.set_ids) < 2**62
            else np.lexsort((set_index, token_id))
        )
        self._post_set = set_index[order].astype(np.int32)
        self._post_pos = postings["position"].to_numpy()[order].astype(np.int32)
        self._post_size = postings["set_size"].to_numpy()[order].astype(np.int32)
        ordered = token_id[order]
        starts = (
            np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
            if len(ordered)
            else np.empty(0, np.int64)
        )
        self._token_of = ordered[starts]
        self._list_indptr = np.concatenate((starts, [len(ordered)])).astype(np.int64)
        self._set_tokens = self._sets_from_postings()

    def _sets_from_postings(self) -> np.ndarray:
        """Every set's tokens (local ids, in its order) from the postings: the posting of token t
        in set s at position p is ``set_tokens[set_indptr[s] + p] = t``."""
        sizes = np.diff(self._set_indptr)
        slots = self._set_indptr[self._post_set] + self._post_pos
        total = int(self._set_indptr[-1])
        if len(slots) != total or (
            total
            and (
                np.any(self._post_pos < 0)
                or np.any(self._post_pos >= sizes[self._post_set])
                or np.bincount(slots, minlength=total).max() > 1
            )
        ):
            raise ValueError(
                "JOSIE sets and postings disagree: the postings do not fill each set's positions exactly once"
            )
        set_tokens = np.empty(total, np.int32)
        set_tokens[slots] = np.repeat(np.arange(len(self._token_of), dtype=np.int32), np.diff(self._list_indptr))
        return set_tokens

    @property
    def num_sets(self) -> int:
        return len(self.set_ids)

    def search(self, query: Iterable[str] | PreparedQuery, k: int = 10, *, floor: int = 0) -> list[dict]:
        """Top-k columns by overlap with ``query``'s distinct normalized values (JOSIE); ``query``
        may be :meth:`prepare`'s. With a ``floor`` (the k-th overlap other shards already
        found), only columns whose overlap reaches it are returned, and the search prunes by it
        from the start (:func:`josie`)."""
        return self._run("josie", query, k, floor)

    def held(self, query: Iterable[str] | PreparedQuery) -> int:
        """How many of the query's tokens this searcher holds lists for: no column here overlaps
        the query in more (an upper bound for a shard, known before searching it)."""
        return len(self._prepare(query)[1])

    def scratch_bytes(self) -> int:
        """The memory this searcher allocated for its queries; its index arrays (:meth:`arrays`)
        are the rest, and may be memory-mapped from the shard cache."""
        return sum(a.nbytes for a in (self._mark, self._hot, self._counts, self._touched, self._cand))

    def search_mergelist(self, query: Iterable[str], k: int = 10) -> list[dict]:
        """Same answer as :meth:`search`, computed by MergeList-D (Eq. 3.1)."""
        return self._run("mergelist", query, k)

    def search_probeset(self, query: Iterable[str], k: int = 10) -> list[dict]:
        """Same answer as :meth:`search`, computed by ProbeSet-D (Eq. 3.3)."""
        return self._run("probeset", query, k)

    def prepare(self, query: Iterable[str] | PreparedQuery) -> PreparedQuery:
        """``query`` normalized and looked up in the token dictionary, for :meth:`search` on this
        searcher and on every other one that shares its dictionary (the other shards of its
        index, ``shared``): a query searched shard by shard is prepared once. A query prepared
        with another dictionary is looked up again (its values are kept)."""
        if isinstance(query, PreparedQuery):
            if query.dictionary is self._dictionary:
                return query
            values = query.values
        else:
            if isinstance(query, (str, bytes)):
                raise ValueError("query must be an iterable of values, not a single string")
            values = normalize_set(query)
            if not values:
                raise ValueError("empty query: no non-null value after normalization")
        found = self._dictionary.found(values)
        return PreparedQuery(values, self._dictionary, found, np.fromiter(found, np.int64, len(found)))

    def _prepare(self, query: Iterable[str] | PreparedQuery) -> tuple[PreparedQuery, np.ndarray]:
        """The prepared query and its tokens this searcher holds lists for, as local ids
        (ascending): tokens without a loaded list (in no loaded shard) match nothing, so a query
        holds exactly the tokens a build of these shards has."""
        prepared = self.prepare(query)
        last, held_ids = self._last_held
        if last is prepared:  # shard by shard, held() and then search() ask for the same query
            return prepared, held_ids
        global_ids = prepared.global_ids
        local = np.minimum(np.searchsorted(self._token_of, global_ids), max(len(self._token_of) - 1, 0))
        held = (self._token_of[local] == global_ids) if len(self._token_of) else np.zeros(len(global_ids), bool)
        self._last_held = found = (prepared, np.sort(local[held]).astype(np.int32))
        return found

    def _run(self, algorithm: str, query: Iterable[str] | PreparedQuery, k: int, floor: int = 0) -> list[dict]:
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        prepared, q = self._prepare(query)
        out_sets = np.full(k, -1, np.int64)
        out_overlaps = np.zeros(k, np.int64)
        stats = np.zeros(4, np.int64)
        with self._lock:
            started, started_cpu = time.perf_counter(), time.thread_time()
            self._mark[q] = 1
            n = self._dispatch(algorithm, q, k, out_sets, out_overlaps, stats, floor) if len(q) >= max(floor, 1) else 0
            elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
            found = out_sets[:n] >= 0  # a floor's placeholders left in the top-k are no sets
            sets, overlaps = out_sets[:n][found], out_overlaps[:n][found]
            # most shards asked under a floor find nothing: no compiled call for them
            samples = (
                _matched_samples(sets, self._set_indptr, self._set_tokens, self._mark, MATCHED_SAMPLE)
                if len(sets)
                else ()
            )
            results = [self._result(int(s), int(o), prepared, sample) for s, o, sample in zip(sets, overlaps, samples)]
            self._mark[q] = 0
        self.last_stats = {
            "algorithm": algorithm,
            "query_size": len(prepared.values),
            "matched_tokens": len(q),
            "lists_read": int(stats[0]),
            "sets_read": int(stats[1]),
            "postings_read": int(stats[2]),
            "set_tokens_read": int(stats[3]),
            "seconds": elapsed,
            "cpu_seconds": elapsed_cpu,  # this thread's CPU time: robust to other processes
        }
        return sorted(results, key=lambda r: (-r["overlap"], r["column_id"]))

    def _dispatch(self, algorithm: str, q: np.ndarray, k: int, out_sets, out_overlaps, stats, floor: int) -> int:
        if algorithm == "mergelist":
            return mergelist(
                q,
                k,
                self._list_indptr,
                self._post_set,
                self._group,
                self._counts,
                self._touched,
                out_sets,
                out_overlaps,
                stats,
            )
        if algorithm == "probeset":
            return probeset(
                q,
                k,
                self._list_indptr,
                self._post_set,
                self._post_pos,
                self._group,
                self._set_indptr,
                self._set_tokens,
                self._mark,
                self._counts,
                self._touched,
                out_sets,
                out_overlaps,
                stats,
            )
        cost = self.read_cost
        return josie(
            q,
            k,
            self.batch_size or 0,
            cost.s0,
            cost.s1,
            cost.l0,
            cost.l1,
            cost.d,
            self._list_indptr,
            self._post_set,
            self._post_pos,
            self._post_size,
            self._group,
            self._set_indptr,
            self._set_tokens,
            self._mark,
            self._hot,
            self._touched,
            self._cand,
            out_sets,
            out_overlaps,
            stats,
            floor,
        )

    def _result(self, set_index: int, overlap: int, prepared: PreparedQuery, sample: np.ndarray) -> dict:
        return {
            "column_id": int(self.set_ids[set_index]),
            "overlap": overlap,
            "containment": overlap / len(prepared.values),
            "matched_sample": [prepared.found[int(self._token_of[t])] for t in sample.tolist() if t >= 0],
        }


def _check_arrays(arrays: Mapping[str, np.ndarray], n_tokens: int) -> None:
    """Raise ``ValueError`` unless ``arrays`` have the shape of one searcher's :data:`ARRAYS`:
    every one present, one-dimensional integers, lengths and end offsets that agree. Their
    contents are not scanned (a load must cost less than a query; the shard cache checks a
    CRC-32 of what it wrote)."""
    missing = [name for name in ARRAYS if name not in arrays]
    if missing:
        raise ValueError(f"JOSIE arrays are missing {missing}")
    if any(arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu" for name in ARRAYS):
        raise ValueError("JOSIE arrays must be one-dimensional integer arrays")
    n_sets, n_lists, n_postings = len(arrays["set_ids"]), len(arrays["token_of"]), len(arrays["post_set"])
    set_indptr, list_indptr = arrays["set_indptr"], arrays["list_indptr"]
    if len(set_indptr) != n_sets + 1 or len(list_indptr) != n_lists + 1 or len(arrays["group"]) != n_lists:
        raise ValueError("JOSIE arrays disagree: offsets and ids have different lengths")
    if not len(arrays["post_pos"]) == len(arrays["post_size"]) == len(arrays["set_tokens"]) == n_postings:
        raise ValueError("JOSIE arrays disagree: the postings' columns and the sets' tokens have different lengths")
    if set_indptr[0] != 0 or set_indptr[-1] != n_postings or list_indptr[0] != 0 or list_indptr[-1] != n_postings:
        raise ValueError("JOSIE arrays disagree: an offset array does not run from 0 to the postings' count")
    if n_lists and arrays["token_of"][-1] >= n_tokens:
        raise ValueError("JOSIE arrays name a token missing from the index's token dictionary")


def to_arrays(searcher: JosieSearcher) -> dict[str, np.ndarray]:
    """The searcher's :data:`ARRAYS` (family shape, ``lakejoin.index``)."""
    return searcher.arrays()


def from_arrays(arrays: Mapping[str, np.ndarray], *, shared: TokenDictionary, **params: Any) -> JosieSearcher:
    """The searcher :func:`to_arrays` was given (family shape, ``lakejoin.index``); ``params`` as
    for :func:`load`."""
    return JosieSearcher.from_arrays(arrays, shared=shared, **params)


def load(tables: Mapping[str, pa.Table], **params: Any) -> JosieSearcher:
    """Build the in-memory searcher from the ``tokens``/``sets``/``postings`` tables.

    ``params``: ``batch_size`` (a fixed λ for every query; default: chosen per query, about
    ``DECISIONS_PER_QUERY`` decision points each), ``read_cost`` (a :class:`ReadCost` to skip
    fitting), ``fit_samples`` (sets and lists timed by the cost fit, default 1,000), ``shared``
    (the index's :class:`TokenDictionary`, from :func:`shared`: then ``tokens`` is not read, and
    the read costs it holds are reused).
    """
    return JosieSearcher(tables, **params)
