"""Show the tables that join with a dataset, from the snapshot's join graph.

    lakejoin related (--dataset ID | --table FILE) [--snapshot N] --json

``--table`` names a file the lake holds (found by its content hash). The JSON is
``{"snapshot_id", "dataset_id", "graph": {"current", "snapshot_id", ["note"]}, "composite_keys", "related":
[{"dataset_id", "table", "method", "columns": [[this column, other column], ...], "evidence"}]}``;
``graph.current`` is false when the snapshot's graph was computed from an earlier snapshot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tabulate import tabulate

from lakejoin.commands._catalog import add_snapshot_argument
from lakejoin.config import LakeConfig
from lakejoin.graph import related
from lakejoin.ids import sha256_file
from lakejoin.query import engine_for
from lakejoin.query.engine import LOCAL_LIMITS
from lakejoin.query.snapshot import LoadedSnapshot

NAME = "related"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="a dataset_id of the lake")
    source.add_argument("--table", help="a table file the lake holds (matched by content)")
    add_snapshot_argument(parser)


def run(args: argparse.Namespace) -> dict[str, Any]:
    loaded = engine_for(LakeConfig.from_args(args.home), LOCAL_LIMITS).snapshot(args.snapshot)
    return related(loaded, args.dataset or dataset_of_file(loaded, Path(args.table)))


def dataset_of_file(loaded: LoadedSnapshot, path: Path) -> str:
    """The active dataset whose content is the file's (its bytes' SHA-256)."""
    if not path.is_file():
        raise ValueError(f"table file not found: {path}")
    digest = sha256_file(path)
    for dataset_id, row in sorted(loaded.datasets.items()):
        if row["status"] == "active" and row.get("content_sha256") == digest:
            return dataset_id
    raise LookupError(
        f"{path.name} is not a table of snapshot {loaded.snapshot_id} (no dataset has its content); search it with `lakejoin search`"
    )


def summarize(result: dict[str, Any]) -> str:
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


def _score(entry: dict[str, Any]) -> str:
    e = entry["evidence"]
    if entry["method"] == "josie":
        return f"overlap {e['overlap']}, containment {e['containment']:.3f}, jaccard {e['jaccard']:.3f}"
    if entry["method"] == "mate":
        return f"joinable keys {e['joinability']} ({e['share']:.3f} of the key's tuples)"
    return f"semantic: {e['matched']} values matched ({e['joinability']:.3f})"
