"""Build index families from the lake's current cells (what changed since the last published
snapshot), then optionally publish.

    spark-submit --master spark://host:7077 spark_jobs/build_index.py --home /lake --family josie --publish
"""

from __future__ import annotations

import argparse
import json
import sys

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.progress import Progress
from lakejoin.spark.pipeline import build_indexes, publish


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="spark_jobs/build_index.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default every family")
    parser.add_argument("--publish", action="store_true", help="publish a snapshot afterwards")
    parser.add_argument("--spark-master")
    args = parser.parse_args(argv)
    config = LakeConfig(LakeConfig.from_args(args.home).home, spark_master=args.spark_master)
    progress = Progress()
    rows = build_indexes(config, None, progress, families=tuple(args.family or FAMILIES))
    summary: dict = {"index_rows": rows}
    if args.publish:
        summary["snapshot_id"] = publish(config, {"index_rows": rows}, progress).snapshot_id
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
