"""Read-cost model of JOSIE (thesis §3.4.3, Eq. 3.15) fitted to the searcher's own storage.

``S(n) = s0 + s1·n`` is the time to read ``n`` tokens of a set and ``L(f) = l0 + l1·f`` the
time to read a posting list of length ``f``. The thesis fits them by timing 1,000 sampled
sets and 1,000 sampled lists in PostgreSQL (Fig. 3.4); here the storage is the in-memory
CSR arrays of ``reads.py``, so :func:`fit_read_cost` times the very reads JOSIE makes (its
list read, passed in by the searcher, and ``reads.count_suffix``), on samples of the loaded
index, when the index is loaded.

``d`` is fitted the same way, by timing JOSIE's own decision step (``kernels.fit_decision_cost``)
on growing numbers of candidates, and ``m0``/``m1`` are MergeList's ``L`` (its bare count), which
JOSIE weighs when it may finish by MergeList's plan (``kernels._merge_is_cheaper``). ``plans``
is the plan timed fastest for each size of query, chosen before any read (``plans.py``).

Single reads take tens of nanoseconds, below a timer's resolution, so the sampled sets are
timed in batches of similar sizes (each batch read ``repeats`` times inside one compiled
call, which also amortizes the call overhead) and the per-read coefficients come from a
least-squares fit of ``time(batch) = c0·reads + c1·tokens`` over the batches, on relative
errors. Lists are timed as a query reads them: the lists of a sampled set's tokens, in their
order, each query once (a list read again is found in the cache, which a query's lists are
not), with the call's fixed cost fitted apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit

from lakejoin.index.josie.reads import count_suffix

_MIN_COST = 1e-10  # seconds; keeps a coefficient positive when the fit lands at or below 0
QUERY_LISTS = 2_000  # lists per query the list-read fit reads at most (its time on load stays a fraction of a second)
Timer = Callable[[np.ndarray, int], object]  # a compiled read loop, called with (items, repeats)
NO_PLANS = (0,) * 16  # ``ReadCost.plans`` with nothing fitted: JOSIE (0) answers every size of query (``plans.py``)


class ReadCost(NamedTuple):
    """Coefficients of Eq. 3.15, in seconds, and ``d``: the time a decision point spends per
    unread candidate (the thesis's "estimation overhead", §3.5.4, linear in the candidates;
    0 makes decisions free). A named tuple, so the compiled search takes it as one argument."""

    s0: float
    s1: float
    l0: float
    l1: float
    d: float = 0.0
    m0: float = np.inf  # MergeList's L(f) = m0 + m1·f (Eq. 3.1); inf: JOSIE never switches to its plan
    m1: float = np.inf
    # The plan that answers a query of 2^c to 2^(c+1) - 1 held tokens, for each size class c
    # (``plans.fit_plans``; the last class holds every larger query too).
    plans: tuple[int, ...] = NO_PLANS

    def S(self, n: float) -> float:  # noqa: N802 - the thesis's name
        """Eq. 3.15's time to read ``n`` tokens of a set: ``s0 + s1·n`` seconds."""
        return self.s0 + self.s1 * n

    def L(self, f: float) -> float:  # noqa: N802 - the thesis's name
        """Eq. 3.15's time to read a posting list of length ``f``: ``l0 + l1·f`` seconds."""
        return self.l0 + self.l1 * f


@njit(cache=True)
def _read_sets(set_indptr: np.ndarray, set_tokens: np.ndarray, mark: np.ndarray, sets: np.ndarray, repeats: int) -> int:
    hits = 0
    for _ in range(repeats):
        for s in sets:
            hits += count_suffix(set_indptr, set_tokens, mark, s, 0)
    return hits


