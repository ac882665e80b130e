"""List the columns of a snapshot with their profile and the index families holding them."""

from __future__ import annotations

import argparse

from lakejoin.commands._catalog import add_snapshot_argument, read_pinned
from lakejoin.lake.schemas import COLUMNS

NAME = "columns"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the snapshot and ``--dataset`` filters."""
    add_snapshot_argument(parser)
    parser.add_argument("--dataset", help="only this dataset's columns")


def run(args: argparse.Namespace) -> list[dict]:
    """The snapshot's column profiles, optionally one dataset's, in dataset and column order."""
    _, rows = read_pinned(args, COLUMNS)
    rows = [{"column": r["name"], **r} for r in rows if args.dataset in (None, r["dataset_id"])]
    return sorted(rows, key=lambda r: (r["dataset_id"], r["ordinal"]))


def summarize(result: list[dict]) -> str:
    """One line per column: dataset, name, type and the families indexing it."""
    return (
        "\n".join(
            f"{r['dataset_id']:<50} {r['column']:<24} {r['type']:<10} {','.join(r['indexed_by'] or [])}" for r in result
        )
        or "no columns"
    )
