"""The ingestion quality gate, written as Great Expectations 1.x suites.

A parsed table enters the lake only if it has at least one column and one row, at most
``max_columns`` columns, unique non-empty headers after the text normalization
(``lakejoin.normalize.normalize_text``: headers are names, so "NA" is no null), and at most ``max_malformed_share`` of
its rows
malformed. Failures are quarantined by ingestion with the GX result JSON as evidence.

Two batches are validated because GX expectations look at one frame at a time: the table
itself (shape), and a small structure frame (one row per header plus the parse statistics).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import pandas as pd
import pyarrow as pa

from lakejoin.normalize import normalize_text
from lakejoin.quality.drift import as_text_table
from lakejoin.quality.expectations import validate

# pandas names a blank header cell "Unnamed: <i>": that is an empty header, not a name
_PANDAS_BLANK_HEADER = re.compile(r"^unnamed: \d+(_level_\d+)?$")


@dataclass(frozen=True)
class GateLimits:
    """Thresholds of the gate."""

    max_columns: int = 2000
    min_rows: int = 1
    max_malformed_share: float = 0.05

    def __post_init__(self) -> None:
        if self.max_columns < 1 or self.min_rows < 0 or not 0 <= self.max_malformed_share <= 1:
            raise ValueError("GateLimits: max_columns >= 1, min_rows >= 0, max_malformed_share in [0, 1]")


@dataclass(frozen=True)
class GateResult:
    """The structural gate's verdict on a parsed table, and its validation result as JSON."""

    success: bool
    reason: str | None
    result_json: str


def normalized_header(name: object) -> str | None:
    """A header trimmed, collapsed and lowercased; None when it is empty. Headers are names, not
    values: "nA" (a sample size) or "NULL" stay headers, so the null-like rules do not apply."""
    text = normalize_text("" if name is None else name)
    return None if not text or _PANDAS_BLANK_HEADER.match(text) else text


def structure_table(table: pa.Table, malformed_rows: int) -> pa.Table:
    """One row per header (normalized), with the malformed-row share in the first row."""
    total = table.num_rows + malformed_rows
    headers = [normalized_header(c) for c in table.column_names]
    share = [malformed_rows / total if total else 0.0] + [None] * (len(headers) - 1)
    return pa.table(
        {"header": pa.array(headers, pa.string()), "malformed_share": pa.array(share[: len(headers)], pa.float64())}
    )


@lru_cache(maxsize=8)
def _suites(limits: GateLimits) -> dict[str, list[Any]]:
    """For each validated table, the expectations it must meet (built once per limits)."""
    import great_expectations as gx

    return {
        "table": [
            gx.expectations.ExpectTableColumnCountToBeBetween(min_value=1, max_value=limits.max_columns),
            gx.expectations.ExpectTableRowCountToBeBetween(min_value=max(1, limits.min_rows)),
        ],
        "structure": [
            gx.expectations.ExpectColumnValuesToNotBeNull(column="header"),
            gx.expectations.ExpectColumnValuesToBeUnique(column="header"),
            gx.expectations.ExpectColumnValuesToBeBetween(
                column="malformed_share", min_value=0, max_value=limits.max_malformed_share
            ),
        ],
    }


def _failure_reason(kind: str, result: dict[str, Any], limits: GateLimits) -> str:
    outcome = result.get("result") or {}
    if kind == "expect_table_column_count_to_be_between":
        return f"{outcome.get('observed_value')} columns (need 1..{limits.max_columns})"
    if kind == "expect_table_row_count_to_be_between":
        return f"{outcome.get('observed_value')} rows (need at least {max(1, limits.min_rows)})"
    if kind == "expect_column_values_to_not_be_null":
        return f"{outcome.get('unexpected_count')} empty header(s)"
    if kind == "expect_column_values_to_be_unique":
        return (
            "duplicate headers after normalization: "
            f"{sorted(set(map(str, outcome.get('partial_unexpected_list') or [])))}"
        )
    if kind == "expect_column_values_to_be_between":
        share = (outcome.get("partial_unexpected_list") or [float("nan")])[0]
        return f"malformed-row share {share:.3f} above {limits.max_malformed_share}"
    return kind


def validate_table(
    table: pa.Table | pd.DataFrame | None,
    dataset_id: str,
    limits: GateLimits = GateLimits(),
    *,
    malformed_rows: int = 0,
) -> GateResult:
    """Run the gate on a parsed table. ``malformed_rows`` is how many rows the parser had to
    drop or repair; None for ``table`` means the file did not parse at all."""
    if malformed_rows < 0:
        raise ValueError("malformed_rows must not be negative")
    if table is None:
        reason = "table could not be parsed"
        return GateResult(False, reason, json.dumps({"dataset_id": dataset_id, "success": False, "reason": reason}))
    arrow = as_text_table(table)
    tables = {"table": arrow, "structure": structure_table(arrow, malformed_rows)}
    validations, reasons = {}, []
    for name, expectations in _suites(limits).items():
        outcome = validate(expectations, tables[name], f"lakejoin_{name}").to_json_dict()
        validations[name] = outcome
        reasons += [
            _failure_reason(r["expectation_config"]["type"], r, limits) for r in outcome["results"] if not r["success"]
        ]
    success = not reasons
    document = {"dataset_id": dataset_id, "success": success, "limits": asdict(limits), "validations": validations}
    return GateResult(success, None if success else "; ".join(reasons), json.dumps(document, default=str))
