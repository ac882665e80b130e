"""PEXESO's brute-force oracle (exact distances over every indexed vector), a synthetic lake with
planted near-duplicates, and the checks that hold a searcher to them."""

from __future__ import annotations

import math

import numpy as np


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


# --- the oracle -------------------------------------------------------------------------


_NEAREST: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def nearest_squared(query: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Per query record (row), the squared distance to its nearest vector of ``column``."""
    key = (id(query), id(column))
    if key not in _NEAREST or _NEAREST[key][0] is not query:
        q = query.astype(np.float64)
        best = np.full(len(q), np.inf)
        for start in range(0, len(column), 256):
            x = column[start : start + 256].astype(np.float64)
            best = np.minimum(best, ((q[:, None, :] - x[None, :, :]) ** 2).sum(axis=2).min(axis=1))
        _NEAREST[key] = (query, best)  # keeps ``query`` alive so its id is not reused
    return _NEAREST[key][1]


def oracle_counts(query: np.ndarray, columns: dict[int, np.ndarray], tau: float) -> dict[int, int]:
    """|Q_M| per column: query records (duplicates count) within ``tau`` of some vector."""
    return {c: int((nearest_squared(query, v) <= tau * tau).sum()) for c, v in columns.items()}


def oracle_threshold(counts: dict[int, int], n: int, T: float) -> set[int]:
    required = math.ceil(round(T * n, 9))
    return {c for c, m in counts.items() if m >= required}


def oracle_topk(counts: dict[int, int], k: int) -> list[int]:
    ranked = sorted((c for c, m in counts.items() if m > 0), key=lambda c: (-counts[c], c))
    return ranked[:k]


# --- synthetic lake with planted near-duplicates -----------------------------------------


def planted_lake(seed: int = 7, dim: int = 24, n_columns: int = 60) -> tuple[dict[int, np.ndarray], list[np.ndarray]]:
    """Columns drawn from a shared pool with per-column noise; queries overlap them in part."""
    rng = np.random.default_rng(seed)
    pool = unit(rng.normal(size=(400, dim)))
    columns = {}
    for c in range(n_columns):
        size = int(rng.integers(10, 80))
        noise = rng.choice([0.003, 0.01, 0.02, 0.03])
        columns[1000 + c] = unit(
            pool[rng.choice(len(pool), size, replace=False)] + rng.normal(scale=noise, size=(size, dim))
        )
    queries = []
    for _ in range(6):
        source = columns[1000 + int(rng.integers(n_columns))]
        overlap = source[rng.choice(len(source), min(len(source), 25), replace=False)]
        fresh = unit(rng.normal(size=(int(rng.integers(5, 25)), dim)))
        query = unit(np.concatenate([overlap, fresh]) + rng.normal(scale=0.01, size=(len(overlap) + len(fresh), dim)))
        queries.append(np.concatenate([query, query[:3]]))  # duplicate records count twice
    return columns, queries


def check_threshold(searcher, columns, query, tau, T, **options):
    """The oracle's joinable columns, each with its brute-force ``jn``, ranked by it (ties by
    column id); with ``lower_bound=True``, a bound between ``T_cnt`` and the truth instead."""
    results = searcher.search(query, tau, T, **options)
    counts = oracle_counts(query, columns, tau * searcher.tau_scale)
    assert {r["column_id"] for r in results} == oracle_threshold(counts, len(query), T)
    for r in results:
        truth = counts[r["column_id"]]
        if options.get("lower_bound"):
            assert math.ceil(round(T * len(query), 9)) <= r["matched"] <= truth
            assert r["matched"] == truth or not r["joinability_exact"]
            assert r["joinability"] == r["matched"] / len(query)
        else:
            assert r["joinability_exact"] and r["matched"] == truth and r["joinability"] == truth / len(query)
    ranking = [(-r["matched"], r["column_id"]) for r in results]
    assert ranking == sorted(ranking)
    return results, counts


def same_answers(searcher, expected, query) -> None:
    """``searcher`` answers ``query`` as ``expected`` does: threshold and top-k, exact counts."""
    for tau, T in ((0.03, 0.3), (0.06, 0.5)):
        got, want = (s.search(query, tau, T, exact=True) for s in (searcher, expected))
        assert [(r["column_id"], r["dataset_id"], r["matched"]) for r in got] == [
            (r["column_id"], r["dataset_id"], r["matched"]) for r in want
        ]
    got, want = (s.search(query, 0.05, mode="topk", k=5, exact=True) for s in (searcher, expected))
    assert [(r["column_id"], r["matched"]) for r in got] == [(r["column_id"], r["matched"]) for r in want]
