"""The synthetic lake generators and the brute-force oracles the index families are tested against."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from lakejoin.normalize import normalize_set, normalize_value
from lakejoin.testing import (
    GroundTruth,
    containment_search,
    generate_lake,
    overlap_topk,
    plant_joinable,
    set_lake,
    set_lake_chunks,
)

# ------------------------------------------------------------------------------------------------
# set_lake / plant_joinable


def _mean_posting_length(sets: list[list[str]]) -> float:
    frequency = Counter(token for s in sets for token in s)
    return sum(frequency.values()) / len(frequency)


def test_set_lake_is_deterministic_by_seed():
    assert set_lake("webtable", 500, seed=3) == set_lake("webtable", 500, seed=3)
    assert set_lake("webtable", 500, seed=3) != set_lake("webtable", 500, seed=4)
    assert set_lake("opendata", 50, seed=3) == set_lake("opendata", 50, seed=3)


@pytest.mark.parametrize("shape", ["opendata", "webtable"])
def test_set_lake_sets_are_distinct_normalized_tokens(shape):
    sets = set_lake(shape, 300, seed=1)
    assert len(sets) == 300
    for tokens in sets:
        assert tokens and len(tokens) == len(set(tokens))
        assert all(normalize_value(t) == t for t in tokens)


def test_set_lake_shapes_differ_as_in_the_thesis():
    opendata = set_lake("opendata", 3_000, seed=0)
    webtable = set_lake("webtable", 3_000, seed=0)
    open_sizes = np.array([len(s) for s in opendata])
    web_sizes = np.array([len(s) for s in webtable])
    # Web tables: small sets (5-100) with long posting lists; Open Data: larger sets, sizes up to
    # thousands, over a vocabulary so large that posting lists are short.
    assert web_sizes.min() >= 5 and web_sizes.max() <= 100
    assert np.median(open_sizes) > np.median(web_sizes)
    assert open_sizes.max() > 1_000
    assert _mean_posting_length(webtable) > 3 * _mean_posting_length(opendata)
    # Zipf token frequencies: the most frequent token is far above the median one.
    frequencies = sorted(Counter(t for s in webtable for t in s).values(), reverse=True)
    assert frequencies[0] > 50 * frequencies[len(frequencies) // 2]


def test_set_lake_overrides_and_bad_input():
    sets = set_lake("webtable", 200, seed=0, min_size=20, max_size=30)
    assert all(20 <= len(s) <= 30 for s in sets)
    with pytest.raises(ValueError, match="unknown set lake shape"):
        set_lake("enterprise", 10)
    with pytest.raises(ValueError, match="override"):
        set_lake("webtable", 10, max_sise=5)
    with pytest.raises(ValueError, match="n_sets"):
        set_lake("webtable", -1)


def test_set_lake_chunks_are_set_lake_in_arrow():
    for shape, n_sets, overrides in (("opendata", 37, {}), ("webtable", 500, {"min_size": 20, "max_size": 30})):
        expected = set_lake(shape, n_sets, seed=3, **overrides)
        for chunk_sets in (1, 10, n_sets, n_sets + 5):
            chunks = list(set_lake_chunks(shape, n_sets, chunk_sets, seed=3, **overrides))
            assert [len(c) for c in chunks] == [
                min(chunk_sets, n_sets - first) for first in range(0, n_sets, chunk_sets)
            ]
            assert [s for c in chunks for s in c.to_pylist()] == expected
    assert list(set_lake_chunks("webtable", 0, 5)) == []
    with pytest.raises(ValueError, match="chunk_sets"):
        set_lake_chunks("webtable", 10, 0)
    with pytest.raises(ValueError, match="n_sets"):
        set_lake_chunks("webtable", -1, 5)


def test_plant_joinable_containment_is_exact():
    sets = set_lake("webtable", 2_000, seed=5)
    untouched = [list(s) for s in sets]
    planted = plant_joinable(sets, 40, containments=(0.3, 0.6, 1.0), seed=2)
    assert len(planted) == 40
    used = [p.query_index for p in planted] + [p.target_index for p in planted]
    assert len(set(used)) == len(used)
    for i, pair in enumerate(planted):
        query, target = sets[pair.query_index], sets[pair.target_index]
        assert len(query) == len(set(query)) == len(untouched[pair.query_index])
        assert target == untouched[pair.target_index]
        overlap = len(set(query) & set(target))
        assert pair.overlap == overlap
        assert pair.containment == overlap / len(query)
        assert abs(pair.containment - (0.3, 0.6, 1.0)[i % 3]) <= 0.5 / len(query) + 1e-12
    with pytest.raises(ValueError, match="containments"):
        plant_joinable(sets, 1, containments=(1.5,))


# ------------------------------------------------------------------------------------------------
# generate_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, GroundTruth]:
    out = tmp_path_factory.mktemp("lake")
    return out, generate_lake(out, n_tables=30, seed=11, max_rows=400)


def _hashes(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _read(directory: Path, table: str, **kwargs) -> pd.DataFrame:
    return pd.read_csv(directory / f"{table}.csv", **kwargs)


def test_generate_lake_writes_tables_and_truth(lake):
    out, truth = lake
    assert sorted(p.stem for p in out.glob("*.csv")) == sorted(truth.tables)
    assert len(truth.tables) == 30
    assert GroundTruth.from_json(out / "ground_truth.json") == truth
    assert truth.joinable_pairs and truth.composite_keys and truth.near_duplicates and truth.unique_keys


def test_generate_lake_is_byte_identical_by_seed_across_hash_seeds(lake, tmp_path):
    out, _ = lake
    again = tmp_path / "again"
    script = (
        "import sys; from lakejoin.testing import generate_lake; generate_lake(sys.argv[1], n_tables=30, seed=11, "
        "max_rows=400)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", script, str(again)], check=True, env=env)
    assert _hashes(again) == _hashes(out)
    other = tmp_path / "other"
    generate_lake(other, n_tables=30, seed=12, max_rows=400)
    assert _hashes(other) != _hashes(out)


@pytest.mark.parametrize("read_as_text", [False, True])
def test_joinable_containment_matches_the_written_files(lake, read_as_text):
    out, truth = lake
    # Whether pandas infers types or keeps text, normalization must give the same sets.
    kwargs = {"dtype": str, "keep_default_na": False} if read_as_text else {}
    for pair in truth.joinable_pairs:
        left = normalize_set(_read(out, pair["left_table"], **kwargs)[pair["left_column"]])
        right = normalize_set(_read(out, pair["right_table"], **kwargs)[pair["right_column"]])
        assert pair["overlap"] == len(left & right)
        assert pair["containment"] == len(left & right) / len(left)


def test_composite_key_joinability_matches_duckdb(lake):
    out, truth = lake
    con = duckdb.connect()
    for key in truth.composite_keys:
        query_columns, target_columns = key["query_columns"], key["target_columns"]
        assert 2 <= len(query_columns) <= 5
        header = list(_read(out, key["target_table"], nrows=0).columns)
        positions = [header.index(c) for c in target_columns]
        assert positions != sorted(positions), "target must hold the key in another column order"
        assert len(header) > len(target_columns)
        q = ", ".join(f'lower(trim("{c}")) AS k{i}' for i, c in enumerate(query_columns))
        t = ", ".join(f'lower(trim("{c}")) AS k{i}' for i, c in enumerate(target_columns))
        on = " AND ".join(f"q.k{i} = t.k{i}" for i in range(len(query_columns)))
        query_csv, target_csv = (out / f"{key[side]}.csv" for side in ("query_table", "target_table"))
        sql = f"""
            WITH q AS (SELECT DISTINCT {q} FROM read_csv('{query_csv}', all_varchar=true)),
                 t AS (SELECT DISTINCT {t} FROM read_csv('{target_csv}', all_varchar=true))
            SELECT count(*) FROM q JOIN t ON {on}
        """
        assert con.execute(sql).fetchone()[0] == key["joinability"]


def test_near_duplicates_are_variants_present_in_both_columns(lake):
    out, truth = lake
    for dup in truth.near_duplicates:
        left = set(_read(out, dup["left_table"], dtype=str, keep_default_na=False)[dup["left_column"]])
        right = set(_read(out, dup["right_table"], dtype=str, keep_default_na=False)[dup["right_column"]])
        assert {v for v, _ in dup["pairs"]} == left
        for variant, original in dup["pairs"]:
            assert original in right
            assert normalize_value(variant) != normalize_value(original)
            assert normalize_value(variant) not in normalize_set(right)


def test_unique_keys_are_exactly_the_unique_columns(lake):
    out, truth = lake
    planted = {(k["table"], k["column"]) for k in truth.unique_keys}
    for table in truth.tables:
        frame = _read(out, table, dtype=str, keep_default_na=False)
        for column in frame.columns:
            values = [normalize_value(v) for v in frame[column]]
            is_unique = None not in values and len(set(values)) == len(values)
            assert is_unique == ((table, column) in planted), (table, column)


def test_generate_lake_bad_input(tmp_path):
    with pytest.raises(ValueError, match="n_tables"):
        generate_lake(tmp_path, n_tables=1)
    with pytest.raises(ValueError, match="override"):
        generate_lake(tmp_path, n_tables=5, rows=3)


# ------------------------------------------------------------------------------------------------
# oracles

SETS = {
    1: ["a", "b", "c"],
    2: ["b", "c", "d", "e"],
    3: ["x", "y"],
    4: ["a", "b", "c", "d", "z"],
    5: ["c"],
}


def test_overlap_topk_hand_checked():
    # Q = {a, b, c, d}: overlaps 1->3, 2->3, 3->0, 4->4, 5->1.
    query = ["a", "b", "c", "d", "d"]
    assert overlap_topk(query, SETS, k=3) == [(4, 4), (1, 3), (2, 3)]
    assert overlap_topk(query, SETS, k=10) == [(4, 4), (1, 3), (2, 3), (5, 1)]
    assert overlap_topk(["q"], SETS, k=2) == []
    with pytest.raises(ValueError, match="empty"):
        overlap_topk([], SETS, k=1)
    with pytest.raises(ValueError, match="k must"):
        overlap_topk(query, SETS, k=0)


def test_containment_search_hand_checked():
    query = ["a", "b", "c", "d"]
    assert containment_search(query, SETS, 0.75) == {1: 0.75, 2: 0.75, 4: 1.0}
    assert containment_search(query, SETS, 0.25) == {1: 0.75, 2: 0.75, 4: 1.0, 5: 0.25}
    with pytest.raises(ValueError, match="threshold"):
        containment_search(query, SETS, 0.0)
    with pytest.raises(ValueError, match="single string"):
        containment_search("abcd", SETS, 0.5)
