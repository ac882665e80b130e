"""Pivot selection and pivot mapping ([ICDE] §III-D; notes/pexeso.md §2.2).

The paper adopts the PCA-based method of Mao, Miranker and Miranker [22]: good pivots are
outliers, but not every outlier is a good pivot. So:

1. farthest-first traversal picks ``c·|P|`` outlier candidates from a sample of ``R_V``;
2. the sample is mapped to the candidates' pivot space (an ``n × c|P|`` distance matrix);
3. PCA on that matrix; for each of the top ``|P|`` principal components the candidate whose
   axis carries the largest loading (smallest angle) becomes a pivot.

Selecting ``|P|`` pivots this way gives the first ``|P|`` of a larger selection, so the cost
model (``cost.py``) can try several ``|P|`` from one run.

Pivot mapping: ``x' = [d(p_1, x), …, d(p_|P|, x)]``, Euclidean, computed in float64.
"""

from __future__ import annotations

import numpy as np

CANDIDATES_PER_PIVOT = 3
_MAP_CHUNK = 65536


def distances_to(vectors: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Euclidean distance (float64) of every row of ``vectors`` to ``point``."""
    diff = np.asarray(vectors, dtype=np.float64) - np.asarray(point, dtype=np.float64)
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def map_to_pivot_space(vectors: np.ndarray, pivots: np.ndarray) -> np.ndarray:
    """Pivot mapping: row ``i`` of the result is ``x_i' = [d(p, x_i) for p in P]``."""
    mapped = np.empty((len(vectors), len(pivots)), dtype=np.float64)
    for start in range(0, len(vectors), _MAP_CHUNK):
        chunk = vectors[start : start + _MAP_CHUNK]
        for i, pivot in enumerate(pivots):
            mapped[start : start + len(chunk), i] = distances_to(chunk, pivot)
    return mapped


def farthest_first(sample: np.ndarray, count: int) -> np.ndarray:
    """Indices of ``count`` outliers by farthest-first traversal.

    Starts from the point farthest from the sample mean (deterministic), then repeatedly
    takes the point whose distance to the chosen set is largest. Stops early when only
    duplicates of chosen points remain.
    """
    chosen = [int(np.argmax(distances_to(sample, sample.mean(axis=0))))]
    nearest = distances_to(sample, sample[chosen[0]])
    while len(chosen) < count:
        candidate = int(np.argmax(nearest))
        if nearest[candidate] == 0.0:
            break
        chosen.append(candidate)
        nearest = np.minimum(nearest, distances_to(sample, sample[candidate]))
    return np.asarray(chosen, dtype=np.int64)


def select_pivots(sample: np.ndarray, n_pivots: int, candidates_per_pivot: int = CANDIDATES_PER_PIVOT) -> np.ndarray:
    """PCA-based pivot selection [22]: the pivots (rows, float32) chosen from ``sample``.

    Returns fewer than ``n_pivots`` rows only when the sample has fewer distinct vectors.
    """
    if n_pivots < 1:
        raise ValueError(f"n_pivots must be at least 1, got {n_pivots}")
    sample = np.asarray(sample, dtype=np.float32)
    if len(sample) == 0:
        raise ValueError("cannot select pivots from an empty sample")
    candidates = farthest_first(sample, n_pivots * candidates_per_pivot)
    if len(candidates) <= n_pivots:
        return sample[candidates]
    candidate_space = map_to_pivot_space(sample, sample[candidates])
    centred = candidate_space - candidate_space.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    chosen: list[int] = []
    for component in components:
        loadings = np.abs(component)
        loadings[chosen] = -1.0
        chosen.append(int(np.argmax(loadings)))
        if len(chosen) == n_pivots:
            break
    return sample[candidates[chosen]]
