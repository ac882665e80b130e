"""Real headers: empty, pandas "Unnamed: N", duplicate or missing header rows never quarantine a
table; names are generated or suffixed and the original header is recorded in catalog/columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakejoin.config import LakeConfig
from lakejoin.lake import delta
from lakejoin.lake.schemas import COLUMNS, DATASETS
from lakejoin.progress import Progress
from lakejoin.sources.headers import first_line_is_data, is_blank, is_row_numbers, name_columns, recorded_headers
from lakejoin.sources.parse import parse_file

# The five shapes, each as the program that writes it does (R write.csv, a CSV export with a
# trailing delimiter, pandas re-writing a frame it read, a join of same-named columns, a dump).
SHAPES = {
    "r_row_names.csv": b'"","city","pop"\n"1","Graz",291072\n"2","Linz",207247\n"3","Wels",62470\n',
    "empty_last.csv": b"code,name,\nAT,Austria,\nDE,Germany,\nFR,France,\n",
    "pandas_unnamed.csv": b"Unnamed: 0,carrier,Unnamed: 2\n7,AA,x\n9,UA,y\n",
    "duplicates.csv": b"id,value,value,Value\n1,a,b,c\n2,d,e,f\n",
    "no_header.csv": b"1,2013-01-01,JFK,3.5\n2,2013-01-02,LGA,4.25\n3,2013-01-03,EWR,1.0\n4,2013-01-04,JFK,2.5\n",
}
EXPECTED = {
    "r_row_names.csv": [("row_names", "", "row_names"), ("city", "city", "header"), ("pop", "pop", "header")],
    "empty_last.csv": [("code", "code", "header"), ("name", "name", "header"), ("column_3", "", "generated")],
    "pandas_unnamed.csv": [
        ("column_1", "Unnamed: 0", "generated"),
        ("carrier", "carrier", "header"),
        ("column_3", "Unnamed: 2", "generated"),
    ],
    "duplicates.csv": [
        ("id", "id", "header"),
        ("value", "value", "header"),
        ("value_2", "value", "deduplicated"),
        ("Value_3", "Value", "deduplicated"),
    ],
    "no_header.csv": [(f"column_{i}", None, "no_header") for i in range(1, 5)],
}


def test_blank_headers_include_pandas_placeholders():
    assert all(is_blank(h) for h in ("", "  ", None, "Unnamed: 3", "unnamed: 0_level_1", "__index_level_0__"))
    assert not any(is_blank(h) for h in ("x", "NA", "Unnamed", "Unnamed: x", "0"))


def test_names_are_generated_by_position_and_real_names_win():
    names = name_columns(["", "column_1", "a", "A", " a "], 6)
    assert [n.name for n in names] == ["column_1_2", "column_1", "a", "A_2", "a_3", "column_6"]
    assert [n.source for n in names] == ["generated", "header", "header", "deduplicated", "deduplicated", "generated"]
    assert names[5].header is None and names[0].header == ""
    assert [n.name for n in name_columns(["x", "y"], 2, has_header=False)] == ["column_1", "column_2"]
    assert [n.name for n in name_columns(["", "row_names"], 2, row_names=True)] == ["row_names_2", "row_names"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "2", "3"], True),
        (["0", "1", "2"], True),
        (["1", "3", "4"], False),
        (["2", "3"], False),
        (["1", None], False),
        ([], False),
        (["1", "2", "x"], False),
    ],
)
def test_row_numbers_are_exactly_one_to_n_or_zero_to_n_minus_one(values, expected):
    assert is_row_numbers(pa.array(values, pa.string())) is expected


@pytest.mark.parametrize(
    ("first", "body", "is_data"),
    [
        (["1", "2.5", "2019-01-01"], [["2", "3.5", "2019-01-02"], ["3", "1.0", "2019-01-03"]], True),
        (["AA", "12"], [["UA", "10"], ["AA", "15"]], True),  # a code seen below, a number in range
        (["carrier", "flights"], [["UA", "10"], ["AA", "15"]], False),  # a word over numbers
        (["id", "name"], [["1", "x"], ["2", "y"]], False),
        (["name", "city"], [["Ann", "Graz"], ["Bo", "Linz"]], False),  # all text: no evidence, keep the header
        (["country", "1990", "1991"], [["A", "1995", "1992"], ["B", "1980", "2000"]], False),  # years in a wide table
        (
            ["rownames", "1970", "1972", "1973"],
            [["Peru", "0", "2", "3000"], ["Chad", "2000", "0", "1"]],
            False,
        ),  # with gaps
        (["year", "2019"], [["2018", "x"], ["2017", "y"]], False),  # a number over text is a name
        (["500", "7"], [["1", "2"], ["3", "4"]], False),  # out of range: no evidence
        (
            ["", "1", "2", "3"],
            [["1", "50", "19", "26"], ["2", "16", "40", "34"]],
            False,
        ),  # R's cross table: an empty corner
        (["7", "", "2"], [["1", "", "3"], ["5", "x", "2"]], True),  # an empty cell over a column with gaps: no evidence
        (["1", "2"], [], False),  # one line: nothing to compare with
    ],
)
def test_first_line_is_data_by_type_agreement_with_the_body(first, body, is_data):
    assert first_line_is_data(first, body) is is_data


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_parses_with_generated_names_and_recorded_headers(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(SHAPES[name])
    parsed = parse_file(path)
    headers = recorded_headers(parsed.table.schema)
    assert [(n, h["header"], h["name_source"]) for n, h in zip(parsed.table.column_names, headers)] == EXPECTED[name]
    expected_rows = SHAPES[name].count(b"\n") - (0 if name == "no_header.csv" else 1)
    assert parsed.table.num_rows == expected_rows  # a first line that is data stays a row


def test_headers_survive_the_staged_parquet_and_the_slow_path(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_bytes(b",x,x\n1,a,b\n2,c,d,e\n3,f,g\n")
    parsed = parse_file(path)
    assert parsed.ragged_rows == 1
    assert parsed.table.column_names == ["row_names", "x", "x_2", "column_4"]
    pq.write_table(parsed.table, tmp_path / "staged.parquet")
    staged = recorded_headers(pq.read_schema(tmp_path / "staged.parquet"))
    assert [h["name_source"] for h in staged] == ["row_names", "header", "deduplicated", "generated"]
    assert [h["header"] for h in staged] == ["", "x", "x", None]


@pytest.fixture(scope="module")
def lake(tmp_path_factory, spark):
    from lakejoin.spark.pipeline import RunOptions, run

    root = tmp_path_factory.mktemp("shapes")
    for name, data in SHAPES.items():
        (root / name).write_bytes(data)
    config = LakeConfig.from_args(str(tmp_path_factory.mktemp("home")), "local[2]", quiet=True)
    options = RunOptions(sources=[f"folder:{root}"], families=())
    run(config, options, Progress(quiet=True))
    return config, options, root


def _catalog(config):
    datasets = {r["dataset_id"]: r for r in delta.read_arrow(config.table_path(DATASETS)).to_pylist()}
    columns = delta.read_arrow(config.table_path(COLUMNS)).to_pylist()
    return datasets, columns


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_ingested_with_its_names_and_original_headers(lake, name):
    config, *_ = lake
    datasets, columns = _catalog(config)
    (dataset,) = [d for d in datasets.values() if d["title"] == name]
    assert dataset["status"] == "active", dataset["reason"]
    mine = sorted((c for c in columns if c["dataset_id"] == dataset["dataset_id"]), key=lambda c: c["ordinal"])
    assert [(c["name"], c["header"], c["name_source"]) for c in mine] == EXPECTED[name]
    if name == "r_row_names.csv":  # row numbers join nothing: no family indexes them
        assert mine[0]["indexed_by"] == [] and mine[0]["type"] == "integer"
        assert "josie" in mine[1]["indexed_by"] and "mate" in mine[2]["indexed_by"]


@pytest.mark.spark
def test_a_lake_written_before_headers_were_recorded_keeps_working(lake):
    """Drop the new fields from catalog/columns (as an older release wrote it), add a file:
    the next run rewrites the table with the fields, null for the rows it keeps."""
    from lakejoin.spark.pipeline import run

    config, options, root = lake
    path = config.table_path(COLUMNS)
    old = delta.read_arrow(path)
    delta.write_arrow(path, old.drop_columns(["header", "name_source"]), operation="columns")
    (root / "later.csv").write_bytes(b"a,,a\n1,2,3\n4,5,6\n")
    run(config, options, Progress(quiet=True))
    datasets, columns = _catalog(config)
    later = {d["dataset_id"] for d in datasets.values() if d["title"] == "later.csv"}
    assert [
        (c["name"], c["header"], c["name_source"])
        for c in sorted((c for c in columns if c["dataset_id"] in later), key=lambda c: c["ordinal"])
    ] == [
        ("a", "a", "header"),
        ("column_2", "", "generated"),
        ("a_2", "a", "deduplicated"),
    ]
    kept = [c for c in columns if c["dataset_id"] not in later]
    assert len(kept) == old.num_rows and all(c["header"] is None and c["name_source"] is None for c in kept)
