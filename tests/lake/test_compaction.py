"""Compaction merges the small files appends and shard swaps leave; vacuum keeps every file a
retained snapshot pins (``lakejoin.lake.compaction``, ``lakejoin.lake.snapshots.vacuum``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakejoin.config import LakeConfig
from lakejoin.embed import value_hash
from lakejoin.lake import delta, snapshots
from lakejoin.lake.compaction import MIN_FILES, compact
from lakejoin.lake.schemas import EMBEDDINGS, EMBEDDINGS_LAYOUT, EMBEDDINGS_SCHEMA


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


def _embedding_rows(start: int, count: int) -> pa.Table:
    hashes = [value_hash(f"value {i}") for i in range(start, start + count)]
    vectors = pa.array([[float(i), float(-i)] for i in range(start, start + count)], pa.list_(pa.float32()))
    return pa.table({"model": ["m"] * count, "value_hash": hashes, "vector": vectors}, schema=EMBEDDINGS_SCHEMA)


def _group_ranges(path: Path) -> list[list[tuple[str, str, int]]]:
    """Per live file, each row group's (min, max, rows) of value_hash."""
    ranges = []
    for uri in delta.files_of(delta.open_table(path)):
        metadata = pq.ParquetFile(uri).metadata
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        ranges.append([(g.column(1).statistics.min, g.column(1).statistics.max, g.num_rows) for g in groups])
    return ranges


def test_the_embedding_cache_is_sorted_in_small_groups_that_lookups_prune_and_compaction_keeps(tmp_path: Path) -> None:
    config = _lake(tmp_path)
    path = config.table_path(EMBEDDINGS)
    for batch in range(MIN_FILES):
        delta.write_rows(
            path, _embedding_rows(batch * 300, 300), EMBEDDINGS_SCHEMA, replace="none", layout=EMBEDDINGS_LAYOUT
        )
    for groups in _group_ranges(path):
        assert all(rows <= EMBEDDINGS_LAYOUT.row_group_rows for _, _, rows in groups)
        assert all(a[1] < b[0] for a, b in itertools.pairwise(groups))  # each file sorted: groups in order, disjoint
    wanted = [value_hash(f"value {i}") for i in (0, 299, 1234, 2399)] + [value_hash("never embedded")]
    everything = delta.read_arrow(path)
    expected = everything.filter(pc.is_in(everything["value_hash"], value_set=pa.array(wanted)))
    found = delta.read_matching(path, "value_hash", wanted, ["value_hash", "vector"])
    assert sorted(found.to_pylist(), key=str) == sorted(expected.select(["value_hash", "vector"]).to_pylist(), key=str)
    assert found.num_rows == 4
    assert delta.read_matching(path, "value_hash", [], ["value_hash"]).num_rows == 0

    assert compact(config, [EMBEDDINGS])[EMBEDDINGS]["files_added"] == 1
    (groups,) = _group_ranges(path)
    assert all(rows <= EMBEDDINGS_LAYOUT.row_group_rows for _, _, rows in groups)
    runs = 1 + sum(
        a[0] > b[0] for a, b in itertools.pairwise(groups)
    )  # a group starting below its predecessor starts a run
    assert runs == MIN_FILES  # the merged file is the appended files' sorted runs, in order
    after = delta.read_matching(path, "value_hash", wanted, ["value_hash", "vector"])
    assert sorted(after.to_pylist(), key=str) == sorted(found.to_pylist(), key=str)
