"""Brute-force reference answers that every exact (and approximate) index is tested against.

They compare the query with every set, one by one, with Python sets: slow, obviously right.
Queries and sets are compared as given; normalize them first (``lakejoin.normalize.normalize_set``)
if they come from raw cells.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping


def _query_set(query: Iterable[str]) -> set[str]:
    if isinstance(query, str):
        raise ValueError("query must be an iterable of tokens, not a single string")
    tokens = set(query)
    if not tokens:
        raise ValueError("query is empty")
    return tokens


def overlap_topk(query: Iterable[str], sets: Mapping[Hashable, Iterable[str]], k: int) -> list[tuple[Hashable, int]]:
    """Exact top-k overlap set similarity search (JOSIE thesis Def. 3.1.1) by brute force.

    Returns up to ``k`` pairs ``(set_id, |Q ∩ X|)``, sorted by overlap descending then set_id
    ascending (one deterministic pick among the ties that the definition allows); sets with zero
    overlap are never returned.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    q = _query_set(query)
    scored = [(set_id, len(q.intersection(tokens))) for set_id, tokens in sets.items()]
    ranked = sorted((pair for pair in scored if pair[1] > 0), key=lambda p: (-p[1], p[0]))
    return ranked[:k]


def containment_search(
    query: Iterable[str], sets: Mapping[Hashable, Iterable[str]], threshold: float
) -> dict[Hashable, float]:
    """Exact containment threshold search (thesis Ch. 2, the problem LSH Ensemble approximates).

    Returns ``{set_id: |Q ∩ X| / |Q|}`` for every set whose containment of the query is at
    least ``threshold`` (``0 < threshold <= 1``).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    q = _query_set(query)
    result = {}
    for set_id, tokens in sets.items():
        containment = len(q.intersection(tokens)) / len(q)
        if containment >= threshold:
            result[set_id] = containment
    return result
