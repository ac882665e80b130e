"""Expire all but the newest N snapshots and delete the files only they used."""

from __future__ import annotations

import argparse

from lakejoin.config import LakeConfig
from lakejoin.lake.snapshots import vacuum

NAME = "vacuum"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retain", type=int, default=5, help="published snapshots to keep readable (default 5)")


def run(args: argparse.Namespace) -> dict:
    return vacuum(LakeConfig.from_args(args.home), args.retain)
