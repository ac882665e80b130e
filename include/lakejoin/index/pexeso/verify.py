"""Verify, [ICDE] Algorithm 2, with exact per-(query record, column) counting (notes §2.6).

The paper's Algorithm 2 updates ``match``/``mismatch`` once per *target vector*; read
literally it double-counts matches and can call a query vector "mismatched" for ``S`` while
another vector of ``S`` in another of its cells would match. Here a pair (q, S) is decided
once: a *hit* as soon as one vector of S matches q, a *miss* only after every vector of S in
every leaf paired with q has failed. Query vectors are distinct values carrying their record
multiplicity ``w(q)`` (duplicates in Q count, notes §1.1).

Per column S: ``matched[S]`` counts matched query records, ``undecided[S]`` the records whose
leaves reach S and are not decided yet (initially ``reach[S]``). Early termination:

1. with ``stop_when_joinable`` (the searcher's lower-bound mode): ``matched[S] ≥ T_cnt`` → S
   is joinable and skipped from then on (its count a lower bound); without it, S is verified to
   the end and its count is exact;
2. Lemma 7: ``matched[S] + undecided[S] < T_cnt`` → S is pruned. A column no query vector's
   leaves reach is never joinable (notes §2.6, "strengthening").

Top-k mode ([v1] Def. 3, threshold algorithm): no early "joinable"; ``T_cnt`` is replaced by
``θ``, the k-th largest ``matched`` so far, which only grows; a column whose upper bound
``matched + undecided`` falls below ``θ`` cannot enter the top k.

Order, as in Algorithm 3: free matches (Lemmas 5/6) and quick browsing for every query
vector first (they push likely columns over ``T_cnt`` early), then the candidate pairs, one
query vector at a time. Every counter and both early terminations are per column, so the
pairs are regrouped by column and each column is replayed alone in that order: the same
state as the query-at-a-time loop, and columns can be verified on several threads.

A posting whose box of mapped vectors Lemma 3 excludes is skipped; inside a posting, Lemma 1
a bisection keeps the slab of vectors whose first principal-axis head coordinate is within
reach (vectors are sorted by it), Lemma 1 filters per vector, Lemma 2 matches, and only then is
the distance computed: a principal-axis head rejects most pairs (``projection.py``, a lower
bound), ``M_τ`` on the original vectors decides the rest. ``use_lemmas=False`` computes the
distance to every vector and keeps only stop-at-T: the paper's PEXESO-H baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

OPEN, JOINABLE, PRUNED = 0, 1, 2
_TOPK_WAVE = 64  # columns per top-k wave: θ is refreshed between waves


class Repository(NamedTuple):
    """A partition's vectors in posting order, as Verify reads them."""

    vectors: np.ndarray  # float32, one row per vector
    mapped: np.ndarray  # float64 x', one row per vector
    first: np.ndarray  # first head coordinate of every vector (float64): bisected within a posting
    heads: np.ndarray  # float32 principal-axis heads (projection.py)


# --- Lemmas 1, 2, 3, 7 and Def. 1 for one pair, box or column (lemmas.py has the rest) ---


# Hot-loop helpers take a 2-d array and a row index rather than the row: a row view made per
# call costs an array struct and its reference counting, more than the test itself.


@numba.njit(cache=True, inline="always")
def lemma1_filters(x_mapped: np.ndarray, v: int, q_mapped: np.ndarray, q: int, tau: float, eps: float) -> bool:
    """Lemma 1 (pivot filtering): ∃p ``|x'_p − q'_p| > τ`` means ``x_v`` cannot match ``q``."""
    for i in range(q_mapped.shape[1]):
        if abs(x_mapped[v, i] - q_mapped[q, i]) > tau + eps:
            return True
    return False


@numba.njit(cache=True, inline="always")
def lemma3_filters(
    box_lo: np.ndarray, box_hi: np.ndarray, p: int, q_mapped: np.ndarray, q: int, tau: float, eps: float
) -> bool:
    """Lemma 3 for box ``p``: ∃i ``lo_i > q'_i + τ`` or ``hi_i < q'_i − τ`` means nothing in it matches."""
    for i in range(q_mapped.shape[1]):
        if box_lo[p, i] - q_mapped[q, i] > tau + eps or q_mapped[q, i] - box_hi[p, i] > tau + eps:
            return True
    return False


