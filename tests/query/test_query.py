"""lakejoin.query on the shared real test lake: each method against a brute-force answer, the
auto picks, file vs dataset queries, bad input, snapshot swaps, join materialization and the CLI."""

from __future__ import annotations

import collections
import io
import json
import shutil
import threading
from contextlib import redirect_stdout
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit.cli import run_cli, without_timing

from lakejoin import cli
from lakejoin.config import LakeConfig
from lakejoin.ids import sha256_file
from lakejoin.index import registry
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import CELLS, COLUMNS
from lakejoin.normalize import normalize_set, normalize_value
from lakejoin.query import QueryEngine, read_table_file
from lakejoin.query import engine as engine_module
from lakejoin.query.join import KeyPair, join, provenance_of, write_table
from lakejoin.query.memory import (
    MEMORY_LIMIT_VARIABLE,
    IndexTooLarge,
    estimated_load_bytes,
    parse_size,
)
from lakejoin.query.ranking import candidates_for
from lakejoin.query.sharded import ShardedFamily
from lakejoin.testing.oracles import containment_search, overlap_topk

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def engine(query_lake: LakeConfig) -> QueryEngine:
    return QueryEngine(query_lake)


@pytest.fixture(scope="module")
def lake(engine: QueryEngine) -> dict:
    """title -> dataset_id, and each indexed column's distinct normalized values."""
    loaded = engine.snapshot()
    cells = delta.read_arrow(engine.config.table_path(CELLS), loaded.snapshot.version_of(CELLS))
    values: dict[int, set[str]] = collections.defaultdict(set)
    for column_id, value in zip(cells["column_id"].to_pylist(), cells["value"].to_pylist()):
        if value is not None:
            values[column_id].add(value)
    columns = delta.read_arrow(engine.config.table_path(COLUMNS), loaded.snapshot.version_of(COLUMNS)).to_pylist()
    return {
        "ids": {row["title"]: dataset_id for dataset_id, row in loaded.datasets.items()},
        "values": values,
        "columns": {c["column_id"]: c for c in columns},
    }


def family_sets(lake: dict, family: str, exclude_dataset: str) -> dict[int, set[str]]:
    return {
        cid: lake["values"][cid]
        for cid, c in lake["columns"].items()
        if family in (c["indexed_by"] or []) and c["dataset_id"] != exclude_dataset and lake["values"][cid]
    }


QUERIES = [
    ("weather.csv", "origin"),
    ("bakeoff_challenges.csv", "baker"),
    ("planes.csv", "manufacturer"),
    ("airports.csv", "tzone"),
]


@pytest.mark.parametrize(("title", "column"), QUERIES)
def test_josie_equals_the_overlap_oracle(engine: QueryEngine, lake: dict, title: str, column: str) -> None:
    dataset_id = lake["ids"][title]
    response = engine.search("josie", [column], dataset_id=dataset_id, k=5)
    query = normalize_set(engine.snapshot().staged_table(dataset_id).column(column).to_pylist())
    expected = overlap_topk(query, family_sets(lake, "josie", dataset_id), 5)
    assert [r["overlap"] for r in response["results"]] == [overlap for _, overlap in expected]
    for result in response["results"]:
        exact = len(query & lake["values"][result["column_id"]])
        assert result["overlap"] == exact and result["containment"] == pytest.approx(exact / len(query))
        assert result["dataset_id"] != dataset_id
        assert result["column"] == lake["columns"][result["column_id"]]["name"]
        assert set(result["matched_sample"]) <= query & lake["values"][result["column_id"]]
    assert response["snapshot_id"] == snapshots.resolve(engine.config).snapshot_id
    assert [r["rank"] for r in response["results"]] == list(range(1, len(response["results"]) + 1))


@pytest.mark.parametrize(("title", "column"), QUERIES[1:])
def test_verified_lshensemble_results_are_exact(engine: QueryEngine, lake: dict, title: str, column: str) -> None:
    dataset_id = lake["ids"][title]
    response = engine.search(
        "lshensemble", [column], dataset_id=dataset_id, k=10, params={"threshold": 0.3, "verify": True}
    )
    query = normalize_set(engine.snapshot().staged_table(dataset_id).column(column).to_pylist())
    truth = containment_search(query, family_sets(lake, "lshensemble", dataset_id), 0.3)
    for result in response["results"]:  # precision 1.0 once verified, exact containment reported
        assert result["containment"] == pytest.approx(truth[result["column_id"]])
        assert 0.0 <= result["containment_estimate"] <= 1.0


