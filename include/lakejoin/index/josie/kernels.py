"""JOSIE's compiled search (Zhu et al., SIGMOD 2019; thesis Ch. 3, Algorithm 2), apart from its searcher.

The searcher (``josie.py``) prepares a query and owns the arrays; these kernels are the
algorithm, compiled with numba because its inner loops run once per posting entry. Their
arguments come bundled as named tuples, which numba compiles as one argument each, fields read
in place: the searcher's arrays (``arrays.IndexArrays``), its per-query memory and the running
top-k (``reads.Scratch``, ``reads.TopK``) and the fitted read costs (``cost.ReadCost``).

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
group is read, the skipped lists adding to every partial overlap in it (§3.4.1:
``partial[s] += skipped + 1``; the released code overwrote the count instead of adding). The read
costs S and L are fitted to this process's arrays when the index is loaded (``cost.py``).

[D] In memory a decision is not free next to the reads it weighs: it scans every unread
candidate (the estimation overhead). So the per-set state a posting
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
(in :func:`josie`'s first pass over the query) so that every query has about 24 decision points: the thesis's λ = 20
for Open Data fits a query of ~480 lists, but a web-table query of a dozen lists would never
decide (i.e. run MergeList), and a 3,000-list query would pay ~150 decision passes. Past the prefix, where lists only
resolve U, a decision whose next batch has NetCost(B) ≥ 0 (Eq. 3.13: the batch costs more
than the set reads it is estimated to save) reads all of U instead; the released code
only ever reads the candidates estimated above |Q ∩ X_k| and so keeps reading lists to
prune the rest. ``L`` is fitted on JOSIE's own list read (:func:`timed_list_reads`),
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
costs a decision pass. Most sets the position filter lets through match only once, so JOSIE
reads far fewer sets than ProbeSet for about one more list (tests/benchmarks/bench_josie.py
prints both). A first sight that counts a skipped duplicate group already has two matches
and is resolved at once.

[D] MergeList's plan is one JOSIE can always take (read every list, no set), and on lakes of
large sets and short lists it is the cheapest (thesis §3.5.4, Fig. 3.5), but a list read that
keeps JOSIE's per-set state costs more than MergeList's bare count. So the cost model weighs it
too: at a decision point, before any candidate is read, reading every remaining list with the
count (Eq. 3.1, MergeList's own fitted L, ``ReadCost.m0``/``m1``) is compared with the least
JOSIE's finish can cost, the lists up to the prefix filter of the k-th largest of the
overlaps found and the candidates' estimates (Eq. 3.4) plus the set reads of those k
(:func:`_merge_is_cheaper`); where the count is cheaper, the search counts the rest of the lists
on top of the partial overlaps it has (:func:`_count_rest`: no list is read twice) and says so
in ``top.stats``.

Errata followed (the printed equations and the released code disagree): the batch
overlap rate uses the observed window ``|Q[1:i] ∩ X| / (i − i_{X,0} + 1)`` (consistent with
Eq. 3.4) rather than the printed Eq. 3.9 denominator; positions are 0-based.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from lakejoin.index.josie.arrays import IndexArrays
from lakejoin.index.josie.cost import ReadCost
from lakejoin.index.josie.reads import (
    Scratch,
    TopK,
    count_suffix,
    heap_push,
    is_group_end,
    kth_overlap,
    note_list_read,
)

DECISIONS_PER_QUERY = 24  # λ per query = ⌈distinct lists / 24⌉ (24 and ⌈⌉: bench_josie, both lakes)
MIN_BATCH_SIZE = 2  # estimates (Eq. 3.4) need two lists since first sight to be a rate at all
PLAN_CANDIDATES = 2  # estimated candidates per result before MergeList's plan is weighed (bench_josie, both shapes)

# Per-set state ``hot[_PARTIAL, s]`` and ``hot[_LAST, s]`` (|Q[1:i] ∩ X| and j_X), the only
# memory a posting entry touches. They are two int32 arrays, not one 8-byte row per set:
# every entry loads ``partial`` (MergeList's counter, ProbeSet's seen flag) but only a
# candidate's entry stores ``j_X``, so the array every entry hits is half the size and
# stays in cache better. ``partial`` is > 0 for an
# unread candidate, 0 for an unseen set, _ONCE for a set matched once (``hot[_LAST, s]``
# is then j_{X,0} and ``hot[_ONCE_AT, s]`` i_{X,0}, written only for such sets) and _DONE
# once read or pruned, which a list read then only loads. The fields read only at decision
# points sit in the candidate table, one row per candidate, scanned sequentially.
_PARTIAL, _LAST, _ONCE_AT = 0, 1, 2
_SET, _FIRST_I, _FIRST_J, _SIZE = range(4)  # X, i_{X,0}, j_{X,0}, |X|
_UNSEEN, _DONE, _ONCE = 0, -(1 << 30), -1


@njit(cache=True)
def matched_samples(sets: np.ndarray, index: IndexArrays, mark: np.ndarray, limit: int) -> np.ndarray:
    """``out[i]``: the first ``limit`` tokens of set ``sets[i]`` that the query holds (``mark``),
    in the set's order (rarest first), -1 after the last. It stops at ``limit``: a shard's top k
    are each sampled, and most are dropped by the merge, so a sample must not cost a scan of a
    large set's every token."""
    set_indptr, set_tokens = index.set_indptr, index.set_tokens
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
def _new_threshold(values: np.ndarray, n: int, k: int, estimate: float) -> float:
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
def _next_batch_end(q: np.ndarray, group: np.ndarray, i: int, batch: int) -> int:
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
def _read_candidate(
    nq: int, i: int, k: int, index: IndexArrays, scratch: Scratch, top: TopK, s: int, n_unread: int, n_heap: int
) -> tuple[int, int]:
    """Resolve set ``s`` if it is an unread candidate: drop it if its upper bound (Eq. 3.6)
    cannot beat |Q ∩ X_k|, else read its suffix and offer its overlap to the top-k."""
    set_indptr, set_tokens, mark, hot = index.set_indptr, index.set_tokens, scratch.mark, scratch.hot
    heap_values, heap_ids, stats = top.overlaps, top.sets, top.stats
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
def _sift_down(keys: np.ndarray, rows: np.ndarray, n: int, root: int) -> None:
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
    q: np.ndarray,
    i: int,
    k: int,
    batch: int,
    list_cost: np.ndarray,
    merge_rest: float,
    cost: ReadCost,
    index: IndexArrays,
    scratch: Scratch,
    top: TopK,
    n_cand: int,
    n_unread: int,
    n_heap: int,
) -> tuple[int, int, int, float, bool]:
    """One decision point after reading the list at query position ``i``.

    One pass over the candidate table prunes unread candidates with the position filter
    (Eq. 3.6), compacts the survivors, sums the next batch's benefit (Eq. 3.12) and buckets
    each survivor's read cost by its upper bound, an integer in [0, |Q|], so the
    candidate-elimination term of Eq. 3.7 is a prefix sum instead of a sort. Then
    candidates are read, best estimate (Eq. 3.4) first, while a candidate's net cost
    (Eq. 3.13) is no more than the next batch's. The reading stops at the first estimate
    ≤ |Q ∩ X_k|, so only the candidates estimated above it are kept, in a max-heap popped
    best first. ``list_cost[m]`` is the summed L(f) of the distinct lists before query
    position m; ``merge_rest`` what reading every list after ``i`` MergeList's way costs
    (Eq. 3.1), inf when that plan is not priced. Before any candidate is read, the pass's
    estimates say whether that plan is the cheaper finish (:func:`_merge_is_cheaper`).
    Returns (n_cand, n_unread, n_heap, NetCost(B), whether to finish MergeList's way).
    """
    s0, s1, hot, cand = cost.s0, cost.s1, scratch.hot, scratch.cand
    heap_values = top.overlaps
    nq = q.shape[0]
    theta = kth_overlap(heap_values, n_heap, k)
    end = _next_batch_end(q, index.group, i, batch)
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
    if merge_rest < np.inf and _merge_is_cheaper(
        q, i, k, list_cost, merge_rest, cost, scratch, hopeful, hopeful_estimate, n_hopeful
    ):
        return n_cand, n_unread, n_heap, net_batch, True
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
        n_unread, n_heap = _read_candidate(nq, i, k, index, scratch, top, s, n_unread, n_heap)
    # Algorithm 2 reads Best(u) while |h| < k or NetCost(X) ≤ NetCost(B). Benefit(X) ≥ 0
    # (Eq. 3.7), so NetCost(X) ≤ S(|X[j_X+1:]|): a candidate whose read costs no more than
    # the batch's net cost is the cheaper action whatever its estimate, including one seen
    # too recently to be estimated at all.
    for c in range(n_cand if n_heap < k or cheapest <= net_batch else 0):
        s = cand[c, _SET]
        if hot[_PARTIAL, s] > 0 and (n_heap < k or s0 + s1 * (cand[c, _SIZE] - 1 - hot[_LAST, s]) <= net_batch):
            n_unread, n_heap = _read_candidate(nq, i, k, index, scratch, top, s, n_unread, n_heap)
    if kth_overlap(heap_values, n_heap, k) >= nq - 1 - i and net_batch >= 0.0:
        # Past the prefix no list brings a new candidate; the lists only resolve U, and
        # the next batch is estimated to cost more than the set reads it saves (Eq. 3.13
        # with NetCost(B) ≥ 0), so reading all of U now is the cheaper way to finish.
        for c in range(n_cand):
            n_unread, n_heap = _read_candidate(nq, i, k, index, scratch, top, cand[c, _SET], n_unread, n_heap)
    return n_cand, n_unread, n_heap, net_batch, False


