"""Principal-axis heads: a cheap lower bound for Verify's exact distances (notes §5.4).

At 384 dimensions the exact distance ``d(q, x)`` of Verify (Algorithm 2) is the cost that
remains after the lemmas, and most pairs it is computed for are far apart. Projecting onto
``k`` orthonormal axes never lengthens a difference, ``‖V_k(q − x)‖ ≤ ‖q − x‖``, so a pair
whose projected distance exceeds ``τ`` does not match. On the ``k`` principal axes of the
indexed vectors the projection keeps most of every distance (16 of 384 axes reject all
but ~0.002 % of non-matching pairs of minilm-onnx vectors; their first 16 raw coordinates
~0.08 %), and the heads sit in one contiguous array in posting order, one cache line each.

The head only rejects; a pair it lets through is decided by ``M_τ`` on the original
vectors, so results are unchanged. Heads are rounded to float32; ``head_bound`` widens
``τ`` by the rounding error so that rounding can never reject a match.
"""

from __future__ import annotations

import math

import numpy as np

HEAD_DIMENSIONS = 16  # 16 float32 values: one 64-byte cache line per vector
AXES_SAMPLE = 4096
_CHUNK = 65536
_FLOAT32_UNIT = 2.0**-23  # a float32 rounding moves a value by at most this times its magnitude


def principal_axes(vectors: np.ndarray, rows: np.ndarray | None = None, k: int = HEAD_DIMENSIONS) -> np.ndarray:
    """The first ``min(k, dim)`` principal axes (orthonormal rows, float64) of ``vectors``
    (of ``vectors[rows]`` when ``rows`` is given, without gathering them), estimated on an
    evenly spaced sample of at most ``AXES_SAMPLE`` rows (deterministic)."""
    n = len(vectors) if rows is None else len(rows)
    picked = np.arange(n)[:: max(1, n // AXES_SAMPLE)][:AXES_SAMPLE]
    sample = np.asarray(vectors[picked if rows is None else rows[picked]], dtype=np.float64)
    if len(sample) == 0:
        return np.eye(min(k, vectors.shape[1]), vectors.shape[1])
    centred = sample - sample.mean(axis=0)
    # full_matrices: a sample with fewer rows than k still yields k orthonormal axes
    _, _, axes = np.linalg.svd(centred, full_matrices=len(sample) < k)
    return np.ascontiguousarray(axes[: min(k, vectors.shape[1])])


def heads(vectors: np.ndarray, axes: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``V_k x`` per row (of ``vectors[rows]`` when ``rows`` is given, gathered a chunk at a
    time), computed in float64 (in chunks: a float64 copy of a lake's vectors would be large)
    and rounded to float32."""
    n = len(vectors) if rows is None else len(rows)
    out = np.empty((n, axes.shape[0]), dtype=np.float32)
    for start in range(0, n, _CHUNK):
        chunk = vectors[start : start + _CHUNK] if rows is None else vectors[rows[start : start + _CHUNK]]
        # einsum, not matmul: a BLAS call wakes OpenBLAS's threads, which then spin ~0.1 s
        # beside Verify's workers (on 2 cores, more than a whole query's search)
        out[start : start + _CHUNK] = np.einsum("ij,kj->ik", np.asarray(chunk, dtype=np.float64), axes)
    return out


def largest_norm(vectors: np.ndarray) -> float:
    """An upper bound of the rows' L2 norms (float32 sums, padded by far more than their error)."""
    if len(vectors) == 0:
        return 0.0
    return float(np.sqrt(np.einsum("ij,ij->i", vectors, vectors).max())) * 1.001


def head_bound(tau: float, axes: np.ndarray, magnitude: float) -> float:
    """The squared projected distance above which a pair cannot match ``τ``.

    ``magnitude`` bounds the norm of every vector involved, so every head value ``|h_j| ≤
    magnitude`` is off by at most ``2^-23·magnitude`` after rounding: the projected
    difference by at most ``2·√k·2^-23·magnitude`` (doubled again for the float64 product
    and the axes' orthonormality, which hold to ~1e-15).
    """
    k = axes.shape[0]
    margin = 4.0 * math.sqrt(k) * _FLOAT32_UNIT * magnitude
    return ((1.0 + 1e-9) * tau + margin) ** 2