def test_mate_joinability_equals_the_brute_force_join(engine: QueryEngine, lake: dict) -> None:
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    response = engine.search("mate", ["series", "episode"], dataset_id=dataset_id, k=3)
    query = engine.snapshot().staged_table(dataset_id).to_pandas()

    def key(frame, a, b):
        return {(normalize_value(x), normalize_value(y)) for x, y in zip(frame[a], frame[b])} - {(None, None)}

    tuples = key(query, "series", "episode")
    assert response["results"], "the bakeoff tables share (series, episode)"
    for result in response["results"]:
        found = engine.snapshot().staged_table(result["dataset_id"]).to_pandas()
        mapped = result["mapping"]
        assert result["joinability"] == len(
            tuples & key(found, mapped["series"]["column"], mapped["episode"]["column"])
        )
    titles = {r["table"] for r in response["results"] if r["joinability"] == len(tuples)}
    assert {"bakeoff_ratings.csv", "bakeoff_episodes.csv"} & titles


def test_pexeso_threshold_mode_ranks_by_exact_joinability(engine: QueryEngine, lake: dict) -> None:
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    results = engine.search("pexeso", ["baker"], dataset_id=dataset_id, k=3, params={"T": 0.6})["results"]
    assert results and all(r["joinability"] >= 0.6 and r["joinability_exact"] for r in results)
    assert [r["joinability"] for r in results] == sorted((r["joinability"] for r in results), reverse=True)
    assert ("bakeoff_bakers.csv", "baker") in {(r["table"], r["column"]) for r in results}
    bounds = engine.search("pexeso", ["baker"], dataset_id=dataset_id, k=3, params={"T": 0.6, "lower_bound": True})[
        "results"
    ]
    assert {r["column_id"] for r in bounds} == {r["column_id"] for r in results}
    exact = {r["column_id"]: r["joinability"] for r in results}
    assert all(0.6 <= r["joinability"] <= exact[r["column_id"]] for r in bounds)
    assert not all(r["joinability_exact"] for r in bounds)  # the bakers' 1.0 stops at T


def test_pexeso_finds_the_equal_column_first(engine: QueryEngine, lake: dict) -> None:
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    response = engine.search("pexeso", ["baker"], dataset_id=dataset_id, k=3, params={"exact": True})
    best = response["results"][0]
    assert (best["table"], best["column"]) == ("bakeoff_bakers.csv", "baker")
    assert best["joinability"] == 1.0 and best["model"] == engine.snapshot().searcher("pexeso")[0].model
    assert all(len(pair) == 2 for pair in best["sample_pairs"])


