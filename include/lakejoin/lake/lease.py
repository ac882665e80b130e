"""The lake's write lease: one writer at a time per lake home, across processes and machines.

Every command that commits to a lake (``lakejoin run``, ``vacuum``, the Airflow tasks, the
spark_jobs) holds the lease while it writes; readers never take it. It lives beside the tables
in ``<home>/_lease/`` as numbered *generations*, ``<generation>.json``; the highest generation
is the lease. A record names its owner (host, pid, command, build id) and an expiry that a
heartbeat thread pushes forward every ``ttl / 4`` seconds, so a killed writer's lease expires
after ``ttl`` seconds (``$LAKEJOIN_LEASE_SECONDS``, default 30) and the next writer recovers it.

Why generations and ``link``: acquiring — the first time, and when taking over an expired or
released lease — is creating the file of the next generation, and only one process can create a
given name. The record is written whole to a private temporary file first and then hard-linked
to its generation's name: ``link`` is atomic and fails if the name exists on local filesystems
and on NFS (where ``O_CREAT|O_EXCL`` was not atomic before NFSv3, and an ``O_EXCL`` file is
visible empty before its content is written). When an NFS ``link`` reply is lost, the link
count of the temporary file (2) still tells whether it was made. Two writers that both see an
expired generation ``n`` both try to create ``n + 1``: one wins, the other sees the winner's
live lease — so takeover needs no delete-then-create and cannot race. The winner then deletes
the superseded generations; a writer that listed the folder before that, and so creates an old
number again, finds a newer generation above its own and backs off. Renewals rewrite the
holder's own generation by rename (readers see the old or the new record, never half of one).

Every Delta commit checks the lease first (:func:`check_commit`, called from
``lakejoin.lake.delta``): the process must still hold the newest generation, and a process that
holds none may not commit while another writer holds a live lease. Expiry compares the
holder's clock with the reader's: machines sharing a lake need clocks that agree to well
within ``ttl``.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakejoin.config import LEASE_SECONDS

LEASE_DIR = "_lease"
TTL_ENV = LEASE_SECONDS.name
DEFAULT_TTL = LEASE_SECONDS.default
HELD, RELEASED = "held", "released"


class LakeWriteError(RuntimeError):
    """A write that one-writer-at-a-time refuses (the CLI prints it and exits non-zero)."""


class LakeBusy(LakeWriteError):
    """Another writer holds the lake's lease (past ``wait``)."""


class LeaseLost(LakeWriteError):
    """This process's lease was taken over (it had expired): its commits must stop."""


def new_build_id() -> str:
    """A fresh build id: one run's commits, and the snapshot that publishes them, carry it."""
    return uuid.uuid4().hex


def lease_ttl() -> float:
    """Seconds a dead writer's lease lasts before the next writer takes it (``LAKEJOIN_LEASE_SECONDS``)."""
    return LEASE_SECONDS.read()


@dataclass
class Lease:
    """A lease this process holds on ``home`` (see the module docstring)."""

    home: Path
    generation: int
    record: dict[str, Any]
    ttl: float
    baseline: dict[str, int] | None = None  # the lake's table versions when acquired (set by snapshots.writing)
    holds: int = 1  # nested holds in this process
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    lost: bool = False

    @property
    def build_id(self) -> str:
        """The build holding the lease, recorded with every Delta commit it makes."""
        return self.record["build_id"]

    def verify(self) -> None:
        """Raise :class:`LeaseLost` unless this lease is still the lake's newest generation."""
        current = _newest(self.home)
        if (
            self.lost
            or current is None
            or current[0] != self.generation
            or current[1].get("token") != self.record["token"]
        ):
            self.lost = True
            holder = describe(current[1]) if current else "nobody"
            raise LeaseLost(
                f"lake {self.home}: this writer (build {self.build_id}) lost its write lease, now held by {holder}; "
                "its commits stop here"
            )

    def renew(self) -> bool:
        """Push the expiry forward; False (and stop renewing) once the lease was taken over."""
        with self._lock:
            try:
                self.verify()
            except LeaseLost:
                return False
            now = time.time()
            self.record.update(renewed_at=now, expires_at=now + self.ttl)
            _replace(_generation_path(self.home, self.generation), self.record)
            return True

    def release(self) -> None:
        """Stop renewing and, unless the lease was taken over, mark it released and expired now, so the
        next writer takes the lake at once instead of after the TTL."""
        self._stop.set()
        with self._lock:
            current = _newest(self.home)
            if not self.lost and current is not None and current[0] == self.generation:
                self.record.update(state=RELEASED, expires_at=time.time())
                _replace(_generation_path(self.home, self.generation), self.record)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            if not self.renew():
                return


_held: dict[Path, Lease] = {}  # home -> the lease this process holds (shared by its threads)
_held_lock = threading.Lock()


@contextmanager
def hold(home: Path, command: str, build_id: str, wait: float = 0.0, ttl: float | None = None) -> Iterator[Lease]:
    """Hold ``home``'s write lease for the block, waiting up to ``wait`` seconds for another
    writer to finish (then :class:`LakeBusy`, naming it). Re-entrant: a hold inside another in
    the same process joins the outer one (and its build id)."""
    home = Path(home)
    with _held_lock:
        outer = _held.get(home)
        if outer is not None:
            outer.holds += 1
    if outer is not None:
        try:
            yield outer
        finally:
            with _held_lock:
                outer.holds -= 1
        return
    lease = acquire(home, command, build_id, wait, ttl)
    with _held_lock:
        _held[home] = lease
    try:
        yield lease
    finally:
        with _held_lock:
            del _held[home]
        lease.release()


