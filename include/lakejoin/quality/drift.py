"""Drift of a dataset across versions, checked with Great Expectations (GE 1.x).

The first profiled version of a dataset yields an ``ExpectationSuite`` (``build_suite``);
every later version is validated against that suite (``validate_version``) and each failed
expectation becomes a drift item ``{kind, column, detail}``:

============================================  ================  ==============================
expectation (from the first version)          when               drift ``kind``
============================================  ================  ==============================
``ExpectTableColumnsToMatchSet`` (exact)       always             ``column_added``/``_removed``
``ExpectColumnToExist``                        every column       (reported as removed)
``ExpectColumnValuesToMatchRegex``             type not string    ``type_changed``
``ExpectColumnValuesToNotBeNull`` (mostly)     null share < 95 %  ``null_spike``
``ExpectColumnValuesToBeUnique``               key candidates     ``key_duplicates``
``ExpectColumnValuesToBeInSet``                <= TOP_K values    ``new_values``
============================================  ================  ==============================

Values are validated after ``lakejoin.normalize.normalize_value`` (null-like text is null,
numbers canonical), so the type regexes are those of ``lakejoin.profile.types`` and the
suite states the profile. A null spike is a null share above the first version's plus
``NULL_TOLERANCE``. Results are rows of ``quality/validations`` (``VALIDATIONS_SCHEMA``);
each row carries the suite it was checked against as JSON, so the first row of a dataset
holds its baseline (``baseline_suite``). Great Expectations is imported on first use: it
takes seconds to import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import TOP_K, finish_profile, profile_values, table_aggregates
from lakejoin.profile.types import VALUE_PATTERNS
from lakejoin.quality.expectations import validate

if TYPE_CHECKING:  # imported lazily at run time: importing GE takes seconds
    from great_expectations import ExpectationSuite
    from great_expectations.data_context import EphemeralDataContext

NULL_TOLERANCE = 0.05


def _non_capturing(pattern: str) -> str:
    """pandas warns on groups in ``str.contains``; the patterns need grouping only."""
    return re.sub(r"\((?!\?)", "(?:", pattern)


TYPE_REGEX = {
    name: _non_capturing(pattern)
    for name, pattern in {
        "integer": VALUE_PATTERNS["integer"],
        "decimal": VALUE_PATTERNS["decimal"],
        "boolean": VALUE_PATTERNS["boolean"],
        "date": VALUE_PATTERNS["date"],
        "datetime": f"({VALUE_PATTERNS['date']})|({VALUE_PATTERNS['datetime']})",
        "identifier": VALUE_PATTERNS["token"],
    }.items()
}

DRIFT_TYPE = pa.struct([("kind", pa.string()), ("column", pa.string()), ("detail", pa.string())])
VALIDATIONS_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("version", pa.int64()),
        ("suite", pa.string()),  # the ExpectationSuite as JSON
        ("success", pa.bool_()),
        ("drift", pa.list_(DRIFT_TYPE)),
        ("validated_at", pa.timestamp("us", tz="UTC")),
        ("result_json", pa.string()),  # the GE validation result as JSON
    ]
)


@cache
def _ge_context() -> EphemeralDataContext:
    """The process's ephemeral GE context: suites and results need one to exist."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


def normalized_table(
    table: pa.Table | pd.DataFrame | Sequence[NormalizedColumn], names: Sequence[str] | None = None
) -> pa.Table:
    """The table with every cell normalized (null-like cells become nulls), as it is validated;
    from the table, or from its ``NormalizedColumn``s and column names."""
    if isinstance(table, (pa.Table, pd.DataFrame)):
        text = as_text_table(table)
        table, names = NormalizedColumn.of_columns(text.columns), text.column_names
    if names is None:
        raise TypeError("normalized_table: names are needed with NormalizedColumns")
    return pa.table({name: column.values() for name, column in zip(names, table)})


def as_text_table(table: pa.Table | pd.DataFrame) -> pa.Table:
    """Every column as text (a staged file already is; a pandas frame's cells become ``str``)."""
    if isinstance(table, pa.Table):
        return table
    return pa.table(
        {
            str(name): pa.array([None if pd.isna(v) else str(v) for v in table[name].tolist()], pa.string())
            for name in table.columns
        }
    )


def profile_table(table: pa.Table | pd.DataFrame) -> list[dict[str, Any]]:
    """Profiles of every column of an in-memory table (``lakejoin.profile.table_aggregates``)."""
    text = as_text_table(table)
    aggregates = table_aggregates(
        NormalizedColumn.of_columns(text.columns), text.column_names, column_ids=[0] * text.num_columns
    )
    return [finish_profile(a) for a in aggregates]


def build_suite(dataset_id: str, profiles: Sequence[Mapping[str, Any]]) -> ExpectationSuite:
    """The expectation suite a dataset's first version states (see the module table)."""
    import great_expectations as gx

    _ge_context()
    expect = gx.expectations
    ordered = sorted(profiles, key=lambda p: p["ordinal"])
    # Collected first and handed to the constructor: ``add_expectation`` compares each new
    # expectation with every one already added (quadratic: 89 s for a 642-column table).
    expectations: list[gx.expectations.Expectation] = [
        expect.ExpectTableColumnsToMatchSet(column_set=[p["name"] for p in ordered], exact_match=True)
    ]
    for profile in ordered:
        column, meta = profile["name"], {"type": profile["type"]}
        expectations.append(expect.ExpectColumnToExist(column=column))
        if profile["type"] in TYPE_REGEX:
            expectations.append(
                expect.ExpectColumnValuesToMatchRegex(column=column, regex=TYPE_REGEX[profile["type"]], meta=meta)
            )
        allowed_nulls = profile["null_fraction"] + NULL_TOLERANCE
        if allowed_nulls < 1:
            expectations.append(expect.ExpectColumnValuesToNotBeNull(column=column, mostly=round(1 - allowed_nulls, 6)))
        if profile["key_candidate"]:
            expectations.append(expect.ExpectColumnValuesToBeUnique(column=column))
        if 0 < profile["distinct"] <= TOP_K < profile["count"]:
            values = sorted(v["value"] for v in json.loads(profile["top_values"]))
            expectations.append(expect.ExpectColumnValuesToBeInSet(column=column, value_set=values))
    return gx.ExpectationSuite(name=f"lakejoin.{dataset_id}", expectations=expectations)


