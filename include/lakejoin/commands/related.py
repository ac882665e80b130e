"""Show the tables that join with a dataset, from the snapshot's join graph.

    lakejoin related (--dataset ID | --table FILE) [--rank quality|overlap] [--snapshot N] --json

``--table`` names a file the lake holds (found by its content hash). The JSON is
``{"snapshot_id", "dataset_id", "table", "rank", "graph": {"current", "snapshot_id", ["note"]},
"composite_keys", "related": [...], "weak": [...]}``; ``graph.current`` is false when the
snapshot's graph was computed from an earlier snapshot. By default (``--rank quality``) each
neighbour table is listed once, best join first: ``{"dataset_id", "table", "method", "columns":
[[this column, other column], ...], "quality", "reason", "evidence", "also", "subsumed"}``, and
``weak`` holds the tables whose best join scores below ``lakejoin.profile.join_quality.MIN_QUALITY``.
``--rank overlap`` lists every edge of the columns' raw lists by overlap, as before quality
ranking (no ``weak``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tabulate import tabulate

from lakejoin.commands._catalog import add_snapshot_argument
from lakejoin.config import LakeConfig
from lakejoin.graph import related
from lakejoin.graph.store import RANKS
from lakejoin.ids import sha256_file
from lakejoin.index import registry
from lakejoin.query import engine_for
from lakejoin.query.engine import LOCAL_LIMITS
from lakejoin.query.snapshot import LoadedSnapshot
from lakejoin.query.tables import dataset_with_content

NAME = "related"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the dataset (or table file), the ranking and the snapshot."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="a dataset_id of the lake")
    source.add_argument("--table", help="a table file the lake holds (matched by content)")
    parser.add_argument(
        "--rank",
        choices=RANKS,
        default="quality",
        help="quality: each table once, best join first (default); overlap: every edge by raw overlap",
    )
    add_snapshot_argument(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The tables related to the dataset (or the file's dataset) in the snapshot's join graph."""
    loaded = engine_for(LakeConfig.from_args(args.home), LOCAL_LIMITS).snapshot(args.snapshot)
    dataset_id = args.dataset if args.table is None else dataset_of_file(loaded, Path(args.table))
    return related(loaded, dataset_id, rank=args.rank)


def dataset_of_file(loaded: LoadedSnapshot, path: Path) -> str:
    """The active dataset whose content is the file's (its bytes' SHA-256)."""
    if not path.is_file():
        raise ValueError(f"table file not found: {path}")
    dataset_id = dataset_with_content(loaded, sha256_file(path))
    if dataset_id is None:
        raise LookupError(
            f"{path.name} is not a table of snapshot {loaded.snapshot_id} (no dataset has its content); search it "
            "with `lakejoin search`"
        )
    return dataset_id


def summarize(result: dict[str, Any]) -> str:
    """A table of the related tables: by quality (one row per table) or every edge by overlap."""
    if result.get("rank") == "quality":
        return _summarize_by_quality(result)
    graph = result["graph"]
    lines = [
        f"snapshot {result['snapshot_id']}, dataset {result['dataset_id']}: {len(result['related'])} related"
        + ("" if graph["current"] else f" ({graph['note']})")
    ]
    rows = [
        [r["method"], r["table"] or r["dataset_id"], ", ".join(f"{a} = {b}" for a, b in r["columns"]), _score(r)]
        for r in result["related"]
    ]
    if rows:
        lines.append(tabulate(rows, headers=["method", "table", "columns", "evidence"], tablefmt="plain"))
    return "\n".join(lines)


def _summarize_by_quality(result: dict[str, Any]) -> str:
    graph = result["graph"]
    title = result.get("table") or result["dataset_id"]
    lines = [
        f"snapshot {result['snapshot_id']}, {title}: {len(result['related'])} related tables, best join first"
        + ("" if graph["current"] else f" ({graph['note']})")
    ]
    if result["composite_keys"]:
        lines.append("keys: " + "; ".join(f"({', '.join(k)})" for k in result["composite_keys"]))
    rows = [
        [
            f"{r['quality']:.2f}",
            r["table"] or r["dataset_id"],
            ("semantic " if r["semantic"] else "") + r["method"],
            ", ".join(f"{a} = {b}" for a, b in r["columns"]),
            r["reason"] + (f" (+{len(r['also'])} more joins)" if r["also"] else ""),
        ]
        for r in result["related"]
    ]
    if rows:
        lines.append(
            tabulate(
                rows, headers=["quality", "table", "method", "columns", "why"], tablefmt="plain", disable_numparse=True
            )
        )
    if result.get("weak"):
        lines.append(f"{len(result['weak'])} more tables join weakly (in the JSON's 'weak'; --rank overlap lists all)")
    return "\n".join(lines)


def _score(entry: dict[str, Any]) -> str:
    return registry.family(entry["method"]).describe_evidence(entry["evidence"])
