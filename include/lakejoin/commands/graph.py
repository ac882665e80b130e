"""Compute the latest snapshot's join graph (incrementally when a graph exists) and publish it.

lakejoin graph [-k 10] [--full] [--no-publish] --json
"""

from __future__ import annotations

import argparse
from typing import Any

from lakejoin.config import LakeConfig
from lakejoin.graph import DEFAULT_K, refresh

NAME = "graph"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``-k``, ``--full`` and ``--no-publish``."""
    parser.add_argument("-k", type=int, default=DEFAULT_K, help=f"neighbours per column or key (default {DEFAULT_K})")
    parser.add_argument("--full", action="store_true", help="recompute every list instead of updating the last graph")
    parser.add_argument(
        "--no-publish", dest="publish", action="store_false", help="write graph/ but publish no snapshot"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Refresh the latest snapshot's join graph (``lakejoin.graph.build.refresh``)."""
    if args.k < 1:
        raise ValueError(f"-k must be at least 1, got {args.k}")
    return refresh(LakeConfig.from_args(args.home), k=args.k, full=args.full, publish=args.publish)


def summarize(result: dict[str, Any]) -> str:
    """One line: edges, columns and keys, time, and the snapshot published."""
    if result.get("graph") == "current":
        return f"snapshot {result['snapshot_id']} already has its join graph"
    published = f", published as snapshot {result['published']}" if result["published"] else ", not published"
    return (
        f"join graph of snapshot {result['snapshot_id']}: {result['edges']} edges over {result['queries']} columns "
        f"and keys in {result['seconds']} s{published}"
    )
