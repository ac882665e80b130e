"""Feedback: bars with counts, rate and ETA on a terminal (a real pseudo-terminal here); nothing
on stderr with --json or --quiet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testkit.on_spark import ON_SPARK

from lakejoin.progress import Progress, format_seconds, process_tree_cpu


class Terminal:
    """A pseudo-terminal: what a program writes to ``stream`` is read back from the other end."""

    def __init__(self) -> None:
        self.reader, writer = os.openpty()
        self.stream = open(writer, "w", buffering=1)  # noqa: SIM115 (lives as long as the Terminal)

    def read(self) -> str:
        self.stream.flush()
        chunks = []
        os.set_blocking(self.reader, False)
        while True:
            try:
                chunk = os.read(self.reader, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()

    def close(self) -> None:
        self.stream.close()
        os.close(self.reader)


@pytest.fixture
def terminal():
    term = Terminal()
    yield term
    term.close()


def test_iterate_draws_count_rate_and_eta_on_a_terminal(terminal):
    progress = Progress(stream=terminal.stream)
    assert progress.interactive
    for _ in progress.iterate(range(40), "files", 40):
        time.sleep(0.005)
    progress.say("next stage")
    screen = terminal.read()
    assert "files [#######" in screen and "10/40" in screen and "40/40" in screen
    assert "/s, ETA " in screen  # partway: a rate and the time left
    assert "/s)" in screen.split("40/40")[1]  # finished: no ETA
    assert screen.rstrip().endswith("next stage")  # the bar line was ended before the next line


def test_a_stream_that_is_no_terminal_gets_stage_lines_only(tmp_path):
    with open(tmp_path / "log", "w") as stream:
        progress = Progress(stream=stream)
        with progress.stage("parse", "3 files"):
            list(progress.iterate(range(30), "files", 30))
            progress.update("parse tasks", 1, 4, time.perf_counter())
    lines = (tmp_path / "log").read_text().splitlines()
    assert len(lines) == 2 and lines[0] == "[parse] 3 files" and lines[1].startswith("[parse] done in ")  # no bar


def test_quiet_writes_nothing_even_on_a_terminal(terminal):
    progress = Progress(quiet=True, stream=terminal.stream)
    with progress.stage("parse"):
        list(progress.iterate(range(30), "files", 30))
    assert terminal.read() == ""


BUSY_CHILD = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < {}: pass"


def test_a_stage_counts_the_cpu_of_the_processes_it_starts() -> None:
    """A stage's CPU seconds hold a child process's work (as a Spark JVM's and its workers' are counted), and not a
    sleep's: wall and CPU are told apart."""
    progress = Progress(quiet=True)
    with progress.stage("busy"):
        subprocess.run([sys.executable, "-c", BUSY_CHILD.format(1.0)], check=True)
    with progress.stage("idle"):
        time.sleep(1.0)
    assert progress.cpu_timings["busy"] >= 0.9
    assert progress.cpu_timings["idle"] < 0.5 <= progress.timings["idle"]


def test_a_running_child_counts_before_it_ends() -> None:
    """A process still running counts with the work it has done so far (rooted at the child: other processes of this
    test run may end meanwhile, and one that no process waits for takes its CPU with it)."""
    child = subprocess.Popen([sys.executable, "-c", BUSY_CHILD.format(1.0) + "\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 30
        while (process_tree_cpu(child.pid) or 0) < 0.9 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (process_tree_cpu(child.pid) or 0) >= 0.9
        assert child.poll() is None  # still running: counted from its own /proc entry
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0s"), (42, "42s"), (185, "3m05s"), (3720, "1h02m")])
def test_eta_format(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.spark
def test_spark_stage_tasks_are_counted_on_a_terminal(spark, terminal):
    from lakejoin.spark.progress import spark_tasks

    progress = Progress(stream=terminal.stream)
    with spark_tasks(spark, progress, "sleepy", poll_seconds=0.1):
        spark.sparkContext.parallelize(range(8), 8).map(lambda x: time.sleep(0.3) or x).collect()
    screen = terminal.read()
    assert "sleepy tasks [" in screen and "/8 (" in screen, screen
    last = [line for line in screen.split("\r") if "sleepy tasks" in line][-1]
    assert "] 8/8 (" in last  # the line left on screen is the final count
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # the group is restored


@pytest.mark.spark
@pytest.mark.parametrize("flag", ["--json", "--quiet"])
def test_json_and_quiet_runs_print_nothing_on_stderr(tmp_path, flag):
    """The real console script, Spark JVM included: its banners go to a log in the lake home."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "towns.csv").write_text("town,country\nGraz,AT\nLinz,AT\nBern,CH\n")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "LAKEJOIN_SPARK_CONSOLE_LOG"} | ON_SPARK  # one small file
    command = [
        str(Path(sys.executable).parent / "lakejoin"),
        "run",
        "--source",
        f"folder:{inputs}",
        "--families",
        "",
        "--home",
        str(home),
        flag,
    ]
    result = subprocess.run(command, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    if flag == "--json":
        assert json.loads(result.stdout)["datasets"]["active"] == 1
    else:
        assert result.stdout == ""
    assert (home / "logs" / "spark-console.log").stat().st_size > 0  # the JVM did talk, to the log
