"""A client for a real Airflow stack (lakejoin.airflow_local): its REST API as the UI calls it, signed in
as the stack's admin through the simple auth manager's /auth/token."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import requests

from lakejoin.airflow_local import ADMIN, Stack

FINISHED = ("success", "failed")


@dataclass
class AirflowStack:
    stack: Stack
    _token: str = field(default="", init=False)

    @property
    def url(self) -> str:
        return self.stack.config.url

    @property
    def token(self) -> str:
        """The admin's JWT (the UI keeps it in its ``_token`` cookie)."""
        self.headers()
        return self._token

    def headers(self) -> dict[str, str]:
        if not self._token:
            response = requests.post(
                f"{self.url}/auth/token", json={"username": ADMIN, "password": self.stack.password}, timeout=30
            )
            response.raise_for_status()
            self._token = response.json()["access_token"]
        return {"Authorization": f"Bearer {self._token}"}

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {**self.headers(), **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=120, **kwargs)

    def wait_for_dag(self, dag_id: str, timeout: float = 300.0) -> None:
        """Until the DAG processor has parsed ``dag_id`` into the metadata DB."""
        deadline = time.monotonic() + timeout
        while self.request("GET", f"/api/v2/dags/{dag_id}").status_code != 200:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} not parsed after {timeout:.0f} s (logs: {self.stack.config.state})")
            time.sleep(2.0)

    def unpause(self, dag_id: str) -> None:
        self.wait_for_dag(dag_id)
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()

    def trigger(self, dag_id: str, conf: dict) -> requests.Response:
        """What the UI's Trigger form sends: the form's params as the run's conf."""
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})

    def set_variable(self, key: str, value: str) -> None:
        self.request("PATCH", f"/api/v2/variables/{key}", json={"key": key, "value": value}).raise_for_status()

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
        """A task's return value as stored in the metadata DB (the JSON text an XCom costs)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        response = self.request("GET", path, params={"map_index": map_index})
        response.raise_for_status()
        value = response.json()["value"]
        return value if isinstance(value, str) else json.dumps(value)

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict:
        suffix = f"/{map_index}" if map_index >= 0 else ""
        response = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}{suffix}")
        response.raise_for_status()
        return response.json()

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """What one try of a task logged, as the UI's log view reads it (one line a record)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        response = self.request("GET", path, params={"full_content": True}, headers={"Accept": "application/json"})
        response.raise_for_status()
        content = response.json()["content"]
        return "\n".join(json.dumps(record) if isinstance(record, dict) else str(record) for record in content)

    def wait_for_task_state(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, state: str, timeout: float = 300.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while (found := self.task_instance(dag_id, run_id, task_id, map_index)["state"]) != state:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} {run_id} {task_id}[{map_index}] still {found} after {timeout:.0f} s")
            time.sleep(1.0)

    def wait_for_run_triggered_by(self, dag_id: str, source_dag_id: str, timeout: float = 600.0) -> str:
        """The id of the first Asset-triggered run of ``dag_id`` that an Asset event of a ``source_dag_id``
        run started (``upstreamAssetEvents``: the events a run consumed)."""
        deadline = time.monotonic() + timeout
        while True:
            for run in self.runs(dag_id):
                if run["run_type"] == "asset_triggered" and source_dag_id in self.triggering_dags(dag_id, run):
                    return run["dag_run_id"]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no run of {dag_id} triggered by {source_dag_id} after {timeout:.0f} s")
            time.sleep(3.0)

    def triggering_dags(self, dag_id: str, run: dict) -> set[str]:
        """The DAGs whose Asset events started ``run``."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents"
        response = self.request("GET", path)
        response.raise_for_status()
        return {event["source_dag_id"] for event in response.json()["asset_events"]}

    def wait_for_snapshot(self, snapshot_id: int, timeout: float = 300.0) -> None:
        """Until the plugin serves ``snapshot_id`` or a later one: a process keeps answering from the
        snapshot it has while it loads a newly published one (``lakejoin.query.snapshot``)."""
        deadline = time.monotonic() + timeout
        while (served := self.served_snapshot()) < snapshot_id:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the plugin serves snapshot {served}, not {snapshot_id}, after {timeout:.0f} s")
            time.sleep(1.0)

    def served_snapshot(self) -> int:
        """The snapshot the plugin answers from (its catalog route, like a search, looks for a newer one)."""
        return self.request("GET", "/lakejoin/api/catalog", params={"limit": 1}).json()["snapshot_id"]

    def runs(self, dag_id: str) -> list[dict]:
        response = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns")
        response.raise_for_status()
        return response.json()["dag_runs"]

    def wait_for_first_run(self, dag_id: str, run_type: str, timeout: float = 300.0) -> str:
        """The id of the first run of ``dag_id`` of ``run_type`` (e.g. ``asset_triggered``) once there is one."""
        deadline = time.monotonic() + timeout
        while not (found := [r for r in self.runs(dag_id) if r["run_type"] == run_type]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {run_type} run of {dag_id} after {timeout:.0f} s")
            time.sleep(3.0)
        return found[0]["dag_run_id"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900.0) -> dict:
        """The run once it has finished, with its task instances' states."""
        deadline = time.monotonic() + timeout
        while (run := self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json())["state"] not in FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} {run_id} still {run['state']} after {timeout:.0f} s")
            time.sleep(3.0)
        instances = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").json()
        run["tasks"] = {
            f"{t['task_id']}[{t['map_index']}]" if t["map_index"] >= 0 else t["task_id"]: t["state"]
            for t in instances["task_instances"]
        }
        return run
