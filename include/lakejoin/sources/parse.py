"""Turn one downloaded file into a table of strings, or say precisely why not.

Every column comes out as text (types are inferred later by profiling from the text, the
same way for every format). Rules, in order:

1. Size: files above ``max_bytes`` are refused (the reason names the limit).
2. Content sniffing before the extension: NUL bytes mean binary junk, a leading ``<html`` or
   ``<!doctype`` means an HTML error page served under a table's name.
3. Encoding: UTF-8 (a BOM is dropped), else UTF-16 when it has a BOM, else Windows-1252 /
   Latin-1 — recorded in ``ParsedTable.encoding``.
4. Dialect: ``csv.Sniffer`` over a sample picks the delimiter among ``, ; \\t |``; quoted
   fields may hold delimiters and newlines.
5. Ragged rows are never shifted silently: short rows are padded with nulls, long rows get
   extra columns ``column_<n>``; both are counted in ``ParsedTable.ragged_rows``.
6. Headers never refuse a table (``lakejoin.sources.headers``): empty, pandas ``Unnamed: N``
   and duplicate names get generated or suffixed names, a leading column of row numbers is
   ``row_names``, a first line that is data stays data; the original header text rides along
   in the table's field metadata.
7. Empty files and header-only files are refused.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lakejoin.sources.headers import SAMPLE_ROWS, first_line_is_data, is_blank, is_row_numbers, name_columns, with_names

DEFAULT_MAX_BYTES = 1 << 30
TEXT_FORMATS = ("csv", "tsv", "txt")
SNIFF_BYTES = 64 * 1024


class UnparseableFile(Exception):
    """The file cannot become a table; the message is the quarantine reason."""


@dataclass
class ParsedTable:
    """A table file parsed to all-text columns, with how it was read and what was repaired."""

    table: pa.Table  # every column pa.string(), names unique, headers in field metadata (headers.with_names)
    format: str
    encoding: str | None = None
    delimiter: str | None = None
    ragged_rows: int = 0
    warnings: list[str] = field(default_factory=list)


def detect_format(path: Path) -> str:
    """The table format of a file, from its suffix."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    if suffix in ("parquet", "pq"):
        return "parquet"
    if suffix == "tsv" or suffix == "tab":
        return "tsv"
    return "csv"


