"""Ingest sources into the lake (catalog, cells, columns) — no index build, no publish.

    spark-submit --master spark://host:7077 spark_jobs/ingest.py --home /lake --source folder:/data

The master comes from spark-submit (or ``--spark-master`` when run as a plain script). The job
holds the lake's write lease while it commits (``--wait`` seconds for another writer, default
none); give it and the build_index job that publishes the same ``--build-id`` to record them as
one build.
"""

from __future__ import annotations

import argparse
import json
import sys

from lakejoin.config import LakeConfig
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import RunOptions, ingest


def main(argv: list[str] | None = None) -> dict:
    """Ingest the sources into the catalog and cells; spark-submit's entry point."""
    parser = argparse.ArgumentParser(prog="spark_jobs/ingest.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--source", action="append", default=[])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--allow-private-hosts", action="store_true")
    parser.add_argument("--spark-master")
    parser.add_argument("--build-id", help="the build the commits belong to (default: a new one)")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for another writer of the lake")
    args = parser.parse_args(argv)
    config = LakeConfig(
        LakeConfig.from_args(args.home).home, spark_master=args.spark_master
    )  # None: spark-submit's master
    options = RunOptions(
        sources=args.source,
        tables=args.tables,
        allow_private_hosts=args.allow_private_hosts,
        build_id=args.build_id,
        wait=args.wait,
    )
    result = ingest(config, options, Progress())
    summary = {"changed": sorted(result.changed), "counts": result.counts, "errors": result.errors}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
