"""Robust parsing: encodings, dialects, ragged rows, and clear reasons for unparseable files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakejoin.sources.parse import UnparseableFile, clean_header, parse_file


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def rows(parsed):
    return parsed.table.to_pylist()


def test_latin1_falls_back_and_keeps_accents(tmp_path):
    path = write(tmp_path, "towns.csv", "town,country\nZürich,Schweiz\nMálaga,España\n".encode("latin-1"))
    parsed = parse_file(path)
    assert parsed.encoding in ("cp1252", "latin-1")
    assert rows(parsed) == [{"town": "Zürich", "country": "Schweiz"}, {"town": "Málaga", "country": "España"}]


def test_utf8_bom_is_not_part_of_the_first_header(tmp_path):
    path = write(tmp_path, "bom.csv", "\ufeffcode,name\nAT,Austria\n".encode("utf-8"))
    parsed = parse_file(path)
    assert parsed.table.column_names == ["code", "name"]
    assert parsed.encoding == "utf-8-sig"


def test_quoted_newlines_and_delimiters_stay_in_one_cell(tmp_path):
    path = write(tmp_path, "notes.csv", b'id,note\n1,"line one\nline two"\n2,"a, b"\n')
    assert rows(parse_file(path)) == [{"id": "1", "note": "line one\nline two"}, {"id": "2", "note": "a, b"}]


def test_semicolon_and_tab_dialects_are_sniffed(tmp_path):
    semicolon = write(tmp_path, "eu.csv", b"name;value\nx;1,5\ny;2,0\n")
    assert rows(parse_file(semicolon)) == [{"name": "x", "value": "1,5"}, {"name": "y", "value": "2,0"}]
    tab = write(tmp_path, "t.tsv", b"a\tb\n1\t2\n")
    assert rows(parse_file(tab)) == [{"a": "1", "b": "2"}]


def test_ragged_rows_are_padded_or_extended_never_shifted(tmp_path):
    path = write(tmp_path, "ragged.csv", b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n")
    parsed = parse_file(path)
    assert parsed.ragged_rows == 2
    assert parsed.table.column_names == ["a", "b", "c", "column_4"]
    assert rows(parsed) == [
        {"a": "1", "b": "2", "c": "3", "column_4": None},
        {"a": "4", "b": "5", "c": None, "column_4": None},
        {"a": "6", "b": "7", "c": "8", "column_4": "9"},
    ]
    assert "ragged" in parsed.warnings[0]


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.csv", b"", "empty file"),
        ("header.csv", b"a,b,c\n", "header only"),
        ("junk.csv", bytes(range(256)) * 4, "binary content"),
        ("nul.csv", b"a,b\n1,\x002\n", "binary content"),
        ("error.csv", b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "HTML"),
        ("bad.jsonl", b'{"a": 1}\n{"a": \n', "malformed JSON on line 2"),
    ],
)
def test_unparseable_files_get_a_reason(tmp_path, name, data, reason):
    with pytest.raises(UnparseableFile, match=reason):
        parse_file(write(tmp_path, name, data))


def test_size_limit_is_enforced(tmp_path):
    path = write(tmp_path, "big.csv", b"a\n" + b"1\n" * 1000)
    with pytest.raises(UnparseableFile, match="too large"):
        parse_file(path, max_bytes=100)


def test_jsonl_and_parquet_become_text_columns(tmp_path):
    jsonl = write(tmp_path, "x.jsonl", b'{"id": 1, "tags": ["a"], "ok": true}\n{"id": 2.5, "extra": null}\n')
    assert rows(parse_file(jsonl)) == [
        {"id": "1", "tags": '["a"]', "ok": "true", "extra": None},
        {"id": "2.5", "tags": None, "ok": None, "extra": None},
    ]
    parquet = tmp_path / "x.parquet"
    pq.write_table(pa.table({"year": [2019, None], "share": [0.5, 1.0]}), parquet)
    assert rows(parse_file(parquet)) == [{"year": "2019", "share": "0.5"}, {"year": None, "share": "1.0"}]


def test_headers_are_cleaned_and_unique():
    assert clean_header(["id", "", " Name  x ", "ID", "id"]) == ["id", "column_2", "Name x", "ID_2", "id_3"]


def test_json_array_of_objects_is_a_table_but_an_array_of_scalars_is_refused(tmp_path):
    records = write(tmp_path, "records.json", json.dumps([{"a": 1}, {"a": 2, "b": "x"}]).encode())
    assert rows(parse_file(records)) == [{"a": "1", "b": None}, {"a": "2", "b": "x"}]
    scalars = write(tmp_path, "array.json", json.dumps([1, 2]).encode())
    with pytest.raises(UnparseableFile, match="not all objects"):
        parse_file(scalars)
