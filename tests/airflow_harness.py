"""Run a DAG file's ``dag.test()`` in a fresh process against a throwaway SQLite Airflow.

Airflow reads its configuration at import time, so each DAG test runs in its own process
with AIRFLOW_HOME pointing at a temporary metadata DB migrated once per test session: the first
``prepare_airflow`` migrates a DB and loads the settings through the airflow CLI, later ones
start from a copy of that DB file as it was then (the same tables, connections, pools and
variables), which saves six airflow CLI processes per home.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lakejoin.deploy import airflow_cli, apply_settings

REPO = Path(__file__).resolve().parents[1]
# One Fernet key for every test home (Airflow encrypts connections with it; a generated key would
# differ per home): a DB copied from another home reads its connections.
FERNET_KEY = base64.urlsafe_b64encode(b"lakejoin-test-fernet-key-32bytes").decode()
_fresh_db: list[Path] = []  # the session's freshly prepared metadata DB, once there is one

_RUNNER = """
import json, runpy, sys
namespace = runpy.run_path(sys.argv[1])
dag = next(v for v in namespace.values() if type(v).__name__ == "DAG" and v.dag_id == sys.argv[2])
run = dag.test(run_conf=json.loads(sys.argv[3]))
name = lambda ti: ti.task_id + ("" if ti.map_index < 0 else f"[{ti.map_index}]")
states = {name(ti): str(ti.state) for ti in run.get_task_instances()}
returned = {name(ti): ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index) for ti in run.get_task_instances()}
upstream = {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}
result = {"state": str(run.state), "tasks": states, "returned": returned, "upstream": upstream}
print("DAGRUN_RESULT " + json.dumps(result, default=str))
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
    if _fresh_db:
        shutil.copyfile(_fresh_db[0], home / "airflow.db")
        return env
    airflow_cli("db", "migrate", env=env)
    apply_settings(REPO / "airflow_settings.yaml", env=env)
    fresh = home.with_name(f"{home.name}-fresh.db")  # beside the home: its own DB changes as its test runs
    shutil.copyfile(home / "airflow.db", fresh)
    _fresh_db.append(fresh)
    return env


def run_dag_test(env: dict[str, str], dag_file: str, dag_id: str, conf: dict, timeout: int = 1200) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(REPO / "dags" / dag_file), dag_id, json.dumps(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    for line in completed.stdout.splitlines():
        if line.startswith("DAGRUN_RESULT "):
            return json.loads(line.removeprefix("DAGRUN_RESULT "))
    raise AssertionError(
        f"dag.test() of {dag_id} produced no result (exit {completed.returncode}):\n{completed.stderr[-4000:]}"
    )
