"""Compact the lake's tables, expire all but the newest N snapshots and delete the files only they used."""

from __future__ import annotations

import argparse

from lakejoin.commands.run import add_wait_argument
from lakejoin.config import LakeConfig
from lakejoin.lake.compaction import compact
from lakejoin.lake.snapshots import vacuum, writing

NAME = "vacuum"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--retain`` and ``--wait``."""
    parser.add_argument("--retain", type=int, default=5, help="published snapshots to keep readable (default 5)")
    add_wait_argument(parser)


def run(args: argparse.Namespace) -> dict:
    """Compact the lake's tables and drop what no retained snapshot reads, holding the write lease."""
    config = LakeConfig.from_args(args.home)
    with writing(config, "lakejoin vacuum", wait=args.wait):
        compacted = compact(config)
        return {**vacuum(config, args.retain), "compacted": compacted}
