"""Join materialization: "join this result onto my table" as a first-class operation.

:func:`join` returns the query table augmented with the found table's columns, each renamed
``<prefix>__<column>`` (prefix: the found table's name), plus ``<prefix>__match_count``: how many
rows of the found table matched the query row. Keys are compared the way the index compared
them: both sides through ``lakejoin.normalize.normalize_value``; a composite key (MATE) matches
when every one of its columns does; a null key cell never matches.

Key matching, by result:

- JOSIE / LSH Ensemble / MATE: equality of normalized values on the key columns of the result
  (MATE: its column ``mapping``);
- PEXESO: each distinct query value joins the found values within the search's distance ``τ`` in
  the search's embedding model (the semantic match PEXESO counted);
- ``transform="learn"`` (the default method, ``lakejoin.transform.DEFAULT_METHOD``) or a method
  name ``"cst" | "cst+" | "cst++" | "autojoin"``: a transformation learned between the two key columns
  (``lakejoin.transform.learn_and_join``) maps each query value to the found values it joins;
  any other string is applied as a program text (``apply_transformation``). One key column only.

One-to-many policy (a query row matching several found rows):

- ``first``: the first matching found row, in the found table's row order (row count kept);
- ``aggregate``: per found column, the distinct non-null values of all matching rows joined with
  ``" | "`` in row order (row count kept);
- ``explode``: one output row per match, as a SQL join (row count may grow).

``how="left"`` keeps query rows without a match (found columns null); ``how="inner"`` drops them.
The provenance (dataset, table, snapshot, method, keys, policy, transformation) is stored as JSON
under the ``lakejoin.provenance`` key of the table's schema metadata; :func:`write_table` writes
it into Parquet's metadata, or into ``<file>.provenance.json`` beside a CSV.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lakejoin.normalize import normalize_value
from lakejoin.sources.parse import clean_header

POLICIES = ("first", "aggregate", "explode")
HOWS = ("left", "inner")
FORMATS = ("parquet", "csv")
PROVENANCE_KEY = b"lakejoin.provenance"
AGGREGATE_SEPARATOR = " | "

Key = tuple[str, ...]


@dataclass(frozen=True)
class KeyPair:
    """A query column and the found column it is joined with."""

    query_column: str
    found_column: str


def key_pairs(result: Mapping[str, Any], query_columns: Sequence[str]) -> list[KeyPair]:
    """The (query column, found column) pairs a search result joins on."""
    if "mapping" in result:
        return [KeyPair(q, m["column"]) for q, m in result["mapping"].items()]
    if len(query_columns) != 1:
        raise ValueError(f"a {len(query_columns)}-column query has no single-column result to join")
    return [KeyPair(query_columns[0], result["column"])]


def join(
    query_table: pa.Table,
    found_table: pa.Table,
    pairs: Sequence[KeyPair],
    *,
    how: str = "left",
    policy: str = "first",
    transform: str | None = None,
    semantic: Mapping[str, Any] | None = None,
    prefix: str = "found",
    provenance: Mapping[str, Any] | None = None,
) -> pa.Table:
    """``query_table`` with ``found_table``'s columns joined on ``pairs`` (see the module doc).

    ``semantic`` (PEXESO results): ``{"model", "tau", "tau_scale"}`` of the search.
    """
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if not pairs:
        raise ValueError("no key columns to join on")
    for pair in pairs:
        if pair.query_column not in query_table.column_names:
            raise ValueError(f"query column {pair.query_column!r} not in the query table")
        if pair.found_column not in found_table.column_names:
            raise ValueError(f"found column {pair.found_column!r} not in the found table")
    if (transform or semantic) and len(pairs) != 1:
        raise ValueError("transformation and semantic joins take a single key column")
    query_keys = [_keys(query_table, [p.query_column for p in pairs])]
    found_keys = _keys(found_table, [p.found_column for p in pairs])
    details: dict[str, Any] = {}
    if transform:
        mapping, details = _transform_mapping(query_table, found_table, pairs[0], transform)
        query_keys = _expand(query_keys[0], mapping)
    elif semantic:
        query_keys = _expand(query_keys[0], _semantic_mapping(query_keys[0], found_keys, semantic))
    rows_of = _rows_by_key(found_keys)
    matches = [sorted({r for key in alternatives for r in rows_of.get(key, ())}) for alternatives in zip(*query_keys)]
    table = _assemble(query_table, found_table, matches, how, policy, prefix)
    meta = {
        **(provenance or {}),
        "keys": [{"query_column": p.query_column, "found_column": p.found_column} for p in pairs],
        "how": how,
        "policy": policy,
        "transform": details or None,
        "semantic": dict(semantic) if semantic else None,
        "rows_in": query_table.num_rows,
        "rows_out": table.num_rows,
        "query_rows_matched": sum(1 for m in matches if m),
        "created_at": datetime.now(UTC).isoformat(),
    }
    return table.replace_schema_metadata({PROVENANCE_KEY: json.dumps(meta, default=str).encode()})


def provenance_of(table: pa.Table) -> dict[str, Any]:
    """The provenance a joined table carries in its schema metadata; ValueError if it has none."""
    raw = (table.schema.metadata or {}).get(PROVENANCE_KEY)
    if raw is None:
        raise ValueError("the table carries no lakejoin provenance")
    return json.loads(raw)


def table_prefix(title: str | None, fallback: str) -> str:
    """A column-name prefix from a table title: ``bakeoff_ratings.csv`` -> ``bakeoff_ratings``."""
    stem = re.sub(r"\.(csv|tsv|txt|parquet|jsonl?|xlsx?)$", "", (title or "").strip(), flags=re.IGNORECASE)
    slug = re.sub(r"[^0-9A-Za-z]+", "_", stem).strip("_").lower()
    return slug or fallback


def write_table(table: pa.Table, path: str | Path, format: str | None = None) -> list[Path]:
    """Write ``table`` as Parquet (provenance in the schema metadata) or CSV (provenance in a
    ``.provenance.json`` sidecar); ``format`` defaults to the file's suffix. Returns the files."""
    path = Path(path)
    fmt = format or (
        "csv" if path.suffix.lower() == ".csv" else "parquet" if path.suffix.lower() in (".parquet", ".pq") else None
    )
    if fmt not in FORMATS:
        raise ValueError(
            f"cannot tell the output format of {path.name}: use a .parquet or .csv file, or give the format "
            f"({'/'.join(FORMATS)})"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(table, path)
        return [path]
    pacsv.write_csv(table.replace_schema_metadata(None), path)
    sidecar = path.with_name(path.name + ".provenance.json")
    sidecar.write_text(json.dumps(provenance_of(table), indent=2))
    return [path, sidecar]


# --- keys ----------------------------------------------------------------------------------


def _keys(table: pa.Table, columns: Sequence[str]) -> list[Key | None]:
    """Normalized key tuple of every row; None where a key cell is null-like."""
    normalized = [[normalize_value(v) for v in table.column(c).to_pylist()] for c in columns]
    return [None if any(v is None for v in row) else tuple(row) for row in zip(*normalized)]


def _rows_by_key(keys: Sequence[Key | None]) -> dict[Key, list[int]]:
    rows: dict[Key, list[int]] = {}
    for row, key in enumerate(keys):
        if key is not None:
            rows.setdefault(key, []).append(row)
    return rows


def _expand(keys: Sequence[Key | None], mapping: Mapping[Key, Sequence[Key]]) -> list[list[Key | None]]:
    """Per query row, the found keys it maps to, as columns of alternatives for ``zip``."""
    alternatives = [list(mapping.get(k, ())) if k is not None else [] for k in keys]
    width = max((len(a) for a in alternatives), default=0)
    return [[a[i] if i < len(a) else None for a in alternatives] for i in range(max(width, 1))]


def _transform_mapping(
    query: pa.Table, found: pa.Table, pair: KeyPair, transform: str
) -> tuple[dict[Key, list[Key]], dict[str, Any]]:
    from lakejoin.transform import DEFAULT_METHOD, LEARN, METHODS, apply_transformation, learn_and_join

    source = _distinct_text(query.column(pair.query_column).to_pylist())
    if transform == LEARN:
        transform = DEFAULT_METHOD
    if transform in METHODS:
        learned = learn_and_join(source, _distinct_text(found.column(pair.found_column).to_pylist()), method=transform)
        mapping: dict[Key, list[Key]] = {}
        for joined in learned["pairs"]:
            s, t = normalize_value(joined["source"]), normalize_value(joined["target"])
            if s is not None and t is not None and (t,) not in mapping.setdefault((s,), []):
                mapping[(s,)].append((t,))
        used = [t for t in learned["transformations"] if t["used"]]
        return mapping, {
            "method": transform,
            "direction": learned["direction"],
            "programs": [t["program"] for t in used],
        }
    outputs = apply_transformation(transform, source)
    mapping = {}
    for raw, out in zip(source, outputs):
        s, t = normalize_value(raw), normalize_value(out)
        if s is not None and t is not None:
            mapping[(s,)] = [(t,)]
    return mapping, {"program": transform}


def _distinct_text(values: Sequence[str | None]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v is not None and normalize_value(v) is not None))


