"""PEXESO (exact scores and lower bounds) vs blocked numpy brute force vs PEXESO-H, side by side on the bundled lake.

Lake: the columns PEXESO indexes in the bundled real-data lake (``lakejoin.sources.bundled``,
the first ``--tables`` tables, default all 2,298; the pipeline's default is 500), parsed and
profiled as the pipeline does; one vector per distinct value, embedded with ``--model`` (default
``minilm-onnx``, lakejoin's PEXESO model). Vectors are cached on disk under ``--cache-dir``
(one chunk per embed call, keyed by model and values), so only the first run embeds.

Queries: in a fixed shuffled column order, the first ``--queries`` columns with 5–2,000
distinct values, removed from the lake as in the paper (§V) and searched with their records
in row order (at most 1,000; duplicates count). Growth: the other columns, in lake order
(the order in which ``--tables N`` adds tables), are cut into prefixes of ``--sizes`` vectors
(a prefix stops at the first column that crosses the size); every size answers the same
queries. The default sizes end with ``0``, the whole lake (543k vectors, ~3.5 GiB peak
memory); the first run embeds it, ~35 min on 2 cores (minilm-onnx embeds ~100–300 values/s
there). ``--tables 500 --sizes 40000`` is the pipeline's default lake (35.6k vectors) whole.

Per size it prints exact distance computations and p50/p95 time per query of

- PEXESO: quick browsing + Block (Lemmas 3–6) + Verify (Lemmas 1, 2, 7), the searcher's default:
  a column that reaches T is verified to the end, so its joinability is exact;
- PEXESO >=T: the same with ``lower_bound=True``, the paper's Algorithm 2 (a column stops
  counting at T: its joinability is a lower bound); the gap to PEXESO is the cost of exact scores;
- PEXESO-H: the same grid blocking, naive verification, stop counting at T (paper §V);
- brute force: blocked float32 BLAS distances to every vector, exact recheck at the border;

and checks that all four return the same columns and that PEXESO's matched counts equal brute
force's. The three run round-robin query by
query in one process, so machine load hits them alike. "speed-up" is brute force's p50 (or
p95) wall time over the method's; "cpu s-up" the same on CPU time (process time: all threads,
Verify's column workers and brute force's BLAS threads alike), which a busy machine's
waiting does not inflate. ``--single-thread`` runs every method on one thread (numba and
OpenBLAS), where CPU time is the verdict that the machine's load cannot sway. Each
call starts after a pause (``SETTLE_S``). Run:
``.venv/bin/python tests/benchmarks/bench_pexeso.py [--quick] [--single-thread] [--sizes N ...]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from report import run_with_docs

from lakejoin.embed import PEXESO_MODEL, embed
from lakejoin.index.pexeso import build_in_memory, load
from lakejoin.index.pexeso.lemmas import required_matches
from lakejoin.index.pexeso.search import distinct_rows
from lakejoin.normalize import normalize_value
from lakejoin.profile import profile_values
from lakejoin.sources.bundled import DEFAULT_TABLES, materialize
from lakejoin.sources.parse import parse_file

CACHE_DIR = Path(tempfile.gettempdir()) / "lakejoin-bench-pexeso"
EMBED_CHUNK = 2048
BLOCK_ROWS = 32768
MAX_QUERY_RECORDS = 1000
QUERY_DISTINCT = (5, 2000)
METHODS = ("PEXESO", "PEXESO >=T", "PEXESO-H", "brute force")
# pause before each timed call: OpenBLAS's idle threads spin ~0.1 s after a product, and on
# 2 cores they halved the speed of whatever ran next (PEXESO: 16 ms right after brute force,
# 8 ms after a pause, at 25k vectors); the pause lets every call start on a quiet process
SETTLE_S = 0.25
# --single-thread: one thread for every method (numba's Verify workers, OpenBLAS), so CPU time
# is a verdict that a busy machine's load cannot sway; BLAS reads these at numpy's import
SINGLE_THREAD_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class LakeColumn:
    name: str  # table path and column name
    values: list[str]  # distinct normalized values: the indexed vectors
    records: list[str]  # the first non-null normalized cells in row order: a query's records


def bundled_columns(tables: int | None, cache_dir: Path) -> list[LakeColumn]:
    """PEXESO's columns of the bundled lake's first ``tables`` tables, as the pipeline picks them.

    Files go through the pipeline's parser and ``profile_values``; a column is kept when its
    profile's ``indexed_by`` names PEXESO (string and identifier columns). The list is cached
    as JSON under ``cache_dir``: parsing the whole lake takes minutes.
    """
    cached = cache_dir / f"columns-{tables or 'all'}.json"
    if cached.exists():
        return [LakeColumn(**c) for c in json.loads(cached.read_text())]
    columns = []
    for path in materialize(cache_dir / "bundled", tables):
        table = parse_file(path).table
        for name in table.column_names:
            originals = [v for v in table[name].to_pylist() if v is not None]
            # a type holds for every cell iff it holds for every distinct cell
            if "pexeso" not in profile_values(sorted(set(originals)), name=name)["indexed_by"]:
                continue
            records = [v for v in map(normalize_value, originals) if v is not None]
            if records:
                label = f"{path.parent.name}/{path.stem}.{name}"
                columns.append(LakeColumn(label, sorted(set(records)), records[:MAX_QUERY_RECORDS]))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps([c.__dict__ for c in columns]))
    return columns


class EmbeddingCache:
    """Vectors of ``model`` on disk: one ``.npy`` chunk and its values (JSON) per embed call.

    Reruns and larger lakes embed only values not seen before, and an interrupted run keeps
    the chunks it finished. A chunk is named by the hash of its model and values.
    """

    def __init__(self, cache_dir: Path, model: str) -> None:
        self.folder = cache_dir / "embeddings" / model
        self.model = model
        self.rows: dict[str, tuple[np.ndarray, int]] = {}
        for listing in sorted(self.folder.glob("*.json")):  # the JSON is written last: chunk complete
            chunk = np.load(listing.with_suffix(".npy"))
            for row, value in enumerate(json.loads(listing.read_text())):
                self.rows[value] = (chunk, row)

    def vectors(self, values: Sequence[str]) -> np.ndarray:
        """The vectors of ``values``, embedding (and storing) the ones not cached yet."""
        missing = sorted(set(values) - self.rows.keys())
        self.folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        for done in range(0, len(missing), EMBED_CHUNK):
            chunk_values = missing[done : done + EMBED_CHUNK]
            digest = hashlib.sha256(json.dumps([self.model, chunk_values]).encode()).hexdigest()[:16]
            chunk = embed(chunk_values, self.model)
            np.save(self.folder / f"{digest}.npy", chunk)
            (self.folder / f"{digest}.json").write_text(json.dumps(chunk_values))
            self.rows.update((value, (chunk, row)) for row, value in enumerate(chunk_values))
            rate = (done + len(chunk_values)) / (time.perf_counter() - started)
            print(
                f"  embedded {done + len(chunk_values):,}/{len(missing):,} new values with {self.model} ({rate:.0f}/s)",
                flush=True,
            )
        return np.stack([self.rows[v][0][self.rows[v][1]] for v in values])


class BruteForce:
    """Blocked numpy range search over every indexed vector, exact at the border."""

    def __init__(self, vectors: np.ndarray, column: np.ndarray) -> None:
        """``vectors``: float32 rows; ``column``: each row's column id."""
        self.vectors = vectors
        self.ids = np.unique(column)
        self.column = np.searchsorted(self.ids, column)
        self.norms = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64).astype(np.float32)
        self.distances = 0

    def search(self, query: np.ndarray, tau: float, T: float) -> dict[int, int]:
        """The joinable columns' matched query records (exact, as PEXESO reports them)."""
        unique, _, counts = distinct_rows(query)  # as PEXESO dedupes (np.unique(axis=0) is slow at 384-d)
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
        joinable = matched >= required_matches(T, len(query))
        return dict(zip(self.ids[joinable].tolist(), matched[joinable].astype(int).tolist()))