@njit(cache=True)
def _merge_is_cheaper(
    q: np.ndarray,
    i: int,
    k: int,
    list_cost: np.ndarray,
    merge_rest: float,
    cost: ReadCost,
    scratch: Scratch,
    hopeful: np.ndarray,
    estimates: np.ndarray,
    n_hopeful: int,
) -> bool:
    """Whether reading every list after query position ``i`` with MergeList's count (its cost
    ``merge_rest``, Eq. 3.1 with MergeList's fitted L) costs no more than JOSIE's cheapest
    finish with the k best-estimated unread candidates (Eq. 3.4) as its top k: the lists up
    to the prefix filter of the k-th estimate, which no plan of JOSIE's can skip, plus those
    k set reads (Eq. 3.15's S). The thesis's cost model weighs lists against sets at every
    step; a list read that also keeps JOSIE's per-set bookkeeping costs more than
    MergeList's bare count, so where the prefix covers about every list and the sets are
    large (short lists: MergeList's case, §3.5.4) the count is the cheaper way to finish.
    The k-th estimate stands for |Q ∩ X_k| only when the candidates estimated outnumber k
    several times (``PLAN_CANDIDATES``): with few of them, the sets of the true top k are
    mostly not seen yet, the k-th estimate is far too low and the prefix far too long, and
    JOSIE goes on."""
    nq = q.shape[0]
    best = np.zeros(k)  # ascending, as the running top-k
    best_read = np.zeros(k)  # the S of reading each
    n_best = 0
    for h in range(n_hopeful):
        s = scratch.cand[hopeful[h], _SET]
        suffix = scratch.cand[hopeful[h], _SIZE] - 1 - scratch.hot[_LAST, s]
        n_best = heap_push(best, best_read, n_best, k, estimates[h], cost.s0 + cost.s1 * suffix)
    if n_hopeful < PLAN_CANDIDATES * k:
        return False
    prefix_end = max(i + 1, nq - int(best[0]))
    return merge_rest <= list_cost[prefix_end] - list_cost[i + 1] + best_read.sum()