@numba.njit(cache=True, inline="always")
def lemma2_matches(x_mapped: np.ndarray, v: int, q_mapped: np.ndarray, q: int, tau: float, eps: float) -> bool:
    """Lemma 2 (pivot matching): ∃p ``d(x, p) + d(q, p) ≤ τ`` means ``x_v`` matches q; applied
    to the posting boxes' ``lo``, False means no vector of posting ``v`` can match by it."""
    for i in range(q_mapped.shape[1]):
        if x_mapped[v, i] + q_mapped[q, i] <= tau - eps:
            return True
    return False


@numba.njit(cache=True, inline="always")
def lemma7_unjoinable(matched: int, undecided: int, required: int) -> bool:
    """Lemma 7 (count-based pruning): ``|Q| − |U| < T`` means ``S`` cannot be joinable.

    ``|Q| − |U|`` is bounded by the records already matched plus those still undecided for
    ``S``; ``U`` holds query records that match *no* vector of ``S`` (notes §2.6).
    """
    return matched + undecided < required


@numba.njit(cache=True, fastmath={"reassoc"}, inline="always")
def _squared_distance(a: np.ndarray, i: int, b: np.ndarray, j: int) -> float:
    """``Σ_k (a_ik − b_jk)²`` in float64. Every term is exact (a float32 difference squared
    fits a float64); the sum may be reassociated to run on SIMD lanes."""
    total = 0.0
    for k in range(a.shape[1]):
        diff = np.float64(a[i, k]) - np.float64(b[j, k])
        total += diff * diff
    return total


@numba.njit(cache=True)
def exact_match(q_vectors: np.ndarray, q: int, x_vectors: np.ndarray, v: int, tau_squared: float) -> bool:
    """Def. 1, ``M_τ(q, x_v)``: ``Σ_j (q_j − x_vj)² ≤ τ²`` in float64."""
    return _squared_distance(q_vectors, q, x_vectors, v) <= tau_squared


class Verified(NamedTuple):
    """What verification decided per column, with one matching vector per (query vector, column) hit."""

    matched: np.ndarray  # int64 per column: matched query records (a lower bound if joinable early)
    undecided: np.ndarray  # int64 per column: records never decided (0 means matched is exact)
    status: np.ndarray  # int8 per column: OPEN, JOINABLE, PRUNED
    hit_query: np.ndarray  # one row per (q, S) hit: the query vector,
    hit_column: np.ndarray  # the column,
    hit_vector: np.ndarray  # and one vector of S that matches q
    distances: int  # exact distance computations


@numba.njit(cache=True, inline="always")
def _bisect(sorted_values: np.ndarray, lo: int, hi: int, value: float) -> int:
    """The first index in ``lo:hi`` whose value is ``≥ value`` (``hi`` if none), halving the
    count left to search; indexes the array directly, where a slice would make a view."""
    count = hi - lo
    while count > 0:
        half = count >> 1
        if sorted_values[lo + half] < value:
            lo += half + 1
            count -= half + 1
        else:
            count = half
    return lo


@numba.njit(cache=True)
def _next_candidate(
    v: int,
    stop: int,
    filtered: bool,
    pivot_match_possible: bool,
    q: int,
    q_mapped: np.ndarray,
    q_heads: np.ndarray,
    repo: Repository,
    tau: float,
    head_bound: float,
    eps: float,
) -> tuple[int, int, bool]:
    """From ``x_v`` on, the first vector that Lemma 2 matches (returned with True) or whose
    principal-axis head is within ``τ`` of q's (with False), or ``stop``; and how many
    vectors reached the distance stage on the way (each one exact distance computation).

    ``filtered``: apply Lemma 1 and Lemma 2; False for PEXESO-H. The head is
    a lower bound of ``d(q, x)`` (``projection.py``), widened for rounding: it only rejects.
    The few vectors it passes are decided by the caller with ``M_τ``; that test stays out
    of this loop, which it would slow down even where it never runs.
    """
    computed = 0
    while v < stop:
        if filtered:
            if lemma1_filters(repo.mapped, v, q_mapped, q, tau, eps):
                v += 1
                continue
            if pivot_match_possible and lemma2_matches(repo.mapped, v, q_mapped, q, tau, eps):
                return v, computed, True
        computed += 1
        if _squared_distance(q_heads, q, repo.heads, v) <= head_bound:
            return v, computed, False
        v += 1
    return v, computed, False


