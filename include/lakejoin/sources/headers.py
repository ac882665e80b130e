"""Column names from header rows as people and programs really write them.

A table is never refused for its header. Every column gets a name, and the original header
text is kept beside it (in the table's field metadata, so the staged Parquet file carries it
to the columns table) with where the name came from (``lakejoin.lake.schemas.NAME_SOURCES``):

- ``header``: the header cell, whitespace trimmed and collapsed.
- ``generated``: the cell was empty — blank, whitespace, or pandas' ``Unnamed: 3`` /
  ``Unnamed: 3_level_0`` / ``__index_level_0__`` — or missing (a ragged row's extra cell):
  ``column_<n>``, n the 1-based position, so the name is stable for the same file.
- ``deduplicated``: the same name as an earlier column (after the text normalization the
  quality gate applies): ``<name>_2``, ``<name>_3``...
- ``row_names``: a leading column with an empty header holding exactly 1..n (R's
  ``write.csv``) or 0..n-1 (a pandas index): named ``row_names``. It stays in the table (the
  rows keep their numbers) but no index family takes it (``lakejoin.profile.selection``):
  every such column overlaps every other one, so it would only add meaningless joins.
- ``no_header``: the file has no header row; its first line is data (``first_line_is_data``)
  and every name is ``column_<n>``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.lake.schemas import DEDUPLICATED, GENERATED, GIVEN, NO_HEADER, ROW_NAMES
from lakejoin.normalize import normalize_text, normalize_value
from lakejoin.profile.types import VALUE_PATTERNS

ROW_NAMES_COLUMN = "row_names"
SAMPLE_ROWS = 200  # body rows the no-header test compares the first line with...
SAMPLE_CELLS = 20_000  # ...fewer for wide tables (at least 20)

# What pandas writes for an empty name (``Unnamed: 3``, multi-level ``Unnamed: 3_level_1``)
# and for an unnamed index in Parquet (``__index_level_0__``).
_PANDAS_BLANK = re.compile(r"^(unnamed: \d+(_level_\d+)?|__index_level_\d+__)$")
_NUMBER = re.compile(VALUE_PATTERNS["decimal"])
_INTEGER = re.compile(VALUE_PATTERNS["integer"])
_DATE = re.compile(f"{VALUE_PATTERNS['date']}|{VALUE_PATTERNS['datetime']}")
_META_HEADER, _META_SOURCE = b"lakejoin.header", b"lakejoin.name_source"


@dataclass(frozen=True)
class ColumnName:
    """A column's unique name, the header cell it came from and how it was named."""

    name: str  # unique within the table
    header: str | None  # the header cell as written; None: no header row, or no cell
    source: str  # one of lakejoin.lake.schemas.NAME_SOURCES


def is_blank(header: str | None) -> bool:
    """True for a header cell that names nothing (blank, or pandas' placeholder for blank)."""
    text = normalize_text("" if header is None else header)
    return not text or bool(_PANDAS_BLANK.match(text))


def name_columns(
    header: Sequence[str | None], width: int, *, has_header: bool = True, row_names: bool = False
) -> list[ColumnName]:
    """Names for ``width`` columns from the header cells (fewer cells than columns: ragged rows).

    Real names are placed first so a generated ``column_2`` never takes a name the file gives;
    ``row_names`` means the first column holds row numbers (``is_row_numbers``)."""
    cells = list(header if has_header else []) + [None] * max(0, width - (len(header) if has_header else 0))
    taken: set[str] = set()
    names: list[ColumnName | None] = [None] * width
    for i, cell in enumerate(cells[:width]):
        if not is_blank(cell) and not (row_names and i == 0):
            base = " ".join(str(cell).split())
            name = _unique(base, taken)
            names[i] = ColumnName(name, cell, GIVEN if name == base else DEDUPLICATED)
    for i, cell in enumerate(cells[:width]):
        if names[i] is None:
            source = ROW_NAMES if row_names and i == 0 else GENERATED if has_header else NO_HEADER
            base = ROW_NAMES_COLUMN if source == ROW_NAMES else f"column_{i + 1}"
            names[i] = ColumnName(_unique(base, taken), cell, source)
    return names  # type: ignore[return-value]


