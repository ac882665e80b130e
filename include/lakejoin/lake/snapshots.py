"""Snapshots: a consistent cut of every Delta table (DESIGN "The lake on disk").

A build writes new Delta versions, then appends ONE row to ``catalog/snapshots`` naming the
version of every table: that commit is the publish. Readers resolve the latest published
snapshot and read each table at its pinned version, so a build that dies before publishing
changes nothing they see. ``vacuum`` expires all but the newest ``retain`` snapshots (an
appended ``expired`` row per snapshot) and deletes the data files no retained snapshot can
reach (delta-rs vacuum with the retention cut at the oldest retained snapshot's time).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from lakejoin.config import LakeConfig
from lakejoin.lake import delta
from lakejoin.lake.schemas import CELLS, COLUMNS, DATASETS, EMBEDDINGS, SNAPSHOTS, SNAPSHOTS_SCHEMA, VALIDATIONS

PUBLISHED, EXPIRED = "published", "expired"


class NoSnapshot(LookupError):
    """No published snapshot matches (nothing built yet, or the id was vacuumed)."""


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    created_at: datetime
    status: str
    table_versions: dict[str, int]
    stats: dict[str, Any]

    def version_of(self, table: str) -> int | None:
        return self.table_versions.get(table)

    def to_json(self) -> dict[str, Any]:
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
        Snapshot(r["snapshot_id"], r["created_at"], r["status"], json.loads(r["table_versions"]), json.loads(r["stats"] or "{}"))
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
    """Every Delta table of the lake a snapshot pins: the catalog, cells, validations, the
    embedding cache and each family's index tables (its shard manifest included)."""
    tables = [DATASETS, CELLS, COLUMNS, VALIDATIONS, EMBEDDINGS]
    index_root = config.home / "index"
    if index_root.exists():
        tables += [f"index/{f.name}/{t.name}" for f in sorted(index_root.iterdir()) if f.is_dir() for t in sorted(f.iterdir()) if delta.exists(t)]
    return [t for t in tables if delta.exists(config.table_path(t))]


def publish(config: LakeConfig, versions: dict[str, int], stats: dict[str, Any]) -> Snapshot:
    """Append the snapshot row: the single commit that makes a build visible."""
    existing = list_snapshots(config)
    snapshot = Snapshot(
        snapshot_id=(existing[-1].snapshot_id + 1) if existing else 1,
        created_at=datetime.now(timezone.utc),
        status=PUBLISHED,
        table_versions=dict(sorted(versions.items())),
        stats=stats,
    )
    _append(config, [snapshot])
    return snapshot


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
    hours = max((datetime.now(timezone.utc) - cutoff).total_seconds() / 3600.0, 0.0)
    deleted: dict[str, int] = {}
    for table in sorted({t for s in kept for t in s.table_versions}):
        path = config.table_path(table)
        if delta.exists(path):
            # Files tombstoned after the oldest kept snapshot was published may still be pinned.
            files = delta.open_table(path).vacuum(retention_hours=math.ceil(hours), enforce_retention_duration=False, dry_run=False)
            deleted[table] = len(files)
    return {"expired": [s.snapshot_id for s in expired], "kept": [s.snapshot_id for s in kept], "files_deleted": deleted}


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
    delta.write_arrow(config.table_path(SNAPSHOTS), pa.Table.from_pylist(rows, schema=SNAPSHOTS_SCHEMA), mode="append", operation="publish")
