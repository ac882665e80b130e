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
query vector at a time. A posting whose box of mapped vectors Lemma 3 excludes is skipped;
inside a posting, Lemma 1 filters, Lemma 2 matches, and only then is the distance computed. ``use_lemmas=False`` verifies every vector naively and keeps only
stop-at-T: the paper's PEXESO-H baseline.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

OPEN, JOINABLE, PRUNED = 0, 1, 2
_THETA_EVERY = 16


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


@numba.njit(cache=True, inline="always")
def _record_hit(q, col, v, weight, n_hits, hits, hit_by, matched, undecided, status, stop_when_joinable, required):
    """Decide (q, S) as a hit: store it with its matching vector ``v``, count ``w(q)`` for S,
    and mark S joinable once it reaches ``T_cnt`` (early termination 1). Returns the hit count."""
    hit_by[col] = q
    hits[n_hits, 0], hits[n_hits, 1], hits[n_hits, 2] = q, col, v
    matched[col] += weight
    undecided[col] -= weight
    if stop_when_joinable and matched[col] >= required:
        status[col] = JOINABLE
    return n_hits + 1


@numba.njit(cache=True)
def _kth_largest(values, k):
    if k > values.shape[0]:
        return 0
    return np.sort(values)[values.shape[0] - k]


@numba.njit(cache=True)
def _verify(
    weights, q_vectors, q_mapped, x_vectors, x_by_pivot,
    leaf_start, post_column, post_vstart, post_vend, post_lo, post_hi,
    m_ptr, m_leaf, b_ptr, b_leaf, c_ptr, c_leaf,
    n_columns, required, top_k, stop_when_joinable, use_lemmas, tau, eps,
):  # fmt: skip
    n_query = weights.shape[0]
    tau2 = tau * tau
    matched = np.zeros(n_columns, np.int64)
    undecided = np.zeros(n_columns, np.int64)
    status = np.zeros(n_columns, np.int8)
    touched_by = np.full(n_columns, -1, np.int64)
    hit_by = np.full(n_columns, -1, np.int64)
    survivors = np.empty(max(0, (post_vend - post_vstart).max()) if post_vend.shape[0] else 0, np.int64)

    # reach[S]: every (q, S) pair any leaf of q reaches starts undecided.
    n_touch = 0
    for q in range(n_query):
        for phase in range(3):
            ptr, leaves = (m_ptr, m_leaf) if phase == 0 else ((b_ptr, b_leaf) if phase == 1 else (c_ptr, c_leaf))
            for i in range(ptr[q], ptr[q + 1]):
                leaf = leaves[i]
                for p in range(leaf_start[leaf], leaf_start[leaf + 1]):
                    col = post_column[p]
                    if touched_by[col] != q:
                        touched_by[col] = q
                        undecided[col] += weights[q]
                        n_touch += 1
    if use_lemmas and top_k == 0:
        for col in range(n_columns):
            if lemma7_unjoinable(0, undecided[col], required):
                status[col] = PRUNED
    hits = np.empty((n_touch, 3), np.int64)  # (query vector, column, matching vector) per hit
    n_hits = 0
    distances = 0
    theta = 0

    # Phase A: free matches (Lemmas 5/6), then quick browsing; hits only.
    for q in range(n_query):
        for i in range(m_ptr[q], m_ptr[q + 1]):
            leaf = m_leaf[i]
            for p in range(leaf_start[leaf], leaf_start[leaf + 1]):
                col = post_column[p]
                if status[col] != OPEN or hit_by[col] == q:
                    continue
                n_hits = _record_hit(q, col, post_vstart[p], weights[q], n_hits, hits, hit_by, matched, undecided, status, stop_when_joinable, required)
        for i in range(b_ptr[q], b_ptr[q + 1]):
            leaf = b_leaf[i]
            for p in range(leaf_start[leaf], leaf_start[leaf + 1]):
                col = post_column[p]
                if status[col] != OPEN or hit_by[col] == q:
                    continue
                v, computed = _first_match(q, p, post_vstart, post_vend, post_lo, post_hi, q_vectors, q_mapped, x_vectors, x_by_pivot, tau, tau2, eps, use_lemmas, survivors)
                distances += computed
                if v >= 0:
                    n_hits = _record_hit(q, col, v, weights[q], n_hits, hits, hit_by, matched, undecided, status, stop_when_joinable, required)
    n_phase_a = n_hits

    # Phase B: candidate pairs, one query vector at a time; misses become final per q.
    touched_by[:] = -1
    touched = np.empty(n_columns, np.int64)
    a = 0
    for q in range(n_query):
        if top_k > 0 and q % _THETA_EVERY == 0:
            theta = _kth_largest(matched, top_k)
        bound = max(required, theta)
        while a < n_phase_a and hits[a, 0] == q:
            hit_by[hits[a, 1]] = q
            a += 1
        n_touched = 0
        for phase in range(2):
            ptr, leaves = (b_ptr, b_leaf) if phase == 0 else (c_ptr, c_leaf)
            for i in range(ptr[q], ptr[q + 1]):
                leaf = leaves[i]
                for p in range(leaf_start[leaf], leaf_start[leaf + 1]):
                    col = post_column[p]
                    if touched_by[col] != q:
                        touched_by[col] = q
                        touched[n_touched] = col
                        n_touched += 1
                    if phase == 0 or status[col] != OPEN or hit_by[col] == q:
                        continue
                    if use_lemmas and lemma7_unjoinable(matched[col], undecided[col], bound):
                        status[col] = PRUNED
                        continue
                    v, computed = _first_match(q, p, post_vstart, post_vend, post_lo, post_hi, q_vectors, q_mapped, x_vectors, x_by_pivot, tau, tau2, eps, use_lemmas, survivors)
                    distances += computed
                    if v >= 0:
                        n_hits = _record_hit(q, col, v, weights[q], n_hits, hits, hit_by, matched, undecided, status, stop_when_joinable, required)
        for j in range(n_touched):
            col = touched[j]
            if status[col] == OPEN and hit_by[col] != q:
                undecided[col] -= weights[q]
                if use_lemmas and lemma7_unjoinable(matched[col], undecided[col], bound):
                    status[col] = PRUNED
    return matched, undecided, status, hits[:n_hits, 0], hits[:n_hits, 1], hits[:n_hits, 2], distances


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
    """Run Algorithm 2 over the CSR pair lists (matching, browsing, candidate) of ``block``."""
    (m_ptr, m_leaf), (b_ptr, b_leaf), (c_ptr, c_leaf) = pair_lists
    result = _verify(
        weights, q_vectors, q_mapped, x_vectors, x_by_pivot, *postings,
        m_ptr, m_leaf, b_ptr, b_leaf, c_ptr, c_leaf,
        n_columns, required, top_k, stop_when_joinable, use_lemmas, float(tau), float(eps),
    )  # fmt: skip
    return Verified(*result[:6], distances=int(result[6]))
