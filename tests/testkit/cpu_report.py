"""CPU seconds per test module, printed at the end of a run beside ``--durations``' wall seconds.

On the 2-core machine the suite is CPU-bound: a test's wall time there says as much about what ran
beside it as about the test. What a test costs is the CPU its process tree spent while it ran (the
test process, its Spark JVM, servers and subprocesses it started: ``lakejoin.progress.process_tree_cpu``),
so each test's figure is taken in the process that runs it and carried to the main process in its
report (pytest-xdist sends a report's ``user_properties`` on), where the modules are summed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest

from lakejoin.progress import process_tree_cpu

PROPERTY = "cpu_seconds"
SHOWN = 15


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    item.stash[_started] = process_tree_cpu() or 0.0
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    if call.when == "teardown" and _started in item.stash:
        spent = (process_tree_cpu() or 0.0) - item.stash[_started]
        outcome.get_result().user_properties.append((PROPERTY, round(spent, 2)))


_started = pytest.StashKey[float]()
_by_module: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == PROPERTY and report.when == "teardown":
            _by_module[report.nodeid.split("::", 1)[0]] += value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _by_module:
        return
    terminalreporter.section(f"CPU seconds of the {SHOWN} costliest test modules (process trees)")
    for module, seconds in sorted(_by_module.items(), key=lambda m: -m[1])[:SHOWN]:
        terminalreporter.write_line(f"{seconds:9.1f}  {module}")
    terminalreporter.write_line(f"{sum(_by_module.values()):9.1f}  all {len(_by_module)} modules")
