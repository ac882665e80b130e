"""SQLite databases as lake tables, with the foreign keys they declare.

:func:`export_tables` writes each table of a database as one CSV file under a folder named after
the database (``<dest>/<db stem>/<table>.csv``), which the ``folder`` source reads as it reads any
other table; :func:`foreign_keys` reads ``PRAGMA foreign_key_list``, the joins the database's
designers declared, the truth a join finder can be scored against. Databases are opened read-only.
"""

from __future__ import annotations

import csv
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ForeignKey:
    """``table(columns)`` references ``referenced_table(referenced_columns)``."""

    table: str
    columns: tuple[str, ...]
    referenced_table: str
    referenced_columns: tuple[str, ...]


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection; a clear error when the file is missing or not a SQLite database."""
    if not path.is_file():
        raise ValueError(f"SQLite database not found: {path}")
    connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        connection.close()
        raise ValueError(f"not a SQLite database: {path} ({error})") from error
    return connection


def table_names(path: Path) -> list[str]:
    """The database's own tables (SQLite's internal ``sqlite_*`` tables left out), by name."""
    with closing(connect(path)) as connection:
        return _tables(connection)


def foreign_keys(path: Path) -> list[ForeignKey]:
    """Every declared foreign key, one per constraint (a composite key's columns together)."""
    with closing(connect(path)) as connection:
        keys = []
        for table in _tables(connection):
            constraints: dict[int, list[tuple[str, str, str | None]]] = {}
            for row in connection.execute(f"PRAGMA foreign_key_list({_quoted(table)})"):
                key_id, _seq, parent, column, parent_column = row[:5]
                constraints.setdefault(key_id, []).append((parent, column, parent_column))
            for columns in constraints.values():
                parent = columns[0][0]
                named = [c[2] for c in columns if c[2] is not None]
                # `REFERENCES parent` alone references the parent's primary key
                referenced = named if len(named) == len(columns) else _primary_key(connection, parent)
                keys.append(ForeignKey(table, tuple(c[1] for c in columns), parent, tuple(referenced)))
        return keys


def export_tables(path: Path, dest: Path) -> dict[str, Path]:
    """Write every table as ``<dest>/<path's stem>/<table>.csv`` (header, then rows; NULL as an empty
    cell); returns each table's file."""
    folder = dest / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    with closing(connect(path)) as connection:
        for table in _tables(connection):
            cursor = connection.execute(f"SELECT * FROM {_quoted(table)}")
            target = folder / f"{table}.csv"
            with target.open("w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow([d[0] for d in cursor.description])
                writer.writerows(["" if v is None else v for v in row] for row in cursor)
            files[table] = target
    return files


def _tables(connection: sqlite3.Connection) -> list[str]:
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    return [name for (name,) in rows]


def _primary_key(connection: sqlite3.Connection, table: str) -> list[str]:
    columns = [(row[5], row[1]) for row in connection.execute(f"PRAGMA table_info({_quoted(table)})") if row[5]]
    return [name for _order, name in sorted(columns)]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
