"""The Spark build of MATE's index equals the in-memory build, fully (over shards) and incrementally
(fed only the rewritten shards)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakejoin.index.mate import build_from_cells, cells_from_frames, load
from lakejoin.index.mate.build import GLOBAL_TABLES
from lakejoin.index.shards import apply_update, in_shards, shards_of
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.sources.bundled import rdataset

pytestmark = pytest.mark.spark
N_SHARDS = 4


def lake(names: list[str], edits: dict[str, pd.DataFrame] | None = None) -> dict[str, pd.DataFrame]:
    frames = {f"bakeoff/{n}": rdataset("bakeoff", n) for n in names}
    frames["odd/values"] = pd.DataFrame({"a": ["Café ", "ÉCOLE", "2019.0", None], "b": ["x-y", "", "NA", "z"]})
    return {**frames, **(edits or {})}


def to_spark(spark, cells: pa.Table):
    return spark.createDataFrame(
        cells.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string"
    )


def frames_of(spark, tables: dict[str, pa.Table]) -> dict:
    return {name: spark.createDataFrame(table) for name, table in tables.items()}  # Arrow keeps int32, binary


def collect(tables: dict) -> dict[str, pa.Table]:
    return {name: pa.Table.from_pandas(frame.toPandas(), preserve_index=False) for name, frame in tables.items()}


def sorted_frame(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    if "superkey" in frame:
        frame["superkey"] = frame["superkey"].map(bytes)
    return frame.sort_values(keys).reset_index(drop=True)


def assert_same_tables(spark_tables: dict[str, pa.Table], memory_tables: dict[str, pa.Table]) -> None:
    assert set(spark_tables) == set(memory_tables)
    keys = {
        "postings": ["dataset_id", "column_id", "row_id"],
        "superkeys": ["dataset_id", "row_id"],
        "params": ["bits"],
        "widths": ["width"],
    }
    for name, key in keys.items():
        got = sorted_frame(spark_tables[name].to_pandas(), key)
        want = sorted_frame(memory_tables[name].to_pandas(), key)
        pd.testing.assert_frame_equal(got[want.columns.tolist()], want, check_dtype=False)


@pytest.mark.parametrize("bits", [None, 512])
def test_spark_build_equals_in_memory(spark, bits) -> None:
    from lakejoin.spark.mate import build_tables

    cells = cells_from_frames(lake(["challenges", "bakers", "ratings"]))
    assert cells.schema.equals(CELLS_SCHEMA)
    tables = collect(build_tables(spark, to_spark(spark, cells), n_shards=N_SHARDS, bits=bits))
    memory = build_from_cells(cells, bits, n_shards=N_SHARDS)
    assert_same_tables(tables, memory)
    assert len(set(tables["postings"]["shard"].to_pylist())) > 1
    # And it serves the same answers once loaded.
    query = lake(["challenges"])["bakeoff/challenges"]
    assert load(tables).search(query, ["series", "baker"], k=3) == load(memory).search(query, ["series", "baker"], k=3)


def test_incremental_build_from_rewritten_shards_equals_full_build(spark) -> None:
    from lakejoin.spark.mate import STALENESS_LIMIT, build_tables, staleness

    before = cells_from_frames(lake(["challenges", "bakers", "ratings"]))
    current = collect(build_tables(spark, to_spark(spark, before), n_shards=N_SHARDS, bits=256))

    ratings = lake(["ratings"])["bakeoff/ratings"]
    edited = ratings.assign(uk_airdate=ratings["uk_airdate"].astype(str) + " (rev)")
    # The added dataset sorts last, so cells_from_frames keeps every other column id.
    added = {"zz/episodes": lake(["episodes"])["bakeoff/episodes"]}
    after = cells_from_frames(lake(["challenges", "bakers"], {"bakeoff/ratings": edited, **added}))
    assert set(after.filter(pc.equal(after["dataset_id"], "bakeoff/bakers"))["column_id"].to_pylist()) == set(
        before.filter(pc.equal(before["dataset_id"], "bakeoff/bakers"))["column_id"].to_pylist()
    )
    for changed, cells in [
        ({"bakeoff/ratings", "zz/episodes"}, after),
        ({"bakeoff/bakers"}, None),
    ]:  # edit + add, remove
        if cells is None:
            cells = after.filter(pc.invert(pc.is_in(after["dataset_id"], pa.array(sorted(changed)))))
        rewritten = shards_of(changed, N_SHARDS)
        delta = cells.filter(pc.is_in(cells["dataset_id"], pa.array(sorted(changed))))
        previous = frames_of(spark, in_shards(current, rewritten, GLOBAL_TABLES))
        update = build_tables(spark, to_spark(spark, delta), n_shards=N_SHARDS, previous=previous, changed=changed)
        update = collect(update)
        assert staleness({name: update[name] for name in GLOBAL_TABLES}) == 0.0 < STALENESS_LIMIT
        assert set(update["postings"]["shard"].to_pylist()) <= set(rewritten)
        current = apply_update(current, update, rewritten, GLOBAL_TABLES)
        assert_same_tables(current, build_from_cells(cells, 256, n_shards=N_SHARDS))


def test_incremental_build_keeps_previous_rows_untouched(spark) -> None:
    """Rows of unchanged datasets come from ``previous`` (not recomputed): a marker survives."""
    from lakejoin.spark.mate import build_tables

    cells = cells_from_frames(lake(["bakers"]))
    previous = build_from_cells(cells, 128)
    marked = previous["superkeys"].to_pandas()
    marked.loc[marked.dataset_id == "bakeoff/bakers", "superkey"] = b"\xff" * 16
    previous["superkeys"] = pa.Table.from_pandas(marked, schema=previous["superkeys"].schema, preserve_index=False)
    delta = cells.filter(pc.equal(cells["dataset_id"], "odd/values"))
    updated = build_tables(
        spark, to_spark(spark, delta), n_shards=1, previous=frames_of(spark, previous), changed={"odd/values"}
    )
    keys = updated["superkeys"].toPandas()
    assert (keys[keys.dataset_id == "bakeoff/bakers"]["superkey"].map(bytes) == b"\xff" * 16).all()
    assert updated["superkeys"].where("bits != 128").count() == 0


@pytest.mark.parametrize("bits", [None, 128])
def test_full_build_from_the_cell_files_equals_in_memory(spark, tmp_path: Path, bits) -> None:
    """``write_full_build`` (executor tasks reading ``lake/cells`` files shard by shard) writes
    the tables the in-memory build makes of the cells in the columns MATE indexes: a column
    indexed by another family only and a cell without a value are left out."""
    from lakejoin.config import LakeConfig
    from lakejoin.lake import delta as lake_delta
    from lakejoin.lake.schemas import CELLS, COLUMNS
    from lakejoin.spark.mate import write_full_build

    cells = cells_from_frames(lake(["challenges", "bakers", "ratings", "episodes"]))
    ratings_columns = sorted(
        set(cells.filter(pc.equal(cells["dataset_id"], "bakeoff/ratings"))["column_id"].to_pylist())
    )
    other_family = ratings_columns[1]  # indexed by JOSIE only
    catalog = cells.group_by(["dataset_id", "column_id"]).aggregate([])
    indexed_by = [["josie"] if c == other_family else ["josie", "mate"] for c in catalog["column_id"].to_pylist()]
    catalog = catalog.append_column("indexed_by", pa.array(indexed_by, pa.list_(pa.string())))
    no_value = pa.table(
        {
            "dataset_id": ["bakeoff/bakers"],
            "column_id": catalog["column_id"][0:1],
            "row_id": [10_000],
            "value": pa.array([None], pa.string()),
            "raw": ["NA"],
        },
        schema=CELLS_SCHEMA,
    )
    config = LakeConfig.from_args(str(tmp_path / "home"), quiet=True)
    lake_delta.write_rows(
        config.table_path(CELLS), pa.concat_tables([cells, no_value]), CELLS_SCHEMA, partition_by=["dataset_id"]
    )
    lake_delta.write_rows(config.table_path(COLUMNS), catalog, catalog.schema)

    versions = write_full_build(spark, config, N_SHARDS, bits)
    written = {name: lake_delta.read_arrow(config.table_path(f"index/mate/{name}")) for name in versions}
    mate_cells = cells.filter(pc.not_equal(cells["column_id"], other_family))
    assert_same_tables(written, build_from_cells(mate_cells, bits, n_shards=N_SHARDS))
    assert other_family not in set(written["postings"]["column_id"].to_pylist())
    shards = set(written["postings"]["shard"].to_pylist())
    assert len(shards) > 1
    assert all(
        len(lake_delta.files_of(lake_delta.open_table(config.table_path("index/mate/postings")), {"shard": [s]})) == 1
        for s in shards
    )