def _unique(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``... : the first one whose normalized form is free."""
    candidate, n = base, 1
    while normalize_text(candidate) in taken:
        n += 1
        candidate = f"{base}_{n}"
    taken.add(normalize_text(candidate))
    return candidate


def is_row_numbers(column: pa.ChunkedArray | pa.Array) -> bool:
    """True when the column is exactly "1".."n" or "0".."n-1", in order, with no gap or null."""
    n = len(column)
    if n == 0 or column.null_count:
        return False
    first = column[0].as_py()
    if first not in ("0", "1") or column[n - 1].as_py() != str(int(first) + n - 1):
        return False
    expected = pa.array([str(i) for i in range(int(first), int(first) + n)], pa.string())
    return bool(pc.all(pc.equal(column, expected)).as_py())


def _kind(text: str | None) -> str | None:
    value = normalize_value(text)
    if value is None:
        return None
    if _NUMBER.match(value):
        return "number"
    return "date" if _DATE.match(value) else "text"


def _vote(cell: str, body: list[str]) -> int:
    """+1: the cell looks like one more value of its column; -1: like a name over it; 0: no telling."""
    if not cell.strip():
        # An unnamed column (the empty corner over R's row names, a pandas index) over a full
        # column is a header's shape; a data row rarely misses the one value all others have.
        return -1 if body and all(v.strip() for v in body) else 0
    kind = _kind(cell)
    kinds = [k for k in map(_kind, body) if k is not None]
    if kind is None or not kinds:
        return 0
    dominant = max(set(kinds), key=kinds.count)
    if kinds.count(dominant) < 0.8 * len(kinds):
        dominant = "mixed"
    if kind == "text":
        if dominant in ("number", "date"):
            return -1  # a word over numbers or dates: a name
        return 1 if normalize_value(cell) in {normalize_value(v) for v in body} else 0
    if kind != dominant:
        return -1  # a number or date over another kind of column: a name such as "2019"
    if kind == "number":
        numbers = [float(normalize_value(v)) for v in body if _kind(v) == "number"]  # type: ignore[arg-type]
        return 1 if min(numbers) <= float(normalize_value(cell)) <= max(numbers) else 0  # type: ignore[arg-type]
    return 1


def first_line_is_data(first: Sequence[str], body: Sequence[Sequence[str]]) -> bool:
    """Whether a delimited file's first line is a data row rather than a header.

    Each column votes by type agreement between its first-line cell and the body below
    (``SAMPLE_ROWS`` rows): a number inside the column's numeric range, a date over dates, or
    a text equal to a value of its column looks like data; a word over numbers or dates, a
    number over text, or an empty cell over a column with no empty value looks like a name.
    Any name vote keeps the header, and so do increasing years across the first line (a wide
    table: "country,1990,1991,2000,..."). csv.Sniffer's has_header is not used: it calls a
    header any first line whose lengths or types differ from the body's, which most real
    headers and many data rows do."""
    if not body or not first:
        return False
    if _increasing_years([normalize_value(c) for c in first if _kind(c) == "number"]):
        return False
    body = body[: max(20, SAMPLE_CELLS // len(first))]
    votes = [_vote(cell, [row[i] for row in body if i < len(row)]) for i, cell in enumerate(first)]
    return min(votes) >= 0 and max(votes) > 0


def _increasing_years(values: list[str | None]) -> bool:
    if len(values) < 2 or not all(v is not None and _INTEGER.match(v) for v in values):
        return False
    years = [int(v) for v in values]  # type: ignore[arg-type]
    return all(1000 <= y <= 2999 for y in years) and all(a < b for a, b in itertools.pairwise(years))


def with_names(table: pa.Table, names: Sequence[ColumnName]) -> pa.Table:
    """``table`` with ``names`` as its column names and the headers in its field metadata."""
    fields = [pa.field(n.name, f.type, metadata=_metadata(n)) for n, f in zip(names, table.schema)]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields))


def _metadata(name: ColumnName) -> dict[bytes, bytes]:
    meta = {_META_SOURCE: name.source.encode()}
    if name.header is not None:
        meta[_META_HEADER] = name.header.encode("utf-8")
    return meta


def recorded_headers(schema: pa.Schema) -> list[dict[str, str | None]]:
    """``{"header", "name_source"}`` per column from ``with_names``' metadata (both None for a
    table staged before headers were recorded)."""
    rows = []
    for f in schema:
        meta = f.metadata or {}
        header, source = meta.get(_META_HEADER), meta.get(_META_SOURCE)
        rows.append(
            {
                "header": None if header is None else header.decode("utf-8"),
                "name_source": None if source is None else source.decode(),
            }
        )
    return rows