def parse_file(path: Path, format: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedTable:
    """Parse ``path`` (format from its extension unless given) or raise UnparseableFile."""
    size = path.stat().st_size
    if size > max_bytes:
        raise UnparseableFile(f"file too large: {size} bytes > limit {max_bytes}")
    if size == 0:
        raise UnparseableFile("empty file")
    fmt = format or detect_format(path)
    if fmt == "parquet":
        parsed = _parse_parquet(path)
    else:
        data = path.read_bytes()
        _reject_non_text(data)
        text, encoding = decode_text(data)
        parsed = _parse_jsonl(text) if fmt == "jsonl" else _parse_delimited(text, fmt)
        parsed.encoding = encoding
    _require_rows(parsed.table)
    return parsed


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode with the first encoding that fits: UTF-8 (BOM dropped), UTF-16 (BOM), cp1252, latin-1."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="strict"), "utf-8-sig"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), "utf-16"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def clean_header(names: list[str]) -> list[str]:
    """Trimmed names; blanks become ``column_<i>``; duplicates get ``_2``, ``_3``...."""
    return [n.name for n in name_columns(names, len(names))]


def _reject_non_text(data: bytes) -> None:
    head = data[:SNIFF_BYTES]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return
    if b"\x00" in head:
        raise UnparseableFile("binary content (NUL bytes): not a text table")
    start = head.lstrip()[:200].lower()
    if start.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        raise UnparseableFile("HTML/XML page, not a table (an error page served as data?)")


def _sniff_delimiter(sample: str, fmt: str) -> str:
    if fmt == "tsv":
        return "\t"
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        first_line = sample.split("\n", 1)[0]
        counts = {d: first_line.count(d) for d in ",;\t|"}
        best = max(counts, key=counts.__getitem__)
        return best if counts[best] else ","


def _parse_delimited(text: str, fmt: str) -> ParsedTable:
    delimiter = _sniff_delimiter(text[:SNIFF_BYTES], fmt)
    head = _head_rows(text, delimiter)
    if not head or not head[0]:
        raise UnparseableFile("no header row")
    has_header = not first_line_is_data(head[0], head[1:])
    fast = _parse_with_arrow(text, delimiter, head[0], has_header)
    if fast is not None:
        return ParsedTable(_named(fast, head[0], has_header), fmt, delimiter=delimiter)
    return _parse_with_csv_module(text, fmt, delimiter, has_header)


def _head_rows(text: str, delimiter: str) -> list[list[str]]:
    """The first line and up to ``SAMPLE_ROWS`` rows below it (from the first MiB; a row cut
    there is left out)."""
    head = text[: 1 << 20]
    reader = csv.reader(io.StringIO(head, newline=""), delimiter=delimiter)
    try:
        rows = [row for _, row in zip(range(SAMPLE_ROWS + 1), reader)]
    except csv.Error:
        return [next(csv.reader(io.StringIO(head.split("\n", 1)[0]), delimiter=delimiter), [])]
    return rows[:-1] if len(head) < len(text) and len(rows) > 1 else rows


def _named(table: pa.Table, header: list[str], has_header: bool) -> pa.Table:
    """``table`` (read with provisional names) with its final names and recorded headers."""
    row_names = has_header and table.num_columns > 1 and is_blank(header[0]) and is_row_numbers(table.column(0))
    return with_names(table, name_columns(header, table.num_columns, has_header=has_header, row_names=row_names))


def _parse_with_arrow(text: str, delimiter: str, header: list[str], has_header: bool) -> pa.Table | None:
    """The fast path; None when any row is ragged (the slow path pads and reports them)."""
    ragged = []

    def on_invalid(row: pacsv.InvalidRow) -> str:
        ragged.append(row)
        return "skip"

    try:
        names = [n.name for n in name_columns(header, len(header), has_header=has_header)]
        table = pacsv.read_csv(
            io.BytesIO(text.encode("utf-8")),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=1 if has_header else 0, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, newlines_in_values=True, invalid_row_handler=on_invalid
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=True, quoted_strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:
        return None
    return None if ragged else table


def _parse_with_csv_module(text: str, fmt: str, delimiter: str, has_header: bool) -> ParsedTable:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        rows = list(reader)
    except csv.Error as error:
        raise UnparseableFile(f"malformed {fmt}: {error}") from error
    if not rows:
        raise UnparseableFile("empty file")
    header, body = rows[0], (rows[1:] if has_header else rows)
    width = max([len(header), *map(len, body)])
    ragged = sum(1 for r in body if len(r) != len(header))
    columns = [
        pa.array([(r[i] if i < len(r) and r[i] != "" else None) for r in body], pa.string()) for i in range(width)
    ]
    table = _named(pa.table(columns, names=[f"c{i}" for i in range(width)]), header, has_header)
    warnings = (
        [f"{ragged} ragged rows (short rows padded with nulls, long rows' extra cells in extra columns)"]
        if ragged
        else []
    )
    return ParsedTable(table, fmt, delimiter=delimiter, ragged_rows=ragged, warnings=warnings)


def _parse_jsonl(text: str) -> ParsedTable:
    """JSON lines, or one JSON array of objects (what portals serve as ``.json``)."""
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as error:
            raise UnparseableFile(f"malformed JSON array: {error.msg} at line {error.lineno}") from error
        if not all(isinstance(r, dict) for r in records):
            raise UnparseableFile("JSON array whose items are not all objects")
        return _records_table(records)
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UnparseableFile(f"malformed JSON on line {number}: {error.msg}") from error
        if not isinstance(record, dict):
            raise UnparseableFile(f"line {number} is not a JSON object")
        records.append(record)
    return _records_table(records)


def _records_table(records: list[dict]) -> ParsedTable:
    names: list[str] = []
    for record in records:
        names.extend(k for k in record if k not in names)
    columns = [pa.array([_json_cell(r.get(n)) for r in records], pa.string()) for n in names]
    return ParsedTable(
        with_names(pa.table(columns, names=[f"c{i}" for i in range(len(names))]), name_columns(names, len(names))),
        "jsonl",
    )


def _json_cell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_parquet(path: Path) -> ParsedTable:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise UnparseableFile(f"unreadable Parquet: {error}") from error
    columns = [_column_as_text(table.column(i)) for i in range(table.num_columns)]
    text = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    return ParsedTable(_named(text, table.column_names, True), "parquet")


def _column_as_text(column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_nested(column.type):
        return pa.array([_json_cell(v) for v in column.to_pylist()], pa.string())
    if pa.types.is_floating(column.type):
        return pa.array([None if v is None else repr(v) for v in column.to_pylist()], pa.string())
    return column.cast(pa.string())


def _require_rows(table: pa.Table) -> None:
    if table.num_columns == 0:
        raise UnparseableFile("no columns")
    if table.num_rows == 0:
        raise UnparseableFile("header only: no data rows")
