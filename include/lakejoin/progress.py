"""Feedback while long commands work: one line per stage on stderr, a bar on a terminal.

On a terminal a stage with a known amount of work draws one line it keeps rewriting: a bar,
the count done, the rate and an ETA (``  parse [######.......] 120/400 (35/s, ETA 8s)``). Loops
report through ``iterate``; Spark stages through ``update``, fed by a status poller
(``lakejoin.spark.progress``). Machine output (``--json``) goes to stdout, so progress never
corrupts it; ``--json`` and ``--quiet`` silence everything here.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

T = TypeVar("T")
BAR_WIDTH = 30
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_tree_cpu(root: int | None = None) -> float | None:
    """CPU seconds (user + system) spent so far by process ``root`` (default: this one) and every process under it,
    the exited children each reaped included: this process's threads, the Spark JVM it started, the JVM's Python
    workers and any process pool. None where ``/proc`` is not there to tell (not Linux)."""
    root = os.getpid() if root is None else root
    try:
        stats = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as file:
                        fields = file.read().rsplit(b")", 1)[1].split()
                except OSError:  # the process ended while the table was read
                    continue
                # after the name: state, ppid (fields[1]), ..., utime, stime, cutime, cstime (fields[11:15])
                stats[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    except FileNotFoundError:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    ticks, todo = 0, [root]
    while todo:
        pid = todo.pop()
        ticks += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return ticks / _TICKS


class Progress:
    """Progress lines and bars on stderr (none when quiet), with each stage's time."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.timings: dict[str, float] = {}
        # CPU seconds of this process tree during each stage; stages running side by side each count all of it
        self.cpu_timings: dict[str, float] = {}
        self._lock = threading.Lock()  # Spark pollers draw from their own threads
        self._drawn = False  # a bar line is on screen, not yet ended

    @property
    def interactive(self) -> bool:
        """Whether bars are drawn: not quiet, and the stream is a terminal."""
        return not self.quiet and self.stream.isatty()

    def say(self, message: str) -> None:
        """Write ``message`` as a line of its own (ending a bar drawn before it), unless quiet."""
        if not self.quiet:
            with self._lock:
                self._end_bar()
                print(message, file=self.stream, flush=True)

    @contextmanager
    def stage(self, name: str, detail: str = "") -> Iterator[None]:
        """Time a stage (wall and CPU seconds) and report it when it ends (``name: detail (1.2 s)``)."""
        started, cpu_started = time.perf_counter(), process_tree_cpu()
        self.say(f"[{name}] {detail}".rstrip())
        yield
        elapsed, cpu_now = time.perf_counter() - started, process_tree_cpu()
        self.timings[name] = self.timings.get(name, 0.0) + elapsed
        if cpu_started is not None and cpu_now is not None:
            self.cpu_timings[name] = self.cpu_timings.get(name, 0.0) + max(cpu_now - cpu_started, 0.0)
        self.say(f"[{name}] done in {elapsed:.1f} s")

    def iterate(self, items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
        """Yield ``items``, drawing a bar with a rate (and an ETA when ``total`` is known) on a terminal."""
        started = time.perf_counter()
        for count, item in enumerate(items, start=1):
            if count % 10 == 0 or count == total:
                self.update(label, count, total, started)
            yield item
        self.done()

    def update(self, label: str, count: int, total: int | None, started: float) -> None:
        """Redraw the bar line: ``count`` of ``total`` done since ``started`` (``time.perf_counter``)."""
        if not self.interactive:
            return
        elapsed = max(time.perf_counter() - started, 1e-9)
        rate = count / elapsed
        if total:
            filled = int(BAR_WIDTH * min(count, total) / total)
            eta = f", ETA {format_seconds((total - count) / rate)}" if 0 < count < total else ""
            line = f"  {label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {count}/{total} ({rate:.1f}/s{eta})"
        else:
            line = f"  {label} {count} ({rate:.1f}/s)"
        with self._lock:
            self.stream.write(f"\r{line}\033[K")
            self.stream.flush()
            self._drawn = True

    def done(self) -> None:
        """End the bar line, if one is drawn (the next output starts on a fresh line)."""
        with self._lock:
            self._end_bar()

    def _end_bar(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: short enough for a bar line."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
