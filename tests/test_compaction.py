"""Compaction merges the small files appends and shard swaps leave; vacuum keeps every file a
retained snapshot pins (``lakejoin.lake.compaction``, ``lakejoin.lake.snapshots.vacuum``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.lake.compaction import compact


def _lake(tmp_path: Path) -> LakeConfig:
    return LakeConfig(home=tmp_path / "home", spark_master="local[1]", quiet=True)


def _append_batches(path: Path, batches: int, shard: int | None = None) -> None:
    for i in range(batches):
        columns = {"value": [f"v{i}-{j}" for j in range(3)]}
        if shard is not None:
            columns["shard"] = pa.array([shard] * 3, pa.int32())
        delta.write_arrow(path, pa.table(columns), mode="append", partition_by=["shard"] if shard is not None else None)


def test_crowded_partitions_are_compacted_and_the_rest_left_alone(tmp_path: Path) -> None:
    config = _lake(tmp_path)
    sharded, small = config.table_path("index/josie/tokens"), config.table_path("index/mate/params")
    _append_batches(sharded, 9, shard=0)
    _append_batches(sharded, 2, shard=1)
    _append_batches(small, 3)
    before = sorted(delta.read_arrow(sharded)["value"].to_pylist())
    done = compact(config, ["index/josie/tokens", "index/mate/params"])
    assert set(done) == {"index/josie/tokens"} and done["index/josie/tokens"]["partitions"] == 1
    live = delta.live_files(sharded, "shard")
    assert sorted(str(v) for v in live.values()) == ["0", "1", "1"]  # shard 0: one file; shard 1 untouched
    assert sorted(delta.read_arrow(sharded)["value"].to_pylist()) == before
    assert len(delta.live_files(small)) == 3
    assert compact(config, ["index/josie/tokens"]) == {}  # nothing left to do


def test_vacuum_after_compaction_keeps_what_a_retained_snapshot_pins(tmp_path: Path) -> None:
    config = _lake(tmp_path)
    table = "index/josie/tokens"
    path = config.table_path(table)
    _append_batches(path, 10, shard=0)
    pinned = snapshots.publish(config, {table: delta.current_version(path)}, {})
    rows = delta.read_arrow(path, pinned.version_of(table)).num_rows
    compact(config, [table])
    _append_batches(path, 1, shard=0)
    latest = snapshots.publish(config, {table: delta.current_version(path)}, {})
    result = snapshots.vacuum(config, retain=2)
    assert result["files_deleted"].get(table, 0) == 0  # the 10 small files are still pinned by the first snapshot
    assert delta.read_arrow(path, pinned.version_of(table)).num_rows == rows
    snapshots.vacuum(config, retain=1)  # the first snapshot expires; the latest reads on
    assert delta.read_arrow(path, latest.version_of(table)).num_rows == rows + 3