@numba.njit(cache=True)
def _first_match(
    q: int,
    p: int,
    post_vstart: np.ndarray,
    post_vend: np.ndarray,
    post_lo: np.ndarray,
    post_hi: np.ndarray,
    q_vectors: np.ndarray,
    q_mapped: np.ndarray,
    q_heads: np.ndarray,
    repo: Repository,
    tau: float,
    tau2: float,
    head_bound: float,
    eps: float,
    use_lemmas: bool,
) -> tuple[int, int]:
    """The first vector of posting ``p`` that matches ``q`` (or -1), and the distances computed."""
    start, stop = post_vstart[p], post_vend[p]
    pivot_match_possible = False
    if use_lemmas:
        if lemma3_filters(post_lo, post_hi, p, q_mapped, q, tau, eps):
            return -1, 0
        # a posting's vectors are sorted by their first head coordinate h_1; |h_1(q) − h_1(x)|
        # is at most the projected distance, so only the slab within its bound can match
        reach = np.sqrt(head_bound) * (1.0 + 1e-12)
        start = _bisect(repo.first, start, stop, np.float64(q_heads[q, 0]) - reach)
        stop = _bisect(repo.first, start, stop, np.nextafter(np.float64(q_heads[q, 0]) + reach, np.inf))
        # Lemma 2 on the posting's box: when no pivot has lo_i + q'_i ≤ τ, no vector of it can
        # match by Lemma 2 (in high dimensions, the usual case), so its per-vector test is skipped
        pivot_match_possible = lemma2_matches(post_lo, p, q_mapped, q, tau, eps)
    computed = 0
    v = start
    while v < stop:
        v, more, by_pivot = _next_candidate(
            v, stop, use_lemmas, pivot_match_possible, q, q_mapped, q_heads, repo, tau, head_bound, eps
        )
        computed += more
        if v < stop and (by_pivot or exact_match(q_vectors, q, repo.vectors, v, tau2)):
            return v, computed
        v += 1
    return -1, computed


_M, _B, _C = 0, 1, 2  # event kinds: matching leaf (Lemmas 5/6), browsed leaf, candidate leaf


