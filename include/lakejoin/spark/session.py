"""One Spark session per process (DESIGN "Spark").

Embedded default: ``local[*]`` inside the calling process, UI off, few shuffle partitions
(the bundled lake is small; Spark's default of 200 would make thousands of tiny tasks).
``master`` may name a standalone cluster (``spark://host:7077``); the lake root must then be
a path every executor sees.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from lakejoin.config import DRIVER_MEMORY, SHUFFLE_PARTITIONS, SPARK_CONSOLE_LOG, SPARK_JAVA_OPTIONS, SPARK_MASTER
from lakejoin.spark import class_archive

_lock = threading.Lock()


def get_spark(
    master: str | None = None, app_name: str = "lakejoin", shuffle_partitions: int | None = None
) -> SparkSession:
    """Return the process's Spark session, starting it on first use.

    A later call with another ``master`` stops the running session and starts a new one. Under
    ``spark-submit`` (no ``master`` given) the submitted master is kept.
    """
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit chose the master
    master = master or SPARK_MASTER.read()
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            if submitted or active.sparkContext.master == master:
                return active
            active.stop()
        # Executors must run the same interpreter as the driver (numpy, lakejoin installed).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        partitions = shuffle_partitions or SHUFFLE_PARTITIONS.read()
        builder = SparkSession.builder if submitted else SparkSession.builder.master(master)
        builder = (
            builder.appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(partitions))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", DRIVER_MEMORY.read())
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.worker.reuse", "true")
        )
        java_options = SPARK_JAVA_OPTIONS.read() or ""
        # The class archive fits the driver's class path only: executors of a cluster start without it.
        driver_options = " ".join(filter(None, [java_options, class_archive.driver_options()]))
        if driver_options:
            builder = builder.config("spark.driver.extraJavaOptions", driver_options)
        if java_options:
            builder = builder.config("spark.executor.extraJavaOptions", java_options)
        spark = _start(builder)
        spark.sparkContext.setLogLevel("ERROR")
        return spark


def _start(builder: SparkSession.Builder) -> SparkSession:
    """Start the session; with ``$LAKEJOIN_SPARK_CONSOLE_LOG`` set, the JVM starts with that file
    as its stderr (its Python workers inherit it), while this process keeps its own."""
    log = SPARK_CONSOLE_LOG.read()
    if not log:
        return builder.getOrCreate()
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 2)
            return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
