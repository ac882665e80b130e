"""Partitioning the indexed sets by size (thesis §2.4.3–2.4.6).

A partitioning ``Π = <[l_i, u_i]>`` splits the distinct set sizes into ``n`` adjacent
intervals. Every set of size ``x`` in ``[l_i, u_i]`` is searched with the threshold translated
with ``u_i`` (Eq. 2.8), which adds false positives bounded by ``N_x (1 - x / u_i)``
(Prop. 2.4.2, Eq. 2.14). :func:`optimal_partitions` minimises the sum of these bounds
(Def. 2.4.2, Eq. 2.17) by the dynamic program of Eq. 2.19; :func:`equi_depth_partitions` is the
approximation the VLDB paper recommends for power-law size distributions.

Both take the size distribution as ``(sizes, counts)``: the distinct sizes ascending and how
many sets have each, and return the ``[(l_i, u_i)]`` bounds (inclusive, ascending).
"""

from __future__ import annotations

import numpy as np
from numba import njit


def _check(sizes: np.ndarray, counts: np.ndarray, num_part: int) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if num_part < 1:
        raise ValueError(f"num_part must be at least 1, got {num_part}")
    if sizes.ndim != 1 or sizes.shape != counts.shape or len(sizes) == 0:
        raise ValueError("sizes and counts must be non-empty 1-D arrays of equal length")
    if np.any(np.diff(sizes) <= 0) or sizes[0] < 1 or np.any(counts < 1):
        raise ValueError("sizes must be distinct positive integers in ascending order with positive counts")
    return sizes, counts


def partition_cost(sizes: np.ndarray, counts: np.ndarray, bounds: list[tuple[int, int]]) -> float:
    """Eq. 2.16/2.17: ``sum_i sum_{x in [l_i, u_i]} N_x (1 - x / u_i)`` of a partitioning."""
    sizes, counts = np.asarray(sizes), np.asarray(counts)
    total = 0.0
    for lower, upper in bounds:
        inside = (sizes >= lower) & (sizes <= upper)
        total += float(np.sum(counts[inside] * (1.0 - sizes[inside] / upper)))
    return total


def optimal_partitions(sizes: np.ndarray, counts: np.ndarray, num_part: int) -> list[tuple[int, int]]:
    """The approximate optimal partitioning (Def. 2.4.2) by dynamic programming (Eq. 2.19).

    With prefix sums ``C[j] = sum_{i<=j} c_i`` and ``W[j] = sum_{i<=j} c_i s_i`` the cost of one
    partition covering distinct sizes ``a..b`` is ``Cost([s_a, s_b]) = (C[b] - C[a-1]) -
    (W[b] - W[a-1]) / s_b`` (Eq. 2.18), so the recursion

        D[p][b] = min_{a} D[p-1][a-1] + Cost([s_a, s_b])
                = C[b] - W[b]/s_b + min_{j=a-1} (D[p-1][j] - C[j] + W[j]/s_b)

    needs no ``|N| x |N|`` cost matrix: ``O(|N|^2 n)`` time (a numba loop) and ``O(|N| n)``
    memory. Fewer distinct sizes than ``num_part`` give one partition per size.
    """
    sizes, counts = _check(sizes, counts, num_part)
    n_sizes = len(sizes)
    num_part = min(num_part, n_sizes)
    cum_count = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])  # C[0..N]
    cum_weight = np.concatenate([[0.0], np.cumsum(counts * sizes, dtype=np.float64)])  # W[0..N]
    upper = np.concatenate([[1.0], sizes.astype(np.float64)])  # s_b for b = 1..N
    split = _dynamic_program(cum_count, cum_weight, upper, num_part)
    bounds = []
    end = n_sizes
    for p in range(num_part, 1, -1):
        j = int(split[p, end])
        bounds.append((int(sizes[j]), int(sizes[end - 1])))
        end = j
    bounds.append((int(sizes[0]), int(sizes[end - 1])))
    return bounds[::-1]


@njit(cache=True)
def _dynamic_program(cum_count: np.ndarray, cum_weight: np.ndarray, upper: np.ndarray, num_part: int) -> np.ndarray:
    """Eq. 2.19 over prefix sums; ``split[p, b]`` is the last size index before partition p."""
    n_sizes = len(upper) - 1
    best = cum_count - cum_weight / upper  # D[1][b]; index 0 is the empty prefix
    best[0] = np.inf
    split = np.zeros((num_part + 1, n_sizes + 1), dtype=np.int64)
    for p in range(2, num_part + 1):
        nxt = np.full(n_sizes + 1, np.inf)
        for b in range(p, n_sizes + 1):
            least, arg = np.inf, p - 1
            for j in range(p - 1, b):  # j = a - 1: partition p covers sizes a..b
                value = best[j] - cum_count[j] + cum_weight[j] / upper[b]
                if value < least:
                    least, arg = value, j
            nxt[b] = cum_count[b] - cum_weight[b] / upper[b] + least
            split[p, b] = arg
        best = nxt
    return split


def equi_depth_partitions(sizes: np.ndarray, counts: np.ndarray, num_part: int) -> list[tuple[int, int]]:
    """Partitions holding about the same number of sets each (VLDB'16 §5; the Go library's default).

    Intervals stay disjoint, so all sets of one size go to the same partition: distinct size
    ``s_j`` goes to partition ``floor(n * C[j-1] / C[N])``, and empty partitions vanish.
    """
    sizes, counts = _check(sizes, counts, num_part)
    sets_before = np.concatenate([[0], np.cumsum(counts)[:-1]])
    part_of = (num_part * sets_before) // counts.sum()
    firsts = np.flatnonzero(np.r_[True, part_of[1:] != part_of[:-1]])
    lasts = np.r_[firsts[1:] - 1, len(sizes) - 1]
    return [(int(sizes[f]), int(sizes[t])) for f, t in zip(firsts, lasts)]


PARTITIONINGS = {"optimal": optimal_partitions, "equi_depth": equi_depth_partitions}


def partition(sizes: np.ndarray, counts: np.ndarray, num_part: int, method: str = "optimal") -> list[tuple[int, int]]:
    """Partition bounds by ``method`` (``"optimal"`` or ``"equi_depth"``) for a size distribution."""
    if method not in PARTITIONINGS:
        raise ValueError(f"unknown partitioning {method!r}; expected one of {sorted(PARTITIONINGS)}")
    return PARTITIONINGS[method](sizes, counts, num_part)
