"""Longest modules first: the order in which `make test` hands test modules to its worker processes.

pytest-xdist's file scheduling gives each worker whole modules and, by default, hands out the modules with the
most tests first. What a module costs is its wall time, not its test count: the Airflow stack's module has few
tests but waits on scheduler polls and retry delays for minutes, and handed out last it ran alone at the end of
the run while the other workers idled. Handing out the longest modules first (the classic longest-processing-time
rule) lets their waits overlap the many short modules' CPU work. pyproject's pytest options pass
``--no-loadscope-reorder``, so the workers take modules in the order set here however pytest is started; modules
not listed keep their collection order, after these.
"""

from __future__ import annotations

import pytest

# Longest first, by the modules' wall seconds on the 2-core machine (each module's summed ``--durations``); a
# module gets onto this list when it takes more than about a minute and a half.
LONGEST_MODULES = (
    "tests/airflow/test_e2e.py",
    "tests/query/test_discover.py",
    "tests/index/test_shards.py",
    "tests/test_pip_install.py",
    "tests/airflow/test_dags.py",
    "tests/spark/test_spark_cluster.py",
    "tests/lake/test_writers.py",
)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope, so this order is the final one
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the listed modules' tests to the front, longest module first; within a module the order stays."""
    rank = {module: position for position, module in enumerate(LONGEST_MODULES)}
    unlisted = len(LONGEST_MODULES)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], unlisted))
