"""dags/lakejoin_search.py run with dag.test(): the operators search and join on the test lake."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from airflow_harness import prepare_airflow, run_dag_test

from lakejoin.config import LakeConfig
from lakejoin.query import QueryEngine

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def env(query_lake: LakeConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = prepare_airflow(tmp_path_factory.mktemp("airflow"))
    env["LAKEJOIN_HOME"] = str(query_lake.home)
    return env


def test_the_search_dag_searches_and_joins(env: dict, query_lake: LakeConfig, tmp_path: Path) -> None:
    engine = QueryEngine(query_lake)
    challenges = next(d for d, row in engine.snapshot().datasets.items() if row["title"] == "bakeoff_challenges.csv")
    out = tmp_path / "joined.csv"
    conf = {
        "method": "auto",
        "dataset_id": challenges,
        "columns": ["series", "episode"],
        "k": 3,
        "policy": "aggregate",
        "output_path": str(out),
    }
    run = run_dag_test(env, "lakejoin_search.py", "lakejoin_search", conf)
    assert run["state"] == "success", run
    assert set(run["tasks"].values()) == {"success"}
    provenance = json.loads(Path(str(out) + ".provenance.json").read_text())
    expected = engine.search("auto", ["series", "episode"], dataset_id=challenges, k=3)
    assert provenance["method"] == "mate" and provenance["snapshot_id"] == expected["snapshot_id"]
    assert provenance["dataset_id"] == expected["results"][0]["dataset_id"] and provenance["policy"] == "aggregate"


def test_the_search_dag_can_stop_after_the_search(env: dict, query_lake: LakeConfig, tmp_path: Path) -> None:
    source = tmp_path / "query.parquet"
    engine = QueryEngine(query_lake)
    weather = next(d for d, row in engine.snapshot().datasets.items() if row["title"] == "weather.csv")
    pq.write_table(engine.snapshot().staged_table(weather).select(["origin"]), source)
    run = run_dag_test(
        env,
        "lakejoin_search.py",
        "lakejoin_search",
        {"method": "josie", "table_path": str(source), "columns": ["origin"], "join": False},
    )
    assert run["state"] == "success", run
    assert run["tasks"]["search"] == "success" and run["tasks"]["join"] == "skipped"
