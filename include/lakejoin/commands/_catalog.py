"""Shared by the catalog-reading commands: read a catalog table at a snapshot's pinned version."""

from __future__ import annotations

import argparse

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots


def add_snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshot", type=int, help="read this snapshot (default: the latest published)")


def read_pinned(args: argparse.Namespace, table: str) -> tuple[snapshots.Snapshot, list[dict]]:
    config = LakeConfig.from_args(args.home)
    snapshot = snapshots.resolve(config, args.snapshot)
    version = snapshot.version_of(table)
    if version is None:
        return snapshot, []
    return snapshot, delta.read_arrow(config.table_path(table), version).to_pylist()
