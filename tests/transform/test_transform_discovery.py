"""Transformation-aware discovery (issue 19): the q-gram family and ``search transform``.

- Tokens meet across the reformattings discovery must see through, and are their own
  normalization (JOSIE's searcher normalizes a query).
- The q-gram family's Spark build (full and incremental) writes the tables its in-process twins
  write, and an incrementally updated index answers as a fresh build.
- Through the real pipeline, on a lake of real tables with planted transformed copies of real
  columns, ``search transform`` ranks each planted partner first with a program that reproduces
  it, the CLI prints the program, ``auto`` falls back to it when JOSIE finds no shared value.
- Bad input gives an error or "no transformation found", in a fresh interpreter with a hard time
  limit (a hang fails the test instead of stalling the suite).
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from transform_lake import KINDS, planted_lake

from lakejoin import cli
from lakejoin.config import LakeConfig
from lakejoin.ids import stable_int64
from lakejoin.index import qgram
from lakejoin.index.josie import APPEND_TABLES, GLOBAL_TABLES, SCHEMAS
from lakejoin.index.qgram.tokens import MAX_TOKENS, column_tokens, value_tokens
from lakejoin.index.shards import apply_update, in_shards, shards_of
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_value
from lakejoin.progress import Progress
from lakejoin.query.engine import QueryEngine
from lakejoin.transform import apply_transformation
from lakejoin.transform.discover import NO_TRANSFORMATION, DiscoveryParams, discover

N_SHARDS = 3


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("rafiei, davood", "d rafiei"),
        ("jfk", "kjfk"),
        ("2013-01-05", "jan 5, 2013"),
        ("2013-01-05", "01/05/2013"),
        ("00042", "42"),
        ("$1,234.50", "1234.5"),
        ("new york", "new_york"),
    ],
)
def test_reformatted_values_share_tokens(left: str, right: str) -> None:
    assert value_tokens(left) & value_tokens(right)


def test_tokens_are_their_own_normalization() -> None:
    rng = random.Random(3)
    alphabet = "abc xyz-019/.,$%éß"
    values = [normalize_value("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))) for _ in range(2_000)]
    for value in filter(None, values):
        assert all(normalize_value(token) == token for token in value_tokens(value)), value
    assert value_tokens("x" * 5_000) == set()  # a long run is no token, and nothing breaks


# --- the family: in-process builds ------------------------------------------------------------


def _cells(tables: dict[str, dict[str, list[object]]]) -> pa.Table:
    """``lake/cells`` rows of {dataset: {column: values}}; a column's id follows its content, as
    the lake's does (a changed dataset's columns get new ids)."""
    rows = []
    for dataset, columns in tables.items():
        for name, values in columns.items():
            column_id = stable_int64(dataset, name, json.dumps(values))
            for row_id, raw in enumerate(values):
                value = normalize_value(raw)
                if value is not None:
                    rows.append(
                        {"dataset_id": dataset, "column_id": column_id, "row_id": row_id, "value": value, "raw": None}
                    )
    return pa.Table.from_pylist(rows, schema=CELLS_SCHEMA)


def _random_lake(rng: random.Random, n: int) -> dict[str, dict[str, list[object]]]:
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "kjfk",
        "jfk",
        "2013-01-05",
        "jan 5, 2013",
        "davood rafiei",
        "d. rafiei",
        "00042",
        "42",
        "new_york",
        "new york",
    ]
    return {
        f"d{i}": {
            f"c{j}": [f"{rng.choice(words)} {rng.randint(0, 40)}" for _ in range(rng.randint(1, 80))]
            for j in range(rng.randint(1, 3))
        }
        for i in range(n)
    }


def _answers(tables: dict[str, pa.Table], queries: list[list[str]]) -> list[list[tuple[int, int]]]:
    searcher = qgram.load(tables)
    return [sorted((r["overlap"], r["column_id"]) for r in searcher.search(q, k=200)) for q in queries]


def test_column_tokens_keep_a_bottom_k_sample_per_column() -> None:
    long = {"wide": {"text": [f"value number {i} of {i * 7}" for i in range(3_000)]}}
    tokens = column_tokens(_cells(long))
    assert tokens.num_rows == MAX_TOKENS
    assert tokens == column_tokens(_cells(long))  # deterministic


def test_incremental_updates_answer_like_a_fresh_build() -> None:
    rng = random.Random(5)
    lake = _random_lake(rng, 12)
    current = qgram.build_in_memory(_cells(lake), n_shards=N_SHARDS)
    for version in range(4):
        changed = set(rng.sample(sorted(lake), 3)) | {f"new{version}"}
        lake = {d: v for d, v in lake.items() if d not in changed or rng.random() < 0.5}
        lake.update({d: _random_lake(rng, 1)["d0"] for d in changed if d.startswith("new")})
        rewritten = shards_of(changed, N_SHARDS)
        cells = _cells(lake)
        changed_cells = cells.filter(pa.compute.is_in(cells["dataset_id"], value_set=pa.array(sorted(changed))))
        update = qgram.update_tables(
            changed_cells, n_shards=N_SHARDS, previous=in_shards(current, rewritten, GLOBAL_TABLES), changed=changed
        )
        current = apply_update(current, update, rewritten, GLOBAL_TABLES, APPEND_TABLES)
        queries = [column for columns in _random_lake(rng, 4).values() for column in columns.values()]
        assert _answers(current, queries) == _answers(qgram.build_in_memory(cells, n_shards=N_SHARDS), queries)


# --- discovery in memory ------------------------------------------------------------------------


def test_discover_learns_and_verifies_a_program_against_a_brute_force_join() -> None:
    query = [
        f"Rafiei, Davood {i}" if i % 7 == 0 else name
        for i, name in enumerate(
            [
                "Zhu, Erkang",
                "Miller, Renee",
                "Nargesian, Fatemeh",
                "Pu, Ken",
                "Dong, Yue",
                "Koudas, Nick",
                "Srivastava, Divesh",
            ]
            * 3
        )
    ]
    partner = ["E Zhu", "R Miller", "F Nargesian", "K Pu", "Y Dong", "N Koudas", "Someone Else"]
    other = ["alpha", "beta", "Zhu"]
    columns = {1: partner, 2: other}
    answer = discover(
        query, [{"column_id": 1, "overlap": 9}, {"column_id": 2, "overlap": 1}], lambda c: columns[c["column_id"]], k=5
    )
    (found,) = answer["results"]
    assert found["column_id"] == 1 and answer["learned"] == 2
    outputs = apply_transformation(found["program"], query)  # the program as printed, applied anew
    partner_set = {normalize_value(v) for v in partner}
    # Miller, Nargesian, Pu, Dong, Koudas three times each; Zhu's rows became Rafiei, Srivastava has no partner
    assert found["matched"] == sum(1 for out in outputs if out in partner_set) == 15
    assert found["joined_values"] == 5 and found["joinability"] == pytest.approx(15 / 21)


def test_discovery_parameters_are_checked() -> None:
    for bad in ({"candidates": 0}, {"sample": 1}, {"budget": 0.0}, {"budget": float("nan")}, {"learner": "magic"}):
        with pytest.raises(ValueError):
            DiscoveryParams(**bad)


BAD_INPUT = {  # name -> (query values, candidate values, expected error or None for "no transformation found")
    "empty column": ([], ["a"], "no non-empty values"),
    "only nulls": ([None, "", "NA"], ["a"], "no non-empty values"),
    "one-row column": (["rafiei, davood"], ["d rafiei"], None),
    "non-text": ([1.5, "2"], ["3"], "must be text"),
    "very long values": (
        [f"{i}-" + "0123456789/" * 500 for i in range(60)],
        [f"{i}." + "2024-01-05 " * 500 for i in range(60)],
        None,
    ),
    "no learnable program": (
        [f"{random.Random(i).random():.9f}qz" for i in range(200)],
        [f"k{random.Random(10_000 + i).random():.5f}w" for i in range(200)],
        None,
    ),
}


@pytest.fixture(scope="module")
def bad_input_results() -> dict:
    script = (
        "import json; from lakejoin.transform.discover import discover\n"
        "results = {}\n"
        f"for name, (query, target, _) in {BAD_INPUT!r}.items():\n"
        "    try:\n        r = discover(query, [{'column_id': 1, 'overlap': 1}], lambda c: target, k=10)\n"
        "    except ValueError as exc:\n        results[name] = {'error': str(exc)}\n"
        "    else:\n        results[name] = {'results': r['results'], 'message': r.get('message')}\n"
        "print(json.dumps(results))"
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300, check=True
    )  # the cases are too long for argv
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_input_gives_an_error_or_no_transformation_in_bounded_time(bad_input_results: dict, name: str) -> None:
    error, result = BAD_INPUT[name][2], bad_input_results[name]
    if error:
        assert error in result["error"]
    else:
        assert result == {"results": [], "message": NO_TRANSFORMATION}


# --- Spark: the family's build equals its in-process twins -------------------------------------


def _arrow(frames) -> dict[str, pa.Table]:
    return {name: frame.toArrow().cast(SCHEMAS[name]) for name, frame in frames.items()}


def _same_tables(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> None:
    keys = {
        "tokens": ["token_id"],
        "dictionary": ["full_build_tokens"],
        "sets": ["set_id"],
        "postings": ["token_id", "set_id"],
    }
    assert set(a) == set(b) == set(keys)
    for name, key in keys.items():
        order = [(k, "ascending") for k in key]
        assert a[name].sort_by(order).to_pylist() == b[name].sort_by(order).to_pylist(), name


def _spark_tables(spark, tables: dict[str, pa.Table]):
    from pyspark.sql.pandas.types import from_arrow_schema

    return {n: spark.createDataFrame(t.to_pandas(), schema=from_arrow_schema(SCHEMAS[n])) for n, t in tables.items()}


def _spark_cells(spark, cells: pa.Table):
    return spark.createDataFrame(
        cells.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string"
    )


@pytest.mark.spark
def test_spark_full_and_incremental_builds_equal_the_in_process_ones(spark) -> None:
    from lakejoin.spark.qgram import build_tables

    rng = random.Random(9)
    lake = _random_lake(rng, 10)
    lake["wide"] = {"text": [f"value number {i} of {i * 7}" for i in range(3_000)]}  # over both caps
    current = _arrow(build_tables(spark, _spark_cells(spark, _cells(lake)), n_shards=N_SHARDS))
    _same_tables(current, qgram.build_in_memory(_cells(lake), n_shards=N_SHARDS))
    for _ in range(2):
        changed = set(rng.sample(sorted(lake), 3))
        lake = {d: (_random_lake(rng, 1)["d0"] if d in changed else v) for d, v in lake.items()}
        rewritten = shards_of(changed, N_SHARDS)
        cells = _cells(lake)
        changed_cells = cells.filter(pa.compute.is_in(cells["dataset_id"], value_set=pa.array(sorted(changed))))
        previous = in_shards(current, rewritten, GLOBAL_TABLES)
        update = _arrow(
            build_tables(
                spark,
                _spark_cells(spark, changed_cells),
                n_shards=N_SHARDS,
                previous=_spark_tables(spark, previous),
                changed=changed,
            )
        )
        _same_tables(update, qgram.update_tables(changed_cells, n_shards=N_SHARDS, previous=previous, changed=changed))
        current = apply_update(current, update, rewritten, GLOBAL_TABLES, APPEND_TABLES)


# --- through the pipeline: a lake with planted partners ---------------------------------------


PLANTED_FAMILIES = ("josie", "lshensemble", "qgram")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, spark) -> dict:
    from lakejoin.spark.pipeline import RunOptions, run

    folder = tmp_path_factory.mktemp("planted-sources")
    plants = planted_lake(folder, plants=len(KINDS), distractors=6, seed=2)
    config = LakeConfig(home=tmp_path_factory.mktemp("planted-home"), spark_master="local[2]", quiet=True)
    # Only the families these tests search: q-gram (transform's candidates), JOSIE (auto's first
    # pick, and the "JOSIE finds none" checks) and LSH Ensemble (auto's second pick for a large
    # column). MATE and PEXESO are never searched here and are the costly builds (PEXESO embeds
    # every value).
    run(config, RunOptions(sources=[f"folder:{folder}"], shards=4, families=PLANTED_FAMILIES), Progress(quiet=True))
    engine = QueryEngine(config)
    ids = {row["title"]: dataset_id for dataset_id, row in engine.snapshot().datasets.items()}
    return {"config": config, "engine": engine, "plants": plants, "ids": ids, "folder": folder}


def _one_to_one(plant, folder: Path) -> bool:
    """Whether the plant's transformation maps the original's distinct values to distinct values
    (an abbreviation of street names is not: "Bridge Road" and "Brook Road" both give "B. Road")."""
    values = set(pd.read_csv(folder / plant.original, dtype=str, keep_default_na=False)[plant.column]) - {""}
    variant = int(plant.planted.split("_")[1])
    outputs = [KINDS[plant.kind][1](v, variant) for v in values]
    return len(set(outputs)) == len(outputs)


@pytest.mark.spark
def test_search_transform_finds_every_one_to_one_planted_partner_first(planted: dict) -> None:
    engine, ids = planted["engine"], planted["ids"]
    assert {p.kind for p in planted["plants"]} == set(KINDS)
    one_to_one = [p for p in planted["plants"] if _one_to_one(p, planted["folder"])]
    assert len(one_to_one) >= len(KINDS) - 1
    for plant in one_to_one:
        response = engine.search("transform", [plant.column], dataset_id=ids[plant.original], k=10)
        best = response["results"][0]
        assert (best["table"], best["column"]) == (plant.planted, plant.planted_column), (
            plant,
            response["results"][:3],
        )
        # the verified count is what the printed program joins on the full columns
        query = engine.snapshot().staged_table(ids[plant.original]).column(plant.column).to_pylist()
        found = {
            normalize_value(v) for v in pd.read_csv(planted["folder"] / plant.planted, dtype=str)[plant.planted_column]
        }
        if best["direction"] == "forward":
            joined = [
                v
                for v, out in zip(query, apply_transformation(best["program"], query))
                if out is not None and out in found
            ]
            assert best["matched"] == len(joined), plant
        assert best["joined_values"] >= 0.8 * len(found), (plant, best)  # most planted values joined
        josie = engine.search("josie", [plant.column], dataset_id=ids[plant.original], k=10)["results"]
        assert (plant.planted, plant.planted_column) not in {(r["table"], r["column"]) for r in josie}


@pytest.mark.spark
def test_auto_falls_back_to_transform_and_the_cli_prints_the_program(planted: dict) -> None:
    engine, ids = planted["engine"], planted["ids"]
    unshared = [
        p
        for p in planted["plants"]
        if not engine.search("josie", [p.column], dataset_id=ids[p.original], k=10)["results"]
    ]
    assert unshared  # the padded ids share no value with any column JOSIE indexes
    plant = unshared[0]
    auto = engine.search("auto", [plant.column], dataset_id=ids[plant.original], k=10)
    assert (
        auto["method"] == "transform"
        and auto["auto"]["picked"] == ["transform"]
        and auto["results"][0]["table"] == plant.planted
    )
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            cli.main(
                [
                    "search",
                    "transform",
                    "--home",
                    str(planted["config"].home),
                    "--dataset",
                    ids[plant.original],
                    "--column",
                    plant.column,
                    "-k",
                    "3",
                ]
            )
            == 0
        )
    text = out.getvalue()
    # the CLI names tables by title (plant.planted is the planted table's file name)
    assert "rows joined (share)" in text and plant.planted in text and auto["results"][0]["program"][:40] in text
