"""Column profiles: type, counts, uniqueness, key candidacy, semantic hint, index selection.

Profiling is split in two:

1. *Aggregates* of one column (``ColumnAggregates``): counts, how many values match each
   pattern of ``types``/``semantic``, numeric and length statistics, the most frequent
   values. ``table_aggregates`` computes them for every column of a table at once, vectorized
   over the table's distinct texts (the pipeline runs it in each file's parse task, on the
   Spark executors, so no stage reads the cells again to profile them); ``profile_values``
   profiles one in-memory column.
2. ``finish_profile(aggregates)`` derives the profile row: the fields of
   ``lakejoin.lake.schemas.COLUMNS_SCHEMA`` plus ``PROFILE_EXTRA_FIELDS``.

Definitions (all over the column's non-null cells; "value" is the normalized value, the
"original" is the cell's text before normalization):

- ``count``: non-null cells; ``nulls = rows - count``; ``null_fraction = nulls / rows``.
- ``distinct``: exact number of distinct values (no sketch); ``uniqueness = distinct / count``.
- ``numeric_*``: min, max, mean and sample standard deviation of the values, for ``integer``
  and ``decimal`` columns only (null otherwise; stddev null below two values).
- ``length_*``: min, max and mean length in characters of the originals.
- ``top_values``: JSON list of the ``TOP_K`` most frequent values, ``[{"value", "count"}]``,
  by count descending then value ascending.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.lake.schemas import COLUMNS_SCHEMA
from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import semantic, types
from lakejoin.profile.keys import is_key_candidate
from lakejoin.profile.selection import DEFAULT_RULES, SelectionRules, indexed_by

TOP_K = 5

PROFILE_EXTRA_FIELDS = [
    pa.field("numeric_min", pa.float64()),
    pa.field("numeric_max", pa.float64()),
    pa.field("numeric_mean", pa.float64()),
    pa.field("numeric_stddev", pa.float64()),
    pa.field("length_min", pa.int64()),
    pa.field("length_max", pa.int64()),
    pa.field("length_mean", pa.float64()),
    pa.field("top_values", pa.string()),
]
PROFILE_SCHEMA = pa.schema([*COLUMNS_SCHEMA, *PROFILE_EXTRA_FIELDS])

# Every per-value test whose match count the aggregates carry: pattern name -> regex.
VALUE_PATTERNS: dict[str, str] = {**types.VALUE_PATTERNS, **semantic.VALUE_PATTERNS}
ORIGINAL_PATTERNS: dict[str, str] = types.ORIGINAL_PATTERNS
VALUE_SETS: dict[str, frozenset[str]] = semantic.VALUE_SETS
MATCH_KEYS: tuple[str, ...] = (*VALUE_PATTERNS, *ORIGINAL_PATTERNS, *VALUE_SETS)

ColumnAggregates = Mapping[str, Any]
"""Keys: column_id, dataset_id, ordinal, name, rows, count, distinct, matches (name -> count
over ``MATCH_KEYS``), numeric_count, numeric_min, numeric_max, numeric_mean, numeric_sumsq
(sum of squared deviations from the mean), length_min, length_max, length_sum, top (list of
(value, count), at least the TOP_K most frequent)."""


def finish_profile(agg: ColumnAggregates, rules: SelectionRules = DEFAULT_RULES) -> dict[str, Any]:
    """The profile row (``PROFILE_SCHEMA`` fields) of one column from its aggregates."""
    count, rows, distinct = agg.get("count") or 0, agg["rows"], agg.get("distinct") or 0
    if rows is None or rows < count:
        raise ValueError(f"column {agg['column_id']}: rows ({rows}) must be at least the non-null count ({count})")
    matches = {key: agg.get("matches", {}).get(key) or 0 for key in MATCH_KEYS}
    column_type = types.infer_type(matches, count)
    numeric = column_type in types.NUMERIC_TYPES
    numeric_count = agg.get("numeric_count") or 0
    profile: dict[str, Any] = {
        "column_id": agg["column_id"],
        "dataset_id": agg["dataset_id"],
        "ordinal": agg["ordinal"],
        "name": agg["name"],
        "header": agg.get("header"),
        "name_source": agg.get("name_source"),
        "type": column_type,
        "count": count,
        "distinct": distinct,
        "nulls": rows - count,
        "null_fraction": (rows - count) / rows if rows else 0.0,
        "uniqueness": distinct / count if count else 0.0,
        "numeric_min": agg.get("numeric_min") if numeric else None,
        "numeric_max": agg.get("numeric_max") if numeric else None,
        "numeric_mean": agg.get("numeric_mean") if numeric else None,
        "numeric_stddev": math.sqrt(agg["numeric_sumsq"] / (numeric_count - 1))
        if numeric and numeric_count > 1
        else None,
        "length_min": agg.get("length_min") if count else None,
        "length_max": agg.get("length_max") if count else None,
        "length_mean": agg["length_sum"] / count if count else None,
        "top_values": json.dumps(
            [{"value": v, "count": n} for v, n in sorted(agg.get("top") or [], key=lambda vn: (-vn[1], vn[0]))[:TOP_K]]
        ),
    }
    profile["key_candidate"] = is_key_candidate(profile)
    profile["semantic_type"] = semantic.infer_semantic_type(profile, matches)
    profile["indexed_by"] = indexed_by(profile, rules)
    return profile


def column_aggregates(
    originals: Sequence[str | None] | NormalizedColumn,
    *,
    name: str,
    rows: int | None = None,
    column_id: int = 0,
    dataset_id: str = "",
    ordinal: int = 0,
) -> dict[str, Any]:
    """The aggregates of one column given its cells' original texts (None for a missing cell),
    or their ``NormalizedColumn`` (``table_aggregates`` of a one-column table)."""
    encoded = (
        originals if isinstance(originals, NormalizedColumn) else NormalizedColumn.of(pa.array(originals, pa.string()))
    )
    aggregates = table_aggregates(
        [encoded], [name], column_ids=[column_id], dataset_id=dataset_id, first_ordinal=ordinal
    )[0]
    return aggregates if rows is None else {**aggregates, "rows": rows}


def table_aggregates(
    columns: Sequence[NormalizedColumn],
    names: Sequence[str],
    *,
    column_ids: Sequence[int],
    dataset_id: str = "",
    first_ordinal: int = 0,
) -> list[dict[str, Any]]:
    """The aggregates of every column of one table (rows: its cells, nulls included).

    Every per-cell quantity depends on the cell's text alone, so each test runs once per
    distinct text or value of the whole table, with Arrow compute (RE2), and is summed per
    column weighted by occurrences: a table costs a few dozen vectorized calls however many
    columns it has. Sums stay exact: ``math.fsum`` sees each number as often as its column
    holds it.
    """
    texts = _kept_texts(columns)  # one row per (column, distinct original text) with a value, by column
    values = pc.dictionary_encode(texts["value"])  # the table's distinct values
    dictionary, n_values, n_columns = values.dictionary, max(len(values.dictionary), 1), len(columns)
    keys, group_of_text = np.unique(texts["column"] * n_values + values.indices.to_numpy(), return_inverse=True)
    group_column, group_value = keys // n_values, keys % n_values  # one group per (column, distinct value), by column
    frequency = np.bincount(group_of_text.reshape(-1), weights=texts["n"], minlength=len(keys)).astype(np.int64)

    def per_column(weights: np.ndarray, of: np.ndarray = group_column) -> np.ndarray:
        return np.bincount(of, weights=weights, minlength=n_columns).astype(np.int64)

    value_texts, original_texts = RegexMatcher(dictionary), RegexMatcher(texts["original"])
    matches = {
        key: per_column(frequency * value_texts.matching(pattern)[group_value])
        for key, pattern in VALUE_PATTERNS.items()
    }
    for key, members in VALUE_SETS.items():
        member = pc.is_in(dictionary, pa.array(sorted(members), pa.string())).to_numpy(zero_copy_only=False)
        matches[key] = per_column(frequency * member[group_value])
    for key, pattern in ORIGINAL_PATTERNS.items():
        matches[key] = per_column(texts["n"] * original_texts.matching(pattern), texts["column"])
    decimal = value_texts.matching(types.VALUE_PATTERNS["decimal"])
    numbers = np.full(len(dictionary), np.nan)
    numbers[decimal] = pc.cast(pc.filter(dictionary, decimal), pa.float64()).to_numpy(zero_copy_only=False)
    lengths = pc.utf8_length(texts["original"]).to_numpy(zero_copy_only=False)
    ranks = np.empty(len(dictionary), np.int64)
    ranks[pc.sort_indices(dictionary).to_numpy()] = np.arange(len(dictionary))  # string order of the values
    text_bounds = np.searchsorted(texts["column"], np.arange(n_columns + 1))
    group_bounds = np.searchsorted(group_column, np.arange(n_columns + 1))
    entries = []
    for j in range(n_columns):
        groups, own_texts = slice(group_bounds[j], group_bounds[j + 1]), slice(text_bounds[j], text_bounds[j + 1])
        top = group_bounds[j] + np.lexsort((ranks[group_value[groups]], -frequency[groups]))[:TOP_K]
        entries.append(
            _column_entry(
                names[j],
                column_ids[j],
                dataset_id,
                first_ordinal + j,
                len(columns[j].indices),
                {key: int(m[j]) for key, m in matches.items()},
                frequency[groups],
                numbers[group_value[groups]],
                lengths[own_texts],
                texts["n"][own_texts],
                [(dictionary[int(group_value[g])].as_py(), int(frequency[g])) for g in top],
            )
        )
    return entries


def _kept_texts(columns: Sequence[NormalizedColumn]) -> dict[str, Any]:
    """The distinct original texts of all columns whose value is not null-like, with their
    column, normalized value and occurrences ``n``."""
    parts = []
    for j, column in enumerate(columns):
        n = np.bincount(
            column.indices.drop_null().to_numpy(zero_copy_only=False), minlength=len(column.originals)
        ).astype(np.int64)
        keep = pc.is_valid(column.normalized)
        parts.append(
            (
                np.full(pc.sum(keep).as_py() or 0, j, np.int64),
                column.originals.filter(keep),
                column.normalized.filter(keep),
                n[keep.to_numpy(zero_copy_only=False)],
            )
        )
    return {
        "column": np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64),
        "original": pa.concat_arrays([p[1] for p in parts]) if parts else pa.array([], pa.string()),
        "value": pa.concat_arrays([p[2] for p in parts]) if parts else pa.array([], pa.string()),
        "n": np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64),
    }


def _column_entry(
    name: str,
    column_id: int,
    dataset_id: str,
    ordinal: int,
    rows: int,
    matches: dict[str, int],
    frequency: np.ndarray,
    group_numbers: np.ndarray,
    lengths: np.ndarray,
    n_texts: np.ndarray,
    top: list[tuple[str, int]],
) -> dict[str, Any]:
    """One column's aggregates (``ColumnAggregates``) from its slices of the table's arrays:
    per distinct value its frequency and number (NaN if none), per distinct text its length."""
    numeric = ~np.isnan(group_numbers)
    numbers = list(zip(group_numbers[numeric].tolist(), frequency[numeric].tolist()))
    numeric_count = int(frequency[numeric].sum())
    mean = math.fsum(_repeated(numbers)) / numeric_count if numbers else None
    return {
        "column_id": column_id,
        "dataset_id": dataset_id,
        "ordinal": ordinal,
        "name": name,
        "rows": rows,
        "count": int(frequency.sum()),
        "distinct": len(frequency),
        "matches": {key: matches.get(key, 0) for key in MATCH_KEYS},
        "numeric_count": numeric_count,
        "numeric_min": min((x for x, _ in numbers), default=None),
        "numeric_max": max((x for x, _ in numbers), default=None),
        "numeric_mean": mean,
        "numeric_sumsq": math.fsum(_repeated([((x - mean) ** 2, n) for x, n in numbers])) if numbers else None,
        "length_min": int(lengths.min()) if len(lengths) else None,
        "length_max": int(lengths.max()) if len(lengths) else None,
        "length_sum": int((lengths * n_texts).sum()),
        "top": top,
    }


class RegexMatcher:
    """An array of texts to test against many patterns: ``re.search(pattern, text)`` as a
    boolean mask. Arrow's RE2 runs the patterns (all RE2-compatible); RE2's ``$`` is end of text
    while Python's also matches before a final newline, so texts holding a newline (found once
    per array) are decided by ``re`` itself."""

    def __init__(self, texts: pa.Array) -> None:
        self.texts = texts
        self.with_newline = np.flatnonzero(
            pc.fill_null(pc.match_substring(texts, "\n"), False).to_numpy(zero_copy_only=False)
        )

    def matching(self, pattern: str) -> np.ndarray:
        """Which texts ``re.search(pattern, text)`` finds a match in, as a boolean mask (a null: False)."""
        mask = pc.fill_null(pc.match_substring_regex(self.texts, pattern), False).to_numpy(zero_copy_only=False)
        if len(self.with_newline):
            regex = re.compile(pattern)
            mask = mask.copy()
            for i in self.with_newline:
                mask[i] = regex.search(self.texts[int(i)].as_py()) is not None
        return mask


def _repeated(weighted: Sequence[tuple[float, int]]) -> Iterator[float]:
    """Each number as many times as its weight (for ``math.fsum``: exact, order-free)."""
    return chain.from_iterable(repeat(x, n) for x, n in weighted)


def profile_values(
    originals: Sequence[str | None], *, name: str, rules: SelectionRules = DEFAULT_RULES, **ids: Any
) -> dict[str, Any]:
    """Profile one in-memory column (``column_aggregates`` then ``finish_profile``)."""
    return finish_profile(column_aggregates(originals, name=name, **ids), rules)
