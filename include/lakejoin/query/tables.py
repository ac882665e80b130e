"""Query tables: what the user holds, read from an uploaded file or from a dataset in the lake.

Either way the query is a table whose every column is text (the lake's staged copies are, and
uploads go through the same parser as ingestion, ``lakejoin.sources.parse.parse_file``), so a
column searched from a file and the same column searched by ``dataset_id`` give one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakejoin.query.snapshot import LoadedSnapshot
from lakejoin.sources.parse import DEFAULT_MAX_BYTES, UnparseableFile, parse_file


@dataclass(frozen=True)
class QueryTable:
    """The user's table and where it came from (``dataset_id`` when it is a lake dataset)."""

    table: pa.Table
    name: str
    dataset_id: str | None = None

    def describe(self, columns: list[str]) -> dict[str, Any]:
        source = {"dataset_id": self.dataset_id} if self.dataset_id else {"file": self.name}
        return {**source, "table": self.name, "columns": columns, "rows": self.table.num_rows}

    def column_values(self, column: str) -> list[str | None]:
        return self.table.column(column).to_pylist()

    def check_columns(self, columns: list[str]) -> None:
        if not columns:
            raise ValueError("no query column given: name one with --column (or several with --columns)")
        if len(set(columns)) != len(columns):
            raise ValueError(f"query columns repeat a name: {columns}")
        missing = [c for c in columns if c not in self.table.column_names]
        if missing:
            raise ValueError(f"unknown column(s) {missing} in {self.name}; columns: {self.table.column_names}")


def read_table_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES, name: str | None = None) -> QueryTable:
    """A CSV / TSV / JSON-lines / Parquet file as a query table (every column text)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"query table file not found: {path}")
    try:
        parsed = parse_file(path, max_bytes=max_bytes)
    except UnparseableFile as error:
        raise ValueError(f"cannot read query table {name or path.name}: {error}") from None
    return QueryTable(_as_text(parsed.table), name or path.name)


def dataset_table(loaded: LoadedSnapshot, dataset_id: str) -> QueryTable:
    """A lake dataset (its staged copy) as a query table."""
    row = loaded.dataset(dataset_id)
    return QueryTable(_as_text(loaded.staged_table(dataset_id)), row.get("title") or dataset_id, dataset_id)


def _as_text(table: pa.Table) -> pa.Table:
    """Every column as ``pa.string()`` (staged copies already are; this guards hand-made tables)."""
    if all(pa.types.is_string(f.type) for f in table.schema):
        return table
    return pa.table({name: table.column(name).cast(pa.string()) for name in table.column_names})
