"""Query tables: what the user holds, read from an uploaded file or from a dataset in the lake.

Either way the query is a table whose every column is text (the lake's staged copies are, and
uploads go through the same parser as ingestion, ``lakejoin.sources.parse.parse_file``), so a
column searched from a file and the same column searched by ``dataset_id`` give one answer. A
file whose bytes are a lake dataset's is that dataset (:func:`in_lake`): it is not its own result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakejoin.ids import sha256_file
from lakejoin.query.snapshot import LoadedSnapshot
from lakejoin.sources.parse import DEFAULT_MAX_BYTES, UnparseableFile, parse_file


@dataclass(frozen=True)
class QueryTable:
    """The user's table and where it came from (``dataset_id`` when it is a lake dataset)."""

    table: pa.Table
    name: str
    dataset_id: str | None = None
    content_sha256: str | None = None  # a file's bytes: the lake dataset it may be

    def describe(self, columns: list[str]) -> dict[str, Any]:
        """What a response says of the query: its source (the file, or the ``dataset_id``), the table's
        name, the query ``columns`` and the table's rows."""
        if self.dataset_id and self.content_sha256 is None:
            source: dict[str, Any] = {"dataset_id": self.dataset_id}
        else:
            source = {"file": self.name, **({"in_lake": self.dataset_id} if self.dataset_id else {})}
        return {**source, "table": self.name, "columns": columns, "rows": self.table.num_rows}

    def column_values(self, column: str) -> list[str | None]:
        """The cells of ``column``, as text (None: a missing cell)."""
        return self.table.column(column).to_pylist()

    def check_columns(self, columns: list[str]) -> None:
        """Raise ``ValueError`` unless ``columns`` name at least one column of the table, and none twice."""
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
    return QueryTable(_as_text(parsed.table), name or path.name, content_sha256=sha256_file(path))


def in_lake(loaded: LoadedSnapshot, table: QueryTable) -> QueryTable:
    """``table`` as the active dataset of ``loaded`` with the same bytes, when there is one."""
    if table.dataset_id is not None or table.content_sha256 is None:
        return table
    dataset_id = dataset_with_content(loaded, table.content_sha256)
    return replace(table, dataset_id=dataset_id) if dataset_id else table


def dataset_with_content(loaded: LoadedSnapshot, content_sha256: str) -> str | None:
    """The active dataset whose file had these bytes (their SHA-256), or None."""
    return next(
        (
            dataset_id
            for dataset_id, row in sorted(loaded.datasets.items())
            if row["status"] == "active" and row.get("content_sha256") == content_sha256
        ),
        None,
    )


def dataset_table(loaded: LoadedSnapshot, dataset_id: str) -> QueryTable:
    """A lake dataset (its staged copy) as a query table."""
    row = loaded.dataset(dataset_id)
    return QueryTable(_as_text(loaded.staged_table(dataset_id)), row.get("title") or dataset_id, dataset_id)


def _as_text(table: pa.Table) -> pa.Table:
    """Every column as ``pa.string()`` (staged copies already are; this guards hand-made tables)."""
    if all(pa.types.is_string(f.type) for f in table.schema):
        return table
    return pa.table({name: table.column(name).cast(pa.string()) for name in table.column_names})
