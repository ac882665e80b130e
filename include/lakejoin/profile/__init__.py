"""Column profiles: type, counts, uniqueness, key candidacy, semantic hint, index selection.

Profiling is split in two so that Spark and plain Python share every decision:

1. *Aggregates* of one column (``ColumnAggregates``): counts, how many values match each
   pattern of ``types``/``semantic``, numeric and length statistics, the most frequent
   values. ``lakejoin.spark.profile.profile_columns`` computes them over ``lake/cells`` with
   Spark built-ins; ``profile_values`` computes them here from a list of raw values (the
   oracle the Spark job is tested against, and the path for a single in-memory table).
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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import pyarrow as pa

from lakejoin.lake.schemas import COLUMNS_SCHEMA
from lakejoin.normalize import normalize_value
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
# compiled once: ``re.search(pattern, ...)`` pays a cache lookup per call, a third of the time
# of profiling a column in Python
_VALUE_REGEXES = {key: re.compile(pattern) for key, pattern in VALUE_PATTERNS.items()}
_ORIGINAL_REGEXES = {key: re.compile(pattern) for key, pattern in ORIGINAL_PATTERNS.items()}
_DECIMAL = re.compile(types.VALUE_PATTERNS["decimal"])

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
        "numeric_stddev": math.sqrt(agg["numeric_sumsq"] / (numeric_count - 1)) if numeric and numeric_count > 1 else None,
        "length_min": agg.get("length_min") if count else None,
        "length_max": agg.get("length_max") if count else None,
        "length_mean": agg["length_sum"] / count if count else None,
        "top_values": json.dumps([{"value": v, "count": n} for v, n in sorted(agg.get("top") or [], key=lambda vn: (-vn[1], vn[0]))[:TOP_K]]),
    }
    profile["key_candidate"] = is_key_candidate(profile)
    profile["semantic_type"] = semantic.infer_semantic_type(profile, matches)
    profile["indexed_by"] = indexed_by(profile, rules)
    return profile


def column_aggregates(originals: Sequence[str | None], *, name: str, rows: int | None = None, column_id: int = 0, dataset_id: str = "", ordinal: int = 0) -> dict[str, Any]:
    """The aggregates of one column given its cells' original texts (None for a missing cell).

    Every per-cell quantity depends on the cell's text alone, so each distinct text is
    normalized and matched once and weighted by how often it occurs (columns repeat values;
    the pipeline's drift check profiles every staged file). Sums stay exact: ``math.fsum``
    sees each number as often as the column holds it.
    """
    texts = Counter(str(original) for original in originals if original is not None)
    cells = [(value, text, n) for text, n in texts.items() for value in [normalize_value(text)] if value is not None]
    frequencies: Counter[str] = Counter()
    for value, _, n in cells:
        frequencies[value] += n
    matches = {key: 0 for key in MATCH_KEYS}
    for value, n in frequencies.items():
        for key, regex in _VALUE_REGEXES.items():
            matches[key] += n if regex.search(value) else 0
        for key, members in VALUE_SETS.items():
            matches[key] += n if value in members else 0
    for _, original, n in cells:
        for key, regex in _ORIGINAL_REGEXES.items():
            matches[key] += n if regex.search(original) else 0
    numbers = [(float(value), n) for value, n in frequencies.items() if _DECIMAL.search(value)]
    numeric_count = sum(n for _, n in numbers)
    mean = math.fsum(_repeated(numbers)) / numeric_count if numbers else None
    lengths = [(len(original), n) for _, original, n in cells]
    return {
        "column_id": column_id,
        "dataset_id": dataset_id,
        "ordinal": ordinal,
        "name": name,
        "rows": len(originals) if rows is None else rows,
        "count": sum(n for _, _, n in cells),
        "distinct": len(frequencies),
        "matches": matches,
        "numeric_count": numeric_count,
        "numeric_min": min((x for x, _ in numbers), default=None),
        "numeric_max": max((x for x, _ in numbers), default=None),
        "numeric_mean": mean,
        "numeric_sumsq": math.fsum(_repeated([((x - mean) ** 2, n) for x, n in numbers])) if numbers else None,
        "length_min": min((length for length, _ in lengths), default=None),
        "length_max": max((length for length, _ in lengths), default=None),
        "length_sum": sum(length * n for length, n in lengths),
        "top": list(frequencies.items()),
    }


def _repeated(weighted: Sequence[tuple[float, int]]) -> Iterator[float]:
    """Each number as many times as its weight (for ``math.fsum``: exact, order-free)."""
    return chain.from_iterable(repeat(x, n) for x, n in weighted)


def profile_values(originals: Sequence[str | None], *, name: str, rules: SelectionRules = DEFAULT_RULES, **ids: Any) -> dict[str, Any]:
    """Profile one in-memory column (``column_aggregates`` then ``finish_profile``)."""
    return finish_profile(column_aggregates(originals, name=name, **ids), rules)