def suite_from_json(text: str) -> ExpectationSuite:
    """An ``ExpectationSuite`` from the JSON stored in ``quality/validations.suite``."""
    import great_expectations as gx

    _ge_context()
    return gx.ExpectationSuite(**json.loads(text))


def suite_json(suite: ExpectationSuite) -> str:
    """The suite as canonical JSON (sorted keys), so equal suites compare equal as text."""
    return json.dumps(suite.to_json_dict(), sort_keys=True)


def _drift_items(result: dict, table: pa.Table) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    removed: set[str] = set()
    for outcome in result["results"]:
        config, details = outcome["expectation_config"], outcome.get("result") or {}
        if outcome["success"] or config["type"] != "expect_table_columns_to_match_set":
            continue
        expected, observed = (
            set(config["kwargs"]["column_set"]),
            set(details.get("observed_value") or table.column_names),
        )
        removed = expected - observed
        items += [
            {"kind": "column_added", "column": c, "detail": "column not in the first version"}
            for c in sorted(observed - expected)
        ]
        items += [
            {"kind": "column_removed", "column": c, "detail": "column of the first version is missing"}
            for c in sorted(removed)
        ]
    for outcome in result["results"]:
        config, details = outcome["expectation_config"], outcome.get("result") or {}
        column = config["kwargs"].get("column")
        if outcome["success"] or column is None or column in removed:
            continue
        items.append(_column_drift(config, details, column, table))
    return items


def _column_drift(config: dict, details: dict, column: str, table: pa.Table) -> dict[str, str]:
    kind = config["type"]
    examples = ", ".join(repr(v) for v in list(dict.fromkeys(details.get("partial_unexpected_list") or []))[:3])
    if kind == "expect_column_values_to_match_regex":
        now = profile_values(table.column(column).to_pylist(), name=column)["type"]
        detail = (
            f"type {config['meta']['type']} -> {now}: {details.get('unexpected_count')} values do not parse (e.g. "
            f"{examples})"
        )
        return {"kind": "type_changed", "column": column, "detail": detail}
    if kind == "expect_column_values_to_not_be_null":
        detail = (
            f"null share {details.get('unexpected_percent', 0):.1f}% exceeds the allowed "
            f"{100 * (1 - config['kwargs']['mostly']):.1f}%"
        )
        return {"kind": "null_spike", "column": column, "detail": detail}
    if kind == "expect_column_values_to_be_unique":
        return {
            "kind": "key_duplicates",
            "column": column,
            "detail": f"{details.get('unexpected_count')} cells repeat a key value (e.g. {examples})",
        }
    if kind == "expect_column_values_to_be_in_set":
        return {
            "kind": "new_values",
            "column": column,
            "detail": f"{details.get('unexpected_count')} cells outside the first version's values (e.g. {examples})",
        }
    return {"kind": kind, "column": column, "detail": json.dumps(details, default=str)[:500]}


def validate_version(
    dataset_id: str,
    version: int,
    table: pa.Table | pd.DataFrame,
    suite_text: str | None = None,
    profiles: Sequence[Mapping[str, Any]] | None = None,
    validated_at: datetime | None = None,
    normalized: pa.Table | None = None,
) -> dict[str, Any]:
    """Validate one dataset version; a ``quality/validations`` row (``VALIDATIONS_SCHEMA``).

    ``table`` holds the version's cells as text (the staged file). Without ``suite_text``
    this is the first version: its suite is built from ``profiles`` (the ``catalog/columns``
    rows of this version; profiled here when None) and the version is validated against it.
    ``normalized`` is ``normalized_table(table)`` when the caller has it already.
    """
    if not dataset_id:
        raise ValueError("dataset_id must be a non-empty string")
    normalized = normalized if normalized is not None else normalized_table(table)
    suite = (
        suite_from_json(suite_text)
        if suite_text
        else build_suite(dataset_id, profiles if profiles is not None else profile_table(table))
    )
    result = validate(suite.expectations, normalized, suite.name).to_json_dict()
    drift = _drift_items(result, normalized)
    return {
        "dataset_id": dataset_id,
        "version": int(version),
        "suite": suite_json(suite),
        "success": not drift,
        "drift": drift,
        "validated_at": validated_at or datetime.now(UTC),
        "result_json": json.dumps(result, default=str, sort_keys=True),
    }


def validations_table(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows from ``validate_version`` as an Arrow table the pipeline appends to ``quality/validations``."""
    return pa.Table.from_pylist(list(records), schema=VALIDATIONS_SCHEMA)


def baseline_suite(validations: pa.Table, dataset_id: str) -> str | None:
    """The suite JSON of ``dataset_id``'s first validated version, or None if it has none."""
    rows = [
        r for r in validations.select(["dataset_id", "version", "suite"]).to_pylist() if r["dataset_id"] == dataset_id
    ]
    return min(rows, key=lambda r: r["version"])["suite"] if rows else None
