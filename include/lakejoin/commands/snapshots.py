"""List snapshots: id, status, creation time and the table versions each pins."""

from __future__ import annotations

import argparse

from lakejoin.config import LakeConfig
from lakejoin.lake.snapshots import list_snapshots

NAME = "snapshots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``snapshots`` takes no arguments of its own."""


def run(args: argparse.Namespace) -> list[dict]:
    """Every snapshot of the lake, as JSON."""
    return [s.to_json() for s in list_snapshots(LakeConfig.from_args(args.home))]


def summarize(result: list[dict]) -> str:
    """One line per snapshot: id, status and creation time."""
    if not result:
        return "no snapshots yet: run `lakejoin run`"
    return "\n".join(f"{s['snapshot_id']:>4}  {s['status']:<9}  {s['created_at']}" for s in result)
