"""dags/lakejoin_search.py run with dag.test(): the operators search and join on the test lake."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from airflow_harness import prepare_airflow, run_dag_tests

from lakejoin.config import LakeConfig
from lakejoin.query import QueryEngine

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def env(query_lake: LakeConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = prepare_airflow(tmp_path_factory.mktemp("airflow"))
    env["LAKEJOIN_HOME"] = str(query_lake.home)
    return env


@pytest.fixture(scope="module")
def searches(env: dict, query_lake: LakeConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Both tests' DAG runs, one after the other in one process (a DAG-test process costs about ten
    CPU-seconds before its first task): a search joined to a file, and a search stopped before the join."""
    folder = tmp_path_factory.mktemp("search-dag")
    engine = QueryEngine(query_lake)
    ids = {row["title"]: d for d, row in engine.snapshot().datasets.items()}
    source = folder / "query.parquet"
    pq.write_table(engine.snapshot().staged_table(ids["weather.csv"]).select(["origin"]), source)
    joined = {
        "method": "auto",
        "dataset_id": ids["bakeoff_challenges.csv"],
        "columns": ["series", "episode"],
        "k": 3,
        "policy": "aggregate",
        "output_path": str(folder / "joined.csv"),
    }
    searched = {"method": "josie", "table_path": str(source), "columns": ["origin"], "join": False}
    runs = run_dag_tests(
        env, [("lakejoin_search.py", "lakejoin_search", joined), ("lakejoin_search.py", "lakejoin_search", searched)]
    )
    return {"joined": {"conf": joined, "run": runs[0]}, "searched": {"conf": searched, "run": runs[1]}}


def test_the_search_dag_searches_and_joins(searches: dict, query_lake: LakeConfig) -> None:
    conf, run = searches["joined"]["conf"], searches["joined"]["run"]
    assert run["state"] == "success", run
    assert set(run["tasks"].values()) == {"success"}
    provenance = json.loads(Path(conf["output_path"] + ".provenance.json").read_text())
    expected = QueryEngine(query_lake).search("auto", ["series", "episode"], dataset_id=conf["dataset_id"], k=3)
    assert provenance["method"] == "mate" and provenance["snapshot_id"] == expected["snapshot_id"]
    assert provenance["dataset_id"] == expected["results"][0]["dataset_id"] and provenance["policy"] == "aggregate"


def test_the_search_dag_can_stop_after_the_search(searches: dict) -> None:
    run = searches["searched"]["run"]
    assert run["state"] == "success", run
    assert run["tasks"]["search"] == "success" and run["tasks"]["join"] == "skipped"
