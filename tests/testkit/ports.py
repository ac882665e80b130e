"""Local TCP ports for the servers tests start on 127.0.0.1.

A port asked of the kernel (binding port 0) comes from its ephemeral range, the range it also hands
to every client socket and to every server bound to port 0 (Spark's driver, block managers and UIs,
py4j). Between the test choosing such a port and its server binding it, another process may take it,
and the server then fails with "address already in use". So tests take ports below that range, each
pytest-xdist worker from a block of its own, each checked free when handed out.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path

BLOCK = 1000  # ports per test worker process
_LINUX_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out on its own (Linux's setting; its default elsewhere)."""
    try:
        return int(_LINUX_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_block() -> range:
    """This worker's ports: block n of those right below the ephemeral range (gw0 nearest to it)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    top = _ephemeral_floor() - worker * BLOCK
    return range(max(top - BLOCK, 1024), top)


_candidates = itertools.cycle(_worker_block())


def free_port() -> int:
    """A port of this worker's block that nothing listens on now."""
    for _ in range(BLOCK):
        port = next(_candidates)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_worker_block()}")


def wait_for_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")
