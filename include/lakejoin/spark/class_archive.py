"""A class-data archive of the Spark driver's JVM (the JDK's dynamic class-data sharing, JEP 350).

A Spark session's JVM loads, parses and verifies some ten thousand classes before it runs a job,
and every CLI run, Airflow task and test that starts Spark pays that again. The archive holds those
classes as the JVM laid them out in memory: a JVM started with it maps the file instead
(``-XX:SharedArchiveFile``): about 3 s of wall and of CPU less per session start
(``tests/benchmarks/bench_small_run.py``).

:func:`build` writes the archive once per installation: a session on this machine's pyspark runs the
kinds of operator a run uses, on a few rows, and its JVM writes the classes it loaded when it exits
(``-XX:ArchiveClassesAtExit``). The file appears complete or not at all, as a JVM given a truncated
archive exits. :func:`driver_options` names the archive to every later driver. The JVM checks that
the archive fits it (the same JDK build and class path; else it runs without it), and its logging
about the archive is off, so a stale archive costs only the time it would have saved and a run's
stderr stays as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lakejoin.config import SPARK_CLASS_ARCHIVE, SPARK_JAVA_OPTIONS

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # no warning about an archive the JVM cannot use


def archive_path() -> Path | None:
    """Where the archive lives (``$LAKEJOIN_SPARK_CLASS_ARCHIVE``; by default in this Python
    environment, as it belongs to its pyspark jars), or None when the setting is ``off``."""
    configured = SPARK_CLASS_ARCHIVE.read()
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    from pyspark import __version__

    return Path(sys.prefix) / "share" / "lakejoin" / f"spark-{__version__}-classes.jsa"


def driver_options() -> str:
    """The driver JVM options that map the archive, or "" when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None and path.is_file() else ""


def build(path: Path) -> Path:
    """Write the archive to ``path`` (replacing one there) from a session in a child process,
    whose JVM dumps its classes when it exits; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    java_options = " ".join(filter(None, [SPARK_JAVA_OPTIONS.read(), f"-XX:ArchiveClassesAtExit={partial}", QUIET]))
    environment = {**os.environ, SPARK_JAVA_OPTIONS.name: java_options, SPARK_CLASS_ARCHIVE.name: "off"}
    try:
        subprocess.run(
            [sys.executable, "-m", "lakejoin.spark.class_archive", "--load-classes"],
            env=environment,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if not partial.is_file():
            raise RuntimeError(f"the JVM wrote no class archive to {partial}")
        partial.replace(path)
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"the session that loads the classes failed: {error.stderr[-2000:]}") from error
    finally:
        partial.unlink(missing_ok=True)
    return path


def _load_classes() -> None:
    """The child of :func:`build`: on ``local[2]``, the operators a run uses (Python tasks over an
    RDD, Arrow batches through Python, Parquet written and read, a shuffle, a join and a sort); then
    the JVM shut down and waited for, as it writes the archive on exit."""
    from pyspark import SparkContext

    from lakejoin.spark.session import get_spark

    spark = get_spark("local[2]")
    with tempfile.TemporaryDirectory(prefix="lakejoin-class-archive-") as folder:
        spark.sparkContext.parallelize(range(100), 2).map(lambda n: {"n": n}).collect()
        spark.range(1000).selectExpr("id % 7 AS k", "CAST(id AS STRING) AS v").write.parquet(f"{folder}/numbers")
        numbers = spark.read.parquet(f"{folder}/numbers")
        joined = numbers.join(numbers.groupBy("k").count(), "k").orderBy("v")
        joined.mapInArrow(lambda batches: batches, joined.schema).toArrow()
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its stdin closes, and dumps the archive first
        gateway.proc.wait()


def main() -> None:
    """``python -m lakejoin.spark.class_archive``: write the archive where :func:`archive_path`
    says, unless it is there already (``--force``: again)."""
    if "--load-classes" in sys.argv:
        _load_classes()
        return
    path = archive_path()
    if path is None:
        print(f"{SPARK_CLASS_ARCHIVE.name}=off: no class archive")
        return
    if path.is_file() and "--force" not in sys.argv:
        print(f"class archive already at {path}")
        return
    print(f"class archive written to {build(path)}")


if __name__ == "__main__":
    main()