def _semantic_mapping(
    query_keys: Sequence[Key | None], found_keys: Sequence[Key | None], semantic: Mapping[str, Any]
) -> dict[Key, list[Key]]:
    """Each distinct query value -> the found values within ``τ`` (Def. 1 of PEXESO, inclusive)."""
    from lakejoin.embed import embed

    queries = sorted({k[0] for k in query_keys if k is not None})
    targets = sorted({k[0] for k in found_keys if k is not None})
    if not queries or not targets:
        return {}
    radius = float(semantic["tau"]) * float(semantic["tau_scale"])
    q, t = embed(queries, semantic["model"]), embed(targets, semantic["model"])
    mapping: dict[Key, list[Key]] = {}
    for start in range(0, len(queries), 1024):  # bounded memory: 1,024 query rows of distances at a time
        block = q[start : start + 1024].astype(np.float64)
        squared = (
            (block**2).sum(1)[:, None]
            + (t.astype(np.float64) ** 2).sum(1)[None, :]
            - 2.0 * block @ t.T.astype(np.float64)
        )
        distances = np.sqrt(np.maximum(squared, 0.0))
        for i, row in enumerate(distances):
            near = np.flatnonzero(row <= radius)
            if len(near):
                mapping[(queries[start + i],)] = [(targets[j],) for j in near[np.argsort(row[near], kind="stable")]]
    return mapping


