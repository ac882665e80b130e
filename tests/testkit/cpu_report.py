"""CPU seconds per test module, printed at the end of a run beside ``--durations``' wall seconds.

On the 2-core machine the suite is CPU-bound: a test's wall time there says as much about what ran
beside it as about the test. What a test costs is the CPU its process tree spent while it ran (the
test process, its Spark JVM, servers and subprocesses it started: ``lakejoin.progress.process_tree_cpu``),
so each test's figure is taken in the process that runs it and carried to the main process in its
report (pytest-xdist sends a report's ``user_properties`` on), where the modules are summed.

Beside the CPU, each worker's timeline: when each of its modules started and ended, in wall seconds from the run's
start, and how long the worker sat without a module at the end. A run is as long as its busiest worker, so the
timeline says which module to shorten or hand out earlier (testkit.schedule).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from lakejoin.progress import process_tree_cpu

PROPERTY = "cpu_seconds"
SPAN = "wall_span"
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
        report = outcome.get_result()
        report.user_properties.append((PROPERTY, round(spent, 2)))
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        report.user_properties.append((SPAN, (worker, item.stash[_wall_started], time.time())))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_wall_started] = time.time()
    yield


_started = pytest.StashKey[float]()
_wall_started = pytest.StashKey[float]()
_by_module: defaultdict[str, float] = defaultdict(float)
_by_test: dict[str, float] = {}
# worker -> module -> [first test's start, last test's end], wall clock
_spans: defaultdict[str, dict[str, list[float]]] = defaultdict(dict)
_run_started = time.time()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    module = report.nodeid.split("::", 1)[0]
    for name, value in report.user_properties:
        if name == PROPERTY:
            _by_module[module] += value
            _by_test[report.nodeid] = value
        elif name == SPAN:
            worker, start, end = value
            span = _spans[worker].setdefault(module, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _by_module:
        return
    terminalreporter.section(f"CPU seconds of the {SHOWN} costliest test modules (process trees)")
    for module, seconds in sorted(_by_module.items(), key=lambda m: -m[1])[:SHOWN]:
        terminalreporter.write_line(f"{seconds:9.1f}  {module}")
    terminalreporter.write_line(f"{sum(_by_module.values()):9.1f}  all {len(_by_module)} modules")
    terminalreporter.section(f"CPU seconds of the {SHOWN} costliest tests (module fixtures: in the first test)")
    for test, seconds in sorted(_by_test.items(), key=lambda t: -t[1])[:SHOWN]:
        terminalreporter.write_line(f"{seconds:9.1f}  {test}")
    _write_timeline(terminalreporter)


def _write_timeline(terminalreporter: pytest.TerminalReporter) -> None:
    """Per worker: its modules of a minute or more (start-end, wall seconds from the run's start) and its idle tail."""
    ends = {worker: max(span[1] for span in spans.values()) for worker, spans in _spans.items()}
    last = max(ends.values())
    terminalreporter.section("Worker timelines (modules of 60 s or more; seconds from the run's start)")
    for worker, spans in sorted(_spans.items()):
        long = sorted((s - _run_started, e - _run_started, m) for m, (s, e) in spans.items() if e - s >= 60)
        shown = ", ".join(f"{module.removeprefix('tests/')} {start:.0f}-{end:.0f}" for start, end, module in long)
        terminalreporter.write_line(
            f"{worker}: {len(spans)} modules, done at {ends[worker] - _run_started:.0f} s "
            f"(idle {last - ends[worker]:.0f} s at the end); {shown}"
        )
