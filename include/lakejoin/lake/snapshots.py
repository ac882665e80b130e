"""Snapshots: a consistent cut of every Delta table (DESIGN "The lake on disk").

A build writes new Delta versions, then appends ONE row to ``catalog/snapshots`` naming the
version of every table: that commit is the publish. Readers resolve the latest published
snapshot and read each table at its pinned version, so a build that dies before publishing
changes nothing they see. ``vacuum`` expires all but the newest ``retain`` snapshots (an
appended ``expired`` row per snapshot) and deletes the data files no retained snapshot can
reach (delta-rs vacuum with the retention cut at the oldest retained snapshot's time), and the
shard arrays cached for the expired ones (``lakejoin.query.shard_arrays``).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, lease
from lakejoin.lake.schemas import (
    CELLS,
    COLUMNS,
    DATASETS,
    EMBEDDINGS,
    GRAPH_TABLES,
    KEYS,
    SNAPSHOTS,
    SNAPSHOTS_SCHEMA,
    VALIDATIONS,
)

PUBLISHED, EXPIRED = "published", "expired"
PENDING = "pending"  # a snapshot a build reads before it publishes it (never written with this status)
# Commits that rewrite files without changing a row: they do not make a version another build's.
NO_DATA_CHANGE = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})


class NoSnapshot(LookupError):
    """No published snapshot matches (nothing built yet, or the id was vacuumed)."""


class MixedBuilds(lease.LakeWriteError):
    """A snapshot would pin a version another build committed while this one held the lease."""


@dataclass(frozen=True)
class Snapshot:
    """A snapshot: the version of every table it pins, its status and its build statistics."""

    snapshot_id: int
    created_at: datetime
    status: str
    table_versions: dict[str, int]
    stats: dict[str, Any]

    def version_of(self, table: str) -> int | None:
        """The version of ``table`` the snapshot pins; None: it pins none."""
        return self.table_versions.get(table)

    @property
    def build_id(self) -> str | None:
        """The build that published it (None for snapshots published before builds were recorded)."""
        return self.stats.get("build_id")

    def to_json(self) -> dict[str, Any]:
        """The snapshot as a JSON-ready dict: id, creation time, status, pinned versions and the build's
        statistics."""
        return {
            "snapshot_id": self.snapshot_id,
            "created_at": self.created_at.isoformat(),
            "status": self.status,
            "table_versions": self.table_versions,
            **{k: v for k, v in self.stats.items() if k not in ("snapshot_id", "status")},
        }


def list_snapshots(config: LakeConfig) -> list[Snapshot]:
    """Every snapshot with its latest status, oldest first."""
    path = config.table_path(SNAPSHOTS)
    if not delta.exists(path):
        return []
    latest: dict[int, dict[str, Any]] = {}
    for row in delta.read_arrow(path).to_pylist():
        current = latest.get(row["snapshot_id"])
        if current is None or row["status"] == EXPIRED:
            latest[row["snapshot_id"]] = row if current is None else {**current, "status": row["status"]}
    return [
        Snapshot(
            r["snapshot_id"],
            r["created_at"],
            r["status"],
            json.loads(r["table_versions"]),
            json.loads(r["stats"] or "{}"),
        )
        for r in sorted(latest.values(), key=lambda r: r["snapshot_id"])
    ]


def resolve(config: LakeConfig, snapshot_id: int | None = None) -> Snapshot:
    """The snapshot a reader should use: ``snapshot_id`` if given, else the latest published one."""
    published = [s for s in list_snapshots(config) if s.status == PUBLISHED]
    if snapshot_id is None:
        if not published:
            raise NoSnapshot(f"no published snapshot in {config.home}: run `lakejoin run` first")
        return published[-1]
    for snapshot in published:
        if snapshot.snapshot_id == snapshot_id:
            return snapshot
    raise NoSnapshot(f"snapshot {snapshot_id} is not published in {config.home} (expired by vacuum, or never built)")


def table_versions(config: LakeConfig, tables: list[str]) -> dict[str, int]:
    """The current version of each existing table: what a new snapshot pins."""
    versions = {}
    for table in tables:
        version = delta.current_version(config.table_path(table))
        if version is not None:
            versions[table] = version
    return versions


def lake_tables(config: LakeConfig) -> list[str]:
    """Every Delta table of the lake a snapshot pins: the catalog (composite keys included), cells,
    validations, the embedding cache, the join graph and each family's index tables (its shard
    manifest included)."""
    tables = [DATASETS, CELLS, COLUMNS, KEYS, VALIDATIONS, EMBEDDINGS, *GRAPH_TABLES]
    index_root = config.home / "index"
    if index_root.exists():
        tables += [
            f"index/{f.name}/{t.name}"
            for f in sorted(index_root.iterdir())
            if f.is_dir()
            for t in sorted(f.iterdir())
            if delta.exists(t)
        ]
    return [t for t in tables if delta.exists(config.table_path(t))]


@contextmanager
def writing(config: LakeConfig, command: str, build_id: str | None = None, wait: float = 0.0) -> Iterator[lease.Lease]:
    """Hold the lake's write lease (``lakejoin.lake.lease``) for one stage of a build (or all of
    them); a fresh hold records the lake's table versions at that moment, which :func:`publish`
    checks the pinned versions against."""
    with lease.hold(config.home, command, build_id or lease.new_build_id(), wait) as held:
        if held.baseline is None:
            held.baseline = table_versions(config, lake_tables(config))
        yield held


def pending(config: LakeConfig, versions: dict[str, int]) -> Snapshot:
    """The snapshot :func:`publish` would append next with ``versions``, not written: what a build
    reads to compute what it pins beside them (the join graph)."""
    existing = list_snapshots(config)
    next_id = (existing[-1].snapshot_id + 1) if existing else 1
    return Snapshot(next_id, datetime.now(UTC), PENDING, dict(sorted(versions.items())), {})


def publish(config: LakeConfig, versions: dict[str, int], stats: dict[str, Any]) -> Snapshot:
    """Append the snapshot row: the single commit that makes a build visible.

    Under a write lease (:func:`writing`) the snapshot is one build's: every pinned version that
    changed since the previous snapshot must have been committed by this build, or before it took
    the lease — the unpublished work of writers that no longer hold it (a killed run, a
    ``--no-publish`` run, an earlier task of a DAG), which this build adopts and the row records.
    A version another build committed while this one held the lease is refused (:class:`MixedBuilds`)."""
    existing = list_snapshots(config)
    held = lease.held(config.home)
    if held is not None and held.baseline is not None:
        previous = next((s for s in reversed(existing) if s.status == PUBLISHED), None)
        adopted = _adopted_builds(config, versions, previous, held)
        stats = {**stats, "build_id": held.build_id, "adopted_builds": adopted}
    snapshot = Snapshot(
        snapshot_id=(existing[-1].snapshot_id + 1) if existing else 1,
        created_at=datetime.now(UTC),
        status=PUBLISHED,
        table_versions=dict(sorted(versions.items())),
        stats=stats,
    )
    _append(config, [snapshot])
    return snapshot


def _adopted_builds(
    config: LakeConfig, versions: dict[str, int], previous: Snapshot | None, held: lease.Lease
) -> list[str]:
    """The other builds whose unpublished versions the snapshot pins (committed before ``held``
    was taken); raises :class:`MixedBuilds` for a version committed by another build since."""
    adopted: set[str] = set()
    for table, version in versions.items():
        pinned_before = previous.version_of(table) if previous else None
        if pinned_before == version:
            continue
        at_acquire = held.baseline.get(table, -1)  # type: ignore[union-attr]
        since = -1 if pinned_before is None else pinned_before
        for commit in delta.history(config.table_path(table), limit=version - since):
            build = delta.commit_build(commit)
            if (
                not since < commit["version"] <= version
                or commit["operation"] in NO_DATA_CHANGE
                or build == held.build_id
            ):
                continue
            if commit["version"] > at_acquire:
                raise MixedBuilds(
                    f"snapshot refused: {table} version {commit['version']} was committed by build "
                    f"{build or 'unknown'} "
                    f"while build {held.build_id} held the lake's write lease; a snapshot publishes one build"
                )
            adopted.add(build or "unrecorded")
    return sorted(adopted)


def vacuum(config: LakeConfig, retain: int) -> dict[str, Any]:
    """Keep the newest ``retain`` published snapshots readable; delete what only older ones used."""
    if retain < 1:
        raise ValueError("--retain must be at least 1: the latest snapshot always stays readable")
    published = [s for s in list_snapshots(config) if s.status == PUBLISHED]
    if not published:
        raise NoSnapshot(f"no published snapshot in {config.home}")
    expired = published[:-retain]
    kept = published[-retain:]
    if expired:
        _append(config, [Snapshot(s.snapshot_id, s.created_at, EXPIRED, s.table_versions, s.stats) for s in expired])
    cutoff = kept[0].created_at
    hours = max((datetime.now(UTC) - cutoff).total_seconds() / 3600.0, 0.0)
    deleted: dict[str, int] = {}
    for table in sorted({t for s in kept for t in s.table_versions}):
        path = config.table_path(table)
        if delta.exists(path):
            # Files tombstoned after the oldest kept snapshot was published may still be pinned.
            with delta.committing(path, "vacuum") as properties:
                files = delta.open_table(path).vacuum(
                    retention_hours=math.ceil(hours),
                    enforce_retention_duration=False,
                    dry_run=False,
                    commit_properties=properties,
                )
            deleted[table] = len(files)
    caches = _remove_shard_caches(config, [s.snapshot_id for s in list_snapshots(config) if s.status == EXPIRED])
    return {
        "expired": [s.snapshot_id for s in expired],
        "kept": [s.snapshot_id for s in kept],
        "files_deleted": deleted,
        "shard_caches_deleted": caches,
    }


def _remove_shard_caches(config: LakeConfig, snapshot_ids: list[int]) -> int:
    """Delete the shard arrays cached for ``snapshot_ids`` (``lakejoin.query.shard_arrays``): no
    query reads an expired snapshot again. How many snapshot folders were deleted."""
    deleted = 0
    for snapshot_id in snapshot_ids:
        folder = config.shard_cache_dir / str(snapshot_id)
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            deleted += 1
    return deleted


def _append(config: LakeConfig, snapshots: list[Snapshot]) -> None:
    rows = [
        {
            "snapshot_id": s.snapshot_id,
            "created_at": s.created_at,
            "status": s.status,
            "table_versions": json.dumps(s.table_versions),
            "stats": json.dumps(s.stats, default=str),
        }
        for s in snapshots
    ]
    delta.write_arrow(
        config.table_path(SNAPSHOTS),
        pa.Table.from_pylist(rows, schema=SNAPSHOTS_SCHEMA),
        mode="append",
        operation="publish",
    )
