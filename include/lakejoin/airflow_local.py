"""Lakejoin's Airflow on this machine: PostgreSQL, the four Airflow 3 components, optionally Spark.

``python -m lakejoin.airflow_local up`` (``make airflow``) starts, in this order: a PostgreSQL
cluster from the operating system's packages on 127.0.0.1 (the metadata DB), ``airflow db
migrate``, ``airflow_settings.yaml``, a Spark standalone master and worker when asked
(``--spark-cluster``; ``spark_default`` and ``$LAKEJOIN_SPARK_MASTER`` then point at it), and the
API server (UI), scheduler (LocalExecutor), DAG processor and triggerer. It prints the UI address
and the admin login, then waits; Ctrl-C or ``python -m lakejoin.airflow_local down`` (``make
airflow-stop``) stops every process and the database. Starting again reuses the database.

Everything lives under the state folder (``./.airflow`` by default): ``postgres/`` (the DB
cluster), ``home/`` (AIRFLOW_HOME: task logs, the generated passwords), ``logs/`` (one file a
process), ``secrets.json`` (the Fernet key and JWT secret, made once) and ``pids.json``. The
airflow CLI runs in subprocesses: this module never imports Airflow.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lakejoin.deploy import airflow_cli, apply_settings_of, read_settings

REPO = Path(__file__).resolve().parents[2]
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
DB_USER = DB_NAME = "airflow"
ADMIN = "admin"
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its state and which ports it takes on 127.0.0.1."""

    state: Path = REPO / ".airflow"
    api_port: int = 8080
    db_port: int = 5433
    spark_cluster: bool = False
    spark_port: int = 7077
    spark_ui_port: int = 8081
    lake_home: str | None = None  # $LAKEJOIN_HOME of every component; None = inherit (else ./.lakejoin)
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The Airflow API server's base URL (the UI and the REST and task execution APIs live under it)."""
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def spark_master(self) -> str:
        """The standalone Spark master's URL: the stack's worker joins it, and with ``spark_cluster`` the
        lake's Spark jobs run on it."""
        return f"spark://127.0.0.1:{self.spark_port}"


@dataclass
class Stack:
    """A started stack: its processes (each the leader of its own process group) and the login."""

    config: StackConfig
    processes: dict[str, subprocess.Popen]
    env: dict[str, str]
    password: str

    def restart(self, component: str, env: dict[str, str] | None = None) -> None:
        """Stop one component and start it again, with ``env`` (else the stack's environment): the
        scheduler's task processes inherit its environment, so a new one changes theirs."""
        process = self.processes[component]
        stop_groups([process.pid], [process])
        process.wait()
        self.processes[component] = _spawn_component(component, env or self.env, self.config.state / "logs")
        _record_pids(self.config.state, self.processes)

    def stop(self) -> None:
        """Stop every component, the last started first (each process group SIGTERMed, killed after
        ``STOP_GRACE_S``), then PostgreSQL, and forget the recorded process ids."""
        children = list(reversed(self.processes.values()))
        stop_groups([p.pid for p in children], children)
        for process in self.processes.values():
            process.wait()
        postgres_down(self.config)
        (self.config.state / "pids.json").unlink(missing_ok=True)


# --- PostgreSQL ------------------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin folder (Debian keeps it off PATH)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run `make system-deps` (Debian's postgresql package)")
    return found[-1].parent


def _as_db_owner(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, its commands run as the ``postgres`` system user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str]) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {(completed.stderr or completed.stdout)[-2000:]}")


def postgres_up(config: StackConfig) -> str:
    """Start the metadata DB cluster (made on the first start), listening on 127.0.0.1 only; its URL."""
    data, bin_dir = config.state / "postgres", postgres_bin()
    fresh = not (data / "PG_VERSION").exists()
    if fresh:
        data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            _run(["chown", "postgres:postgres", str(data)])
        # trust: only this machine's loopback reaches it (listen_addresses below); production uses a password
        _run(_as_db_owner([str(bin_dir / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust", "-E", "UTF8"]))
    options = f"-p {config.db_port} -k {data} -c listen_addresses=127.0.0.1"
    log = data / "server.log"  # inside the cluster folder: the postgres user may write there
    _run(_as_db_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]))
    if fresh:
        _run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(config.db_port), "-U", DB_USER, DB_NAME])
    return f"postgresql+psycopg2://{DB_USER}@127.0.0.1:{config.db_port}/{DB_NAME}"