def test_auto_picks_by_query_shape(engine: QueryEngine, lake: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    challenges = lake["ids"]["bakeoff_challenges.csv"]
    one = engine.search("auto", ["baker"], dataset_id=challenges, k=4)
    assert one["method"] == "josie" and one["auto"]["picked"] == ["josie"] and len(one["results"]) == 4
    # JOSIE's best by overlap, the best four by join quality first, each with its exact overlap
    exact = engine.search("josie", ["baker"], dataset_id=challenges, k=candidates_for(4))["results"]
    by_column = {r["column_id"]: r for r in exact}
    assert all(r["overlap"] == by_column[r["column_id"]]["overlap"] for r in one["results"])
    assert [r["quality"] for r in one["results"]] == sorted((r["quality"] for r in one["results"]), reverse=True)
    assert all(
        r["reason"] and {"keyness", "containment", "informativeness"} <= set(r["quality_parts"]) for r in one["results"]
    )
    assert all(r["dataset_id"] != challenges for r in one["results"])
    assert engine.search("auto", ["series", "episode"], dataset_id=challenges)["method"] == "mate"
    assert engine.search("auto", ["baker"], dataset_id=challenges, params={"semantic": True})["method"] == "pexeso"
    monkeypatch.setattr(engine_module, "AUTO_LSH_MIN_DISTINCT", 100)
    large = engine.search("auto", ["baker"], dataset_id=challenges, k=3)
    assert large["auto"]["picked"] == ["josie", "lshensemble"]
    assert all("containment_estimate" in r and "overlap" in r for r in large["results"])


def test_a_file_query_equals_the_dataset_query(engine: QueryEngine, lake: dict, tmp_path: Path) -> None:
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    path = tmp_path / "challenges.parquet"
    pq.write_table(engine.snapshot().staged_table(dataset_id), path)
    from_file = engine.search("josie", ["baker"], table=read_table_file(path), k=6)
    from_lake = engine.search("josie", ["baker"], dataset_id=dataset_id, k=5)

    def strip(results):
        return [{k: v for k, v in r.items() if k != "rank"} for r in results if r["dataset_id"] != dataset_id]

    assert strip(from_file["results"])[:5] == strip(from_lake["results"])
    assert from_file["query"]["file"] == "challenges.parquet"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (dict(method="josie", columns=["nope"]), "unknown column"),
        (dict(method="josie", columns=["baker"], k=0), "k must be"),
        (dict(method="josie", columns=["baker"], k=101), "k must be"),
        (dict(method="josie", columns=["baker"], params={"tau": 0.1}), "unknown parameter"),
        (dict(method="lshensemble", columns=["baker"], params={"threshold": "high"}), "must be float"),
        (dict(method="bm25", columns=["baker"]), "unknown method"),
        (dict(method="josie", columns=[]), "no query column"),
        (dict(method="josie", columns=["series", "episode"]), "searches one column"),
        (dict(method="auto", columns=["series", "episode"], params={"semantic": True}), "exactly one query column"),
    ],
)
def test_bad_queries_are_named(engine: QueryEngine, lake: dict, call: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        engine.search(dataset_id=lake["ids"]["bakeoff_challenges.csv"], **call)


def test_bad_sources_are_named(engine: QueryEngine, lake: dict, tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="not in snapshot"):
        engine.search("josie", ["x"], dataset_id="no-such-dataset")
    with pytest.raises(ValueError, match="exactly one"):
        engine.search("josie", ["x"])
    empty = tmp_path / "empty.csv"
    empty.write_text("name\nNA\n\n")
    with pytest.raises(ValueError, match="empty"):
        engine.search("josie", ["name"], table=read_table_file(empty))
    with pytest.raises(LookupError, match="not published"):
        engine.search("josie", ["baker"], dataset_id=lake["ids"]["bakeoff_challenges.csv"], snapshot_id=999)


def test_a_publish_swaps_the_snapshot_and_queries_stay_consistent(query_lake: LakeConfig, tmp_path: Path) -> None:
    config = LakeConfig(home=tmp_path / "home")
    shutil.copytree(query_lake.home, config.home)
    engine = QueryEngine(config, refresh_seconds=0.0)
    first = engine.snapshot()
    dataset_id = next(d for d, row in first.datasets.items() if row["title"] == "bakeoff_challenges.csv")
    before = engine.search("josie", ["baker"], dataset_id=dataset_id, k=3)
    # A build writes a new index version (here: an empty JOSIE sets table) but has not published
    # it yet: queries keep reading the versions the snapshot pins.
    sets = delta.read_arrow(config.table_path("index/josie/sets"), first.snapshot.version_of("index/josie/sets"))
    delta.write_arrow(config.table_path("index/josie/sets"), sets.slice(0, 0))
    fresh = QueryEngine(config, refresh_seconds=0.0)
    assert fresh.search("josie", ["baker"], dataset_id=dataset_id, k=3)["results"] == before["results"]
    seen: list[int] = []
    errors: list[BaseException] = []

    def client() -> None:
        try:
            for _ in range(20):
                seen.append(engine.search("josie", ["baker"], dataset_id=dataset_id, k=3)["snapshot_id"])
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=client) for _ in range(3)]
    for thread in threads:
        thread.start()
    republished = snapshots.publish(config, first.snapshot.table_versions, {"republished": True})
    for thread in threads:
        thread.join()
    assert not errors
    assert set(seen) <= {first.snapshot_id, republished.snapshot_id}
    after = engine.search("josie", ["baker"], dataset_id=dataset_id, k=3)
    assert after["snapshot_id"] == republished.snapshot_id and after["results"] == before["results"]
    assert (
        engine.search("josie", ["baker"], dataset_id=dataset_id, k=3, snapshot_id=first.snapshot_id)["snapshot_id"]
        == first.snapshot_id
    )