def round_robin(
    methods: dict[str, tuple[Callable[[np.ndarray], dict[int, int]], Callable[[], float]]], queries: list[np.ndarray]
) -> dict[str, tuple]:
    """Per method: results, wall times and CPU times per query.

    Each method comes with its CPU clock (``time.process_time``: all threads, as both Verify
    and BLAS run on several). Query by query, every method in turn (the first method
    rotates, each call after a ``SETTLE_S`` pause), so load changes on a busy machine hit
    all methods alike and no method pays for another's idle threads.
    """
    names = list(methods)
    out = {name: ([], [], []) for name in names}
    for i, query in enumerate(queries):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            search, clock = methods[name]
            time.sleep(SETTLE_S)
            start, start_cpu = time.perf_counter(), clock()
            result = search(query)
            wall, cpu = time.perf_counter() - start, clock() - start_cpu
            for store, item in zip(out[name], (result, wall, cpu)):
                store.append(item)
    return {name: (results, np.asarray(wall), np.asarray(cpu)) for name, (results, wall, cpu) in out.items()}


def split_queries(
    columns: list[LakeColumn], n_queries: int, seed: int = 0
) -> tuple[list[LakeColumn], list[LakeColumn]]:
    """(lake, queries): in a shuffled order, the first ``n_queries`` columns with 5–2,000
    distinct values are the queries; the lake keeps the other columns in lake order."""
    order = np.random.default_rng(seed).permutation(len(columns))
    chosen = [i for i in order.tolist() if QUERY_DISTINCT[0] <= len(columns[i].values) <= QUERY_DISTINCT[1]][:n_queries]
    taken = set(chosen)
    return [c for i, c in enumerate(columns) if i not in taken], [columns[i] for i in chosen]