def postgres_down(config: StackConfig) -> None:
    """Stop the local PostgreSQL server, if it runs."""
    data = config.state / "postgres"
    if (data / "postmaster.pid").exists():
        _run(_as_db_owner([str(postgres_bin() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]))


# --- Airflow ---------------------------------------------------------------------------------------


def _secrets(state: Path) -> dict[str, str]:
    """The Fernet key (encrypts connections in the DB) and JWT secret, made once and kept with the DB."""
    path = state / "secrets.json"
    if not path.exists():
        made = {"fernet_key": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(), "jwt": secrets.token_hex(32)}
        path.write_text(json.dumps(made))
        path.chmod(0o600)
    return json.loads(path.read_text())


def airflow_env(config: StackConfig, db_url: str) -> dict[str, str]:
    """The environment every component and airflow CLI call of this stack runs with."""
    kept = _secrets(config.state)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(config.state / "home"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",  # the lakejoin_spark pool holds Spark tasks to one at a time anyway
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__FERNET_KEY": kept["fernet_key"],
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{config.url}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(config.api_port),
        "AIRFLOW__API__BASE_URL": config.url,
        "AIRFLOW__API_AUTH__JWT_SECRET": kept["jwt"],
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        # Parsing a DAG file imports the library (2-3 s here); on a loaded 2-core machine Airflow's 30 s and
        # 50 s limits were exceeded and a DAG never reached the DB, so they are raised.
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "180",
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "240",
        **config.extra_env,
    }
    if config.lake_home:
        env["LAKEJOIN_HOME"] = config.lake_home
    if config.spark_cluster:
        env["LAKEJOIN_SPARK_MASTER"] = config.spark_master
    return env


def _settings(config: StackConfig) -> dict:
    """airflow_settings.yaml, with ``spark_default`` pointing at this stack's cluster when it has one."""
    settings = read_settings(REPO / "airflow_settings.yaml")
    if config.spark_cluster:
        for connection in settings["connections"]:
            if connection["conn_id"] == "spark_default":
                connection.update(conn_host="spark://127.0.0.1", conn_port=config.spark_port)
    return settings


def _spawn(name: str, command: list[str], env: dict[str, str], logs: Path) -> subprocess.Popen:
    with open(logs / f"{name}.log", "ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _spark_processes(config: StackConfig, env: dict[str, str], logs: Path) -> dict[str, subprocess.Popen]:
    import pyspark  # only for where its launcher scripts are

    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    spark_env = {**env, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    spark_env["SPARK_WORKER_DIR"] = str(config.state / "spark-work")
    master_args = ["--host", "127.0.0.1", "--port", str(config.spark_port), "--webui-port", str(config.spark_ui_port)]
    master = _spawn(
        "spark-master", [spark_class, "org.apache.spark.deploy.master.Master", *master_args], spark_env, logs
    )
    worker_args = [config.spark_master, "--host", "127.0.0.1", "--webui-port", "0"]
    worker = _spawn(
        "spark-worker", [spark_class, "org.apache.spark.deploy.worker.Worker", *worker_args], spark_env, logs
    )
    return {"spark-master": master, "spark-worker": worker}


def _wait_for(
    what: str, ready: Callable[[], bool], processes: dict[str, subprocess.Popen], logs: Path, timeout: float = 300.0
) -> None:
    """Poll ``ready()`` until it is true; fail with the log of a process that exited meanwhile."""
    deadline = time.monotonic() + timeout
    while not ready():
        for name, process in processes.items():
            if process.poll() is not None:
                tail = (logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode} while waiting for {what}:\n{tail}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s (logs: {logs})")
        time.sleep(1.0)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start(config: StackConfig) -> Stack:
    """Bring the whole stack up and wait until the API server answers; the caller stops it."""
    logs = config.state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = airflow_env(config, postgres_up(config))
    processes: dict[str, subprocess.Popen] = {}
    stack = Stack(config, processes, env, password="")
    try:
        airflow_cli("db", "migrate", env=env)
        apply_settings_of(_settings(config), env=env)
        if config.spark_cluster:
            processes.update(_spark_processes(config, env, logs))
            master_log = logs / "spark-master.log"
            _wait_for("the Spark worker", lambda: "Registering worker" in master_log.read_text(), processes, logs)
        for component in COMPONENTS:
            processes[component] = _spawn_component(component, env, logs)
        _record_pids(config.state, processes)
        _wait_for(f"the API server at {config.url}", lambda: _healthy(config.url), processes, logs)
        passwords = Path(env["AIRFLOW_HOME"]) / "simple_auth_manager_passwords.json.generated"
        stack.password = json.loads(passwords.read_text())[ADMIN]
    except BaseException:
        stack.stop()
        raise
    return stack


def _spawn_component(component: str, env: dict[str, str], logs: Path) -> subprocess.Popen:
    return _spawn(component, [str(Path(sys.executable).with_name("airflow")), component], env, logs)


def _record_pids(state: Path, processes: dict[str, subprocess.Popen]) -> None:
    """Where ``down`` finds this supervisor and the process groups it started."""
    groups = [p.pid for p in processes.values()]
    (state / "pids.json").write_text(json.dumps({"supervisor": os.getpid(), "groups": groups}))


def stop_groups(pids: list[int], children: list[subprocess.Popen] | None = None) -> None:
    """SIGTERM each process group, then SIGKILL what is left after STOP_GRACE_S. ``children``: the
    group leaders this process started, reaped as they exit (an unreaped leader keeps its group alive)."""
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        for child in children or []:
            child.poll()
        if not any(_group_alive(pid) for pid in pids):
            break
        time.sleep(0.5)
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has already exited
        os.killpg(pid, signum)


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except ProcessLookupError:
        return False


def down(config: StackConfig) -> None:
    """Stop a stack started by ``up`` in another process: its supervisor stops everything; if the
    supervisor is gone, its process groups and the database are stopped from here."""
    pids_file = config.state / "pids.json"
    if pids_file.exists():
        recorded = json.loads(pids_file.read_text())
        try:
            os.kill(recorded["supervisor"], signal.SIGTERM)
            deadline = time.monotonic() + 3 * STOP_GRACE_S
            while pids_file.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
        except ProcessLookupError:
            pass
        stop_groups(recorded["groups"])
        pids_file.unlink(missing_ok=True)
    postgres_down(config)


def _serve(config: StackConfig) -> None:
    print(f"starting Airflow (state in {config.state}; logs in {config.state / 'logs'}) ...", flush=True)
    stack = start(config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `down` from another shell: stop as on Ctrl-C
    print(f"Airflow UI: {config.url}  login: {ADMIN} / {stack.password}", flush=True)
    if config.spark_cluster:
        print(f"Spark master: {config.spark_master} (spark_default points at it)", flush=True)
    print("Ctrl-C or `make airflow-stop` stops it.", flush=True)
    try:
        while all(p.poll() is None for p in stack.processes.values()):
            time.sleep(2.0)
        exited = [name for name, p in stack.processes.items() if p.poll() is not None]
        print(f"{', '.join(exited)} exited: stopping (see {config.state / 'logs'})", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping Airflow ...", flush=True)
        stack.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m lakejoin.airflow_local up|down``: start or stop the local Airflow stack."""
    parser = argparse.ArgumentParser(prog="python -m lakejoin.airflow_local", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("AIRFLOW_STATE", REPO / ".airflow")))
    parser.add_argument("--port", type=int, default=int(os.environ.get("AIRFLOW_PORT", "8080")))
    parser.add_argument("--db-port", type=int, default=int(os.environ.get("AIRFLOW_DB_PORT", "5433")))
    parser.add_argument("--spark-cluster", action="store_true", help="also a Spark standalone master and worker")
    args = parser.parse_args(argv)
    config = StackConfig(
        state=args.state.resolve(), api_port=args.port, db_port=args.db_port, spark_cluster=args.spark_cluster
    )
    if args.action == "up":
        _serve(config)
    else:
        down(config)


if __name__ == "__main__":
    main()
