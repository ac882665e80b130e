"""Build index families from the lake's current cells, shard by shard (only the shards holding a
dataset changed since each family's last build), then optionally publish.

    spark-submit --master spark://host:7077 spark_jobs/build_index.py --home /lake --family josie --publish

It holds the lake's write lease for the builds and the publish (``--wait`` as in spark_jobs/ingest.py).
"""

from __future__ import annotations

import argparse
import json
import sys

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.lake.snapshots import writing
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import build_indexes, publish


def main(argv: list[str] | None = None) -> dict:
    """Build the index families on the committed cells (and publish when asked); spark-submit's entry point."""
    parser = argparse.ArgumentParser(prog="spark_jobs/build_index.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default every family")
    parser.add_argument("--publish", action="store_true", help="publish a snapshot afterwards")
    parser.add_argument("--spark-master")
    parser.add_argument("--build-id", help="the build the commits belong to (default: a new one)")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for another writer of the lake")
    args = parser.parse_args(argv)
    config = LakeConfig(LakeConfig.from_args(args.home).home, spark_master=args.spark_master)
    progress = Progress()
    with writing(
        config, "spark_jobs/build_index.py", args.build_id, args.wait
    ):  # one lease for the builds and the publish
        builds = {
            f: b.to_json() for f, b in build_indexes(config, progress, families=tuple(args.family or FAMILIES)).items()
        }
        summary: dict = {"index_builds": builds}
        if args.publish:
            summary["snapshot_id"] = publish(config, summary, progress).snapshot_id
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
