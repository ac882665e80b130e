"""The portal's view of a folder: every table file is one dataset with stable ids.

``root/<organization>/<name>.csv`` becomes a CKAN package (organization = first folder, tags =
organization and format) with one resource, and a Socrata dataset with a four-by-four id. Ids
derive from the relative path, so they survive server restarts; ``metadata_modified`` and
``updatedAt`` come from the file's mtime, ETags from its size and mtime (as nginx does).
"""

from __future__ import annotations

import hashlib
import re
import threading
import uuid
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

# suffix -> CKAN format label; Socrata exports only the row-shaped ones (csv, parquet).
TABLE_FORMATS = {".csv": "CSV", ".tsv": "TSV", ".parquet": "Parquet", ".json": "JSON", ".xlsx": "XLSX", ".zip": "ZIP"}
MIME_TYPES = {
    "CSV": "text/csv",
    "TSV": "text/tab-separated-values",
    "Parquet": "application/vnd.apache.parquet",
    "JSON": "application/json",
    "XLSX": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "ZIP": "application/zip",
}
SOCRATA_FORMATS = frozenset({"CSV", "Parquet"})
DEFAULT_ORGANIZATION = "default"
_ID_NAMESPACE = uuid.UUID("6f1d3b7e-2c0a-4b8e-9a51-1c2d3e4f5a6b")
_SLUG = re.compile(r"[^a-z0-9_-]+")
_FOURBYFOUR = "abcdefghijkmnpqrstuvwxyz23456789"


def slug(text: str) -> str:
    """A CKAN name: lowercase alphanumerics, '-' and '_', at most 100 characters."""
    return _SLUG.sub("-", text.lower()).strip("-")[:100] or "table"


