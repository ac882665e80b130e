"""Named pause points, so a test can kill a writer at a chosen moment (tests/test_writers.py).

With ``LAKEJOIN_PAUSE_AT=<point>`` in its environment, a process reaching that point prints
``lakejoin: paused at <point>`` to stderr and sleeps until it is killed. The points, in run order:
``parse`` (Spark started, nothing of the run committed), ``cells`` (cells committed, columns and
catalog not yet), ``index`` (an index family's manifest committed pending and its first table
written; ``index:<family>`` pauses only that family's build, while the others, built beside it,
run on to their end), ``publish`` (everything built, the snapshot row not written). Unset, a point
costs one environment lookup.
"""

from __future__ import annotations

import sys
import time

from lakejoin.config import PAUSE_AT

PAUSE_ENV = PAUSE_AT.name


def pause_point(name: str, detail: str | None = None) -> None:
    """Sleep until killed when ``LAKEJOIN_PAUSE_AT`` names this point, as ``name`` or as
    ``name:detail`` (see the module docstring)."""
    wanted = PAUSE_AT.read()
    if wanted is None or wanted not in (name, f"{name}:{detail}"):
        return
    print(f"lakejoin: paused at {wanted}", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)