def _sample(lengths: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Half uniform, half length-weighted: the skewed lengths of a lake still span the fit."""
    candidates = np.flatnonzero(lengths > 0)
    if len(candidates) == 0:
        return candidates
    half = max(1, n // 2)
    weights = lengths[candidates] / lengths[candidates].sum()
    picked = np.concatenate((rng.choice(candidates, size=half), rng.choice(candidates, size=half, p=weights)))
    return picked[np.argsort(lengths[picked], kind="stable")]


def _fit(timer: Timer, items: np.ndarray, lengths: np.ndarray, batch: int) -> tuple[float, float]:
    """Least-squares ``(c0, c1)`` of ``time = c0·reads + c1·tokens`` over batches of items."""
    rows, times = [], []
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        tokens = int(lengths[chunk].sum())
        repeats = max(1, 20_000 // (len(chunk) + tokens // 4 + 1))
        timer(chunk, 1)  # warm the caches and compile
        best = min(_timed(timer, chunk, repeats) for _ in range(3))
        rows.append((len(chunk), tokens))
        times.append(best / repeats)
    if not rows:  # nothing to read (a subset of shards without sets): no cost can matter
        return _MIN_COST, _MIN_COST
    # Relative least squares (rows scaled by 1/time): timing noise grows with the time, so
    # plain least squares lets the long batches' noise swamp the short ones that fix c0.
    t = np.array(times)
    a = np.array(rows, dtype=np.float64) / t[:, None]
    (c0, c1), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return max(float(c0), _MIN_COST), max(float(c1), _MIN_COST)


def _fit_in_query_order(timer: Timer, queries: list[np.ndarray], list_lengths: np.ndarray) -> tuple[float, float]:
    """Least-squares ``(c0, c1)`` of ``time = c + c0·lists + c1·entries`` over whole queries'
    lists, each query read once, in its order: a query's lists lie apart in the arrays, so
    each list read starts cold, unlike the same few lists read again (:func:`_fit`), and the
    per-list part of ``L`` is where JOSIE's list read and MergeList's count differ most. The
    constant ``c`` is the call's own overhead, left out of ``L``."""
    timer(queries[0][:1], 1)  # compile
    rows, times = [], []
    for tokens in queries:
        rows.append((1.0, len(tokens), float(list_lengths[tokens].sum())))
        times.append(_timed(timer, tokens, 1))
    t = np.array(times)
    a = np.array(rows) / t[:, None]
    (_, c0, c1), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return max(float(c0), _MIN_COST), max(float(c1), _MIN_COST)


def _timed(timer: Timer, chunk: np.ndarray, repeats: int) -> float:
    start = time.perf_counter()
    timer(chunk, repeats)
    return time.perf_counter() - start


def fit_read_cost(
    read_lists: Callable[[np.ndarray, int], None],
    merge_lists: Callable[[np.ndarray, int], None],
    list_lengths: np.ndarray,
    set_indptr: np.ndarray,
    set_tokens: np.ndarray,
    *,
    samples: int = 1000,
    batch: int = 20,
    seed: int = 0,
) -> ReadCost:
    """Fit ``S`` and ``L`` by timing ``samples`` sets and ``samples`` posting lists.

    ``read_lists(token_ids, repeats)`` is the searcher's own list read (JOSIE's, with its
    candidate bookkeeping, which costs more per entry than a bare count) and ``merge_lists``
    MergeList's count of the same lists (``m0``, ``m1``); sets are read with
    :func:`~lakejoin.index.josie.reads.count_suffix`, the read every searcher uses.
    """
    rng = np.random.default_rng(seed)
    set_lengths = np.diff(set_indptr)
    mark = np.zeros(int(set_tokens.max(initial=0)) + 1, np.uint8)
    mark[::2] = 1
    lists = _sample(list_lengths, samples, rng).astype(np.int64)
    sets = _sample(set_lengths, samples, rng).astype(np.int64)
    s0, s1 = _fit(lambda c, r: _read_sets(set_indptr, set_tokens, mark, c, r), sets, set_lengths, batch)
    if len(sets) < 4:  # too few sets to read a query's lists from: timed list by list
        return ReadCost(s0, s1, *_fit(read_lists, lists, list_lengths, batch))
    # The sampled sets' tokens are the queries (the first QUERY_LISTS of each: a query's
    # rarest lists, the ones every plan reads), half for each read so neither finds the
    # other's lists in the cache.
    queries = [set_tokens[set_indptr[s] : min(set_indptr[s + 1], set_indptr[s] + QUERY_LISTS)] for s in sets]
    l0, l1 = _fit_in_query_order(read_lists, queries[::2], list_lengths)
    m0, m1 = _fit_in_query_order(merge_lists, queries[1::2], list_lengths)
    return ReadCost(s0=s0, s1=s1, l0=l0, l1=l1, m0=m0, m1=m1)
