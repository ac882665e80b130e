"""Which plan answers a query, chosen before any list is read (thesis §3.2, §3.5.4).

A query can be answered three ways, each exact: **MergeList** reads every distinct posting list
with a bare count (Eq. 3.1: Σ L(f) over the lists), **ProbeSet** reads the lists up to the prefix
filter and every candidate they bring at first sight (Eq. 3.3: Σ L(f) over the prefix plus
Σ S(|X[j_{X,0}:]|) over the candidates) and **JOSIE** weighs lists against candidates as it goes
(Algorithm 2, Eq. 3.14). The thesis finds each one fastest on some lakes: MergeList where lists
are short and sets large (Open Data, Fig. 3.5), ProbeSet where sets are tiny (Web Tables,
Fig. 3.7), JOSIE in between, and within a lake the winner moves with the query's size.

Eqs. 3.3 and 3.14 depend on |Q ∩ X_k| and on the candidates, which no plan knows before reading,
so each plan's whole-query time is fitted instead, the way Eq. 3.15's S and L are (``cost.py``):
on load, sets of the index are searched as queries by all three plans (k = ``FIT_K``), timed,
and each plan's time is fitted as ``c0 + c1·lists + c2·entries`` over the query's distinct
lists and their posting entries, Eq. 3.1's terms, which every plan's cost grows with and which
are known from the list lengths alone. :func:`search` prices a query by the three lines and runs
the cheapest plan; JOSIE may still finish MergeList's way (``kernels._merge_is_cheaper``). The
plan changes the time only, never the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numba import njit

from lakejoin.index.josie.arrays import IndexArrays
from lakejoin.index.josie.baselines import mergelist, probeset
from lakejoin.index.josie.cost import NO_PLANS, ReadCost
from lakejoin.index.josie.kernels import _floor_heap, josie
from lakejoin.index.josie.reads import Scratch, TopK, is_group_end

JOSIE, MERGELIST, PROBESET = 0, 1, 2  # plan numbers, as ``ReadCost.plans`` and ``TopK.stats[4]`` hold them
PLAN_NAMES = ("josie", "mergelist", "probeset")
FIT_K = 10  # the k the plans are timed with: the searches' default
FIT_QUERIES = 48  # sampled sets searched per plan on load
FIT_REPEATS = 3  # runs per query and plan; the fastest counts


@njit(cache=True)
def query_lists(q: np.ndarray, index: IndexArrays) -> tuple[int, int]:
    """The distinct posting lists of ``q`` (one per duplicate group, §3.4.1) and their entries."""
    lists = 0
    entries = 0
    for i in range(q.shape[0]):
        if is_group_end(q, index.group, i):
            lists += 1
            entries += index.list_indptr[q[i] + 1] - index.list_indptr[q[i]]
    return lists, entries


@njit(cache=True)
def cheapest_plan(plans: tuple, lists: int, entries: int) -> int:
    """The plan whose fitted line prices ``lists`` lists of ``entries`` entries lowest (JOSIE on
    a tie, and where nothing was fitted: every line infinite)."""
    best, best_cost = JOSIE, np.inf
    for plan in range(3):
        price = plans[3 * plan] + plans[3 * plan + 1] * lists + plans[3 * plan + 2] * entries
        if price < best_cost:
            best, best_cost = plan, price
    return best


@njit(cache=True)
def search(
    q: np.ndarray, k: int, batch: int, floor: int, cost: ReadCost, index: IndexArrays, scratch: Scratch, top: TopK
) -> int:
    """Answer ``q`` (as :func:`~lakejoin.index.josie.kernels.josie` takes it) by the plan the
    fitted lines price cheapest; ``top.stats[4]`` says which (:data:`PLAN_NAMES`), and a floor
    holds for every plan."""
    lists, entries = query_lists(q, index)
    plan = cheapest_plan(cost.plans, lists, entries)
    if plan == MERGELIST:
        top.stats[4] = MERGELIST
        return mergelist(q, k, index, scratch, top, _floor_heap(top.overlaps, top.sets, k, floor))
    if plan == PROBESET:
        top.stats[4] = PROBESET
        return probeset(q, k, index, scratch, top, _floor_heap(top.overlaps, top.sets, k, floor))
    return josie(q, k, batch, floor, cost, index, scratch, top)


Plan = Callable[[np.ndarray, TopK], int]  # one plan's search of (query, running top-k)


def fit_plans(plans: tuple[Plan, Plan, Plan], queries: list[np.ndarray], index: IndexArrays) -> tuple[float, ...]:
    """The lines ``c0 + c1·lists + c2·entries`` (seconds) of the plans in :data:`PLAN_NAMES`
    order, each fitted on ``queries`` (ascending token ids of this index) by relative least
    squares, as ``cost._fit`` does; all infinite (JOSIE for every query) when too few queries
    have different shapes to fit three coefficients."""
    shapes = np.array([query_lists(q, index) for q in queries], dtype=np.float64).reshape(-1, 2)
    if len({tuple(row) for row in shapes.tolist()}) < 4:
        return NO_PLANS
    features = np.column_stack((np.ones(len(queries)), shapes))
    times = np.array([_fastest(plans, q) for q in queries])  # (queries, plans)
    return tuple(c for plan in range(len(plans)) for c in _nonnegative_fit(features, times[:, plan]))


def _nonnegative_fit(features: np.ndarray, times: np.ndarray) -> list[float]:
    """Relative least squares of ``times`` on ``features`` with every coefficient ≥ 0: lists and
    entries grow together, so an unconstrained fit can trade a negative price of one for the
    other, which extrapolates badly; a feature whose coefficient comes out negative is dropped
    and the rest refitted."""
    kept = np.ones(features.shape[1], bool)
    coefficients = np.zeros(features.shape[1])
    while kept.any():
        rows = features[:, kept] / times[:, None]
        solved, *_ = np.linalg.lstsq(rows, np.ones_like(times), rcond=None)
        coefficients[:] = 0.0
        coefficients[kept] = solved
        if (solved >= 0).all():
            break
        kept[np.flatnonzero(kept)[solved < 0]] = False
    return coefficients.tolist()


def _fastest(plans: tuple[Plan, Plan, Plan], q: np.ndarray) -> list[float]:
    """Each plan's fastest of ``FIT_REPEATS`` runs on ``q``, the plans taking turns, so that none
    always finds the lists in the cache another just read."""
    best = [np.inf] * len(plans)
    for _ in range(FIT_REPEATS):
        for number, plan in enumerate(plans):
            top = TopK(np.zeros(FIT_K, np.int64), np.full(FIT_K, -1, np.int64), np.zeros(5, np.int64))
            started = time.perf_counter()
            plan(q, top)
            best[number] = min(best[number], time.perf_counter() - started)
    return best