@njit(cache=True, inline="always")
def _read_list(
    token: int,
    i: int,
    skipped: int,
    nq: int,
    k: int,
    admit: bool,
    read_below: float,
    cost: ReadCost,
    index: IndexArrays,
    scratch: Scratch,
    top: TopK,
    counts: tuple[int, int, int, int, int],
) -> tuple[int, int, int, int, int]:
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
    ``counts`` and the result: (n_touched, n_cand, n_unread, n_heap, n_once)."""
    n_touched, n_cand, n_unread, n_heap, n_once = counts
    s0, s1 = cost.s0, cost.s1
    post_set, post_pos, post_size = index.post_set, index.post_pos, index.post_size
    set_indptr, set_tokens, mark = index.set_indptr, index.set_tokens, scratch.mark
    hot, touched, cand = scratch.hot, scratch.touched, scratch.cand
    heap_values, heap_ids, stats = top.overlaps, top.sets, top.stats
    for e in range(index.list_indptr[token], index.list_indptr[token + 1]):
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
def timed_list_reads(tokens: np.ndarray, repeats: int, index: IndexArrays, scratch: Scratch) -> None:
    """JOSIE's list reads as the cost fit times them (``cost.fit_read_cost``): ``tokens``
    read as the first lists of a long query, so every set in them is recorded at its first
    match and becomes a candidate at its second (none is read: no decision has priced a
    read yet), the bookkeeping a list read pays inside the prefix; state is reset after
    each repeat."""
    top = TopK(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(4, np.int64))
    free = ReadCost(0.0, 0.0, 0.0, 0.0)
    for _ in range(repeats):
        n_touched = 0
        for t in tokens:
            n_touched = _read_list(
                t, 0, 0, 1 << 30, 1, True, -np.inf, free, index, scratch, top, (n_touched, 0, 0, 0, 0)
            )[0]
        for m in range(n_touched):
            scratch.hot[_PARTIAL, scratch.touched[m]] = _UNSEEN


@njit(cache=True)
def _count_rest(
    q: np.ndarray, start: int, k: int, index: IndexArrays, scratch: Scratch, top: TopK, n_heap: int, n_touched: int
) -> int:
    """Finish by MergeList's plan from query position ``start``: every list left is read with a
    bare count (Eq. 3.1) on top of the partial overlaps JOSIE's reads left, and every set still
    counted joins the top-k with its overlap, now exact. A set read or pruned (``_DONE``) is left
    alone: its overlap is in the top-k already, or its bound (Eqs. 3.2, 3.6) is at most an
    overlap the top-k holds; a set matched once counts 1. A set JOSIE met only past the prefix
    filter was never counted, so its count from ``start`` is short, but it cannot beat
    |Q ∩ X_k| either way (the filter's bound). Resets ``scratch.hot`` and returns the top-k's
    size."""
    list_indptr, post_set, group, hot, touched = (
        index.list_indptr,
        index.post_set,
        index.group,
        scratch.hot,
        scratch.touched,
    )
    skipped = 0
    for i in range(start, q.shape[0]):
        if not is_group_end(q, group, i):
            skipped += 1
            continue
        note_list_read(top.stats, list_indptr, q[i])
        for e in range(list_indptr[q[i]], list_indptr[q[i] + 1]):
            s = post_set[e]
            partial = hot[_PARTIAL, s]
            if partial > 0:
                hot[_PARTIAL, s] = partial + skipped + 1
            elif partial == _ONCE:
                hot[_PARTIAL, s] = skipped + 2
            elif partial == _UNSEEN:
                hot[_PARTIAL, s] = skipped + 1
                touched[n_touched] = s
                n_touched += 1
        skipped = 0
    for t in range(n_touched):
        s = touched[t]
        partial = hot[_PARTIAL, s]
        if partial > 0 or partial == _ONCE:
            n_heap = heap_push(top.overlaps, top.sets, n_heap, k, max(partial, 1), s)
        hot[_PARTIAL, s] = _UNSEEN
    return n_heap


@njit(cache=True)
def floor_heap(out_overlaps: np.ndarray, out_sets: np.ndarray, k: int, floor: int) -> int:
    """The running top-k a search starts from: empty, or k placeholders at ``floor - 1``."""
    if floor <= 1:
        return 0
    out_overlaps[:k] = floor - 1
    out_sets[:k] = -1
    return k


@njit(cache=True)
def josie(
    q: np.ndarray, k: int, batch: int, floor: int, cost: ReadCost, index: IndexArrays, scratch: Scratch, top: TopK
) -> int:
    """JOSIE (Algorithm 2) over the query's token ids ``q`` (ascending, all in the index),
    with batches of ``batch`` distinct lists (λ; 0: ⌈distinct lists / ``DECISIONS_PER_QUERY``⌉).

    ``floor`` (> 1) is an overlap known to be reached by k sets elsewhere (other shards of the
    index: the k-th overlap merged so far). The running top-k starts as k placeholders (set -1)
    at ``floor - 1``, so |Q ∩ X_k| starts there and every filter (prefix, position, Eq. 3.6)
    prunes what cannot reach ``floor``; sets that reach it, ties included, are still found.

    ``cost``: the fitted :class:`~lakejoin.index.josie.cost.ReadCost`; ``index``: the searcher's
    :class:`~lakejoin.index.josie.arrays.IndexArrays`. ``scratch.hot`` (three rows of one int32 per
    set) must have row ``_PARTIAL`` zeroed and is left so; ``scratch.touched`` and ``scratch.cand``
    (the candidate table) hold one row per set. Results go to ``top.sets``/``top.overlaps``
    (ascending overlap); returns their count. ``top.stats`` gets lists read, sets read, posting
    entries read, set tokens read, and 1 in its fifth slot when the search finished by
    MergeList's plan (:func:`_merge_is_cheaper`, :func:`_count_rest`).
    """
    list_indptr, group, hot, touched, cand = index.list_indptr, index.group, scratch.hot, scratch.touched, scratch.cand
    out_overlaps, out_sets, stats = top.overlaps, top.sets, top.stats
    l0, l1, d = cost.l0, cost.l1, cost.d
    nq = q.shape[0]
    list_cost = np.zeros(nq + 1)
    merge_cost = np.zeros(nq + 1)  # the same sums with MergeList's L (Eq. 3.1)
    merge_priced = cost.m0 + cost.m1 < np.inf
    distinct = 0
    for m in range(nq):
        length = list_indptr[q[m] + 1] - list_indptr[q[m]] if is_group_end(q, group, m) else -1
        distinct += length >= 0
        list_cost[m + 1] = list_cost[m] + (l0 + l1 * length if length >= 0 else 0.0)
        if merge_priced:
            merge_cost[m + 1] = merge_cost[m] + (cost.m0 + cost.m1 * length if length >= 0 else 0.0)
    batch = batch if batch > 0 else max(MIN_BATCH_SIZE, -(-distinct // DECISIONS_PER_QUERY))
    n_heap = floor_heap(out_overlaps, out_sets, k, floor)
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
            cost,
            index,
            scratch,
            top,
            (n_touched, n_cand, n_unread, n_heap, n_once),
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
        merge_rest = merge_cost[nq] - merge_cost[i + 1] if merge_priced else np.inf
        n_cand, n_unread, n_heap, read_below, merge = _decide(
            q, i, k, batch, list_cost, merge_rest, cost, index, scratch, top, n_cand, n_unread, n_heap
        )
        if merge:  # the rest by MergeList's count: cheaper than JOSIE's state
            stats[4] = 1
            return _count_rest(q, i + 1, k, index, scratch, top, n_heap, n_touched)
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


def fit_decision_cost(index: IndexArrays, cost: ReadCost, *, samples: int = 1000, seed: int = 0) -> float:
    """Seconds per unread candidate of one decision point (:func:`_decide`), fitted like the
    read costs: time decisions over growing candidate counts (up to ``4·samples``) and take
    the least-squares slope. Every candidate is estimated (Eqs. 3.4, 3.9–3.12) and survives
    the position filter but none beats θ: the pass over U that every decision makes; the
    few candidates above θ, heaped and weighed one by one, are not per-candidate costs. The
    decisions see a query of 64 distinct lists, none of them the index's, and state and
    candidate table freshly allocated, as a query's first decision finds them."""
    n_sets = index.set_indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    nq, i, k = 64, 31, 10  # estimate 1/32·64 = 2 = θ for each candidate below
    q = np.arange(nq, dtype=np.int32)
    lists = index._replace(group=np.arange(nq, dtype=index.group.dtype))
    list_cost = np.zeros(nq + 1)
    counts, times = [], []
    for n in np.unique(np.minimum(n_sets, samples * np.arange(1, 5))):
        table = np.zeros((n, 4), np.int32)  # seen once, at query position 0 and set position 0
        table[:, _SET] = rng.choice(n_sets, size=n, replace=False)
        table[:, _SIZE] = np.diff(index.set_indptr)[table[:, _SET]]  # sets of < 3 tokens get pruned: a negligible share
        hot = np.zeros((3, n_sets), np.int32)
        best = np.inf
        for _ in range(4):
            scratch = Scratch(np.zeros(1, np.uint8), hot, np.empty(0, np.int32), np.empty(0, np.int32), table.copy())
            hot[_PARTIAL, table[:, _SET]] = 1
            top = TopK(np.full(k, 2, np.int64), np.zeros(k, np.int64), np.zeros(4, np.int64))
            started = time.perf_counter()
            _decide(q, i, k, 20, list_cost, np.inf, cost, lists, scratch, top, n, n, k)
            best = min(best, time.perf_counter() - started)
        counts.append(n)
        times.append(best)
    if len(counts) < 2:
        return 0.0
    slope = np.polyfit(np.array(counts, float), np.array(times), 1)[0]
    return max(float(slope), 0.0)