def run(
    size: int,
    lake_columns: list[LakeColumn],
    query_columns: list[LakeColumn],
    cache: EmbeddingCache,
    tau: float,
    T: float,
) -> dict:
    taken, total = [], 0
    for column in lake_columns:
        if 0 < size <= total:
            break
        taken.append(column)
        total += len(column.values)
    cache.vectors(sorted({v for c in taken + query_columns for v in c.values}))  # embeds what is not cached, once
    # one array of the lake's vectors, column by column: the index is built from views of it
    # and the brute force searches it (a copy per use would not fit the whole lake in ~5 GiB)
    lake = cache.vectors([v for c in taken for v in c.values])
    column = np.repeat(np.arange(len(taken)), [len(c.values) for c in taken])
    ends = np.cumsum([len(c.values) for c in taken])
    vectors = {i: lake[end - len(c.values) : end] for i, (c, end) in enumerate(zip(taken, ends.tolist()))}
    queries = [cache.vectors(c.records) for c in query_columns]
    n_vectors = len(lake)

    brute = BruteForce(lake, column)
    start = time.perf_counter()
    tables = build_in_memory(vectors, model=cache.model)
    del vectors  # from here the lake's vectors live in the index and in the brute force, once each
    searcher = load(tables)
    del tables
    build_s = time.perf_counter() - start
    searcher.search(queries[0], tau, T)  # compile/load the numba kernels outside the timing
    distances = dict.fromkeys(METHODS, 0)

    def pexeso(name: str, **options: bool) -> Callable[[np.ndarray], dict[int, int]]:
        def search(query: np.ndarray) -> dict[int, int]:
            found = {r["column_id"]: r["matched"] for r in searcher.search(query, tau, T, **options)}
            distances[name] += searcher.last_stats.distances
            return found

        return search

    timings = round_robin(
        {
            "PEXESO": (pexeso("PEXESO"), time.process_time),
            "PEXESO >=T": (pexeso("PEXESO >=T", lower_bound=True), time.process_time),
            "PEXESO-H": (pexeso("PEXESO-H", use_lemmas=False, lower_bound=True), time.process_time),
            "brute force": (lambda q: brute.search(q, tau * 2, T), time.process_time),
        },
        queries,
    )
    distances["brute force"] = brute.distances
    part = searcher.partitions[0]
    return {
        "vectors": n_vectors,
        "columns": len(brute.ids),
        "records": int(np.median([len(q) for q in queries])),
        "shape": f"|P|={len(part.pivots)} m={part.levels}",
        "build_s": build_s,
        "timings": timings,
        "distances": distances,
        "agree": all(
            [set(r) for r in timings[name][0]] == [set(r) for r in timings["brute force"][0]] for name in METHODS
        ),
        "exact": timings["PEXESO"][0] == timings["brute force"][0],
        "found": sum(len(r) for r in timings["PEXESO"][0]),
        "queries": len(queries),
    }


