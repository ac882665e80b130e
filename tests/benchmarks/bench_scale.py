"""Search beyond one machine (issue #17): a synthetic open-data-shaped lake built by the Spark
pipeline into shards, then batch discovery on Spark and interactive search past memory.

The lake: ``set_lake("opendata", sets)`` (power-law sizes and token frequencies, thesis §3.5)
cut into tables of ``COLUMNS_PER_TABLE`` columns, so 1,000,000 sets are 100,000 tables. By
default the sets are written **directly in the lake layout the ingest leaves**, in chunks of
``TABLES_PER_CHUNK`` tables (so memory holds the sets' token ranks and one chunk) (``lake/cells``
partitioned by dataset, ``catalog/datasets``, ``catalog/columns``, and staged Parquet copies of
the query tables), and then the real index builds run on it
(``lakejoin.spark.pipeline.build_indexes``: ``lakejoin.spark.indexing`` and each family's Spark
build, then ``publish``). The ingest (crawl, per-file parse, the quality gate, profiling,
Great Expectations Data Docs) costs per file, not per cell, and is measured by ``--csv``, which
writes one CSV per table and runs the whole main job (``lakejoin.spark.pipeline.run``) with
its per-stage seconds. JOSIE, LSH Ensemble and MATE are built (PEXESO would embed every
distinct value first; it is measured by bench_pexeso.py). Then:

- **build**: minutes of the index builds (and of the lake written before them), per-stage
  seconds, shard count and on-disk size per family;
- **batch** (``lakejoin.spark.discover``): queries/s of JOSIE over a sample of query tables
  (every column of each) on ``local[2]`` and on a standalone master with one and with two
  one-core workers on 127.0.0.1, each worker pinned to its own CPU with ``taskset`` (unpinned,
  one "one-core" worker's JVM and Python workers spread over both cores of a 2-core machine,
  so one worker is not one core's work), and the peak resident memory of one executor (its JVM
  and Python workers, sampled every 0.2 s) with the CPUs its processes were allowed;
- **interactive** (``QueryEngine``): p50 / p95 of one JOSIE query with the whole index in
  memory and shard by shard under a budget below the index (``--budget``, 2 GiB by default; on a lake whose
  index fits 2 GiB, the largest shard's load, so that one shard stays cached and the rest are
  re-loaded per query: from the shard arrays cached on the first load,
  ``lakejoin.query.shard_arrays``), and the measured per-shard costs (load of one shard from its
  Delta files, load of its cached arrays, search of one shard);
- **projection**: what 16 nodes would do on the seed papers' lakes, from the measured cost per
  (query, shard) with shards of this lake's size.

The load average (``os.getloadavg``) is printed beside each measurement.

    python tests/benchmarks/bench_scale.py [--quick] [--sets N] [--queries Q] [--shards S]
        [--csv] [--home DIR] [--steps build,batch,interactive] [--budget 2G]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from report import run_with_docs

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from lakejoin.config import LakeConfig  # noqa: E402
from lakejoin.ids import column_id  # noqa: E402
from lakejoin.lake import delta, snapshots  # noqa: E402
from lakejoin.lake.schemas import CELLS, CELLS_SCHEMA, COLUMNS, COLUMNS_SCHEMA, DATASETS, DATASETS_SCHEMA  # noqa: E402
from lakejoin.progress import Progress  # noqa: E402
from lakejoin.query.engine import QueryEngine  # noqa: E402
from lakejoin.query.family import ask, family_query  # noqa: E402
from lakejoin.query.memory import MEMORY_LIMIT_VARIABLE, IndexTooLarge, estimated_load_bytes, parse_size  # noqa: E402
from lakejoin.query.shard_arrays import shard_folder  # noqa: E402
from lakejoin.query.sharded import ShardedFamily  # noqa: E402
from lakejoin.spark.pipeline import RunOptions, build_indexes, publish, run  # noqa: E402
from lakejoin.testing import set_lake_chunks  # noqa: E402

COLUMNS_PER_TABLE = 10
TABLES_PER_CHUNK = 10_000  # written per step: ~11 M cells, under 1 GB of Arrow
FAMILIES = ("josie", "lshensemble", "mate")
FULL_BUDGET = 2 * 2**30
INTERACTIVE_QUERIES = 20
# The seed papers' lakes (sets / domains / tables) and the nodes of the projected cluster.
SEEDS = {"JOSIE (web tables, sets)": 163_000_000, "LSH Ensemble (domains)": 262_000_000, "MATE (tables)": 145_000_000}
NODES, CORES_PER_NODE = 16, 16

_JOB = """
import json, sys, time
from pathlib import Path
from lakejoin.config import LakeConfig
from lakejoin.spark.discover import discover
from lakejoin.spark.session import get_spark
home, master, spec, out = sys.argv[1:5]
spark = get_spark(master)
spark.range(4).count()  # executors up before the clock starts
started = time.perf_counter()
summary = discover(spark, LakeConfig(home=Path(home)), "josie", spec, Path(out), k=10)
print("RESULT " + json.dumps({**summary, "wall": time.perf_counter() - started}))
"""


def load_average() -> float:
    return os.getloadavg()[0]


def table_id(t: int) -> str:
    return f"synthetic-t{t:06d}"


def query_tables(n_tables: int, n_queries: int) -> list[int]:
    """Every ``n_tables // n_queries``-th table: the batch's query tables (the first ones also
    the interactive queries)."""
    step = max(1, n_tables // n_queries)
    return list(range(0, n_tables, step))[:n_queries]


def lake_chunks(n_sets: int) -> Iterator[tuple[int, pa.ListArray]]:
    """The lake's sets, ``set_lake("opendata", n_sets, seed=7)``, as (first table, its sets) per
    ``TABLES_PER_CHUNK`` tables: the token ranks are drawn here, each chunk's text when it is
    written, so a million sets never become Python strings."""
    sets = set_lake_chunks("opendata", n_sets, TABLES_PER_CHUNK * COLUMNS_PER_TABLE, seed=7)
    return ((i * TABLES_PER_CHUNK, chunk) for i, chunk in enumerate(sets))


def table_frame(sets: pa.ListArray, t: int) -> pa.Table:
    """Table ``t`` of a chunk: columns ``c0``, ``c1``, ... holding its sets, padded with nulls to
    the longest."""
    columns = sets.slice(t * COLUMNS_PER_TABLE, COLUMNS_PER_TABLE)
    rows = pc.max(columns.value_lengths()).as_py()
    return pa.table(
        {
            f"c{c}": pa.concat_arrays([values.values, pa.nulls(rows - len(values), pa.string())])
            for c, values in enumerate(columns)
        }
    )


def tables_in(sets: pa.ListArray) -> int:
    return -(-len(sets) // COLUMNS_PER_TABLE)


def write_csv_lake(folder: Path, chunks: Iterator[tuple[int, pa.ListArray]]) -> None:
    """The sets as tables of ``COLUMNS_PER_TABLE`` columns, one CSV per table (``--csv``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for first, sets in chunks:
        for t in range(tables_in(sets)):
            table_frame(sets, t).to_pandas().to_csv(folder / f"t{first + t:06d}.csv", index=False)


def write_lake_tables(config: LakeConfig, chunks: Iterator[tuple[int, pa.ListArray]], staged: set[int]) -> None:
    """The sets in the layout the ingest leaves: ``lake/cells`` (one row per cell, partitioned by
    dataset, written by the ingest's writer), ``catalog/datasets`` and ``catalog/columns`` (every
    column a string column that JOSIE, LSH Ensemble and MATE index), and staged Parquet copies of
    the ``staged`` tables (the query tables: batch discovery and the engine read a lake query's
    values from its copy). One commit per table and chunk, so memory holds one chunk."""
    (config.home / "raw").mkdir(parents=True, exist_ok=True)
    for first, sets in chunks:
        cells, datasets, columns = lake_rows(first, sets, staged)
        delta.write_rows(
            config.table_path(CELLS),
            cells,
            CELLS_SCHEMA,
            partition_by=["dataset_id"],
            replace="all" if first == 0 else "none",
            operation="cells",
        )
        delta.write_arrow(
            config.table_path(DATASETS), datasets, mode="overwrite" if first == 0 else "append", operation="ingest"
        )
        delta.write_arrow(
            config.table_path(COLUMNS), columns, mode="overwrite" if first == 0 else "append", operation="columns"
        )
        for t in sorted(staged & set(range(first, first + tables_in(sets)))):
            pq.write_table(table_frame(sets, t - first), config.home / staged_path(t))


def staged_path(t: int) -> str:
    return f"raw/{table_id(t)}.parquet"


def lake_rows(first: int, sets: pa.ListArray, staged: set[int]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The cells, datasets and columns rows of one chunk of tables, numbered from ``first``."""
    sizes = sets.value_lengths().to_numpy().astype(np.int64)
    table_of = np.arange(len(sets)) // COLUMNS_PER_TABLE  # within the chunk
    ordinal = np.arange(len(sets)) % COLUMNS_PER_TABLE
    names = [table_id(first + t) for t in range(tables_in(sets))]
    ids = pa.array(names, pa.string())
    sha = "synthetic"
    column_ids = np.array([column_id(names[t], sha, int(o)) for t, o in zip(table_of, ordinal)], np.int64)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    cells = pa.table(
        {
            "dataset_id": ids.take(pa.array(np.repeat(table_of, sizes))),
            "column_id": pa.array(np.repeat(column_ids, sizes)),
            "row_id": pa.array(np.arange(int(sizes.sum()), dtype=np.int64) - starts),
            "value": sets.flatten(),
            "raw": pa.nulls(int(sizes.sum()), pa.string()),
        },
        schema=CELLS_SCHEMA,
    )
    rows = np.zeros(len(names), np.int64)
    np.maximum.at(rows, table_of, sizes)
    widths = np.bincount(table_of)
    now = datetime.now(UTC)
    datasets = [
        {
            "dataset_id": names[t],
            "source": "synthetic",
            "title": f"synthetic table {first + t}",
            "format": "csv",
            "fetched_at": now,
            "content_sha256": sha,
            "version": 1,
            "status": "active",
            "rows": int(rows[t]),
            "columns": int(widths[t]),
            "staged_path": staged_path(first + t) if first + t in staged else None,
        }
        for t in range(len(names))
    ]
    columns = pa.table(
        {
            "column_id": column_ids,
            "dataset_id": ids.take(pa.array(table_of)),
            "ordinal": pa.array(ordinal.astype(np.int32)),
            "name": [f"c{o}" for o in ordinal],
            "header": [f"c{o}" for o in ordinal],
            "name_source": ["header"] * len(sets),
            "type": ["string"] * len(sets),
            "count": sizes,
            "distinct": sizes,
            "nulls": rows[table_of] - sizes,
            "null_fraction": (rows[table_of] - sizes) / rows[table_of],
            "uniqueness": np.ones(len(sets)),
            "key_candidate": pa.array(sizes == rows[table_of]),
            "semantic_type": pa.nulls(len(sets), pa.string()),
            "indexed_by": [list(FAMILIES)] * len(sets),
        },
        schema=COLUMNS_SCHEMA,
    )
    return cells, pa.Table.from_pylist(datasets, schema=DATASETS_SCHEMA), columns


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(home: Path, n_sets: int, n_queries: int, shards: int | None, csv: bool) -> dict:
    """The lake of ``n_sets`` sets and its indexes, published; seconds per step."""
    config = LakeConfig(home=home, spark_master="local[2]", quiet=True)
    began = started = time.perf_counter()
    chunks = lake_chunks(n_sets)
    seconds = {"generate sets": time.perf_counter() - started}
    progress = Progress(quiet=True)
    if csv:
        started = time.perf_counter()
        write_csv_lake(home.parent / "sources", chunks)
        seconds["write CSV"] = time.perf_counter() - started
        summary = run(
            config,
            RunOptions(sources=[f"folder:{home.parent / 'sources'}"], families=FAMILIES, shards=shards),
            progress,
        )
        seconds.update(summary["stage_seconds"])
    else:
        with snapshots.writing(config, "bench_scale"):
            started = time.perf_counter()
            write_lake_tables(config, chunks, set(query_tables(-(-n_sets // COLUMNS_PER_TABLE), n_queries)))
            seconds["write lake tables"] = time.perf_counter() - started
            build_indexes(config, progress, families=FAMILIES, shards=shards)
            publish(config, {"bench_scale": n_sets}, progress)
        seconds.update(progress.timings)
    return {"minutes": (time.perf_counter() - began) / 60, "seconds": seconds, "load": load_average(), "config": config}


def built_families(config: LakeConfig) -> dict:
    loaded = QueryEngine(config).snapshot()
    return {f: {"shards": loaded.shard_count(f), "bytes": folder_bytes(config.home / "index" / f)} for f in FAMILIES}


class PeakMemory:
    """Largest resident memory of one executor (a JVM running executor tasks plus its Python
    workers), sampled every 0.2 s while running, and the CPUs those processes were allowed
    (``cpus``: each executor's set, as ``taskset`` left it)."""

    def __init__(self, marker: str) -> None:
        self.marker, self.peak, self._stop = marker, 0, threading.Event()
        self.cpus: set[tuple[int, ...]] = set()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            for process in psutil.process_iter(["cmdline"]):
                try:
                    if self.marker in " ".join(process.info["cmdline"] or []):
                        tree = [process, *process.children(recursive=True)]
                        self.peak = max(self.peak, sum(p.memory_info().rss for p in tree))
                        self.cpus.update(tuple(p.cpu_affinity()) for p in tree)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue


def batch(home: Path, master: str, spec: str, out: Path, marker: str) -> dict:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    loads = [load_average()]
    with PeakMemory(marker) as memory:
        completed = subprocess.run(
            [sys.executable, "-c", _JOB, str(home), master, spec, str(out)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=3600,
        )
    loads.append(load_average())
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-3000:])
    result = json.loads(
        next(line for line in completed.stdout.splitlines() if line.startswith("RESULT ")).removeprefix("RESULT ")
    )
    return {
        **result,
        "qps": result["queries"] / result["wall"],
        "peak": memory.peak,
        "load": max(loads),
        "cpus": sorted(memory.cpus),
    }


def interactive(config: LakeConfig, queries: list[tuple[str, str]], budget: int | None) -> dict:
    """p50/p95 of the queries after a first one (which loads the whole index, or the shards it
    reaches), and per query the shards asked, read and skipped by their bound."""
    if budget is None:
        os.environ.pop(MEMORY_LIMIT_VARIABLE, None)
    else:
        os.environ[MEMORY_LIMIT_VARIABLE] = str(budget)
    engine = QueryEngine(config)
    started = time.perf_counter()
    engine.search("josie", [queries[0][1]], dataset_id=queries[0][0], k=10)  # warm: load (or the first shards)
    first = time.perf_counter() - started
    seconds, reads = [], []
    for dataset_id, column in queries:
        started = time.perf_counter()
        answer = engine.search("josie", [column], dataset_id=dataset_id, k=10)
        seconds.append(time.perf_counter() - started)
        reads.append(answer.get("shards", {}))
    os.environ.pop(MEMORY_LIMIT_VARIABLE, None)
    cuts = statistics.quantiles(seconds, n=20)
    per_query = {name: statistics.mean(r.get(name, 0) for r in reads) for name in ("searched", "read", "skipped")}
    return {
        "p50": statistics.median(seconds) * 1000,
        "p95": cuts[18] * 1000,
        "first": first,
        **per_query,
        "memory": process_memory(),
        "load": load_average(),
    }


def process_memory() -> dict[str, int]:
    """This process's anonymous memory (its own: heap, arrays it allocated) and its resident
    file-backed pages (memory-mapped shard arrays: the OS's page cache), from /proc."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) * 1024 for name in ("RssAnon", "RssFile")}


def shard_costs(config: LakeConfig, queries: list[tuple[str, str]]) -> dict:
    """Per shard, the seconds of one load from the Delta files (the index's global part already
    in this process; the shard's cached arrays deleted first, so it reads, builds and writes
    them), of one load that maps the cached arrays, and of one query on the loaded shard,
    averaged over the shards."""
    loaded = QueryEngine(config).snapshot()
    shards = ShardedFamily(loaded, "josie").shards
    loaded.load_shards("josie", shards[:1])  # the global part, once per process
    asked = [family_query("josie", [c], [loaded.staged_table(d).column(c).to_pylist()], 10, {}) for d, c in queries]
    built, mapped, searches = [], [], []
    for shard in shards:
        shutil.rmtree(shard_folder(config, loaded.snapshot_id, "josie", shard), ignore_errors=True)
        started = time.perf_counter()
        loaded.load_shards("josie", [shard])
        built.append(time.perf_counter() - started)
        loaded.load_shards("josie", [shard])  # the first use in a process checks the CRC
        started = time.perf_counter()
        searcher = loaded.load_shards("josie", [shard])
        mapped.append(time.perf_counter() - started)
        started = time.perf_counter()
        for query in asked:
            ask(searcher, query)
        searches.append((time.perf_counter() - started) / len(asked))
    ms = {
        name: statistics.mean(values) * 1000
        for name, values in (("built_ms", built), ("mapped_ms", mapped), ("search_ms", searches))
    }
    return {**ms, "load": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 sets (2,000 tables), 40 query tables")
    parser.add_argument("--sets", type=int, help="sets in the lake (default 1,000,000; --quick 20,000)")
    parser.add_argument("--queries", type=int, help="query tables for the batch (default 200; --quick 40)")
    parser.add_argument("--shards", type=int, help="shard count (default: the pipeline's rule)")
    parser.add_argument(
        "--csv",
        action="store_true",
        help=(
            "write one CSV per table and run the whole main job (crawl, parse, quality, profiles) instead of writing "
            "the lake tables"
        ),
    )
    parser.add_argument(
        "--home", type=Path, help="keep the lake here (built if it has no snapshot yet; default: a temporary folder)"
    )
    parser.add_argument("--steps", default="build,batch,interactive", help="comma-separated: build, batch, interactive")
    parser.add_argument(
        "--budget",
        type=parse_size,
        default=FULL_BUDGET,
        help="interactive shard-by-shard budget for an index larger than it, e.g. 3G (default 2G)",
    )
    args = parser.parse_args()
    n_sets = args.sets or (20_000 if args.quick else 1_000_000)
    n_queries = args.queries or (40 if args.quick else 200)
    steps = set(args.steps.split(","))
    with tempfile.TemporaryDirectory(prefix="lakejoin-bench-scale-") as folder:
        home = args.home or Path(folder) / "home"
        config = LakeConfig(home=home, spark_master="local[2]", quiet=True)
        built = None
        if not snapshots.list_snapshots(config):
            built = build(home, n_sets, n_queries, args.shards, args.csv)
            print("built:", json.dumps({k: v for k, v in built.items() if k != "config"}), flush=True)
        header(n_sets, built, built_families(config))
        loaded = QueryEngine(config).snapshot()
        n_tables = len(loaded.datasets)
        sample = (
            [table_id(t) for t in query_tables(n_tables, n_queries)]
            if not args.csv
            else sorted(loaded.datasets)[:: max(1, n_tables // n_queries)][:n_queries]
        )
        if "batch" in steps:
            batch_step(config, ",".join(sample), Path(folder), built_families(config)["josie"]["shards"], n_sets)
        if "interactive" in steps:
            queries = [(d, c.name) for d in sample[:INTERACTIVE_QUERIES] for c in loaded.columns_of(d)[:1]]
            interactive_step(config, queries, args.budget)


def header(n_sets: int, built: dict | None, families: dict) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"bench_scale — {now} — {platform.machine()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"lake: {n_sets:,} sets in {-(-n_sets // COLUMNS_PER_TABLE):,} tables")
    if built is not None:
        steps = ", ".join(f"{name} {s:.0f} s" for name, s in built["seconds"].items())
        print(
            f"build (load {built['load']:.1f} at its end): {built['minutes']:.1f} min wall; seconds per stage (the "
            f"families' builds may overlap): {steps}"
        )
    for family, info in families.items():
        print(
            f"  {family:12s} {info['shards']:>4} shards, {info['bytes'] / 2**20:8.1f} MiB on disk "
            f"({info['bytes'] / max(info['shards'], 1) / 2**20:.2f} MiB/shard)"
        )


def batch_step(config: LakeConfig, spec: str, folder: Path, shards: int, n_sets: int) -> None:
    from testkit.spark_cluster import standalone_cluster

    runs = {
        "local[2]": batch(config.home, "local[2]", spec, folder / "out-local", "org.apache.spark.deploy.SparkSubmit")
    }
    for workers in (1, 2):
        logs = folder / f"cluster-{workers}"
        logs.mkdir()
        with standalone_cluster(logs, workers=workers, cores=1, memory="3g", pinned=True) as url:
            runs[f"standalone, {workers} pinned worker(s) x 1 core"] = batch(
                config.home, url, spec, folder / f"out-{workers}", "CoarseGrainedExecutorBackend"
            )
    print("\nbatch discovery, JOSIE k=10 (every column of each query table)")
    print(
        f"{'where':45s} {'queries':>8} {'seconds':>8} {'queries/s':>10} {'peak MiB/executor':>18} {'load':>5}  "
        "executors' CPUs"
    )
    for where, r in runs.items():
        cpus = " ".join("{" + ",".join(map(str, c)) + "}" for c in r["cpus"])
        print(
            f"{where:45s} {r['queries']:>8} {r['wall']:>8.1f} {r['qps']:>10.2f} {r['peak'] / 2**20:>18.0f} "
            f"{r['load']:>5.1f}  {cpus}"
        )
    one, two = (runs[k]["qps"] for k in list(runs)[1:])
    print(f"two workers / one worker: {two / one:.2f}x (goal >= 1.7x)")
    two_run = runs[list(runs)[-1]]
    per_query_shard = two_run["wall"] * 2 / (two_run["queries"] * shards)  # core-seconds per (query, shard)
    sets_per_shard = n_sets / shards
    print(
        f"\nprojection to {NODES} nodes x {CORES_PER_NODE} cores, shards of {sets_per_shard:,.0f} sets, "
        f"{per_query_shard * 1000:.1f} core-ms per (query, shard) as measured on two workers:"
    )
    for lake, size in SEEDS.items():
        n = size / sets_per_shard
        print(
            f"  {lake:28s} {size:>12,} -> {n:>9,.0f} shards: {NODES * CORES_PER_NODE / (n * per_query_shard):10.3f} "
            "queries/s"
        )


def interactive_step(config: LakeConfig, queries: list[tuple[str, str]], full_budget: int) -> None:
    loaded = QueryEngine(config).snapshot()
    rows = {n: loaded.row_count(f"index/josie/{n}") or 0 for n in loaded.index_tables_of("josie")}
    whole_bytes = estimated_load_bytes("josie", rows)
    # 2 GiB at full size; a small lake fits that, so then the largest shard (fewer than all fit)
    budget = full_budget if whole_bytes > full_budget else max(ShardedFamily(loaded, "josie").load_bytes.values()) + 1
    in_memory = interactive(config, queries, None)
    print(
        f"\ninteractive JOSIE, {MEMORY_LIMIT_VARIABLE}: whole index estimated {whole_bytes / 2**20:.0f} MiB, "
        f"shard-by-shard budget {budget / 2**20:.0f} MiB"
    )
    print(
        f"  in memory      p50 {in_memory['p50']:8.1f} ms  p95 {in_memory['p95']:8.1f} ms  (load "
        f"{in_memory['load']:.1f})"
    )
    try:
        sharded = interactive(config, queries, budget)
    except IndexTooLarge as refused:  # the index's global part alone is over the budget
        os.environ.pop(MEMORY_LIMIT_VARIABLE, None)
        print(f"  shard by shard refused: {refused}")
        return
    costs = shard_costs(config, queries)
    memory = sharded["memory"]
    print(
        f"  shard by shard p50 {sharded['p50']:8.1f} ms  p95 {sharded['p95']:8.1f} ms  "
        f"({sharded['p50'] / in_memory['p50']:.1f}x in memory; goal <= 10x; load {sharded['load']:.1f})\n"
        f"    per query: {sharded['searched']:.1f} shards asked, {sharded['skipped']:.1f} skipped by their bound, "
        f"{sharded['read']:.1f} read; "
        f"first query (loads every shard it reaches) {sharded['first']:.1f} s; process memory after: "
        f"{memory['RssAnon'] / 2**30:.2f} GiB own, {memory['RssFile'] / 2**30:.2f} GiB mapped files"
    )
    print(
        f"  per shard: load from Delta (and cache its arrays) {costs['built_ms']:.1f} ms, load of the cached arrays "
        f"{costs['mapped_ms']:.2f} ms, "
        f"one query {costs['search_ms']:.2f} ms (load {costs['load']:.1f})"
    )


if __name__ == "__main__":
    run_with_docs(main)