@numba.njit(cache=True)
def _column_events(
    weights: np.ndarray,
    leaf_start: np.ndarray,
    post_column: np.ndarray,
    m_ptr: np.ndarray,
    m_leaf: np.ndarray,
    b_ptr: np.ndarray,
    b_leaf: np.ndarray,
    c_ptr: np.ndarray,
    c_leaf: np.ndarray,
    n_columns: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    ev_start: int,
    ev_stop: int,
    ev_q: np.ndarray,
    ev_p: np.ndarray,
    ev_kind: np.ndarray,
    weights: np.ndarray,
    reach: int,
    bound: int,
    stop_when_joinable: bool,
    use_lemmas: bool,
    q_vectors: np.ndarray,
    q_mapped: np.ndarray,
    q_heads: np.ndarray,
    repo: Repository,
    post_vstart: np.ndarray,
    post_vend: np.ndarray,
    post_lo: np.ndarray,
    post_hi: np.ndarray,
    tau: float,
    tau2: float,
    head_bound: float,
    eps: float,
    hit_q: np.ndarray,
    hit_v: np.ndarray,
    hit_start: int,
) -> tuple[int, int, int, int, int]:
    """Algorithm 2 for one column S: returns ``matched``, ``undecided``, status, hits, distances.

    Columns do not interact (every counter and early termination is per S), so S alone, in
    its events' order, reaches exactly the state the query-at-a-time loop leaves it in. Hits
    go to ``hit_q/hit_v[hit_start:]``, one per decided (q, S) hit, q ascending per phase.
    """
    matched, undecided, n_hits, distances = 0, reach, 0, 0
    if use_lemmas and lemma7_unjoinable(0, undecided, bound):
        return matched, undecided, PRUNED, n_hits, distances

    # Phase A: free matches (Lemmas 5/6), then quick browsing; hits only.
    for e in range(ev_start, ev_stop):
        q, p = ev_q[e], ev_p[e]
        if ev_kind[e] == _C or (n_hits > 0 and hit_q[hit_start + n_hits - 1] == q):
            continue
        v = post_vstart[p]
        if ev_kind[e] == _B:
            v, computed = _first_match(
                q,
                p,
                post_vstart,
                post_vend,
                post_lo,
                post_hi,
                q_vectors,
                q_mapped,
                q_heads,
                repo,
                tau,
                tau2,
                head_bound,
                eps,
                use_lemmas,
            )
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
            v, computed = _first_match(
                q,
                p,
                post_vstart,
                post_vend,
                post_lo,
                post_hi,
                q_vectors,
                q_mapped,
                q_heads,
                repo,
                tau,
                tau2,
                head_bound,
                eps,
                use_lemmas,
            )
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
    columns: np.ndarray,
    ev_start: np.ndarray,
    ev_q: np.ndarray,
    ev_p: np.ndarray,
    ev_kind: np.ndarray,
    weights: np.ndarray,
    reach: np.ndarray,
    bound: int,
    stop_when_joinable: bool,
    use_lemmas: bool,
    q_vectors: np.ndarray,
    q_mapped: np.ndarray,
    q_heads: np.ndarray,
    repo: Repository,
    post_vstart: np.ndarray,
    post_vend: np.ndarray,
    post_lo: np.ndarray,
    post_hi: np.ndarray,
    tau: float,
    head_bound: float,
    eps: float,
    hit_q: np.ndarray,
    hit_v: np.ndarray,
    hit_start: np.ndarray,
    matched: np.ndarray,
    undecided: np.ndarray,
    status: np.ndarray,
    n_hits: np.ndarray,
) -> int:
    """``_verify_column`` for each of ``columns``, into their slots of the per-column arrays;
    returns the distances computed. Releases the GIL: workers run it side by side."""
    distances = 0
    for col in columns:
        result = _verify_column(
            ev_start[col], ev_start[col + 1], ev_q, ev_p, ev_kind, weights, reach[col], bound,
            stop_when_joinable, use_lemmas, q_vectors, q_mapped, q_heads, repo,
            post_vstart, post_vend, post_lo, post_hi, tau, tau * tau, head_bound, eps, hit_q, hit_v, hit_start[col],
        )  # fmt: skip
        matched[col], undecided[col], status[col], n_hits[col] = result[0], result[1], result[2], result[3]
        distances += result[4]
    return distances


_WORKERS = max(1, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # numba.config is filled from the environment at import; honours NUMBA_NUM_THREADS; sets nothing
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
    q_heads: np.ndarray,
    repo: Repository,
    postings: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    pair_lists: tuple[tuple[np.ndarray, np.ndarray], ...],
    n_columns: int,
    *,
    required: int,
    top_k: int,
    stop_when_joinable: bool,
    use_lemmas: bool,
    tau: float,
    head_bound: float,
    eps: float,
) -> Verified:
    """Run Algorithm 2 over the CSR pair lists (matching, browsing, candidate) of ``block``;
    ``q_heads`` and ``repo.heads`` are principal-axis heads, ``head_bound`` their squared
    rejection bound (``projection.py``).

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
            q_vectors, q_mapped, q_heads, repo, post_vstart, post_vend, post_lo, post_hi,
            float(tau), float(head_bound), float(eps), hit_q, hit_v, hit_start, matched, undecided, status, n_hits,
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
