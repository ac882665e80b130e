"""Show Great Expectations validations of dataset versions: success and drift per version."""

from __future__ import annotations

import argparse
from typing import Any

from lakejoin.config import resolve_home
from lakejoin.lake import delta
from lakejoin.lake.schemas import VALIDATIONS

NAME = "quality"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--dataset`` and ``--failed`` filters."""
    parser.add_argument("--dataset", help="only this dataset_id")
    parser.add_argument("--failed", action="store_true", help="only versions with drift")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Read ``<home>/quality/validations`` at its latest Delta version."""
    path = resolve_home(args.home) / VALIDATIONS
    if not delta.exists(path):
        return {"table_version": None, "validations": []}
    columns = ["dataset_id", "version", "success", "drift", "validated_at"]
    version = delta.current_version(path)
    rows = delta.read_arrow(path, version, columns).to_pylist()
    rows = [r for r in rows if args.dataset in (None, r["dataset_id"]) and not (args.failed and r["success"])]
    rows.sort(key=lambda r: (r["dataset_id"], r["version"]))
    return {"table_version": version, "validations": rows}


def summarize(result: dict[str, Any]) -> str:
    """One line per validated version, with one indented line per drift finding."""
    lines = []
    for row in result["validations"]:
        status = "ok" if row["success"] else f"drift ({len(row['drift'])})"
        lines.append(f"{row['dataset_id']:<50} v{row['version']:<3} {status}")
        lines += [f"    {d['kind']:<15} {d['column'] or '':<24} {d['detail']}" for d in row["drift"]]
    return "\n".join(lines) or "no validations"
