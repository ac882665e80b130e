"""Apply ``airflow_settings.yaml`` (connections, pools, variables) to an Airflow metadata DB.

Runs the ``airflow`` CLI in a subprocess, so the library never imports Airflow. Used by
``make airflow-setup`` and the DAG tests; ``astro dev start`` reads the same file itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml


def airflow_cli(*args: str, env: dict[str, str] | None = None) -> str:
    """Run the ``airflow`` command of this environment and return its output; RuntimeError on failure."""
    executable = Path(sys.executable).with_name("airflow")
    completed = subprocess.run(
        [str(executable), *args], env=env or os.environ.copy(), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"airflow {' '.join(args)} failed: {completed.stderr[-2000:]}")
    return completed.stdout


def read_settings(settings_file: Path) -> dict:
    """The ``airflow:`` section of an ``airflow_settings.yaml``: connections, pools, variables."""
    return yaml.safe_load(settings_file.read_text())["airflow"]


def apply_settings(settings_file: Path, env: dict[str, str] | None = None) -> dict[str, int]:
    """Create or update every connection, pool and variable the file lists."""
    return apply_settings_of(read_settings(settings_file), env)


def apply_settings_of(settings: dict, env: dict[str, str] | None = None) -> dict[str, int]:
    """Create or update every connection, pool and variable of ``settings`` (as ``read_settings`` gives them)."""
    for pool in settings.get("pools", []):
        airflow_cli(
            "pools", "set", pool["pool_name"], str(pool["pool_slot"]), pool.get("pool_description", ""), env=env
        )
    for variable in settings.get("variables", []):
        airflow_cli("variables", "set", variable["variable_name"], str(variable["variable_value"]), env=env)
    for connection in settings.get("connections", []):
        if _has_connection(connection["conn_id"], env):
            airflow_cli("connections", "delete", connection["conn_id"], env=env)
        airflow_cli(
            "connections",
            "add",
            connection["conn_id"],
            "--conn-type",
            connection["conn_type"],
            "--conn-host",
            connection.get("conn_host", ""),
            "--conn-port",
            str(connection.get("conn_port", "")),
            "--conn-extra",
            json.dumps(connection.get("conn_extra", {})),
            env=env,
        )
    return {k: len(settings.get(k, [])) for k in ("connections", "pools", "variables")}


def _has_connection(conn_id: str, env: dict[str, str] | None) -> bool:
    try:
        airflow_cli("connections", "get", conn_id, env=env)
        return True
    except RuntimeError:
        return False
