"""Run DAG files' ``dag.test()`` in a fresh process against a throwaway SQLite Airflow.

Airflow reads its configuration at import time, so DAG tests run in a process of their own (one
or several DAG runs in turn) with AIRFLOW_HOME pointing at a temporary metadata DB migrated once
per test run: the first ``prepare_airflow`` of any worker process migrates a DB and loads the settings through the
airflow CLI, every later one starts from a copy of that DB file as it was then (the same tables,
connections, pools and variables), which saves six airflow CLI processes per home.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lakejoin.deploy import airflow_cli, apply_settings

REPO = Path(__file__).resolve().parents[1]
# One Fernet key for every test home (Airflow encrypts connections with it; a generated key would
# differ per home): a DB copied from another home reads its connections.
FERNET_KEY = base64.urlsafe_b64encode(b"lakejoin-test-fernet-key-32bytes").decode()
# The folder every worker process of one test run shares (conftest sets it), where the run's
# freshly prepared metadata DB is kept; outside a test run, a folder of this process's own.
RUN_DIR_ENV = "LAKEJOIN_TEST_RUN_DIR"

_RUNNER = """
import json, runpy, sys
for dag_file, dag_id, conf in json.loads(sys.argv[1]):
    # the file read again for each run: a run renders its tasks' templated fields in place
    namespace = runpy.run_path(dag_file)
    dag = next(v for v in namespace.values() if type(v).__name__ == "DAG" and v.dag_id == dag_id)
    run = dag.test(run_conf=conf)
    name = lambda ti: ti.task_id + ("" if ti.map_index < 0 else f"[{ti.map_index}]")
    instances = run.get_task_instances()
    states = {name(ti): str(ti.state) for ti in instances}
    returned = {name(ti): ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index) for ti in instances}
    result = {"run_id": run.run_id, "state": str(run.state), "tasks": states, "returned": returned}
    result["upstream"] = {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}
    print("DAGRUN_RESULT " + json.dumps(result, default=str), flush=True)
"""


def airflow_env(home: Path) -> dict[str, str]:
    env = os.environ.copy()
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__CORE__FERNET_KEY=FERNET_KEY,
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
    )
    return env


def prepare_airflow(home: Path) -> dict[str, str]:
    """A fresh metadata DB with airflow_settings.yaml loaded: migrated and filled by the airflow
    CLI on the session's first call, a copy of that DB on later calls."""
    env = airflow_env(home)
    home.mkdir(parents=True, exist_ok=True)
    if RUN_DIR_ENV not in os.environ:
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="lakejoin-airflow-")
    run_dir = Path(os.environ[RUN_DIR_ENV])
    fresh = run_dir / "airflow-fresh.db"
    with open(run_dir / "airflow-fresh.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker preparing it: wait, then copy it
        if not fresh.exists():
            airflow_cli("db", "migrate", env=env)
            apply_settings(REPO / "airflow_settings.yaml", env=env)
            shutil.copyfile(home / "airflow.db", fresh)  # a copy: the home's own DB changes as its test runs
            return env
    shutil.copyfile(fresh, home / "airflow.db")
    return env


def run_dag_test(env: dict[str, str], dag_file: str, dag_id: str, conf: dict, timeout: int = 1200) -> dict:
    """``dag.test()`` of ``dag_id`` (in ``dags/dag_file``) with ``conf``: its run id, state, tasks' states,
    returned values and upstream tasks."""
    return run_dag_tests(env, [(dag_file, dag_id, conf)], timeout)[0]


def run_dag_tests(env: dict[str, str], runs: list[tuple[str, str, dict]], timeout: int = 1200) -> list[dict]:
    """``dag.test()`` of each (DAG file, DAG id, conf) of ``runs`` in turn, in one process: a process costs
    about ten CPU-seconds before its first task runs (Airflow's import, the in-process execution API's
    routes, the plugins), a later run in it under half a second."""
    described = [(str(REPO / "dags" / dag_file), dag_id, conf) for dag_file, dag_id, conf in runs]
    completed = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(described)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    results = [
        json.loads(line.removeprefix("DAGRUN_RESULT "))
        for line in completed.stdout.splitlines()
        if line.startswith("DAGRUN_RESULT ")
    ]
    if len(results) < len(runs):
        raise AssertionError(
            f"dag.test() of {runs[len(results)][1]} produced no result (exit {completed.returncode}):\n"
            f"{completed.stderr[-4000:]}"
        )
    return results
