"""Ingest sources into the lake (catalog, cells, columns) — no index build, no publish.

    spark-submit --master spark://host:7077 spark_jobs/ingest.py --home /lake --source folder:/data

The master comes from spark-submit (or ``--spark-master`` when run as a plain script).
"""

from __future__ import annotations

import argparse
import json
import sys

from lakejoin.config import LakeConfig
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import RunOptions, ingest


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="spark_jobs/ingest.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--source", action="append", default=[])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--allow-private-hosts", action="store_true")
    parser.add_argument("--spark-master")
    args = parser.parse_args(argv)
    config = LakeConfig(LakeConfig.from_args(args.home).home, spark_master=args.spark_master)  # None: spark-submit's master
    result = ingest(config, RunOptions(sources=args.source, tables=args.tables, allow_private_hosts=args.allow_private_hosts), Progress())
    summary = {"changed": sorted(result.changed), "counts": result.counts, "errors": result.errors}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