def acquire(home: Path, command: str, build_id: str, wait: float = 0.0, ttl: float | None = None) -> Lease:
    """Take the lease (the next generation's file), renewing it from a daemon thread until released."""
    ttl = ttl or lease_ttl()
    folder = Path(home) / LEASE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        current = _newest(home)
        if current is None or not is_live(current[1]):
            generation = (current[0] if current else 0) + 1
            record = _record(command, build_id, ttl)
            path = _generation_path(home, generation)
            if _create(path, record):
                if _newest(home)[0] != generation:  # type: ignore[index]
                    path.unlink(missing_ok=True)  # a stale listing: a newer generation already holds the lake
                    continue
                _forget_older(home, generation)
                lease = Lease(Path(home), generation, record, ttl)
                threading.Thread(target=lease._heartbeat, name="lakejoin-lease", daemon=True).start()
                return lease
            continue  # another writer created that generation first: look again
        if time.monotonic() >= deadline:
            hint = f" (waited {wait:g} s)" if wait else " (use --wait SECONDS to wait for it)"
            raise LakeBusy(f"lake {home} is being written by {describe(current[1])}{hint}")
        time.sleep(min(1.0, max(deadline - time.monotonic(), 0.05)))


def holder(home: Path) -> dict[str, Any] | None:
    """The live lease's record (owner, expiry), or None when nobody holds the lake."""
    current = _newest(Path(home))
    return current[1] if current and is_live(current[1]) else None


def held(home: Path) -> Lease | None:
    """The lease this process holds on ``home``, if any."""
    return _held.get(Path(home))


def check_commit(table_path: Path) -> str | None:
    """Called before every Delta commit: the build id to record with it (None when this process
    holds no lease: library use outside a command). Raises :class:`LeaseLost` if this process's
    lease was taken over, :class:`LakeBusy` if it holds none and another writer holds the lake."""
    for home in Path(table_path).parents:
        lease = _held.get(home)
        if lease is not None:
            lease.verify()
            return lease.build_id
    for home in list(Path(table_path).parents)[:3]:  # tables sit 2-3 levels below their home
        other = holder(home) if (home / LEASE_DIR).is_dir() else None
        if other is not None:
            raise LakeBusy(
                f"cannot commit to {table_path} without the lake's write lease: {home} is being written by "
                f"{describe(other)}"
            )
    return None


def is_live(record: dict[str, Any]) -> bool:
    """True if the record is a held lease that has not expired."""
    return record.get("state") == HELD and float(record.get("expires_at", 0)) > time.time()


def describe(record: dict[str, Any]) -> str:
    """The holder as people read it: who, where, what, since when, until when."""
    since = datetime.fromtimestamp(record["acquired_at"], UTC).strftime("%H:%M:%S UTC")
    left = max(float(record["expires_at"]) - time.time(), 0.0)
    return (
        f"pid {record['pid']} on {record['host']} ({record['command']}; build {record['build_id']}) since {since}, "
        f"lease expires in {left:.0f} s unless renewed"
    )


def _record(command: str, build_id: str, ttl: float) -> dict[str, Any]:
    now = time.time()
    return {
        "token": uuid.uuid4().hex,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "command": command,
        "argv": shlex.join(sys.argv)[:300],
        "build_id": build_id,
        "state": HELD,
        "acquired_at": now,
        "renewed_at": now,
        "expires_at": now + ttl,
    }


def _generation_path(home: Path, generation: int) -> Path:
    return Path(home) / LEASE_DIR / f"{generation:012d}.json"


def _newest(home: Path) -> tuple[int, dict[str, Any]] | None:
    """(generation, record) of the highest generation, or None before the first writer."""
    folder = Path(home) / LEASE_DIR
    if not folder.is_dir():
        return None
    while True:
        generations = [int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()]
        if not generations:
            return None
        try:
            return max(generations), json.loads(_generation_path(home, max(generations)).read_text())
        except FileNotFoundError:  # superseded and forgotten since the listing: list again
            continue


def _create(path: Path, record: dict[str, Any]) -> bool:
    """Create ``path`` holding ``record`` unless it exists (see the module docstring)."""
    temporary = path.parent / f".tmp-{record['token']}"
    temporary.write_text(json.dumps(record))
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        return os.stat(temporary).st_nlink == 2  # NFS: the link may exist though its reply was lost
    finally:
        temporary.unlink(missing_ok=True)


def _replace(path: Path, record: dict[str, Any]) -> None:
    temporary = path.parent / f".tmp-{record['token']}-renew"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, path)


def _forget_older(home: Path, generation: int) -> None:
    """Delete superseded generations (only the newest one decides)."""
    for path in (Path(home) / LEASE_DIR).glob("*.json"):
        if path.stem.isdigit() and int(path.stem) < generation:
            path.unlink(missing_ok=True)
