"""Batch discovery: answer a set of queries against the pinned snapshot, one Spark task per shard,
and write the ranked answers as a Delta table (``lakejoin.spark.discover``).

    spark-submit --master spark://host:7077 spark_jobs/discover.py --home /lake josie --queries all --out /lake/discoveries/josie

The arguments are those of ``lakejoin discover``; the master comes from spark-submit (or
``--spark-master`` when run as a plain script).
"""  # noqa: E501 (the spark-submit command line is copied whole)

from __future__ import annotations

import argparse
import json
import sys

from lakejoin.commands.discover import add_arguments, run_discover
from lakejoin.config import LakeConfig
from lakejoin.spark.session import get_spark


def main(argv: list[str] | None = None) -> dict:
    """Batch discovery on the cluster spark-submit gives; spark-submit's entry point."""
    parser = argparse.ArgumentParser(prog="spark_jobs/discover.py", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    add_arguments(parser)
    args = parser.parse_args(argv)
    config = LakeConfig(
        LakeConfig.from_args(args.home).home, spark_master=args.spark_master
    )  # None: spark-submit's master
    summary = run_discover(args, config, get_spark(config.spark_master))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