def report(result: dict) -> None:
    brute_wall, brute_cpu = result["timings"]["brute force"][1:]
    for name in METHODS:
        _, wall, cpu = result["timings"][name]
        p50, p95, cpu50 = np.percentile(wall, 50), np.percentile(wall, 95), np.percentile(cpu, 50)
        print(
            f"{result['vectors']:>8} {result['columns']:>5} {result['queries']:>3} {result['records']:>5} "
            f"{result['shape']:>10} {name:>11} "
            f"{result['distances'][name] / len(wall):>11.0f} {p50 * 1e3:>8.2f} {p95 * 1e3:>8.2f} {cpu50 * 1e3:>8.2f} "
            f"{np.percentile(brute_wall, 50) / p50:>7.1f}x {np.percentile(brute_wall, 95) / p95:>7.1f}x "
            f"{np.percentile(brute_cpu, 50) / cpu50:>7.1f}x "
            f"{result['distances']['brute force'] / max(result['distances'][name], 1):>9.1f}x"
        )
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"{'':>8} build {result['build_s']:.1f} s; peak RSS so far {peak_gib:.1f} GiB; "
        f"joinable (query, column) pairs {result['found']}; all four agree: {result['agree']}; "
        f"PEXESO's matched counts equal brute force's: {result['exact']}"
    )
    (_, exact_wall, exact_cpu), (_, bound_wall, bound_cpu) = (result["timings"][name] for name in METHODS[:2])
    print(
        f"{'':>8} exact scores cost: p50 {np.percentile(exact_wall, 50) * 1e3:.2f} vs "
        f"{np.percentile(bound_wall, 50) * 1e3:.2f} ms "
        f"(total wall x{exact_wall.sum() / bound_wall.sum():.2f}, CPU x{exact_cpu.sum() / bound_cpu.sum():.2f}), "
        f"distances x{result['distances']['PEXESO'] / max(result['distances']['PEXESO >=T'], 1):.2f} over the lower "
        "bounds"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small lakes, few queries")
    parser.add_argument("--model", default=PEXESO_MODEL)
    parser.add_argument(
        "--tables",
        type=int,
        default=0,
        help=f"bundled lake size in tables (0: all; the pipeline default is {DEFAULT_TABLES})",
    )
    parser.add_argument("--sizes", type=int, nargs="+", help="lake prefixes in vectors (0: the whole lake)")
    parser.add_argument("--queries", type=int, help="query columns per size")
    parser.add_argument("--tau", type=float, default=0.06)
    parser.add_argument("--T", type=float, default=0.6)
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument(
        "--single-thread", action="store_true", help="every method on one thread; CPU time is then load-proof"
    )
    args = parser.parse_args()
    if args.single_thread and any(os.environ.get(k) != v for k, v in SINGLE_THREAD_ENV.items()):
        # thread counts are fixed when numpy and numba load: restart with them set
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **SINGLE_THREAD_ENV})
    sizes = args.sizes or ((5_000, 10_000) if args.quick else (25_000, 100_000, 250_000, 0))
    n_queries = args.queries or (10 if args.quick else 40)
    columns = bundled_columns(args.tables or None, args.cache_dir)
    cache = EmbeddingCache(args.cache_dir, args.model)
    print(
        f"lake: bundled, {args.tables or 'all'} tables, {len(columns)} PEXESO columns, "
        f"{sum(len(c.values) for c in columns):,} vectors; model {args.model}; tau={args.tau} (x2 = "
        f"{2 * args.tau:.2f}), T={args.T}"
    )
    threads = (
        "one thread per method" if args.single_thread else "Verify's column workers and BLAS's threads on both cores"
    )
    print(f"wall: p50/p95 wall time per query; cpu: p50 CPU time of all threads ({threads})")
    print(
        f"{'vectors':>8} {'cols':>5} {'|Q|':>3} {'recs':>5} {'shape':>10} {'method':>11} {'dist/query':>11} "
        f"{'p50 ms':>8} {'p95 ms':>8} "
        f"{'cpu p50':>8} {'p50 s-up':>8} {'p95 s-up':>8} {'cpu s-up':>8} {'dist ratio':>10}"
    )
    lake_columns, query_columns = split_queries(columns, n_queries)
    for size in sizes:
        report(run(size, lake_columns, query_columns, cache, args.tau, args.T))


if __name__ == "__main__":
    run_with_docs(main)
