"""Shared fixtures: one Spark session for the whole test run (starting one costs ~10 s) and the small
real query lake the query, plugin and search-page tests read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported at run time only after the environment below is set
    from lakejoin.config import LakeConfig

os.environ.setdefault("LAKEJOIN_SHUFFLE_PARTITIONS", "4")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A test's Spark JVMs live for seconds: the JIT's quick tier and the serial collector spend about a quarter
# less CPU on them than C2 and G1's threads do (docs/operations.md, LAKEJOIN_SPARK_JAVA_OPTIONS). Set here, it
# reaches every worker process, CLI run, Airflow task and cluster the tests start.
os.environ.setdefault("LAKEJOIN_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# Test modules run in parallel worker processes (pytest-xdist, `make test`): each worker serves the bundled lake's
# local portal on a port of its own, so two workers' `lakejoin run`s never meet on one port.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["LAKEJOIN_PORTAL_PORT"] = str(8791 + int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")))


SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# CPU seconds per test module at the end of a run; the longest modules handed to the workers first
pytest_plugins = ["testkit.cpu_report", "testkit.schedule"]


@pytest.fixture(scope="session")
def spark():
    from lakejoin.spark.session import get_spark

    return get_spark("local[2]")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout (benchmarks, fixtures, notes)."""
    if not SHARED.exists():
        pytest.skip("../shared is not beside this checkout")
    return SHARED


@pytest.fixture(scope="session")
def query_lake(tmp_path_factory: pytest.TempPathFactory) -> LakeConfig:
    """The small real lake (testkit.query_lake) built once per test run, shared read-only by every worker
    process (tests that change it copy it first); the worker that builds it starts its Spark session."""
    from testkit.query_lake import build_query_lake

    return build_query_lake(_run_temp(tmp_path_factory) / "query-lake")


@pytest.fixture(scope="session", autouse=True)
def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Name the folder the worker processes of this test run share (airflow_harness keeps the run's
    migrated Airflow metadata DB there)."""
    from airflow_harness import RUN_DIR_ENV

    os.environ[RUN_DIR_ENV] = str(_run_temp(tmp_path_factory))


def _run_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp folder of the whole test run: under pytest-xdist each worker's base temp is a folder of it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
