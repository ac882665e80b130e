"""PEXESO's filtering and matching lemmas ([ICDE] §III-B, C; notes/pexeso.md §2.3).

Notation as in the paper: ``q'`` and ``x'`` are mapped (pivot-space) vectors, ``τ`` the
distance threshold, a cell is a box ``[lo, hi]`` in pivot space. Every lemma uses the "there
exists one pivot / one dimension" form (the paper's proof of Lemma 3 says "for all", a typo).

Cells here are the *bounding boxes of the points a cell holds*, not the cell's grid region.
A bounding box lies inside the grid region, so each lemma's proof holds unchanged, the tests
are tighter, and a point clamped into a border cell (a coordinate outside the grid bounds) is
still inside its box.

Floating point: mapped coordinates are rounded distances, so a filter prunes only when the
gap exceeds ``τ + eps`` and a match is declared only when the sum is ``≤ τ − eps``; everything
in between is decided by the exact distance (notes §5.1 item 7). ``verify.exact_match`` is THE
match predicate ``M_τ(q, x)`` (Def. 1): the float64 sum of squared differences ``≤ τ²``.

The vectorised forms here serve the grid descent (Lemmas 3–6). The scalar forms used per
pair inside the numba kernel (Lemmas 1, 2, 3 on a posting's box, 7 on a column, and the exact
match ``M_τ``) live in ``verify.py``: numba's on-disk cache is invalidated only by edits to the
file of the cached function, so code it inlines must sit in that same file.
"""

from __future__ import annotations

import math

import numpy as np

RELATIVE_EPS = 1e-9


def tolerance(extent: float) -> float:
    """The ``eps`` that absorbs rounding in mapped coordinates of magnitude ``extent``."""
    return RELATIVE_EPS * max(1.0, float(extent))


def required_matches(T: float, n_query: int) -> int:
    """``T_cnt = ⌈T·|Q|⌉``: Lemma 7 and Algorithm 2 compare counts, the definition a ratio.

    The rounding guard keeps ``0.7 * 10`` (= 7.000000000000001) at 7.
    """
    return max(1, math.ceil(round(T * n_query, 9)))


# --- Lemmas 3-6: cells (vectorised over arrays of pairs) ---------------------------------


def lemma3_survives(cell_lo: np.ndarray, cell_hi: np.ndarray, q: np.ndarray, tau: float, eps: float) -> np.ndarray:
    """Lemma 3 (vector–cell filtering): False where ``cell ∩ SQR(q', τ) = ∅``.

    Pruned iff ∃i: ``c.lo_i > q'_i + τ`` or ``c.hi_i < q'_i − τ``. Rows are pairs.
    """
    gap = np.maximum(cell_lo - q, q - cell_hi)
    return ~(gap > tau + eps).any(axis=1)


def lemma4_survives(
    q_lo: np.ndarray, q_hi: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray, tau: float, eps: float
) -> np.ndarray:
    """Lemma 4 (cell–cell filtering): False where no (x ∈ c, q ∈ c_q) pair can match.

    Pruned iff ∃i: the gap between ``[c_q.lo_i, c_q.hi_i]`` and ``[c.lo_i, c.hi_i]`` exceeds
    τ (Lemma 1 in pivot space under L∞; notes §2.3 on the paper's mixed-space proof).
    """
    gap = np.maximum(c_lo - q_hi, q_lo - c_hi)
    return ~(gap > tau + eps).any(axis=1)


def lemma5_matches(cell_hi: np.ndarray, q: np.ndarray, tau: float, eps: float) -> np.ndarray:
    """Lemma 5 (vector–cell matching): True where ∃i ``c.hi_i ≤ τ − q'_i``.

    Then ``c ⊆ RQR(q', p_i, τ)`` and every vector of ``c`` matches ``q`` by Lemma 2.
    """
    return (cell_hi + q <= tau - eps).any(axis=1)


def lemma6_matches(cell_hi: np.ndarray, q_max: np.ndarray, tau: float, eps: float) -> np.ndarray:
    """Lemma 6 (cell–cell matching): True where ∃i ``c.hi_i ≤ τ − max_{q ∈ c_q} q'_i``.

    ``c`` then lies in ``min RQR`` and every pair of the two cells matches. When some
    ``q'_i > τ`` the right side is negative and pivot ``i`` cannot match, as the paper requires.
    """
    return (cell_hi + q_max <= tau - eps).any(axis=1)
