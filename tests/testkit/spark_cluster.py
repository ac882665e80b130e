"""A standalone Spark master and workers on 127.0.0.1, started from the pyspark installation."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from lakejoin.config import SPARK_JAVA_OPTIONS
from testkit.ports import free_port, wait_for_port

SPARK_HOME = Path(pyspark.__file__).parent


@contextmanager
def standalone_cluster(
    logs: Path, workers: int = 1, cores: int = 2, memory: str = "2g", pinned: bool = False
) -> Iterator[str]:
    """A standalone master and ``workers`` workers on 127.0.0.1 started from the pyspark
    installation (logs under ``logs``); yields the master URL, then stops them by pid.

    ``pinned``: worker n and every process it starts (its executors' JVMs and Python workers
    inherit the affinity) run on CPUs ``n*cores .. (n+1)*cores - 1`` only (``taskset``), so a
    one-core worker cannot spread over the machine's other cores as an unpinned one does."""
    if pinned and workers * cores > (os.cpu_count() or 1):
        raise ValueError(
            f"{workers} pinned worker(s) of {cores} core(s) need {workers * cores} CPUs; this machine has "
            f"{os.cpu_count()}"
        )
    port, web = free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        # the master's and workers' JVMs take the drivers' and executors' options (tests/conftest.py sets them)
        "SPARK_DAEMON_JAVA_OPTS": SPARK_JAVA_OPTIONS.read() or "",
    }
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(web),
            ],
            env=env,
            stdout=open(logs / "master.log", "w"),  # noqa: SIM115 - the process writes it until stopped
            stderr=subprocess.STDOUT,
        )
    ]
    for n in range(workers):
        processes.append(
            subprocess.Popen(
                [
                    *_pinned_to(n, cores, pinned),
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    f"spark://127.0.0.1:{port}",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(free_port()),
                ],
                env={**env, "SPARK_WORKER_DIR": str(logs / f"work-{n}")},
                stdout=open(logs / f"worker-{n}.log", "w"),  # noqa: SIM115 - the process writes it until stopped
                stderr=subprocess.STDOUT,
            )
        )
    try:
        wait_for_port(port)
        _wait_for_workers(logs / "master.log", workers)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)


def _pinned_to(worker: int, cores: int, pinned: bool) -> list[str]:
    """The ``taskset`` prefix that holds worker ``worker`` to its own ``cores`` CPUs (none unpinned)."""
    return ["taskset", "--cpu-list", f"{worker * cores}-{(worker + 1) * cores - 1}"] if pinned else []


def _wait_for_workers(master_log: Path, workers: int, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while master_log.read_text().count("Registering worker") < workers:
        if time.time() > deadline:
            raise TimeoutError(
                f"{workers} worker(s) did not register with the master:\n{master_log.read_text()[-2000:]}"
            )
        time.sleep(0.5)
