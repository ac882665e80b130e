"""List datasets of a snapshot with status, reason, url, title, version and content hash."""

from __future__ import annotations

import argparse

from lakejoin.commands._catalog import add_snapshot_argument, read_pinned
from lakejoin.lake.schemas import DATASETS

NAME = "datasets"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the snapshot and ``--status`` filters."""
    add_snapshot_argument(parser)
    parser.add_argument("--status", choices=["active", "removed", "quarantined"], help="only datasets with this status")


def run(args: argparse.Namespace) -> list[dict]:
    """The snapshot's dataset rows (without their staging paths), optionally of one status."""
    _, rows = read_pinned(args, DATASETS)
    rows = [{k: v for k, v in r.items() if k != "staged_path"} for r in rows]
    return [r for r in rows if args.status in (None, r["status"])]


def summarize(result: list[dict]) -> str:
    """One line per dataset: status, version, id and the reason it is not active."""
    return (
        "\n".join(f"{r['status']:<11} v{r['version']:<3} {r['dataset_id']:<50} {r['reason'] or ''}" for r in result)
        or "no datasets"
    )
