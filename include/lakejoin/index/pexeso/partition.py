"""Column clustering for lakes larger than memory ([ICDE] §IV; notes/pexeso.md §2.8).

Pivots are outliers of the data they were chosen from, so columns with different
distributions should not share an index. Each column is summarised as a probability
histogram over space regions; columns are clustered k-means style under the paper's "JSD",
which is really the symmetrised KL (Jeffreys) divergence
``(KL(A‖B) + KL(B‖A)) / 2`` (notes §5.3); histograms are smoothed so empty bins stay finite.
Each partition gets its own PEXESO (pivots, grids, inverted index); search visits the
partitions one at a time and takes the union, which is exact because every column lives in
exactly one partition.

The paper leaves the regions unspecified. Here region ``r`` is the Voronoi cell of reference
vector ``r``: the first vectors of the build's hash-ordered sample, so the Spark build and
``build_in_memory`` see the same regions.
"""

from __future__ import annotations

import numpy as np

from lakejoin.index.pexeso.pivots import distances_to

SMOOTHING = 1e-3


def nearest_region(vectors: np.ndarray, references: np.ndarray) -> np.ndarray:
    """The index of the nearest reference vector of every row (ties to the lower index)."""
    distance = np.stack([distances_to(vectors, r) for r in references], axis=1)
    return np.argmin(distance, axis=1).astype(np.int64)


def jeffreys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The paper's "JSD": ``(KL(a‖b) + KL(b‖a)) / 2`` of each row of ``a`` against ``b``."""
    return 0.5 * ((a - b) * (np.log(a) - np.log(b))).sum(axis=-1)


def to_distribution(counts: np.ndarray) -> np.ndarray:
    """Smoothed probability histograms from region counts (rows: columns)."""
    smoothed = np.asarray(counts, dtype=np.float64) + SMOOTHING
    return smoothed / smoothed.sum(axis=1, keepdims=True)


def cluster_columns(counts: np.ndarray, k: int, iterations: int = 10, seed: int = 0) -> np.ndarray:
    """Partition label (0..k-1) of every column, from its region counts.

    k random columns start as centres; each round assigns every column to the centre of
    least Jeffreys divergence and moves each centre to its cluster's mean histogram.
    """
    if k < 1:
        raise ValueError(f"the number of partitions must be at least 1, got {k}")
    histograms = to_distribution(counts)
    k = min(k, len(histograms))
    rng = np.random.default_rng(seed)
    centres = histograms[rng.choice(len(histograms), size=k, replace=False)]
    labels = np.zeros(len(histograms), dtype=np.int64)
    for round_ in range(iterations):
        divergence = np.stack([jeffreys(histograms, c) for c in centres], axis=1)
        new_labels = np.argmin(divergence, axis=1)
        if round_ > 0 and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        for cluster in range(k):
            members = histograms[labels == cluster]
            if len(members):
                centres[cluster] = members.mean(axis=0)
    return labels
