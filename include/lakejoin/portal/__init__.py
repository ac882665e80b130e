"""A local open-data portal over a folder of tables, speaking the CKAN Action API and the Socrata
Discovery API + SODA CSV export, with fault injection. No real CKAN or Socrata can run offline
(CKAN needs Solr), so crawler tests and benchmarks run against this over real HTTP.

    with serve(root) as portal:          # port 0: any free port
        crawl(f"ckan:{portal.url}")
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import cast

from lakejoin.portal.server import Faults, make_server

__all__ = ["Faults", "PortalServer", "serve"]


class PortalServer:
    """A running portal: ``url``, request counters in ``stats`` (requests, api, bodies,
    not_modified, fault_500, fault_429), and ``stop()``."""

    def __init__(self, root: Path, host: str, port: int, faults: Faults) -> None:
        if not root.is_dir():
            raise ValueError(f"portal root {root} is not a directory")
        self._cache = tempfile.TemporaryDirectory(prefix="lakejoin-portal-")
        self._server, self._state = make_server(root, host, port, faults, Path(self._cache.name))
        self._thread = threading.Thread(target=self._server.serve_forever, name="lakejoin-portal", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL the portal answers at (the port the OS chose when 0 was asked)."""
        host, port = cast(tuple[str, int], self._server.server_address[:2])  # an AF_INET(6) server bound to a str host
        return f"http://{host}:{port}"

    @property
    def stats(self) -> Counter:
        """A copy of the request counters."""
        with self._state.lock:
            return Counter(self._state.stats)

    def stop(self) -> None:
        """Shut the server down, wait for its thread and delete the CSV copies of Parquet tables."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._cache.cleanup()

    def __enter__(self) -> PortalServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def serve(root: str | Path, port: int = 0, host: str = "127.0.0.1", faults: Faults | None = None) -> PortalServer:
    """Start serving ``root`` in a background thread and return the running server."""
    return PortalServer(Path(root), host, port, faults or Faults())
