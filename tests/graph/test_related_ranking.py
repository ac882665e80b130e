"""Related tables ranked by join quality, on a planted lake through ``lakejoin run`` (the graph
published in the run's own snapshot) and ``lakejoin related`` / ``lakejoin search auto``.

The lake plants the trap join quality exists for: ``visits.clinic_code`` holds 300 small integer
codes with no partner table, and every distractor table holds an integer key covering them (item,
route, room, lot and station numbers), while the real key joins share fewer values:
``visits.patient_id`` (120 of 400 six-digit patient ids: the graph's integer overlaps, which
JOSIE's index leaves out) and ``visits.doctor`` (60 of 80 doctor codes, JOSIE), which a
table of shifts repeats many-to-many. By raw overlap a small-integer table comes first; by quality
the real parents do.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testkit.cli import run_cli

from lakejoin import cli
from lakejoin.config import LakeConfig
from lakejoin.graph import compute
from lakejoin.graph.edges import JOSIE, MATE, Edge
from lakejoin.graph.neighbours import Join, joins_of
from lakejoin.graph.store import pinned_graph
from lakejoin.lake import snapshots
from lakejoin.profile.join_quality import Side, composite_quality
from lakejoin.query.snapshot import load_snapshot

pytestmark = pytest.mark.spark

# the session's Spark master (tests/conftest.py): another one would stop the session other tests hold
RUN_OPTIONS = ("--families", "josie,mate", "--spark-master", "local[2]", "--json")


def planted_sources(folder: Path) -> None:
    rng = np.random.default_rng(35)
    folder.mkdir()
    patients = rng.choice(np.arange(100_000, 1_000_000), 400, replace=False)
    pd.DataFrame(
        {
            "patient_id": patients,
            "name": [f"patient {i}" for i in range(400)],
            "age": rng.integers(1, 96, 400),
            "county": rng.integers(1, 301, 400),
        }
    ).to_csv(folder / "patients.csv", index=False)
    visited = rng.choice(patients, 120, replace=False)
    doctors = [f"D-{i:04d}" for i in range(1, 81)]
    pd.DataFrame({"doctor_id": doctors, "name": [f"doctor {i}" for i in range(80)]}).to_csv(
        folder / "doctors.csv", index=False
    )
    pd.DataFrame({"doctor": np.repeat(doctors, 20), "weekday": np.tile(np.arange(1, 21), 80)}).to_csv(
        folder / "shifts.csv", index=False
    )
    pd.DataFrame(
        {
            "visit_id": rng.choice(np.arange(1_000_000, 9_999_999), 2000, replace=False),
            "patient_id": np.concatenate([visited, rng.choice(visited, 1880)]),
            "doctor": np.concatenate([doctors[:60], rng.choice(doctors[:60], 1940)]),
            "clinic_code": np.concatenate([np.arange(1, 301), rng.integers(1, 301, 1700)]),
            "year": rng.integers(2015, 2025, 2000),
            "cost": np.round(rng.uniform(10, 900, 2000), 2),
        }
    ).to_csv(folder / "visits.csv", index=False)
    distractors = {  # numeric columns covering the small codes: keys of their tables, or measures
        "inventory": {"item_no": np.arange(1, 451), "stock": rng.integers(0, 1000, 450)},
        "routes": {"route_no": np.arange(1, 321), "stops": rng.integers(2, 60, 320)},
        "survey": {
            "respondent": np.arange(1, 801),
            "age": rng.integers(1, 100, 800),
            "score": rng.integers(1, 301, 800),
        },
        "rooms": {"room": np.arange(1, 501), "floor": rng.integers(1, 30, 500)},
        "parcels": {"lot": np.arange(1, 351), "block": rng.integers(1, 301, 350)},
        "counts": {"station": np.arange(1, 401), "riders": rng.integers(1, 500, 400)},
    }
    for name, columns in distractors.items():
        pd.DataFrame(columns).to_csv(folder / f"{name}.csv", index=False)
    # a composite key, (team, player), and a table of games that repeats its tuples once per game
    # and names each player twice (as the player, and as the substitute's card: the same names)
    rosters = [(f"team {t}", f"player {15 * t + i}") for t in range(8) for i in range(25)]
    pd.DataFrame(rosters, columns=["team", "player"]).to_csv(folder / "rosters.csv", index=False)
    played = [(f"game {g}", *rosters[i]) for g in range(12) for i in sorted(rng.choice(200, 150, replace=False))]
    games = pd.DataFrame(played, columns=["game", "team", "player"])
    games.assign(substitute=games["player"]).to_csv(folder / "games.csv", index=False)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("planted")
    planted_sources(root / "sources")
    home = str(root / "home")
    run_cli("run", "--home", home, "--source", f"folder:{root / 'sources'}", *RUN_OPTIONS)
    return home, root / "sources"


def related(home: str, table: Path, *flags: str) -> dict:
    return run_cli("related", "--home", home, "--table", str(table), *flags, "--json")


def test_the_run_publishes_its_graph_and_the_key_join_comes_first(lake: tuple[str, Path]) -> None:
    home, sources = lake
    config = LakeConfig.from_args(home)
    assert [s.snapshot_id for s in snapshots.list_snapshots(config)] == [1]  # no second snapshot for the graph
    answer = related(home, sources / "visits.csv")
    assert answer["graph"]["current"] and answer["snapshot_id"] == 1
    best = {r["table"]: r for r in answer["related"][:2]}  # the two real parents, first
    first, second = best["patients.csv"], best["doctors.csv"]
    assert (first["method"], first["columns"]) == ("josie", [["patient_id", "patient_id"]])
    assert (second["method"], second["columns"]) == ("josie", [["doctor", "doctor_id"]])
    assert first["reason"] == second["reason"] == "all your values are keys of theirs"
    parts = first["evidence"]["quality"]
    assert {"score", "keyness", "containment", "coverage", "informativeness", "shape", "name", "growth"} <= set(parts)
    assert parts["score"] == first["quality"] and parts["cardinality"] == "n:1"
    listed = answer["related"] + answer["weak"]
    assert len({r["table"] for r in listed}) == len(listed)  # each table once
    others = [r for r in listed if r["table"] not in ("patients.csv", "doctors.csv")]
    assert {"inventory.csv", "routes.csv", "shifts.csv"} <= {r["table"] for r in others}
    assert all(r["quality"] < min(first["quality"], second["quality"]) for r in others)  # small codes, m:n after
    # the trap is real: by raw overlap a table sharing only small integers comes first
    raw = related(home, sources / "visits.csv", "--rank", "overlap")["related"]
    assert raw[0]["table"] != "patients.csv" and raw[0]["columns"][0][0] == "clinic_code"


def test_a_composite_join_counts_the_distinct_tuples_of_the_side_that_repeats_them(lake: tuple[str, Path]) -> None:
    """Games repeat each (team, player) tuple of the rosters once per game (1,800 rows, 200
    tuples; as a grid of their columns, 8 teams x 130 players, 1,040): every tuple is a key of
    the rosters, so the join contains all of them."""
    home, sources = lake
    answer = related(home, sources / "rosters.csv")
    first = [*answer["related"], *answer["weak"]][0]
    assert (first["table"], first["method"]) == ("games.csv", "mate")
    assert first["columns"] == [["team", "team"], ["player", "player"]]
    assert first["reason"] == "all their (team, player) tuples are keys of yours"
    assert first["evidence"]["quality"]["containment"] == 1.0
    assert first in answer["related"]  # worth making, not weak


def test_of_composite_mappings_as_good_the_one_whose_names_agree_is_the_join(lake: tuple[str, Path]) -> None:
    """The rosters' (team, player) maps onto the games' (team, player) and (team, substitute) alike:
    MATE reports one of them, whichever its order meets first. Names break the tie."""
    home, _ = lake
    config = LakeConfig.from_args(home)
    loaded = load_snapshot(config, snapshots.resolve(config))
    dataset = {row["title"]: dataset_id for dataset_id, row in loaded.datasets.items()}
    column = {
        (title, c.name): c.column_id
        for title in ("rosters.csv", "games.csv")
        for c in loaded.columns_of(dataset[title])
    }
    key = (column[("rosters.csv", "team")], column[("rosters.csv", "player")])
    substitute = (column[("games.csv", "team")], column[("games.csv", "substitute")])
    edge = Edge(MATE, dataset["rosters.csv"], key, dataset["games.csv"], substitute, 200, 1.0)
    (join,) = joins_of(loaded, dataset["rosters.csv"], [(edge, True)])
    assert join.other_ids == (column[("games.csv", "team")], column[("games.csv", "player")])
    assert join.quality.reason == "all their (team, player) tuples are keys of yours"


def test_search_auto_ranks_by_quality_and_never_returns_the_query_table(lake: tuple[str, Path]) -> None:
    home, sources = lake
    query = ("--home", home, "--table", str(sources / "visits.csv"), "--column", "doctor", "--json")
    auto, exact = run_cli("search", "auto", *query), run_cli("search", "josie", *query)
    assert auto["query"]["in_lake"] and all(r["dataset_id"] != auto["query"]["in_lake"] for r in auto["results"])
    assert [r["table"] for r in auto["results"][:2]] == ["doctors.csv", "shifts.csv"]
    assert auto["results"][0]["reason"] == "all your values are keys of theirs"
    assert auto["results"][0]["quality"] > auto["results"][1]["quality"]
    assert auto["results"][1]["quality_parts"]["cardinality"] == "m:n"
    # the exact answer is unchanged: JOSIE's top-k by overlap (the two tie at 60 shared codes)
    assert [r["overlap"] for r in exact["results"]] == [60, 60] and "quality" not in exact["results"][0]


def test_bad_input_is_named(lake: tuple[str, Path], tmp_path: Path) -> None:
    home, _ = lake
    for argv, message in [
        (["related", "--home", home, "--dataset", "no-such", "--json"], "not in snapshot"),
        (["related", "--home", home, "--dataset", "", "--json"], "not in snapshot"),
        (["related", "--home", home, "--table", str(tmp_path / "missing.csv"), "--json"], "not found"),
    ]:
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli.main(argv) == 2
        assert message in json.loads(out.getvalue())["error"]
    empty = tmp_path / "empty.csv"
    empty.write_text("patient_id\n")
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            cli.main(["search", "auto", "--home", home, "--table", str(empty), "--column", "patient_id", "--json"]) == 2
        )
    assert "empty" in json.loads(out.getvalue())["error"]


def test_a_run_updates_the_graph_incrementally_and_no_graph_leaves_it_to_later(lake: tuple[str, Path]) -> None:
    """Changes the module's lake (a dataset id names its source folder, so a copy would be a new
    lake): this test runs last."""
    home, sources = lake
    (sources / "rooms.csv").unlink()
    frame = pd.read_csv(sources / "patients.csv")
    frame.iloc[: len(frame) // 2].to_csv(sources / "patients.csv", index=False)
    argv = ("run", "--home", home, "--source", f"folder:{sources}", *RUN_OPTIONS)
    changed = run_cli(*argv)
    assert not changed["graph"]["full"] and changed["graph"]["changed_datasets"] == 2
    config = LakeConfig.from_args(home)
    loaded = load_snapshot(config, snapshots.resolve(config))
    incremental, full = pinned_graph(loaded), compute(loaded)
    assert incremental is not None
    held = {q: edges for q, edges in full.lists.items() if edges}  # graph/edges stores no row for an empty list
    assert {q: edges for q, edges in incremental.lists.items() if edges} == held  # incremental graph = full graph
    (sources / "routes.csv").unlink()
    assert "graph" not in run_cli(*argv, "--no-graph")
    stale = related(home, sources / "visits.csv")
    assert not stale["graph"]["current"] and "earlier state" in stale["graph"]["note"]


def test_the_smallest_composite_key_that_joins_as_well_comes_first() -> None:
    """(series, episode) and (series, episode, baker) both contain all of a table's tuples: the
    key without the column the join does not need is the table's join; a column join as good
    comes after the composite one."""
    columns = ["series", "episode", "baker"]
    sides = [Side(c, "integer" if c != "baker" else "string", 1000, 10) for c in columns]

    def join(method: str, ids: tuple[int, ...]) -> Join:
        key = [sides[i] for i in ids]
        return Join("episodes", method, ids, ids, composite_quality(1.0, 1.0, key, False, key), {})

    bigger, smaller, column = join(MATE, (0, 1, 2)), join(MATE, (0, 1)), join(JOSIE, (2,))
    assert bigger.quality.score == smaller.quality.score == column.quality.score
    assert sorted([column, bigger, smaller], key=lambda j: j.order) == [smaller, bigger, column]
