"""Loading the latest snapshot and every index family in the background when a server starts, so
the first search does not pay the load (the REST API's ``/api/status`` reports the progress).

A load that failed (most often: the lake has no published snapshot yet) is tried again when asked, at
most every :data:`RETRY_SECONDS`: a server started on an empty lake picks up the first snapshot
published after it.

A family that cannot load (not built, too large for the memory left, module missing) is recorded
and skipped; the server serves the others, and a search for that family reports the cause itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakejoin.index import FAMILIES
from lakejoin.query.engine import QueryEngine

log = logging.getLogger(__name__)

IDLE, LOADING, READY, FAILED = "idle", "loading", "ready", "failed"
RETRY_SECONDS = 10.0


@dataclass
class Warmup:
    """One background load of ``engine_of()``'s latest snapshot; :meth:`status` is thread-safe."""

    engine_of: Callable[[], QueryEngine]
    state: str = IDLE
    snapshot_id: int | None = None
    loading: str | None = None  # the family being loaded now
    loaded: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # family -> why it did not load
    error: str | None = None
    seconds: float | None = None
    retry_seconds: float = RETRY_SECONDS
    _failed_at: float | None = None  # time.monotonic() of the last failed load
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        """Begin loading in a daemon thread. Later calls return the same thread, unless that load failed
        at least ``retry_seconds`` ago: then a new one begins."""
        with self._lock:
            if self._thread is None or self._retry_due():
                self.state, self.error, self.loaded, self.skipped = LOADING, None, [], {}
                self._thread = threading.Thread(target=self._run, name="lakejoin-warmup", daemon=True)
                self._thread.start()
            return self._thread

    def _retry_due(self) -> bool:
        return (
            self.state == FAILED
            and self._failed_at is not None
            and time.monotonic() - self._failed_at >= self.retry_seconds
        )

    def status(self) -> dict[str, Any]:
        """The load's state, snapshot, family loading now, families loaded and skipped (with why), error
        and seconds, read together as one JSON-ready dict."""
        with self._lock:
            return {
                "state": self.state,
                "snapshot_id": self.snapshot_id,
                "loading": self.loading,
                "loaded": list(self.loaded),
                "skipped": dict(self.skipped),
                "error": self.error,
                "seconds": self.seconds,
            }

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            loaded = self.engine_of().snapshot()
            self._set(snapshot_id=loaded.snapshot_id)
            for family in (f for f in FAMILIES if f in loaded.families()):
                self._set(loading=family)
                try:
                    loaded.searcher(family)
                    self._set(loaded=[*self.loaded, family])
                except Exception as error:  # noqa: BLE001  (a family that cannot load must not stop the others)
                    log.warning("lakejoin warm-up: %s not loaded: %s", family, error)
                    self._set(skipped={**self.skipped, family: str(error)})
            self._set(state=READY, loading=None, seconds=round(time.perf_counter() - started, 3))
        except Exception as error:  # noqa: BLE001  (no lake or no snapshot yet: reported; searches say why)
            log.warning("lakejoin warm-up failed: %s", error)
            seconds = round(time.perf_counter() - started, 3)
            self._set(state=FAILED, loading=None, error=str(error), seconds=seconds, _failed_at=time.monotonic())

    def _set(self, **values: Any) -> None:
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)