@dataclass(frozen=True)
class Table:
    """One table file as the portal publishes it."""

    relpath: str
    path: Path
    size: int
    mtime_ns: int
    format: str

    @property
    def organization(self) -> str:
        """The CKAN organization: the slug of the table's top folder (a table at the root: ``default``)."""
        parts = self.relpath.split("/")
        return slug(parts[0]) if len(parts) > 1 else DEFAULT_ORGANIZATION

    @property
    def name(self) -> str:
        """The CKAN package name: the slug of the relative path without its suffix."""
        return slug(self.relpath.rsplit(".", 1)[0].replace("/", "-"))

    @property
    def title(self) -> str:
        """The file's name without its suffix."""
        return Path(self.relpath).stem

    @property
    def package_id(self) -> str:
        """The CKAN package id: a UUID derived from the relative path, so stable across restarts."""
        return str(uuid.uuid5(_ID_NAMESPACE, "package:" + self.relpath))

    @property
    def resource_id(self) -> str:
        """The CKAN resource id: a UUID derived from the relative path, so stable across restarts."""
        return str(uuid.uuid5(_ID_NAMESPACE, "resource:" + self.relpath))

    @property
    def socrata_id(self) -> str:
        """The Socrata four-by-four id (``abcd-2345``), derived from the relative path's hash."""
        digest = hashlib.sha256(self.relpath.encode()).digest()
        chars = "".join(_FOURBYFOUR[b % len(_FOURBYFOUR)] for b in digest[:8])
        return f"{chars[:4]}-{chars[4:]}"

    @property
    def etag(self) -> str:
        """The download's ETag, from the file's size and modification time: a changed file gets a new one."""
        return f'"{self.size:x}-{self.mtime_ns:x}"'

    @property
    def modified(self) -> datetime:
        """The file's modification time, in UTC."""
        return datetime.fromtimestamp(self.mtime_ns / 1e9, tz=UTC)

    @property
    def http_date(self) -> str:
        """The modification time as an HTTP date (``Last-Modified``)."""
        return formatdate(self.mtime_ns // 10**9, usegmt=True)


def _table(root: Path, path: Path) -> Table | None:
    relpath = path.relative_to(root).as_posix()
    fmt = TABLE_FORMATS.get(path.suffix.lower())
    if fmt is None or any(part.startswith(".") for part in relpath.split("/")) or not path.is_file():
        return None
    stat = path.stat()
    return Table(relpath, path, stat.st_size, stat.st_mtime_ns, fmt)


def scan(root: Path) -> list[Table]:
    """Every table file under ``root`` (hidden files skipped), sorted by relative path."""
    return [table for path in sorted(root.rglob("*")) if (table := _table(root, path)) is not None]


class Catalog:
    """The folder as the portal lists it. Listings rescan; lookups by id re-stat only the one
    file they name (the id map comes from the last scan), so a download costs O(1), not O(n)."""

    KEYS = ("package_id", "name", "resource_id", "socrata_id")

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._paths: dict[tuple[str, str], Path] = {}

    def tables(self) -> list[Table]:
        """Every table, rescanned; the scan also refreshes the id map :meth:`find` looks in."""
        tables = scan(self.root)
        with self._lock:
            self._paths = {(key, getattr(t, key)): t.path for t in tables for key in self.KEYS}
        return tables

    def find(self, key: str, value: str) -> Table | None:
        """The table whose ``key`` (one of :attr:`KEYS`) is ``value``, or None; an id the last scan did not
        see, or whose file is gone, rescans."""
        with self._lock:
            path = self._paths.get((key, value))
        if path is None or not path.exists():
            path = next((t.path for t in self.tables() if getattr(t, key) == value), None)
        return _table(self.root, path) if path is not None else None


class RowIndex:
    """Byte offsets of every CSV record of a table, so SODA ``$limit/$offset`` pages are slices.

    A record ends at a newline outside quotes (RFC 4180: an odd number of quote characters on a
    line toggles the quoted state). Parquet tables are written to CSV once, beside the cache."""

    def __init__(self, csv_path: Path) -> None:
        self.csv_path = csv_path
        self.starts = array("q")
        self.ends = array("q")
        position, inside, record_start = 0, False, 0
        with csv_path.open("rb") as handle:
            for line in handle:
                if not inside:
                    record_start = position
                if line.count(b'"') % 2:
                    inside = not inside
                position += len(line)
                if not inside and line.strip():
                    self.starts.append(record_start)
                    self.ends.append(position)
        if not self.starts:
            raise ValueError(f"{csv_path} has no header")

    @property
    def rows(self) -> int:
        """The number of records after the header."""
        return len(self.starts) - 1

    def _read(self, first: int, last: int) -> bytes:
        with self.csv_path.open("rb") as handle:
            handle.seek(self.starts[first])
            data = handle.read(self.ends[last] - self.starts[first])
        return data if data.endswith(b"\n") else data + b"\n"

    def header(self) -> bytes:
        """The header record, newline-terminated."""
        return self._read(0, 0)

    def page(self, offset: int, limit: int) -> bytes:
        """Header plus records ``offset .. offset+limit-1`` (just the header past the end)."""
        first, last = offset + 1, min(offset + limit, self.rows)
        return self.header() + (self._read(first, last) if first <= last else b"")


class RowIndexCache:
    """RowIndex per (table, size, mtime): a changed file gets a fresh index."""

    def __init__(self, cache_dir: Path) -> None:
        self._dir = cache_dir
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, int, int], RowIndex] = {}

    def get(self, table: Table) -> RowIndex:
        """The table's row index, built on first use (a Parquet table written to CSV first)."""
        key = (table.relpath, table.size, table.mtime_ns)
        with self._lock:
            if key not in self._indexes:
                self._indexes[key] = RowIndex(self._as_csv(table))
            return self._indexes[key]

    def _as_csv(self, table: Table) -> Path:
        if table.format == "CSV":
            return table.path
        target = (
            self._dir / f"{hashlib.sha256(repr((table.relpath, table.size, table.mtime_ns)).encode()).hexdigest()}.csv"
        )
        if not target.exists():
            pacsv.write_csv(pq.read_table(table.path), target)
        return target
