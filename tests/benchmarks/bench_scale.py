"""Search beyond one machine (issue #17): a synthetic open-data-shaped lake built by the Spark
pipeline into shards, then batch discovery on Spark and interactive search past memory.

The lake: ``set_lake("opendata", sets)`` (power-law sizes and token frequencies, thesis §3.5)
cut into tables of ``COLUMNS_PER_TABLE`` columns, so 1,000,000 sets are 100,000 tables. JOSIE,
LSH Ensemble and MATE are built (PEXESO would embed every distinct value first; it is measured
by bench_pexeso.py). Then:

- **build**: minutes of ``lakejoin.spark.pipeline.run``, shard count and on-disk size per family;
- **batch** (``lakejoin.spark.discover``): queries/s of JOSIE over a sample of query tables
  (every column of each) on ``local[2]`` and on a standalone master with one and with two
  one-core workers on 127.0.0.1, and the peak resident memory of one executor (its JVM and
  Python workers, sampled every 0.2 s);
- **interactive** (``QueryEngine``): p50 / p95 of one JOSIE query with the whole index in
  memory and shard by shard under a budget below the index (2 GiB at full size; on a lake whose
  index fits 2 GiB, the largest shard's load, so that some shards stay cached and the rest are
  read per query);
- **projection**: what 16 nodes would do on the seed papers' lakes, from the measured cost per
  (query, shard) with shards of this lake's size.

    python tests/benchmarks/bench_scale.py [--quick] [--sets N] [--queries Q]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from lakejoin.config import LakeConfig  # noqa: E402
from lakejoin.progress import Progress  # noqa: E402
from lakejoin.query.engine import QueryEngine  # noqa: E402
from lakejoin.query.memory import MEMORY_LIMIT_VARIABLE, estimated_load_bytes  # noqa: E402
from lakejoin.query.sharded import ShardedFamily  # noqa: E402
from lakejoin.spark.pipeline import RunOptions, run  # noqa: E402
from lakejoin.testing import set_lake  # noqa: E402

COLUMNS_PER_TABLE = 10
FAMILIES = ("josie", "lshensemble", "mate")
FULL_BUDGET = 2 * 2**30
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


def write_lake(folder: Path, n_sets: int, seed: int = 7) -> None:
    """``n_sets`` open-data-shaped sets as tables of ``COLUMNS_PER_TABLE`` columns (CSV)."""
    folder.mkdir(parents=True, exist_ok=True)
    sets = set_lake("opendata", n_sets, seed=seed)
    for t in range(0, n_sets, COLUMNS_PER_TABLE):
        columns = {f"c{c}": pd.Series(values, dtype=object) for c, values in enumerate(sets[t : t + COLUMNS_PER_TABLE])}
        pd.DataFrame(columns).to_csv(folder / f"t{t // COLUMNS_PER_TABLE:06d}.csv", index=False)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(home: Path, sources: Path, shards: int | None) -> dict:
    config = LakeConfig(home=home, spark_master="local[2]", quiet=True)
    started = time.perf_counter()
    run(config, RunOptions(sources=[f"folder:{sources}"], families=FAMILIES, shards=shards), Progress(quiet=True))
    minutes = (time.perf_counter() - started) / 60
    loaded = QueryEngine(config).snapshot()
    families = {f: {"shards": loaded.shard_count(f), "bytes": folder_bytes(home / "index" / f)} for f in FAMILIES}
    return {"minutes": minutes, "families": families, "config": config}


class PeakMemory:
    """Largest resident memory of one executor (a JVM running executor tasks plus its Python
    workers), sampled every 0.2 s while running."""

    def __init__(self, marker: str) -> None:
        self.marker, self.peak, self._stop = marker, 0, threading.Event()
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
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue


def batch(home: Path, master: str, spec: str, out: Path, marker: str) -> dict:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with PeakMemory(marker) as memory:
        completed = subprocess.run([sys.executable, "-c", _JOB, str(home), master, spec, str(out)], check=False, capture_output=True, text=True, env=env, timeout=3600)
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-3000:])
    result = json.loads(next(line for line in completed.stdout.splitlines() if line.startswith("RESULT ")).removeprefix("RESULT "))
    return {**result, "qps": result["queries"] / result["wall"], "peak": memory.peak}


def interactive(config: LakeConfig, queries: list[tuple[str, str]], budget: int | None) -> dict:
    if budget is None:
        os.environ.pop(MEMORY_LIMIT_VARIABLE, None)
    else:
        os.environ[MEMORY_LIMIT_VARIABLE] = str(budget)
    engine = QueryEngine(config)
    engine.search("josie", [queries[0][1]], dataset_id=queries[0][0], k=10)  # warm: load (or the first shards)
    seconds = []
    for dataset_id, column in queries:
        started = time.perf_counter()
        engine.search("josie", [column], dataset_id=dataset_id, k=10)
        seconds.append(time.perf_counter() - started)
    os.environ.pop(MEMORY_LIMIT_VARIABLE, None)
    cuts = statistics.quantiles(seconds, n=20)
    return {"p50": statistics.median(seconds) * 1000, "p95": cuts[18] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 sets (2,000 tables), 40 query tables")
    parser.add_argument("--sets", type=int, help="sets in the lake (default 1,000,000; --quick 20,000)")
    parser.add_argument("--queries", type=int, help="query tables for the batch (default 200; --quick 40)")
    parser.add_argument("--shards", type=int, help="shard count (default: the pipeline's rule)")
    args = parser.parse_args()
    n_sets = args.sets or (20_000 if args.quick else 1_000_000)
    n_queries = args.queries or (40 if args.quick else 200)
    from test_spark_cluster import standalone_cluster

    with tempfile.TemporaryDirectory(prefix="lakejoin-bench-scale-") as folder:
        root = Path(folder)
        started = time.perf_counter()
        write_lake(root / "sources", n_sets)
        written = time.perf_counter() - started
        built = build(root / "home", root / "sources", args.shards)
        config = built["config"]
        engine = QueryEngine(config)
        loaded = engine.snapshot()
        datasets = sorted(d for d, row in loaded.datasets.items() if row["status"] == "active")
        step = max(1, len(datasets) // n_queries)
        sample = datasets[::step][:n_queries]
        spec = ",".join(sample)
        runs = {"local[2]": batch(config.home, "local[2]", spec, root / "out-local", "org.apache.spark.deploy.SparkSubmit")}
        for workers in (1, 2):
            logs = root / f"cluster-{workers}"
            logs.mkdir()
            with standalone_cluster(logs, workers=workers, cores=1, memory="3g") as url:
                runs[f"standalone, {workers} worker(s) x 1 core"] = batch(config.home, url, spec, root / f"out-{workers}", "CoarseGrainedExecutorBackend")
        print("measured:", json.dumps({"build": {**built, "config": None}, "batch": runs}), flush=True)  # kept if a later step fails
        queries = [(d, c.name) for d in sample[:20] for c in loaded.columns_of(d)[:1]]
        rows = {n: loaded.row_count(f"index/josie/{n}") for n in loaded.index_tables_of("josie")}
        whole_bytes = estimated_load_bytes("josie", rows)
        # 2 GiB at full size; a small lake fits that, so then the largest shard (fewer than all fit)
        budget = FULL_BUDGET if whole_bytes > FULL_BUDGET else max(ShardedFamily(loaded, "josie").load_bytes.values()) + 1
        in_memory = interactive(config, queries, None)
        sharded = interactive(config, queries, budget)
        report(args, n_sets, written, built, runs, in_memory, sharded, budget, whole_bytes)


def report(args, n_sets, written, built, runs, in_memory, sharded, budget, whole_bytes) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"bench_scale — {now} — {platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB (shared with other sessions)")
    print(f"lake: {n_sets:,} sets in {n_sets // COLUMNS_PER_TABLE:,} tables (CSV written in {written:.0f} s); build {built['minutes']:.1f} min on local[2]")
    for family, info in built["families"].items():
        print(f"  {family:12s} {info['shards']:>4} shards, {info['bytes'] / 2**20:8.1f} MiB on disk ({info['bytes'] / max(info['shards'], 1) / 2**20:.2f} MiB/shard)")
    print("\nbatch discovery, JOSIE k=10 (every column of each query table)")
    print(f"{'where':38s} {'queries':>8} {'seconds':>8} {'queries/s':>10} {'peak MiB/executor':>18}")
    for where, r in runs.items():
        print(f"{where:38s} {r['queries']:>8} {r['wall']:>8.1f} {r['qps']:>10.2f} {r['peak'] / 2**20:>18.0f}")
    one, two = (runs[k]["qps"] for k in list(runs)[1:])
    print(f"two workers / one worker: {two / one:.2f}x (goal >= 1.7x)")
    print(f"\ninteractive JOSIE, {MEMORY_LIMIT_VARIABLE}: whole index estimated {whole_bytes / 2**20:.0f} MiB, shard-by-shard budget {budget / 2**20:.0f} MiB")
    print(f"  in memory      p50 {in_memory['p50']:8.1f} ms  p95 {in_memory['p95']:8.1f} ms")
    print(f"  shard by shard p50 {sharded['p50']:8.1f} ms  p95 {sharded['p95']:8.1f} ms  ({sharded['p50'] / in_memory['p50']:.1f}x in memory; goal <= 10x)")
    two_run = runs[list(runs)[-1]]
    shards = built["families"]["josie"]["shards"]
    per_query_shard = two_run["wall"] * 2 / (two_run["queries"] * shards)  # core-seconds per (query, shard)
    sets_per_shard = n_sets / shards
    print(f"\nprojection to {NODES} nodes x {CORES_PER_NODE} cores, shards of {sets_per_shard:,.0f} sets, {per_query_shard * 1000:.1f} core-ms per (query, shard) as measured on two workers:")
    for lake, size in SEEDS.items():
        n = size / sets_per_shard
        print(f"  {lake:28s} {size:>12,} -> {n:>9,.0f} shards: {NODES * CORES_PER_NODE / (n * per_query_shard):10.3f} queries/s")


if __name__ == "__main__":
    main()
