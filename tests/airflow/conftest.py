"""The plugin's API server on the shared query lake, started once per session for the plugin, search-page
and DAG tests of this folder."""

from __future__ import annotations

import pytest
from testkit.api_server import ApiServer, start_api_server

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