# --- output --------------------------------------------------------------------------------


def _assemble(
    query: pa.Table, found: pa.Table, matches: list[list[int]], how: str, policy: str, prefix: str
) -> pa.Table:
    found_names = found.column_names
    names = clean_header([*query.column_names, *(f"{prefix}__{n}" for n in found_names), f"{prefix}__match_count"])
    found_columns = [found.column(n).to_pylist() for n in found_names]
    query_rows: list[int] = []
    found_rows: list[list[int]] = []
    for row, rows in enumerate(matches):
        if not rows and how == "inner":
            continue
        if policy == "explode" and rows:
            query_rows.extend([row] * len(rows))
            found_rows.extend([r] for r in rows)
        else:
            query_rows.append(row)
            found_rows.append(rows[:1] if policy == "first" else rows)
    taken = query.take(pa.array(query_rows, pa.int64()))
    arrays = [taken.column(i) for i in range(query.num_columns)]
    for values in found_columns:
        arrays.append(pa.array([_cell(values, rows) for rows in found_rows], pa.string()))
    arrays.append(pa.array([len(matches[row]) for row in query_rows], pa.int64()))
    return pa.table(arrays, names=names)


def _cell(values: list[str | None], rows: list[int]) -> str | None:
    if not rows:
        return None
    if len(rows) == 1:
        return values[rows[0]]
    kept = list(dict.fromkeys(value for r in rows if (value := values[r]) is not None))
    return AGGREGATE_SEPARATOR.join(kept) if kept else None
