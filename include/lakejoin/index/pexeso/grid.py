"""The hierarchical grid over pivot space ([ICDE] §III-E; notes/pexeso.md §2.4).

Level ``ℓ ∈ [1, m]`` halves every pivot dimension ``ℓ`` times, so it has ``2^{|P|·ℓ}``
potential cells; only non-empty cells exist (the grid is sparse).

Cell keys are Morton (Z-order) codes of the leaf coordinates: the bits of the |P| integer
coordinates are interleaved, most significant level first. Hence

- the key of a point's level-ℓ ancestor is ``leaf_key >> |P|·(m − ℓ)``, and
- sorting points by leaf key puts every cell's points, at every level, in one contiguous
  range, so the tree needs no pointers: children, leaves and points of a cell are ranges.

The repository grid ``HG_RV`` and the query grid ``HG_Q`` share ``m`` and the bounds
``[lo, hi]`` (taken from the index's pivot-selection sample), so equal keys mean the same
cell (quick browsing). Coordinates outside the bounds are clamped into border cells; the
lemmas use each cell's bounding box of points, which stays correct under clamping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_KEY_BITS = 62


def check_shape(n_pivots: int, levels: int) -> None:
    """Leaf keys must fit in an int64: ``|P| · m ≤ 62``."""
    if levels < 1:
        raise ValueError(f"the grid needs at least one level, got m={levels}")
    if n_pivots * levels > MAX_KEY_BITS:
        raise ValueError(f"|P|·m = {n_pivots}·{levels} exceeds {MAX_KEY_BITS} key bits; lower m or |P|")


def leaf_keys(mapped: np.ndarray, lo: np.ndarray, hi: np.ndarray, levels: int) -> np.ndarray:
    """The Morton key of each mapped vector's leaf cell (int64)."""
    n_pivots = mapped.shape[1]
    check_shape(n_pivots, levels)
    sides = 1 << levels
    width = np.where(hi > lo, (hi - lo) / sides, 1.0)
    coords = np.floor((mapped - lo) / width)
    coords = np.clip(np.nan_to_num(coords, nan=0.0), 0, sides - 1).astype(np.int64)
    keys = np.zeros(len(mapped), dtype=np.int64)
    for bit in range(levels - 1, -1, -1):
        for dim in range(n_pivots):
            keys = (keys << 1) | ((coords[:, dim] >> bit) & 1)
    return keys


def cross_ranges(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """All ``(i, j)`` with ``i ∈ [a_start, a_end)`` and ``j ∈ [b_start, b_end)``, per row.

    The block nested-loop step of Algorithm 1, vectorised over many cell pairs.
    """
    a_len = a_end - a_start
    b_len = b_end - b_start
    counts = a_len * b_len
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    row = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    width = b_len[row]
    return a_start[row] + offset // width, b_start[row] + offset % width


@dataclass(frozen=True)
class Level:
    """The non-empty cells of one grid level, sorted by key.

    ``start``/``end`` delimit each cell's points, ``child_start``/``child_end`` its cells on
    the next level, ``lo``/``hi`` the bounding box of its points.
    """

    keys: np.ndarray
    start: np.ndarray
    end: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    child_start: np.ndarray
    child_end: np.ndarray


class HierarchicalGrid:
    """``HG`` over points already sorted by leaf key; ``levels[ℓ - 1]`` is level ℓ."""

    def __init__(self, sorted_keys: np.ndarray, sorted_mapped: np.ndarray, n_pivots: int, m: int) -> None:
        self.m = m
        self.n_pivots = n_pivots
        self.levels: list[Level] = []
        next_keys = None
        for level in range(m, 0, -1):
            keys_here = sorted_keys >> (n_pivots * (m - level))
            first = (
                np.flatnonzero(np.r_[True, keys_here[1:] != keys_here[:-1]])
                if len(keys_here)
                else np.zeros(0, np.int64)
            )
            keys = keys_here[first]
            end = np.r_[first[1:], len(sorted_keys)].astype(np.int64)
            if len(first):
                lo = np.minimum.reduceat(sorted_mapped, first, axis=0)
                hi = np.maximum.reduceat(sorted_mapped, first, axis=0)
            else:
                lo = hi = np.zeros((0, n_pivots))
            if next_keys is None:
                child_start = child_end = np.zeros(len(keys), dtype=np.int64)
            else:
                parents = next_keys >> n_pivots
                child_start = np.searchsorted(parents, keys, side="left")
                child_end = np.searchsorted(parents, keys, side="right")
            self.levels.insert(0, Level(keys, first.astype(np.int64), end, lo, hi, child_start, child_end))
            next_keys = keys

    @property
    def leaves(self) -> Level:
        """The finest level: its cells are the leaves, each holding a range of the sorted vectors."""
        return self.levels[-1]

    def leaf_range(self, level: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The leaves under each of ``cells`` (indices at ``level``), as index ranges."""
        shift = self.n_pivots * (self.m - level)
        ancestors = self.leaves.keys >> shift
        keys = self.levels[level - 1].keys[cells]
        return np.searchsorted(ancestors, keys, "left"), np.searchsorted(ancestors, keys, "right")
