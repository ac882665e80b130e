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

from pyspark.sql import SparkSession

_lock = threading.Lock()


def get_spark(master: str | None = None, app_name: str = "lakejoin", shuffle_partitions: int | None = None) -> SparkSession:
    """Return the process's Spark session, starting it on first use.

    A later call with another ``master`` stops the running session and starts a new one. Under
    ``spark-submit`` (no ``master`` given) the submitted master is kept.
    """
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit chose the master
    master = master or os.environ.get("LAKEJOIN_SPARK_MASTER", "local[*]")
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            if submitted or active.sparkContext.master == master:
                return active
            active.stop()
        # Executors must run the same interpreter as the driver (numpy, lakejoin installed).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        partitions = shuffle_partitions or int(os.environ.get("LAKEJOIN_SHUFFLE_PARTITIONS", "8"))
        builder = SparkSession.builder if submitted else SparkSession.builder.master(master)
        builder = (
            builder.appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(partitions))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", os.environ.get("LAKEJOIN_DRIVER_MEMORY", "4g"))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.worker.reuse", "true")
        )
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        return spark
