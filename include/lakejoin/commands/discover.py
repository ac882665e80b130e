"""Batch discovery on Spark: every query of a set against the pinned snapshot, one task per shard.

    lakejoin discover {josie,lshensemble,mate,pexeso} --queries SPEC --out TABLE [-k 10] \
        [--column NAME | --columns A,B] [--snapshot N] [--spark-master URL] [family flags]

``SPEC`` is a table file, a folder of table files, dataset ids (comma-separated) or ``all``
(every column the family indexes: the lake against itself). The answers are written as a Delta
table at ``TABLE``: one row per (query, rank) with the fields of ``lakejoin search --json``
(``lakejoin.spark.discover.OUTPUT_SCHEMA``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lakejoin.commands.search import FAMILY_FLAGS
from lakejoin.config import LakeConfig
from lakejoin.index import SEARCH_FAMILIES

NAME = "discover"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the method, the query set, the output table and the family flags."""
    parser.add_argument("method", help=f"one of {', '.join(SEARCH_FAMILIES)}")
    parser.add_argument(
        "--queries",
        required=True,
        metavar="SPEC",
        help="a table file, a folder of tables, dataset ids (comma-separated) or 'all'",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="TABLE",
        help="where to write the answers (a Delta table; replaced if it exists)",
    )
    columns = parser.add_mutually_exclusive_group()
    columns.add_argument("--column", help="search only this column of each query table")
    columns.add_argument("--columns", help="these columns (MATE: the composite key, required), comma-separated")
    parser.add_argument("-k", type=int, default=10, help="results per query (default 10)")
    parser.add_argument("--snapshot", type=int, help="search this snapshot (default: the latest published)")
    parser.add_argument("--spark-master", help="Spark master URL (default local[*] or $LAKEJOIN_SPARK_MASTER)")
    for flag, (key, options) in FAMILY_FLAGS.items():
        if key != "semantic":
            parser.add_argument(flag, dest=key, **options)


def family_params(args: argparse.Namespace) -> dict[str, Any]:
    """The family parameters given on the command line (``FAMILY_FLAGS``)."""
    return {key: getattr(args, key) for key, _ in FAMILY_FLAGS.values() if getattr(args, key, None) is not None}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start a Spark session and run the batch discovery (``run_discover``)."""
    from lakejoin.spark.session import get_spark

    config = LakeConfig.from_args(args.home, args.spark_master, quiet=args.quiet or args.json)
    return run_discover(args, config, get_spark(config.spark_master))


def run_discover(args: argparse.Namespace, config: LakeConfig, spark: Any) -> dict[str, Any]:
    """The job behind ``lakejoin discover`` and ``spark_jobs/discover.py``."""
    from lakejoin.spark.discover import discover

    columns = (
        [args.column]
        if args.column
        else [c.strip() for c in args.columns.split(",") if c.strip()]
        if args.columns
        else None
    )
    return discover(
        spark,
        config,
        args.method,
        args.queries,
        Path(args.out),
        k=args.k,
        params=family_params(args),
        columns=columns,
        snapshot_id=args.snapshot,
    )


def summarize(result: dict[str, Any]) -> str:
    """One line: queries, shards, rows written and where."""
    return (
        f"snapshot {result['snapshot_id']}, {result['method']}: {result['queries']} queries over {result['shards']} "
        f"shards -> {result['rows']} rows in {result['out']} (version {result['version']}, {result['seconds']} s)"
    )
