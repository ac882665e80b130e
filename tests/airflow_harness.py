"""Run a DAG file's ``dag.test()`` in a fresh process against a throwaway SQLite Airflow.

Airflow reads its configuration at import time, so each DAG test runs in its own process
with AIRFLOW_HOME pointing at a temporary metadata DB migrated once per test session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lakejoin.deploy import airflow_cli, apply_settings

REPO = Path(__file__).resolve().parents[1]

_RUNNER = """
import json, runpy, sys
namespace = runpy.run_path(sys.argv[1])
dag = next(v for v in namespace.values() if type(v).__name__ == "DAG" and v.dag_id == sys.argv[2])
run = dag.test(run_conf=json.loads(sys.argv[3]))
name = lambda ti: ti.task_id + ("" if ti.map_index < 0 else f"[{ti.map_index}]")
states = {name(ti): str(ti.state) for ti in run.get_task_instances()}
returned = {name(ti): ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index) for ti in run.get_task_instances()}
upstream = {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}
print("DAGRUN_RESULT " + json.dumps({"state": str(run.state), "tasks": states, "returned": returned, "upstream": upstream}, default=str))
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
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
    )
    return env


def prepare_airflow(home: Path) -> dict[str, str]:
    """Migrate a fresh metadata DB and load airflow_settings.yaml into it."""
    env = airflow_env(home)
    home.mkdir(parents=True, exist_ok=True)
    airflow_cli("db", "migrate", env=env)
    apply_settings(REPO / "airflow_settings.yaml", env=env)
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
    raise AssertionError(f"dag.test() of {dag_id} produced no result (exit {completed.returncode}):\n{completed.stderr[-4000:]}")
