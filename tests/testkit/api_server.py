"""A real ``airflow api-server`` with the Lakejoin plugin on 127.0.0.1, signed in through Airflow's
simple auth manager."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests
from airflow_harness import prepare_airflow

from testkit.ports import free_port

USER, PASSWORD = "lake", "lake-test-password"
MAX_UPLOAD_BYTES = 256 * 1024  # small, so the 413 test uploads little


@dataclass
class ApiServer:
    url: str
    token: str
    process: subprocess.Popen
    log: Path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def post(self, path: str, headers: dict[str, str] | None = None, **kwargs) -> requests.Response:
        return requests.post(f"{self.url}{path}", headers={**self.headers(), **(headers or {})}, timeout=300, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        return requests.get(f"{self.url}{path}", headers=self.headers(), timeout=300, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def start_api_server(root: Path, lake_home: Path, timeout: float = 240) -> ApiServer:
    """``airflow api-server`` with the plugin, SimpleAuthManager user ``lake`` and a fixed JWT
    secret; returns once ``/auth/token`` issued a token (Airflow 3's simple-auth login)."""
    root.mkdir(parents=True, exist_ok=True)
    passwords = root / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    env = prepare_airflow(root / "airflow")
    env.update(
        AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords),
        AIRFLOW__API_AUTH__JWT_SECRET="lakejoin-test-secret-" + "x" * 32,
        LAKEJOIN_HOME=str(lake_home),
        LAKEJOIN_MAX_UPLOAD_BYTES=str(MAX_UPLOAD_BYTES),
    )
    port = free_port()
    log = root / "api-server.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"api-server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            response = requests.post(f"{url}/auth/token", json={"username": USER, "password": PASSWORD}, timeout=5)
            if response.status_code == 201:
                return ApiServer(url, response.json()["access_token"], process, log)
        except requests.ConnectionError:
            pass
        time.sleep(1)
    os.killpg(process.pid, signal.SIGTERM)
    raise RuntimeError(f"api-server did not answer within {timeout} s:\n{log.read_text()[-3000:]}")
