"""Verify, [ICDE] Algorithm 2, with exact per-(query record, column) counting (notes §2.6).

The paper's Algorithm 2 updates ``match``/``mismatch`` once per *target vector*; read
literally it double-counts matches and can call a query vector "mismatched" for ``S`` while
another vector of ``S`` in another of its cells would match. Here a pair (q, S) is decided
once: a *hit* as soon as one vector of S matches q, a *miss* only after every vector of S in
every leaf paired with q has failed. Query vectors are distinct values carrying their record
multiplicity ``w(q)`` (duplicates in Q count, notes §1.1).

Per column S: ``matched[S]`` counts matched query records, ``undecided[S]`` the records whose
leaves reach S and are not decided yet (initially ``reach[S]``). Early termination:

1. ``matched[S] ≥ T_cnt`` → S is joinable and skipped from then on (its count a lower bound);
2. Lemma 7: ``matched[S] + undecided[S] < T_cnt`` → S is pruned. A column no query vector's
   leaves reach is never joinable (notes §2.6, "strengthening").

Top-k mode ([v1] Def. 3, threshold algorithm): no early "joinable"; ``T_cnt`` is replaced by
``θ``, the k-th largest ``matched`` so far, which only grows; a column whose upper bound
``matched + undecided`` falls below ``θ`` cannot enter the top k.

Order, as in Algorithm 3: free matches (Lemmas 5/6) and quick browsing for every query
vector first (they push likely columns over ``T_cnt`` early), then the candidate pairs, one
query vector at a time. Every counter and both early terminations are per column, so the
pairs are regrouped by column and each column is replayed alone in that order: the same
state as the query-at-a-time loop, and columns can be verified on several threads. A posting whose box of mapped vectors Lemma 3 excludes is skipped;
inside a posting, Lemma 1 filters, Lemma 2 matches, and only then is the distance computed. ``use_lemmas=False`` verifies every vector naively and keeps only
stop-at-T: the paper's PEXESO-H baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

OPEN, JOINABLE, PRUNED = 0, 1, 2
_TOPK_WAVE = 64  # columns per top-k wave: θ is refreshed between waves


# --- Lemmas 1, 2, 3, 7 and Def. 1 for one pair, box or column (lemmas.py has the rest) ---


@numba.njit(cache=True, inline="always")
def lemma1_survivors(x_by_pivot: np.ndarray, start: int, stop: int, q_mapped: np.ndarray, tau: float, eps: float, out: np.ndarray) -> int:
    """Lemma 1 (pivot filtering) over vectors ``start:stop``, which pass it on pivot 1 (the
    caller's slab): ∃p ``|x'_p − q'_p| > τ`` means x cannot match q. Writes the survivors, in
    order, to ``out`` and returns how many there are.

    Pivot-major coordinates (``x_by_pivot[p, x]``), one pivot per pass over the shrinking
    survivor list: the first pass streams one contiguous run, and later passes touch few
    vectors, where a vector-at-a-time test would load every vector's whole mapped row.
    """
    n = 0
    for v in range(start, stop):
        out[n] = v
        n += 1
    for i in range(1, q_mapped.shape[0]):
        low, high = q_mapped[i] - tau - eps, q_mapped[i] + tau + eps
        kept = 0
        for k in range(n):
            v = out[k]
            out[kept] = v
            kept += low <= x_by_pivot[i, v] <= high
        n = kept
        if n == 0:
            break
    return n


@numba.njit(cache=True, inline="always")
def lemma3_filters(box_lo: np.ndarray, box_hi: np.ndarray, q_mapped: np.ndarray, tau: float, eps: float) -> bool:
    """Lemma 3 for one box: ∃i ``lo_i > q'_i + τ`` or ``hi_i < q'_i − τ`` means nothing in it matches."""
    for i in range(q_mapped.shape[0]):
        if box_lo[i] - q_mapped[i] > tau + eps or q_mapped[i] - box_hi[i] > tau + eps:
            return True
    return False


@numba.njit(cache=True, inline="always")
def lemma2_matches(x_by_pivot: np.ndarray, v: int, q_mapped: np.ndarray, tau: float, eps: float) -> bool:
    """Lemma 2 (pivot matching): ∃p ``d(x, p) + d(q, p) ≤ τ`` means x matches q."""
    for i in range(q_mapped.shape[0]):
        if x_by_pivot[i, v] + q_mapped[i] <= tau - eps:
            return True
    return False


@numba.njit(cache=True, inline="always")
def lemma7_unjoinable(matched: int, undecided: int, required: int) -> bool:
    """Lemma 7 (count-based pruning): ``|Q| − |U| < T`` means ``S`` cannot be joinable.

    ``|Q| − |U|`` is bounded by the records already matched plus those still undecided for
    ``S``; ``U`` holds query records that match *no* vector of ``S`` (notes §2.6).
    """
    return matched + undecided < required


_PREFIX = 16  # float32 values per 64-byte cache line


@numba.njit(cache=True, fastmath={"reassoc"})
def _squared_distance(q: np.ndarray, x: np.ndarray, start: int, stop: int) -> float:
    """``Σ_j (q_j − x_j)²`` over ``start ≤ j < stop`` in float64. Every term is exact (a float32
    difference squared fits a float64); the sum may be reassociated to run on SIMD lanes."""
    total = 0.0
    for j in range(start, stop):
        diff = np.float64(q[j]) - np.float64(x[j])
        total += diff * diff
    return total


@numba.njit(cache=True, inline="always")
def exact_match(q: np.ndarray, x: np.ndarray, tau_squared: float) -> bool:
    """Def. 1, ``M_τ(q, x)``: ``Σ_j (q_j − x_j)² ≤ τ²`` in float64.

    The first cache line of ``x`` settles most far pairs (sums of non-negative terms only
    grow); the rest is summed only for the pairs it leaves.
    """
    head = _squared_distance(q, x, 0, min(_PREFIX, q.shape[0]))
    return head <= tau_squared and head + _squared_distance(q, x, _PREFIX, q.shape[0]) <= tau_squared


class Verified(NamedTuple):
    matched: np.ndarray  # int64 per column: matched query records (a lower bound if joinable early)
    undecided: np.ndarray  # int64 per column: records never decided (0 means matched is exact)
    status: np.ndarray  # int8 per column: OPEN, JOINABLE, PRUNED
    hit_query: np.ndarray  # one row per (q, S) hit: the query vector,
    hit_column: np.ndarray  # the column,
    hit_vector: np.ndarray  # and one vector of S that matches q
    distances: int  # exact distance computations


@numba.njit(cache=True)
def _first_match(q, p, post_vstart, post_vend, post_lo, post_hi, q_vectors, q_mapped, x_vectors, x_by_pivot, tau, tau2, eps, use_lemmas, survivors):
    """The first vector of posting ``p`` that matches ``q`` (or -1), and the distances computed."""
    start, end = post_vstart[p], post_vend[p]
    if not use_lemmas:
        for v in range(start, end):
            if exact_match(q_vectors[q], x_vectors[v], tau2):
                return v, v - start + 1
        return -1, end - start
    if lemma3_filters(post_lo[p], post_hi[p], q_mapped[q], tau, eps):
        return -1, 0
    # a posting's vectors are sorted by x'_1: Lemma 1 on pivot 1 is a slab, found by bisection
    first = x_by_pivot[0, start:end]
    stop = start + np.searchsorted(first, q_mapped[q, 0] + tau + eps, side="right")
    start += np.searchsorted(first, q_mapped[q, 0] - tau - eps)
    # Lemma 2 on the posting's box: when no pivot has lo_i + q'_i ≤ τ, no vector of it can match
    # by Lemma 2 (in high dimensions, the usual case), so its per-vector test is skipped
    pivot_match_possible = (post_lo[p] + q_mapped[q] <= tau - eps).any()
    computed = 0
    for k in range(lemma1_survivors(x_by_pivot, start, stop, q_mapped[q], tau, eps, survivors)):
        v = survivors[k]
        if pivot_match_possible and lemma2_matches(x_by_pivot, v, q_mapped[q], tau, eps):
            return v, computed
        computed += 1
        if exact_match(q_vectors[q], x_vectors[v], tau2):
            return v, computed
    return -1, computed


_M, _B, _C = 0, 1, 2  # event kinds: matching leaf (Lemmas 5/6), browsed leaf, candidate leaf


@numba.njit(cache=True)
def _column_events(weights, leaf_start, post_column, m_ptr, m_leaf, b_ptr, b_leaf, c_ptr, c_leaf, n_columns):
    """The pair lists regrouped by column: per S, its postings ``(q, posting, kind)`` in the
    order the query-at-a-time Algorithm 2 visits them (q, then matching, browsed, candidate
    leaves), plus ``reach[S]``, the records whose leaves reach S, and how many distinct q do.

    Two passes (count, then fill) of a counting sort; the fill keeps visiting order per S.
    """
    n_query = weights.shape[0]
    ev_start = np.zeros(n_columns + 1, np.int64)
    reach = np.zeros(n_columns, np.int64)
    n_reaching = np.zeros(n_columns, np.int64)
    touched_by = np.full(n_columns, -1, np.int64)
    for fill in range(2):
        if fill:
            ev_start[1:] = np.cumsum(ev_start[1:])
            cursor = ev_start[:-1].copy()
            ev_q = np.empty(ev_start[n_columns], np.int64)
            ev_p = np.empty(ev_start[n_columns], np.int64)
            ev_kind = np.empty(ev_start[n_columns], np.int8)
        for q in range(n_query):
            for kind in range(3):
                ptr, leaves = (m_ptr, m_leaf) if kind == _M else ((b_ptr, b_leaf) if kind == _B else (c_ptr, c_leaf))
                for i in range(ptr[q], ptr[q + 1]):
                    leaf = leaves[i]
                    for p in range(leaf_start[leaf], leaf_start[leaf + 1]):
                        col = post_column[p]
                        if fill:
                            e = cursor[col]
                            ev_q[e], ev_p[e], ev_kind[e] = q, p, kind
                            cursor[col] = e + 1
                            continue
                        ev_start[col + 1] += 1
                        if touched_by[col] != q:
                            touched_by[col] = q
                            reach[col] += weights[q]
                            n_reaching[col] += 1
    return ev_start, ev_q, ev_p, ev_kind, reach, n_reaching


@numba.njit(cache=True)
def _verify_column(
    ev_start, ev_stop, ev_q, ev_p, ev_kind, weights, reach, bound, stop_when_joinable, use_lemmas,
    q_vectors, q_mapped, x_vectors, x_by_pivot, post_vstart, post_vend, post_lo, post_hi,
    tau, tau2, eps, hit_q, hit_v, hit_start, survivors,
):  # fmt: skip
    """Algorithm 2 for one column S: returns ``matched``, ``undecided``, status, hits, distances.

    Columns do not interact (every counter and early termination is per S), so S alone, in
    its events' order, reaches exactly the state the query-at-a-time loop leaves it in. Hits
    go to ``hit_q/hit_v[hit_start:]``, one per decided (q, S) hit, q ascending per phase.
    """
    matched, undecided, status, n_hits, distances = 0, reach, OPEN, 0, 0
    if use_lemmas and lemma7_unjoinable(0, undecided, bound):
        return matched, undecided, PRUNED, n_hits, distances

    # Phase A: free matches (Lemmas 5/6), then quick browsing; hits only.
    for e in range(ev_start, ev_stop):
        q, p = ev_q[e], ev_p[e]
        if ev_kind[e] == _C or (n_hits > 0 and hit_q[hit_start + n_hits - 1] == q):
            continue
        v = post_vstart[p]
        if ev_kind[e] == _B:
            v, computed = _first_match(q, p, post_vstart, post_vend, post_lo, post_hi, q_vectors, q_mapped, x_vectors, x_by_pivot, tau, tau2, eps, use_lemmas, survivors)
            distances += computed
        if v >= 0:
            hit_q[hit_start + n_hits], hit_v[hit_start + n_hits] = q, v
            n_hits += 1
            matched += weights[q]
            undecided -= weights[q]
            if stop_when_joinable and matched >= bound:
                return matched, undecided, JOINABLE, n_hits, distances
    n_phase_a = n_hits

    # Phase B: candidate pairs, q ascending; a q whose leaves all fail is a final miss.
    a, e = 0, ev_start
    while e < ev_stop:
        q = ev_q[e]
        while a < n_phase_a and hit_q[hit_start + a] < q:
            a += 1
        hit = a < n_phase_a and hit_q[hit_start + a] == q
        touched = False
        while e < ev_stop and ev_q[e] == q:
            p, kind = ev_p[e], ev_kind[e]
            e += 1
            touched |= kind != _M
            if kind != _C or hit:
                continue
            if use_lemmas and lemma7_unjoinable(matched, undecided, bound):
                return matched, undecided, PRUNED, n_hits, distances
            v, computed = _first_match(q, p, post_vstart, post_vend, post_lo, post_hi, q_vectors, q_mapped, x_vectors, x_by_pivot, tau, tau2, eps, use_lemmas, survivors)
            distances += computed
            if v >= 0:
                hit_q[hit_start + n_hits], hit_v[hit_start + n_hits] = q, v
                n_hits += 1
                hit = True
                matched += weights[q]
                undecided -= weights[q]
                if stop_when_joinable and matched >= bound:
                    return matched, undecided, JOINABLE, n_hits, distances
        if touched and not hit:
            undecided -= weights[q]
            if use_lemmas and lemma7_unjoinable(matched, undecided, bound):
                return matched, undecided, PRUNED, n_hits, distances
    return matched, undecided, OPEN, n_hits, distances


@numba.njit(cache=True, nogil=True)
def _verify_columns(
    columns, ev_start, ev_q, ev_p, ev_kind, weights, reach, bound, stop_when_joinable, use_lemmas,
    q_vectors, q_mapped, x_vectors, x_by_pivot, post_vstart, post_vend, post_lo, post_hi,
    tau, eps, hit_q, hit_v, hit_start, matched, undecided, status, n_hits,
):  # fmt: skip
    """``_verify_column`` for each of ``columns``, into their slots of the per-column arrays;
    returns the distances computed. Releases the GIL: workers run it side by side."""
    longest = (post_vend - post_vstart).max() if post_vend.shape[0] else 0
    survivors = np.empty(longest, np.int64)
    distances = 0
    for col in columns:
        result = _verify_column(
            ev_start[col], ev_start[col + 1], ev_q, ev_p, ev_kind, weights, reach[col], bound,
            stop_when_joinable, use_lemmas, q_vectors, q_mapped, x_vectors, x_by_pivot,
            post_vstart, post_vend, post_lo, post_hi, tau, tau * tau, eps, hit_q, hit_v, hit_start[col], survivors,
        )  # fmt: skip
        matched[col], undecided[col], status[col], n_hits[col] = result[0], result[1], result[2], result[3]
        distances += result[4]
    return distances


_WORKERS = max(1, numba.config.NUMBA_NUM_THREADS)  # honours NUMBA_NUM_THREADS; sets nothing
_pool: ThreadPoolExecutor | None = None


def _spread(task: Callable[[np.ndarray], int], columns: np.ndarray) -> int:
    """Run ``task`` over ``columns`` dealt round-robin to ``_WORKERS`` slices, the calling
    thread taking the first; the sum of the results.

    Plain threads over a ``nogil`` kernel, not ``prange``: numba's default OpenMP layer
    spin-waits at its barrier, which on a busy 2-core machine made Verify 3-7x slower.
    Columns come heaviest first, so round-robin gives every worker a share of the heavy ones.
    """
    global _pool
    slices = [columns[w::_WORKERS] for w in range(min(_WORKERS, len(columns)))]
    if len(slices) < 2:
        return sum(task(s) for s in slices)
    if _pool is None:
        _pool = ThreadPoolExecutor(_WORKERS - 1, thread_name_prefix="pexeso-verify")
    others = [_pool.submit(task, s) for s in slices[1:]]
    return task(slices[0]) + sum(f.result() for f in others)
def verify(
    weights: np.ndarray,
    q_vectors: np.ndarray,
    q_mapped: np.ndarray,
    x_vectors: np.ndarray,
    x_by_pivot: np.ndarray,
    postings: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    pair_lists: tuple[tuple[np.ndarray, np.ndarray], ...],
    n_columns: int,
    *,
    required: int,
    top_k: int,
    stop_when_joinable: bool,
    use_lemmas: bool,
    tau: float,
    eps: float,
) -> Verified:
    """Run Algorithm 2 over the CSR pair lists (matching, browsing, candidate) of ``block``.

    Columns are independent, so they are verified in parallel (``_spread``); every result is
    the one a single thread gives. Threshold mode verifies all columns at once. Top-k visits
    them by ``reach`` descending in waves of ``_TOPK_WAVE``; ``θ``, the k-th largest
    ``matched`` of the columns done, is fixed during a wave.
    """
    (m_ptr, m_leaf), (b_ptr, b_leaf), (c_ptr, c_leaf) = pair_lists
    leaf_start, post_column, post_vstart, post_vend, post_lo, post_hi = postings
    ev_start, ev_q, ev_p, ev_kind, reach, n_reaching = _column_events(
        weights, leaf_start, post_column, m_ptr, m_leaf, b_ptr, b_leaf, c_ptr, c_leaf, n_columns
    )
    hit_start = np.r_[0, np.cumsum(n_reaching)]
    hit_q, hit_v = np.empty(hit_start[-1], np.int64), np.empty(hit_start[-1], np.int64)
    matched, undecided = np.zeros(n_columns, np.int64), reach.copy()
    status, n_hits = np.zeros(n_columns, np.int8), np.zeros(n_columns, np.int64)

    def columns_task(bound: int) -> Callable[[np.ndarray], int]:
        return lambda columns: _verify_columns(
            columns, ev_start, ev_q, ev_p, ev_kind, weights, reach, bound, stop_when_joinable, use_lemmas,
            q_vectors, q_mapped, x_vectors, x_by_pivot, post_vstart, post_vend, post_lo, post_hi,
            float(tau), float(eps), hit_q, hit_v, hit_start, matched, undecided, status, n_hits,
        )  # fmt: skip

    order = np.argsort(-reach, kind="stable")
    wave = max(top_k, _TOPK_WAVE) if top_k else max(n_columns, 1)
    distances = 0
    for first in range(0, n_columns, wave):
        theta = int(np.sort(matched)[-top_k]) if 0 < top_k <= n_columns else 0
        distances += _spread(columns_task(max(required, theta)), order[first : first + wave])
    # hits gathered column by column: the same arrays whichever worker took which column
    column = np.repeat(np.arange(n_columns), n_hits)
    at = np.arange(len(column)) + np.repeat(hit_start[:-1] - (np.cumsum(n_hits) - n_hits), n_hits)
    return Verified(matched, undecided, status, hit_q[at], column, hit_v[at], distances=int(distances))
