"""The plugin's API server on the shared query lake, started once per session for the plugin, search-page
and DAG tests of this folder; one real Airflow stack for the end-to-end tests' module."""

from __future__ import annotations

import glob
import shutil
import tempfile
from pathlib import Path

import pytest
from testkit.airflow_stack import AirflowStack
from testkit.api_server import ApiServer, start_api_server
from testkit.ports import free_port

from lakejoin.airflow_local import StackConfig, start
from lakejoin.config import LakeConfig
from lakejoin.query import QueryEngine


@pytest.fixture(scope="session")
def api_server(tmp_path_factory: pytest.TempPathFactory, query_lake: LakeConfig) -> ApiServer:
    server = start_api_server(tmp_path_factory.mktemp("api-server"), query_lake.home)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine(api_server: ApiServer, query_lake: LakeConfig) -> QueryEngine:
    return QueryEngine(LakeConfig(home=query_lake.home))


@pytest.fixture(scope="module")
def ids(engine: QueryEngine) -> dict[str, str]:
    return {row["title"]: dataset_id for dataset_id, row in engine.snapshot().datasets.items()}


@pytest.fixture(scope="module")  # one module uses it: stopped when that module ends, not left idling
def airflow_stack(tmp_path_factory: pytest.TempPathFactory) -> AirflowStack:
    """One real Airflow stack (PostgreSQL, LocalExecutor, the four components) on free ports, its lake a temp folder."""
    if not glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"):
        pytest.skip("PostgreSQL is not installed (`make system-deps` installs Debian's postgresql package)")
    # Outside pytest's private (0700) temp root: as root, the database runs as the `postgres` user, which must reach it.
    state = Path(tempfile.mkdtemp(prefix="lakejoin-airflow-"))
    state.chmod(0o755)
    lake = tmp_path_factory.mktemp("airflow-lake")  # $LAKEJOIN_HOME of the DAG runs and of the plugin
    # The DAG files do not change while the tests run: parsed once, not every 30 s (each parse is a process that
    # imports the library, about a CPU-second a file).
    parse_once = {"AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600"}
    config = StackConfig(
        state=state, api_port=free_port(), db_port=free_port(), lake_home=str(lake), extra_env=parse_once
    )
    stack = start(config)
    yield AirflowStack(stack)
    stack.stop()
    shutil.rmtree(state, ignore_errors=True)
