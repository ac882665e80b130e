"""A benchmark's latest table, written into the documentation by the benchmark itself.

Every script under ``tests/benchmarks/`` starts through :func:`run_with_docs` (``run_with_docs(main)`` under
``if __name__ == "__main__"``), which adds two options to the script's own:

- ``--write-docs``: also write what the run printed to ``docs/benchmarks/<script>.md``, the
  fragment ``docs/benchmarks.md`` includes;
- ``--markdown PATH``: the same, to ``PATH``.

The fragment holds the command (without these options), the machine (architecture, cores this
process may use, memory, CPU model), the code's commit, the date, the wall time and the load
average at the start and the end, then the output verbatim. The output is
taken from file descriptor 1, so lines printed by the script's child processes are kept too.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS_FRAGMENTS = ROOT / "docs" / "benchmarks"


def run_with_docs(main: Callable[[], int | None]) -> int | None:
    """Run a benchmark's ``main`` (which parses ``sys.argv``), writing its fragment when asked to."""
    script = Path(sys.argv[0]).resolve()
    target, sys.argv[1:] = fragment_target(script.stem, sys.argv[1:])
    if target is None:
        return main()
    command = shlex.join(["python", _relative(script), *sys.argv[1:]])
    load_before, started = os.getloadavg()[0], time.monotonic()
    when = datetime.now(UTC)
    with captured_stdout() as chunks:
        result = main()
    seconds = time.monotonic() - started
    output = b"".join(chunks).decode(errors="replace")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(fragment(command, output, when, seconds, (load_before, os.getloadavg()[0])))
    print(f"wrote {_relative(target)}", file=sys.stderr)
    return result


def fragment_target(name: str, args: list[str]) -> tuple[Path | None, list[str]]:
    """The fragment's path asked for by ``--write-docs`` / ``--markdown PATH``, and the other args."""
    target, rest = None, []
    arguments = iter(args)
    for arg in arguments:
        if arg == "--write-docs":
            target = DOCS_FRAGMENTS / f"{name}.md"
        elif arg == "--markdown" or arg.startswith("--markdown="):
            value = arg.partition("=")[2] or next(arguments, "")
            if not value:
                raise SystemExit("--markdown needs a PATH")
            target = Path(value)
        else:
            rest.append(arg)
    return target, rest


def fragment(command: str, output: str, when: datetime, seconds: float, loads: tuple[float, float]) -> str:
    """The Markdown fragment: how the table was made, then the table as printed."""
    fence = "````" if "```" in output else "```"
    return (
        f"**Command:** `{command}`  \n"
        f"**Machine:** {machine()}  \n"
        f"**Run:** {when:%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min, load average {loads[0]:.1f} at the start "
        f"and {loads[1]:.1f} at the end; code at `{commit()}`\n\n"
        f"{fence}text\n{output.rstrip()}\n{fence}\n"
    )


def machine() -> str:
    """Architecture, the cores this process may use (``nproc``), memory and CPU model."""
    cores = len(os.sched_getaffinity(0))
    memory = _meminfo_kib("MemTotal") / 2**20
    model = _cpu_model()
    return f"{platform.machine()}, {cores} cores, {memory:.1f} GiB" + (f", {model}" if model else "")


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextmanager
def captured_stdout() -> Iterator[list[bytes]]:
    """Everything written to file descriptor 1 meanwhile, still shown as it is written."""
    sys.stdout.flush()
    shown = os.dup(1)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 1)
    os.close(write_end)
    chunks: list[bytes] = []

    def pump() -> None:
        while data := os.read(read_end, 65536):
            os.write(shown, data)
            chunks.append(data)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    try:
        yield chunks
    finally:
        sys.stdout.flush()
        os.dup2(shown, 1)
        # A child still alive (a Spark JVM) keeps the pipe open: what it prints later is not the table,
        # and the pump keeps showing it through `shown` until the process exits.
        thread.join(timeout=2)
        if not thread.is_alive():
            os.close(shown)
            os.close(read_end)


def _meminfo_kib(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
