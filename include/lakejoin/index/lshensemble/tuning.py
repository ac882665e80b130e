"""Choosing the LSH parameters (b, r) per query and partition (thesis §2.4.7, Eqs. 2.22–2.26).

A set of size ``x`` with containment ``t`` of a query of size ``q`` has Jaccard
``s = t / (x/q + 1 - t)`` and becomes a candidate of a (b, r) banded LSH with probability

    P(t | x, q, b, r) = 1 - (1 - s^r)^b                                   (Eq. 2.22)

LSH adds false positives ``FP = ∫_0^{min(t*, x/q)} P dt`` and false negatives
``FN = ∫_{t*}^{min(1, x/q)} (1 - P) dt`` (zero when ``x/q < t*``) (Eqs. 2.23, 2.24). A
partition ``[l, u]`` is tuned with ``x = u`` (Eq. 2.26): ``argmin_{b r <= m} w_fp FP + w_fn FN``.

As the thesis suggests, the integrals are precomputed rather than evaluated per query: for one
ratio ``x/q`` a single pass gives the cumulative integral of P for every (b, r), from which the
argmin for every threshold on a 0.01 grid follows. Ratios are snapped to a log grid of step
0.05 (5% apart; datasketch uses 10 fixed ratios) and each grid cell is cached on first use, so
a query costs a lookup.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_T_STEP = 0.0025  # integration grid on containment t in [0, 1] (trapezoid rule)
_T_GRID = np.linspace(0.0, 1.0, int(round(1 / _T_STEP)) + 1)
_THRESHOLDS = np.arange(1, 101) / 100  # t* grid for the parameter choice
_LOG_RATIO_STEP = 0.05
_LOG_RATIO_RANGE = (-240, 300)  # x/q from e^-12 to e^15, cells of the log grid


@lru_cache(maxsize=16)
def band_params(num_perm: int, max_r: int) -> np.ndarray:
    """All ``(b, r)`` with ``r <= max_r`` and ``b r <= num_perm``, ordered by (b, r)."""
    return np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, max_r + 1) if b * r <= num_perm])


def candidate_probability(t: np.ndarray, ratio: float, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Eq. 2.22 for every ``(b, r)`` (rows) at every containment ``t`` (columns); ratio = x/q."""
    jaccard = np.clip(t / (ratio + 1.0 - t), 0.0, 1.0)
    return 1.0 - (1.0 - jaccard[None, :] ** r[:, None]) ** b[:, None]


def _interp_rows(cumulative: np.ndarray, t: float) -> np.ndarray:
    """Each row of a cumulative integral on ``_T_GRID`` evaluated at ``t`` (linear)."""
    pos = min(t / _T_STEP, len(_T_GRID) - 1.0)
    i = min(int(pos), len(_T_GRID) - 2)
    frac = pos - i
    return cumulative[:, i] * (1.0 - frac) + cumulative[:, i + 1] * frac


@lru_cache(maxsize=8192)
def _best_params_for_cell(num_perm: int, max_r: int, w_fp: float, w_fn: float, cell: int) -> np.ndarray:
    """Index into :func:`band_params` of the argmin of Eq. 2.26 for every t* in ``_THRESHOLDS``."""
    ratio = float(np.exp(cell * _LOG_RATIO_STEP))
    params = band_params(num_perm, max_r)
    prob = candidate_probability(_T_GRID, ratio, params[:, 0], params[:, 1])
    steps = (prob[:, 1:] + prob[:, :-1]) * (_T_STEP / 2)
    cumulative = np.concatenate([np.zeros((len(params), 1)), np.cumsum(steps, axis=1)], axis=1)
    best = np.empty(len(_THRESHOLDS), dtype=np.int64)
    for i, t_star in enumerate(_THRESHOLDS):
        fp = _interp_rows(cumulative, min(t_star, ratio))  # Eq. 2.23
        if ratio >= t_star:  # Eq. 2.24
            top = min(1.0, ratio)
            fn = (top - t_star) - (_interp_rows(cumulative, top) - _interp_rows(cumulative, t_star))
        else:
            fn = 0.0
        best[i] = int(np.argmin(w_fp * fp + w_fn * fn))
    best.setflags(write=False)
    return best


def optimal_params(
    threshold: float, ratios: np.ndarray, num_perm: int, max_r: int, weights: tuple[float, float] = (0.5, 0.5)
) -> tuple[np.ndarray, np.ndarray]:
    """``(b, r)`` arrays minimising ``w_fp FP + w_fn FN`` at each ``x/q`` ratio (Eq. 2.26), cached."""
    cells = np.clip(np.rint(np.log(np.asarray(ratios, dtype=np.float64)) / _LOG_RATIO_STEP), *_LOG_RATIO_RANGE)
    t_index = min(max(round(threshold * 100), 1), 100) - 1
    w_fp, w_fn = float(weights[0]), float(weights[1])
    choice = [_best_params_for_cell(num_perm, max_r, w_fp, w_fn, int(cell))[t_index] for cell in cells]
    params = band_params(num_perm, max_r)[np.array(choice, dtype=np.int64)].reshape(-1, 2)
    return params[:, 0], params[:, 1]
