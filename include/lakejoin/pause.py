"""Named pause points, so a test can kill a writer at a chosen moment (tests/test_writers.py).

With ``LAKEJOIN_PAUSE_AT=<point>`` in its environment, a process reaching that point prints
``lakejoin: paused at <point>`` to stderr and sleeps until it is killed. The points, in run order:
``parse`` (Spark started, nothing of the run committed), ``cells`` (cells committed, columns and
catalog not yet), ``index`` (an index family's manifest committed pending and its first table
written), ``publish`` (everything built, the snapshot row not written). Unset, a point costs one
environment lookup.
"""

from __future__ import annotations

import sys
import time

from lakejoin.config import PAUSE_AT

PAUSE_ENV = PAUSE_AT.name


def pause_point(name: str) -> None:
    """Sleep until killed when ``LAKEJOIN_PAUSE_AT`` names this point (see the module docstring)."""
    if PAUSE_AT.read() != name:
        return
    print(f"lakejoin: paused at {name}", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)
