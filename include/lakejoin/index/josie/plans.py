"""Which plan answers a query, chosen before any list is read (thesis §3.2, §3.5.4).

A query can be answered three ways, each exact: **MergeList** reads every distinct posting list
with a bare count (Eq. 3.1: Σ L(f) over the lists), **ProbeSet** reads the lists up to the prefix
filter and every candidate they bring at first sight (Eq. 3.3: Σ L(f) over the prefix plus
Σ S(|X[j_{X,0}:]|) over the candidates) and **JOSIE** weighs lists against candidates as it goes
(Algorithm 2, Eq. 3.14). The thesis finds each one fastest on some lakes: MergeList where lists
are short and sets large (Open Data, Fig. 3.5), ProbeSet where sets are tiny (Web Tables,
Fig. 3.7), JOSIE in between, and within a lake the winner moves with the query's size.

Eqs. 3.3 and 3.14 depend on |Q ∩ X_k| and on the candidates, which no plan knows before reading,
so the plans are priced by measurement instead, the way Eq. 3.15's S and L are (``cost.py``): on
load, sets of the index, of sizes spread over the index's, are searched as queries by all three
plans (k = ``FIT_K``) and timed, and each size class (the query's held tokens, by powers of
two) gets the plan with the least time summed over its queries, each query's times relative to
its fastest plan's. A line fitted over all sizes cannot hold this choice: on Web Tables ProbeSet
is fastest for the smallest and the largest queries and JOSIE in between. The searcher
(``JosieSearcher.search``) looks the query's class up (:func:`size_class`, no pass over the
query) and runs that plan's kernel as it runs the baseline's own; JOSIE may still finish
MergeList's way (``kernels._merge_is_cheaper``). The plan changes the time only, never the
answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from lakejoin.index.josie.cost import NO_PLANS
from lakejoin.index.josie.reads import TopK

JOSIE, MERGELIST, PROBESET = 0, 1, 2  # plan numbers, as ``ReadCost.plans`` and ``TopK.stats[4]`` hold them
PLAN_NAMES = ("josie", "mergelist", "probeset")
FIT_K = 10  # the k the plans are timed with: the searches' default
FIT_QUERIES = 48  # sampled sets searched per plan on load
FIT_REPEATS = 3  # runs per query and plan; the fastest counts


def size_class(held: int) -> int:
    """The size class of a query holding ``held`` tokens: ⌊log2(held)⌋, at most the last of
    ``ReadCost.plans``' classes."""
    return min(max(held, 1).bit_length() - 1, len(NO_PLANS) - 1)


Plan = Callable[[np.ndarray, TopK], int]  # one plan's search of (query, running top-k)


def fit_plans(plans: tuple[Plan, Plan, Plan], queries: list[np.ndarray]) -> tuple[int, ...]:
    """The plan (:data:`PLAN_NAMES` number) of each size class, from ``queries`` (ascending token
    ids of the index ``plans`` search) timed by every plan (:func:`plans_by_size`)."""
    return plans_by_size([len(q) for q in queries], np.array([_fastest(plans, q) for q in queries]))


def plans_by_size(sizes: list[int], times: np.ndarray) -> tuple[int, ...]:
    """Each size class's plan, from queries of ``sizes`` held tokens and their ``times`` (one row
    per query, one column per plan): the class's least summed relative time (each query's times
    over its fastest's); a class without queries takes the nearest class's plan (the smaller on
    a tie), and with no query at all every class is JOSIE's."""
    relative = np.zeros((len(NO_PLANS), len(PLAN_NAMES)))
    for size, row in zip(sizes, times):
        relative[size_class(size)] += row / row.min()
    measured = np.flatnonzero(relative.any(axis=1))
    if not len(measured):
        return NO_PLANS
    nearest = measured[np.abs(np.arange(len(NO_PLANS))[:, None] - measured[None, :]).argmin(axis=1)]
    return tuple(int(plan) for plan in relative[nearest].argmin(axis=1))


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
