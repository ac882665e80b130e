"""Feedback while long commands work: one line per stage on stderr, a bar on a terminal.

Machine output (``--json``) goes to stdout, so progress never corrupts it; ``--quiet`` silences
everything here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Progress:
    def __init__(self, quiet: bool = False, stream=None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.timings: dict[str, float] = {}

    @property
    def interactive(self) -> bool:
        return not self.quiet and self.stream.isatty()

    def say(self, message: str) -> None:
        if not self.quiet:
            print(message, file=self.stream, flush=True)

    @contextmanager
    def stage(self, name: str, detail: str = "") -> Iterator[None]:
        """Time a stage and report it when it ends (``name: detail (1.2 s)``)."""
        started = time.perf_counter()
        self.say(f"[{name}] {detail}".rstrip())
        yield
        elapsed = time.perf_counter() - started
        self.timings[name] = self.timings.get(name, 0.0) + elapsed
        self.say(f"[{name}] done in {elapsed:.1f} s")

    def iterate(self, items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
        """Yield ``items``, drawing a bar with a rate on a terminal."""
        started = time.perf_counter()
        count = 0
        for item in items:
            count += 1
            if self.interactive and (count % 10 == 0 or count == total):
                self._draw(label, count, total, started)
            yield item
        if self.interactive:
            self.stream.write("\n")

    def _draw(self, label: str, count: int, total: int | None, started: float) -> None:
        rate = count / max(time.perf_counter() - started, 1e-9)
        if total:
            filled = int(30 * count / total)
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r  {label} [{bar}] {count}/{total} ({rate:.0f}/s)")
        else:
            self.stream.write(f"\r  {label} {count} ({rate:.0f}/s)")
        self.stream.flush()