def merge_oracle(query: pd.DataFrame, found: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """pandas inner merge on normalized keys: the rows ``explode`` must produce."""
    left = query.assign(**{f"_k{i}": query[q].map(normalize_value) for i, (q, _) in enumerate(pairs)}).reset_index(
        names="_row"
    )
    right = found.assign(**{f"_k{i}": found[f].map(normalize_value) for i, (_, f) in enumerate(pairs)}).reset_index(
        names="_found"
    )
    keys = [f"_k{i}" for i in range(len(pairs))]
    return left.dropna(subset=keys).merge(right.dropna(subset=keys), on=keys)


@pytest.mark.parametrize(
    ("title", "pairs"),
    [
        ("bakeoff_bakers.csv", [("baker", "baker")]),
        ("bakeoff_ratings.csv", [("series", "series"), ("episode", "episode")]),
    ],
)
def test_join_policies_against_a_pandas_merge(
    engine: QueryEngine, lake: dict, title: str, pairs: list[tuple[str, str]]
) -> None:
    loaded = engine.snapshot()
    query = loaded.staged_table(lake["ids"]["bakeoff_challenges.csv"])
    found = loaded.staged_table(lake["ids"][title])
    keys = [KeyPair(q, f) for q, f in pairs]
    merged = merge_oracle(query.to_pandas(), found.to_pandas(), pairs)
    exploded = join(query, found, keys, policy="explode", how="inner", prefix="f")
    assert exploded.num_rows == len(merged)
    assert sorted(zip(exploded["rownames"].to_pylist(), exploded["f__rownames"].to_pylist())) == sorted(
        zip(merged["rownames_x"], merged["rownames_y"])
    )
    first = join(query, found, keys, policy="first", prefix="f")
    assert first.num_rows == query.num_rows
    firsts = merged.sort_values("_found").groupby("_row")["_found"].first()
    found_rows = found.to_pandas()
    for row, found_row in firsts.items():
        assert first["f__rownames"][row].as_py() == found_rows["rownames"][found_row]
    counts = merged.groupby("_row").size()
    assert first["f__match_count"].to_pylist() == [int(counts.get(i, 0)) for i in range(query.num_rows)]
    aggregated = join(query, found, keys, policy="aggregate", how="inner", prefix="f")
    assert aggregated.num_rows == len(counts)


def test_join_learns_a_transformation(engine: QueryEngine, lake: dict) -> None:
    """Planted: the query holds the bakers as "Last, First"; the lake has "First Last"."""
    bakers = engine.snapshot().staged_table(lake["ids"]["bakeoff_bakers.csv"])
    full = [f for f in dict.fromkeys(bakers["baker_full"].to_pylist()) if f and " " in f][:60]
    query = pa.table(
        {
            "name": [f.split(" ", 1)[1] + ", " + f.split(" ", 1)[0] for f in full],
            "n": [str(i) for i in range(len(full))],
        }
    )
    joined = join(query, bakers, [KeyPair("name", "baker_full")], transform="learn", prefix="b")  # the default method
    assert joined["b__baker_full"].to_pylist() == full
    assert provenance_of(joined)["transform"]["method"] == "cst++"
    programs = provenance_of(joined)["transform"]["programs"]
    assert programs
    by_program = join(query, bakers, [KeyPair("name", "baker_full")], transform=programs[0], prefix="b")
    assert by_program["b__baker_full"].to_pylist() == full
    assert join(query, bakers, [KeyPair("name", "baker_full")], prefix="b")["b__match_count"].to_pylist() == [0] * len(
        full
    )


def test_engine_join_writes_provenance(engine: QueryEngine, lake: dict, tmp_path: Path) -> None:
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    table, summary = engine.join("mate", ["series", "episode"], dataset_id=dataset_id, policy="first")
    provenance = provenance_of(table)
    assert provenance["snapshot_id"] == summary["snapshot_id"] and provenance["method"] == "mate"
    assert provenance["dataset_id"] == summary["result"]["dataset_id"] != dataset_id
    assert provenance["query_rows_matched"] == table.num_rows  # every (series, episode) is in the found table
    (parquet,) = write_table(table, tmp_path / "out.parquet")
    assert provenance_of(pq.read_table(parquet)) == provenance
    csv, sidecar = write_table(table, tmp_path / "out.csv")
    assert json.loads(sidecar.read_text()) == provenance
    assert pd.read_csv(csv, dtype=str).shape == (table.num_rows, table.num_columns)
    semantic, summary = engine.join("pexeso", ["baker"], dataset_id=dataset_id)
    assert provenance_of(semantic)["semantic"]["model"] == summary["result"]["model"]
    assert provenance_of(semantic)["query_rows_matched"] == semantic.num_rows
    with pytest.raises(ValueError, match="format"):
        write_table(table, tmp_path / "out.xlsx")
    with pytest.raises(LookupError, match="no rank"):
        engine.join("josie", ["baker"], dataset_id=dataset_id, rank=100, k=100)


def cli_text(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(list(argv)) == 0
    return out.getvalue()


def result_rows(text: str) -> list[str]:
    """The table rows of ``lakejoin search``'s text output (after the summary, header and rule lines)."""
    return [line for line in text.splitlines()[3:] if line[:6].strip().isdigit()]


def test_the_cli_shows_a_column_searched_against_itself_at_1(engine: QueryEngine, lake: dict, tmp_path: Path) -> None:
    """A lake table's columns in a file of other bytes: PEXESO finds its own column with jn 1.000,
    exact (no "≥"); ``--lower-bound`` stops that column at T and marks it. The lake table's own
    file is that table: it is named once and not listed as its own result."""
    home, dataset_id = str(engine.config.home), lake["ids"]["bakeoff_bakers.csv"]
    staged = engine.snapshot().staged_table(dataset_id).to_pandas()
    path = tmp_path / "bakers.csv"
    staged[["baker"]].to_csv(path, index=False)  # the bakers, not the table's bytes
    query = ("search", "pexeso", "--home", home, "--table", str(path), "--column", "baker", "-k", "3")

    def own(text: str) -> list[str]:
        return next(row.split() for row in result_rows(text) if row.split()[1:3] == ["bakeoff_bakers.csv", "baker"])

    text = cli_text(*query)
    assert own(text)[3] == "1.000" and "≥" not in text  # challenges.baker holds every baker too: a tie at 1.0
    found = {(r["dataset_id"], r["column"]): r for r in run_cli(*query, "--json")["results"]}
    assert (found[dataset_id, "baker"]["joinability"], found[dataset_id, "baker"]["joinability_exact"]) == (1.0, True)
    bounded = own(cli_text(*query, "--lower-bound", "-k", "50"))  # lower bounds tie near T: list every column past it
    assert bounded[3] == "≥" and 0.6 <= float(bounded[4]) < 1.0
    itself = tmp_path / "bakers-itself.csv"
    staged.to_csv(itself, index=False)  # the bytes the lake ingested
    assert sha256_file(itself) == engine.snapshot().datasets[dataset_id]["content_sha256"]
    for method in ("pexeso", "josie", "auto"):
        argv = ("search", method, "--home", home, "--table", str(itself), "--column", "baker", "-k", "3")
        answer = run_cli(*argv, "--json")
        assert answer["query"]["in_lake"] == dataset_id and answer["results"]
        assert all(r["dataset_id"] != dataset_id for r in answer["results"])
        assert cli_text(*argv).count(dataset_id) == 1  # named once, in the note


def test_the_cli_text_is_an_aligned_table_with_integer_counts(engine: QueryEngine, lake: dict) -> None:
    """Every method's rows line up under the header; counts print as integers, never 2e+04."""
    home, dataset_id = str(engine.config.home), lake["ids"]["bakeoff_challenges.csv"]
    searches = [
        ("josie", "--column", "baker"),
        ("lshensemble", "--column", "baker", "--threshold", "0.3"),
        ("mate", "--columns", "series,episode"),
        ("pexeso", "--column", "baker"),
    ]
    for method, *flags in searches:
        argv = ("search", method, "--home", home, "--dataset", dataset_id, *flags, "-k", "4")
        text, results = cli_text(*argv), run_cli(*argv, "--json")["results"]
        header, rows = text.splitlines()[1], result_rows(text)
        assert len(rows) == len(results) > 0, text
        for row, result in zip(rows, results):
            assert row.index(result["table"]) == header.index("table") and "e+" not in row
            if method == "mate":
                assert f"{result['joinability']:,} ({result['share']:.3f})" in row


def test_the_cli_goes_through_the_engine(engine: QueryEngine, lake: dict, tmp_path: Path) -> None:
    home = str(engine.config.home)
    dataset_id = lake["ids"]["bakeoff_challenges.csv"]
    searched = run_cli(
        "search",
        "lshensemble",
        "--home",
        home,
        "--dataset",
        dataset_id,
        "--column",
        "baker",
        "-k",
        "4",
        "--threshold",
        "0.4",
        "--verify",
        "--json",
    )
    assert without_timing(searched) == without_timing(
        engine.search("lshensemble", ["baker"], dataset_id=dataset_id, k=4, params={"threshold": 0.4, "verify": True})
    )
    out = tmp_path / "joined.csv"
    joined = run_cli(
        "join",
        "auto",
        "--home",
        home,
        "--dataset",
        dataset_id,
        "--columns",
        "series,episode",
        "--policy",
        "aggregate",
        "--out",
        str(out),
        "--json",
    )
    assert joined["files"] == [str(out), str(out) + ".provenance.json"] and joined["method"] == "mate"
    bad = io.StringIO()
    with redirect_stdout(bad):
        assert cli.main(["search", "josie", "--home", home, "--dataset", dataset_id, "--column", "nope", "--json"]) == 2
    assert "unknown column" in json.loads(bad.getvalue())["error"]


def test_an_index_too_large_for_memory_is_refused_and_nothing_else_breaks(
    query_lake: LakeConfig,
    lake: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The load estimate comes from the Delta log's row counts; past the memory budget the index
    is served shard by shard (tests/test_discover.py), and when even one shard is over it the load
    is refused with a clear error (not an OOM kill), and the same engine serves once memory allows."""
    fresh = QueryEngine(query_lake)  # no searcher loaded yet
    dataset_id = lake["ids"]["weather.csv"]
    loaded = fresh.snapshot()
    rows = {name: loaded.row_count(f"index/josie/{name}") for name in loaded.index_tables_of("josie")}
    needed = estimated_load_bytes("josie", rows)
    assert rows["postings"] > 0 and needed >= rows["postings"] * registry.family("josie").load_bytes_per_row["postings"]
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(min(ShardedFamily(loaded, "josie").load_bytes.values()) - 1))
    with pytest.raises(
        IndexTooLarge, match=r"josie index of snapshot \d+ needs about [\d.]+ MiB to load \([\d,]+ rows in index/josie/"
    ):
        fresh.search("josie", ["origin"], dataset_id=dataset_id)
    monkeypatch.setattr(engine_module, "_engines", {})  # the CLI's in-process engine loads afresh too
    bad = io.StringIO()
    with redirect_stdout(bad):
        assert (
            cli.main(
                [
                    "search",
                    "josie",
                    "--home",
                    str(query_lake.home),
                    "--dataset",
                    dataset_id,
                    "--column",
                    "origin",
                    "--json",
                ]
            )
            == 2
        )
    assert "needs about" in json.loads(bad.getvalue())["error"]
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(needed))
    assert fresh.search("josie", ["origin"], dataset_id=dataset_id)["results"]


@pytest.mark.parametrize(
    ("text", "size"), [("512", 512), ("2K", 2048), ("1.5G", 3 * 2**29), ("8GiB", 8 * 2**30), ("3 mb", 3 * 2**20)]
)
def test_memory_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_memory_size_is_named() -> None:
    with pytest.raises(ValueError, match="LAKEJOIN_INDEX_MEMORY"):
        parse_size("lots")
