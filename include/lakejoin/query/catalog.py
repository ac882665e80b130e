"""Finding a table by name: a paged search over a snapshot's catalog (titles, publishers, sources
and column names), and a table's columns with their profile — what the search page's picker
shows so that a user chooses query columns knowingly.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakejoin.profile import profile_values
from lakejoin.query.columns import ColumnInfo
from lakejoin.query.snapshot import LoadedSnapshot

MAX_PAGE = 50
MAX_MATCHED_COLUMNS = 5  # column names shown under a hit found by its columns
# Where a query word was found, best first: the rank of a hit is the sum over its words.
TITLE_START, TITLE, PUBLISHER_OR_SOURCE, COLUMN = range(4)


@dataclass(frozen=True)
class _Entry:
    dataset_id: str
    title: str
    publisher: str
    source: str
    columns: tuple[str, ...]
    columns_lower: tuple[str, ...]
    title_words: tuple[str, ...]


_entries: OrderedDict[tuple[Path, int], list[_Entry]] = OrderedDict()
_entries_lock = threading.Lock()


def find_tables(loaded: LoadedSnapshot, text: str = "", offset: int = 0, limit: int = 20) -> dict[str, Any]:
    """Active tables whose title, publisher, source or column names contain every word of
    ``text`` (case-insensitive), best first (title words before publisher/source before column
    names; then by title); all tables by title when ``text`` is blank."""
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"offset must be >= 0 and limit in [1, {MAX_PAGE}], got offset={offset}, limit={limit}")
    words = text.lower().split()
    ranked = sorted(
        ((rank, entry) for entry in _catalog_entries(loaded) if (rank := _rank(entry, words)) is not None),
        key=lambda p: (p[0], p[1].title.lower(), p[1].dataset_id),
    )
    page = [_hit(loaded, entry, words) for _, entry in ranked[offset : offset + limit]]
    return {
        "snapshot_id": loaded.snapshot_id,
        "query": text,
        "total": len(ranked),
        "offset": offset,
        "limit": limit,
        "tables": page,
    }


def table_profile(loaded: LoadedSnapshot, dataset_id: str) -> dict[str, Any]:
    """A table's catalog entry and every column with its profile (``LookupError`` if not active)."""
    row = loaded.dataset(dataset_id)
    return {
        **_summary(row),
        "snapshot_id": loaded.snapshot_id,
        "columns": [column_profile(c) for c in loaded.columns_of(dataset_id)],
    }


def column_profile(column: ColumnInfo) -> dict[str, Any]:
    """A column's profile as the REST API and the search page show it."""
    return {
        "name": column.name,
        "column_id": column.column_id,
        "type": column.type,
        "distinct": column.distinct,
        "nulls": column.nulls,
        "null_fraction": column.null_fraction,
        "key_candidate": column.key_candidate,
        "semantic_type": column.semantic_type,
        "indexed_by": column.indexed_by,
    }


def uploaded_profile(table: pa.Table) -> list[dict[str, Any]]:
    """An uploaded query table's columns, profiled as the lake profiles its own (``column_id`` None)."""
    fields = ("name", "type", "distinct", "nulls", "null_fraction", "key_candidate", "semantic_type")
    profiles = (profile_values(table.column(name).to_pylist(), name=name) for name in table.column_names)
    return [{**{f: p[f] for f in fields}, "column_id": None, "indexed_by": []} for p in profiles]


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    fields = ("dataset_id", "title", "publisher", "source", "url", "rows", "columns")
    return {name: row.get(name) for name in fields}


def _hit(loaded: LoadedSnapshot, entry: _Entry, words: list[str]) -> dict[str, Any]:
    matched = [name for name, lower in zip(entry.columns, entry.columns_lower) if any(w in lower for w in words)]
    return {**_summary(loaded.datasets[entry.dataset_id]), "matched_columns": matched[:MAX_MATCHED_COLUMNS]}


def _rank(entry: _Entry, words: list[str]) -> int | None:
    """Sum of each word's best place (``TITLE_START`` … ``COLUMN``); None when a word is nowhere."""
    total = 0
    title = entry.title.lower()
    for word in words:
        if any(part.startswith(word) for part in entry.title_words) or title.startswith(word):
            total += TITLE_START
        elif word in title:
            total += TITLE
        elif word in entry.publisher or word in entry.source:
            total += PUBLISHER_OR_SOURCE
        elif any(word in name for name in entry.columns_lower):
            total += COLUMN
        else:
            return None
    return total


def _entry(dataset_id: str, row: dict[str, Any], columns: list[str]) -> _Entry:
    title = row.get("title") or dataset_id
    return _Entry(
        dataset_id,
        title,
        (row.get("publisher") or "").lower(),
        (row.get("source") or "").lower(),
        tuple(columns),
        tuple(c.lower() for c in columns),
        tuple(re.split(r"[^0-9a-z]+", title.lower())),
    )


def _catalog_entries(loaded: LoadedSnapshot) -> list[_Entry]:
    """The snapshot's active tables in searchable form, built once per snapshot (a few kept)."""
    key = (loaded.config.home, loaded.snapshot_id)
    with _entries_lock:
        if key in _entries:
            _entries.move_to_end(key)
            return _entries[key]
    names: dict[str, list[str]] = {}
    for column in sorted(loaded.columns.values(), key=lambda c: (c.dataset_id, c.ordinal)):
        names.setdefault(column.dataset_id, []).append(column.name)
    entries = [
        _entry(dataset_id, row, names.get(dataset_id, []))
        for dataset_id, row in loaded.datasets.items()
        if row["status"] == "active"
    ]
    with _entries_lock:
        _entries[key] = entries
        while len(_entries) > 4:
            _entries.popitem(last=False)
    return entries
