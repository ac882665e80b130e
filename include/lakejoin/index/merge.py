"""Exact merges of answers given by searchers over disjoint parts of one index (shards).

A column (MATE: a table) lives in exactly one shard, and every family scores a candidate from
the query and that candidate alone, so the whole index's answer is a merge of the answers each
shard gives for the same query. The merge depends only on the shape of the family's score:

- **top-k by a score** (JOSIE's overlap, MATE's joinability, PEXESO's top-k mode): each shard's
  top-k holds every candidate of the global top-k that lives in it, so the global top-k is the
  k best of their union, by the family's own ranking key (``IndexFamily.rank_key``);
- **threshold** (PEXESO's threshold mode): the union, ranked;
- **threshold steps** (LSH Ensemble's top-k mode, which lowers its threshold step by step until
  k results reach it): each shard reports, per step, how many of its candidates reach that
  step's threshold and its top-k there (``LshEnsembleSearcher.search_steps``); the whole index
  stops at the first step where the shards' counts add up to k, and answers their union's top k
  at that step (:func:`merge_threshold_steps`).

A tie at the k-th score may be broken differently by the whole index (whichever candidate its
search met first) and by a merge (the smaller id): both are exact top-k answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any

Result = dict[str, Any]

RankKey = Callable[[Result], tuple]  # a family's ranking, as its searcher sorts: best score first, then the smaller id


def merge_top_k(parts: Iterable[Sequence[Result]], k: int, key: RankKey) -> list[Result]:
    """The ``k`` best results of the parts' union by ``key``."""
    return sorted(chain.from_iterable(parts), key=key)[:k]


def merge_threshold(parts: Iterable[Sequence[Result]], key: RankKey) -> list[Result]:
    """Every part's results (each passed the threshold on its own), ranked by ``key``."""
    return sorted(chain.from_iterable(parts), key=key)


def merge_threshold_steps(parts: Iterable[Sequence[dict[str, Any]]], k: int | None, key: RankKey) -> list[Result]:
    """LSH Ensemble's answer from each part's threshold steps (``{"threshold", "reached",
    "results"}``, thresholds descending; see the module docstring), ranked by ``key``. A part stops once its own
    count reaches ``k``, which the total then has too, so every part has each step examined."""
    stepped = [p for p in parts if p]
    if not stepped:
        return []
    last = max(len(p) for p in stepped) - 1
    step = next((i for i in range(last) if k is None or _reached(stepped, i, k) >= k), last)
    if any(len(p) <= step for p in stepped):
        raise ValueError(
            f"LSH Ensemble parts disagree on their steps: one stopped before step {step} without reaching k={k}"
        )
    return sorted(chain.from_iterable(p[step]["results"] for p in stepped), key=key)[:k]


def _reached(stepped: list[Sequence[dict[str, Any]]], i: int, k: int) -> int:
    """Results of every part reaching step ``i``'s threshold (a part that stopped before ``i``
    had reached ``k`` on its own)."""
    return sum(p[i]["reached"] if len(p) > i else k for p in stepped)
