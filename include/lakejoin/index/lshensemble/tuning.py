"""Choosing the LSH parameters (b, r) per query and partition (thesis §2.4.7, Eqs. 2.22–2.26).

A set of size ``x`` with containment ``t`` of a query of size ``q`` has Jaccard
``s = t / (x/q + 1 - t)`` and becomes a candidate of a (b, r) banded LSH with probability

    P(t | x, q, b, r) = 1 - (1 - s^r)^b                                   (Eq. 2.22)

LSH adds false positives ``FP = ∫_0^{min(t*, x/q)} P dt`` and false negatives
``FN = ∫_{t*}^{min(1, x/q)} (1 - P) dt`` (zero when ``x/q < t*``) (Eqs. 2.23, 2.24). A
partition ``[l, u]`` is tuned with ``x = u`` (Eq. 2.26): ``argmin_{b r <= m} w_fp FP + w_fn FN``.

Each integral is divided by the length of its range, so FP and FN are error rates: the chance
that a set below ``t*`` is returned and that a set at or above ``t*`` is missed, containment
uniform on the range (recall, the thesis's accuracy metric, counts misses per result). The raw
integrals weigh the two ranges by their lengths, ``t*`` against ``1 - t*``: at high ``t*``, and
as ``u/q`` nears ``t*`` where the FN range shrinks to nothing (at ``t* = 1`` FN is always 0),
the argmin ignores misses and picks few bands (equal weights, 256 slots, t* = 0.8, u = q:
b=3, r=4, recall 0.49 at the threshold). As the FN range vanishes its rate tends to the miss
rate at ``t*``, so the range is taken at least one integration step long.

As the thesis suggests, the integrals are precomputed rather than evaluated per query: ratios
``x/q`` are rounded up to a log grid of step 0.05 (5% apart; datasketch rounds up to 10 fixed
ratios, e^-5..e^5, up to 3x apart, which trades precision for recall at equal weights) and
thresholds to a 0.01 grid, and one pass per ratio (a numba kernel) gives the cumulative
integral of P for every (b, r), hence the argmin for every threshold. The whole table is built
once per ``(num_perm, max_r, weights)``, so a query costs one lookup per partition.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

_T_STEP = 0.0025  # integration grid on containment t in [0, 1] (trapezoid rule)
_T_GRID = np.linspace(0.0, 1.0, round(1 / _T_STEP) + 1)
_THRESHOLDS = np.arange(1, 101) / 100  # t* grid for the parameter choice
_LOG_RATIO_STEP = 0.05
_LOG_RATIO_RANGE = (-240, 300)  # x/q from e^-12 to e^15, cells of the log grid


@lru_cache(maxsize=16)
def band_params(num_perm: int, max_r: int) -> np.ndarray:
    """All ``(b, r)`` with ``r <= max_r`` and ``b r <= num_perm``, ordered by (b, r)."""
    return np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, max_r + 1) if b * r <= num_perm])


def params_table(num_perm: int, max_r: int, weights: tuple[float, float]) -> np.ndarray:
    """``table[cell, i]``: index into :func:`band_params` of the argmin of Eq. 2.26 at ratio
    ``exp(cell * step)`` (cells from ``_LOG_RATIO_RANGE[0]``) and ``t* = _THRESHOLDS[i]``;
    computed once per process and arguments (~0.25 s at 256 permutations)."""
    return _params_table(num_perm, max_r, float(weights[0]), float(weights[1]))


@lru_cache(maxsize=16)
def _params_table(num_perm: int, max_r: int, w_fp: float, w_fn: float) -> np.ndarray:
    params = band_params(num_perm, max_r)
    cells = np.arange(_LOG_RATIO_RANGE[0], _LOG_RATIO_RANGE[1] + 1)
    table = _argmin_table(np.exp(cells * _LOG_RATIO_STEP), params[:, 0], params[:, 1], max_r, w_fp, w_fn)
    table.setflags(write=False)
    return table


@njit(cache=True)
def _interp(cumulative: np.ndarray, t: float) -> float:
    """A cumulative integral on ``_T_GRID`` evaluated at ``t`` (linear)."""
    n = len(cumulative)
    pos = min(t / _T_STEP, n - 1.0)
    i = min(int(pos), n - 2)
    frac = pos - i
    return cumulative[i] * (1.0 - frac) + cumulative[i + 1] * frac


@njit(cache=True)
def _argmin_table(ratios: np.ndarray, b: np.ndarray, r: np.ndarray, max_r: int, w_fp: float, w_fn: float) -> np.ndarray:
    """Eqs. 2.22–2.26 for every ratio and threshold: P on ``_T_GRID`` for every (b, r), its
    cumulative integral (trapezoid rule), then the FP and FN rates at each t* by linear
    interpolation.
    Parameters are ordered by (b, r), so for each r the b's come as 1, 2, ..: ``(1 - s^r)^b``
    costs one multiplication per parameter."""
    n_params, n_t = len(b), len(_T_GRID)
    best = np.empty((len(ratios), len(_THRESHOLDS)), dtype=np.int64)
    cumulative = np.empty((n_params, n_t))
    miss = np.empty(max_r + 1)  # (1 - s^r), then its running power
    base = np.empty(max_r + 1)
    previous = np.empty(n_params)
    for c in range(len(ratios)):
        ratio = ratios[c]
        for k in range(n_t):
            s = min(max(_T_GRID[k] / (ratio + 1.0 - _T_GRID[k]), 0.0), 1.0)
            for depth in range(1, max_r + 1):
                base[depth] = 1.0 - s**depth
                miss[depth] = 1.0
            for p in range(n_params):
                miss[r[p]] *= base[r[p]]
                prob = 1.0 - miss[r[p]]
                if k == 0:
                    cumulative[p, 0] = 0.0
                else:
                    cumulative[p, k] = cumulative[p, k - 1] + (prob + previous[p]) * (_T_STEP / 2)
                previous[p] = prob
        for i in range(len(_THRESHOLDS)):
            t_star = _THRESHOLDS[i]
            top = min(1.0, ratio)
            best_cost = np.inf
            fp_range = min(t_star, ratio)
            fn_range = max(top - t_star, _T_STEP)
            for p in range(n_params):
                fp = _interp(cumulative[p], fp_range) / fp_range  # Eq. 2.23, per non-result
                fn = 0.0
                if ratio >= t_star:  # Eq. 2.24, per result
                    low = min(t_star, top - _T_STEP)
                    fn = 1.0 - (_interp(cumulative[p], low + fn_range) - _interp(cumulative[p], low)) / fn_range
                cost = w_fp * fp + w_fn * fn
                if cost < best_cost:
                    best_cost = cost
                    best[c, i] = p
    return best


def optimal_params(
    threshold: float, ratios: np.ndarray, num_perm: int, max_r: int, weights: tuple[float, float] = (0.5, 0.5)
) -> tuple[np.ndarray, np.ndarray]:
    """``(b, r)`` arrays minimising ``w_fp FP + w_fn FN`` (rates) at each ``x/q`` ratio (Eq. 2.26)."""
    t_index = min(max(round(threshold * 100), 1), 100) - 1
    params = band_params(num_perm, max_r)
    table = params_table(num_perm, max_r, weights)
    return _lookup(table, params, np.asarray(ratios, dtype=np.float64), t_index)


@njit(cache=True, nogil=True)
def _lookup(table: np.ndarray, params: np.ndarray, ratios: np.ndarray, t_index: int) -> tuple[np.ndarray, np.ndarray]:
    """The table's (b, r) at each ratio, rounded up to the next grid cell: erring the way u_i
    standing in for x does (Eq. 2.8), toward a lower s*."""
    b = np.empty(len(ratios), dtype=np.int64)
    r = np.empty(len(ratios), dtype=np.int64)
    for i in range(len(ratios)):
        cell = np.ceil(np.log(ratios[i]) / _LOG_RATIO_STEP - 1e-9)
        cell = min(max(cell, _LOG_RATIO_RANGE[0]), _LOG_RATIO_RANGE[1])
        choice = table[np.int64(cell) - _LOG_RATIO_RANGE[0], t_index]
        b[i], r[i] = params[choice, 0], params[choice, 1]
    return b, r
