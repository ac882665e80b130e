"""Pure profiling logic (lakejoin.profile): types, semantic hints, keys, index selection."""

from __future__ import annotations

import json

import pytest

from lakejoin.profile import PROFILE_SCHEMA, column_aggregates, finish_profile, profile_values
from lakejoin.profile.selection import DEFAULT_RULES, SelectionRules, indexed_by


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "2", "-3", None, "2019.0"], "integer"),
        (["1", "2.5", "1e-05"], "decimal"),
        (["yes", "No", "Y"], "boolean"),
        (["2013-01-01", "2013-12-31"], "date"),
        (["2013-01-01T06:00:00Z", "2013-01-01"], "datetime"),
        (["01001", "02110", "10001"], "identifier"),  # leading zeros: codes, not integers
        (["UA", "AA", "9E"], "identifier"),
        (["N14228", "n102uw"], "identifier"),
        (["United Air Lines Inc.", "Delta"], "string"),
        (["red", "green"], "string"),
        (["1", "2", "x"], "string"),
        ([None, "n/a", ""], "string"),
    ],
)
def test_type_inference(values, expected):
    assert profile_values(values, name="c")["type"] == expected


def test_counts_nulls_and_stats():
    profile = profile_values(["10", "20", "20", None, "NA", "30"], name="c")
    assert (profile["count"], profile["distinct"], profile["nulls"]) == (4, 3, 2)
    assert profile["null_fraction"] == pytest.approx(2 / 6)
    assert profile["uniqueness"] == pytest.approx(3 / 4)
    assert (profile["numeric_min"], profile["numeric_max"], profile["numeric_mean"]) == (10, 30, 20)
    assert profile["numeric_stddev"] == pytest.approx((200 / 3) ** 0.5)
    assert json.loads(profile["top_values"])[0] == {"value": "20", "count": 2}
    assert set(profile) == set(PROFILE_SCHEMA.names)


def test_string_columns_have_no_numeric_stats_but_lengths():
    profile = profile_values([" Ab ", "cde"], name="c")
    assert profile["numeric_mean"] is None
    assert (profile["length_min"], profile["length_max"], profile["length_mean"]) == (3, 4, 3.5)


def test_top_values_break_ties_by_value():
    top = json.loads(profile_values(["b", "a", "c", "c", "d", "e", "f"], name="c")["top_values"])
    assert [t["value"] for t in top] == ["c", "a", "b", "d", "e"]


@pytest.mark.parametrize(
    ("values", "name", "expected"),
    [
        (["a@b.org", "x.y@example.com"], "contact", "email"),
        (["https://a.org/x", "www.example.com"], "link", "url"),
        (["(212) 555-1234", "+1 212-555-1234"], "tel", "phone"),
        (["2020-01-31", "1999-12-01"], "d", "iso_date"),
        (["US", "FR", "KR", "JP"], "iso2", "country_code"),
        (["NY", "CA", "TX"], "state", "us_state"),
        (["10001", "02110"], "zip", "postal_code"),
        (["01001", "36061"], "county_fips", "fips_code"),
        (["01001", "36061"], "code", "numeric_code"),
        (["40.7", "-74.1", "33.9"], "lat", "latitude"),
        (["-74.1", "151.2"], "lon", "longitude"),
        (["181.62", "-20.4"], "long", None),  # outside [-180, 180]: not a longitude
        (["40.7", "33.9"], "temp", None),
    ],
)
def test_semantic_hints(values, name, expected):
    assert profile_values(values, name=name)["semantic_type"] == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "2", "3"], True),
        (["UA", "ua", "AA"], False),  # equal after normalization
        (["1", "2", None], False),  # a null
        (["1.5", "2.5", "3.5"], False),  # decimals are not keys
        (["x"], False),  # too few rows
        (["a" * 100, "b" * 100], False),  # free text
    ],
)
def test_key_candidate(values, expected):
    assert profile_values(values, name="c")["key_candidate"] is expected


def test_default_selection_leaves_numeric_columns_to_mate():
    assert profile_values(["1", "2"], name="c")["indexed_by"] == ["mate"]
    assert profile_values(["x y", "z"], name="c")["indexed_by"] == ["josie", "lshensemble", "mate", "pexeso", "qgram"]
    assert profile_values(["true", "false"], name="c")["indexed_by"] == ["josie", "lshensemble", "mate"]
    assert profile_values([None], name="c")["indexed_by"] == []


def test_pexeso_takes_label_like_strings_only():
    sentence = "a remark long enough to be free text rather than the label of an entity, past 64 characters"
    assert "pexeso" not in profile_values([sentence, sentence + " again"], name="remarks")["indexed_by"]
    assert "pexeso" not in profile_values(["N14228", "N24211"], name="tailnum")["indexed_by"]  # identifier codes
    assert "pexeso" in profile_values(["Korea, Rep.", "Viet Nam"], name="country")["indexed_by"]
    every_text = SelectionRules(pexeso=frozenset({"string", "identifier"}), label_max_mean_length=None)
    assert "pexeso" in profile_values([sentence, sentence + " again"], name="remarks", rules=every_text)["indexed_by"]
    assert "pexeso" in profile_values(["N14228", "N24211"], name="tailnum", rules=every_text)["indexed_by"]


def test_selection_rules_are_configurable():
    rules = SelectionRules(pexeso=frozenset({"string"}), josie=DEFAULT_RULES.josie | {"integer"}, min_distinct=3)
    assert indexed_by({"type": "identifier", "distinct": 5}, rules) == ["josie", "lshensemble", "mate", "qgram"]
    assert indexed_by({"type": "integer", "distinct": 5}, rules) == ["josie", "mate"]
    assert indexed_by({"type": "string", "distinct": 2}, rules) == []
    assert profile_values(["1", "2", "3"], name="c", rules=rules)["indexed_by"] == ["josie", "mate"]


def test_selection_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown types"):
        SelectionRules(mate=frozenset({"float"}))
    with pytest.raises(ValueError, match="lacks"):
        indexed_by({"type": "string"})


def test_rows_below_count_is_an_error():
    aggregates = column_aggregates(["a", "b"], name="c", rows=1)
    with pytest.raises(ValueError, match="rows"):
        finish_profile(aggregates)
