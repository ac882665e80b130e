"""``index/<family>/shards``: the manifest of one family's sharded index (``lakejoin.index.shards``).

One row per shard. The family-wide fields repeat on every row, so the table stays one small
Delta table that a snapshot pins like any other:

- ``n_shards``: chosen at the family's first build and kept;
- ``catalog_version``: the ``catalog/datasets`` version the index reflects — the next build
  rebuilds the datasets whose version or status differs from it, whatever ran in between
  (a run that built other families only, a crawl that committed without building);
- ``state``: ``complete``, or ``pending`` while a build is writing. A build commits ``pending``
  before it touches a table and ``complete`` after the last one, so a build killed in between
  leaves ``pending`` and the next run rebuilds the family in full (a half-written incremental
  update is not safe to apply twice: LSH Ensemble's size histogram would count it twice);
- ``full_build_id`` / ``staleness``: the last full build, and the family's drift since
  (``staleness(tables)`` of its build module), which triggers a full rebuild past its limit;
- per shard: ``rows`` (JSON ``{table: rows}``, from the Delta log) and ``build_id``, the build that
  last rewrote it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from lakejoin.index.shards import MANIFEST, SHARD
from lakejoin.lake import delta

COMPLETE, PENDING = "complete", "pending"

MANIFEST_SCHEMA = pa.schema(
    [
        (SHARD, pa.int32()),
        ("n_shards", pa.int32()),
        ("rows", pa.string()),
        ("build_id", pa.string()),
        ("full_build_id", pa.string()),
        ("catalog_version", pa.int64()),
        ("state", pa.string()),
        ("staleness", pa.float64()),
        ("written_at", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass
class Manifest:
    """A sharded family's manifest: its shards, the catalog version it indexes and each shard's rows and build."""

    n_shards: int
    catalog_version: int | None
    state: str
    full_build_id: str
    staleness: float
    shard_rows: dict[int, dict[str, int]] = field(default_factory=dict)
    shard_builds: dict[int, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether the last build that began finished; False (``pending``): one is writing, or was
        interrupted and the next run rebuilds the family in full."""
        return self.state == COMPLETE


def manifest_path(home: Path, family: str) -> Path:
    """The Delta table holding the family's manifest."""
    return home / "index" / family / MANIFEST


def read_manifest(home: Path, family: str, version: int | None = None) -> Manifest | None:
    """The family's manifest (at ``version``), or None if the family has never been built sharded."""
    path = manifest_path(home, family)
    if not delta.exists(path):
        return None
    rows = delta.read_arrow(path, version).to_pylist()
    if not rows:
        return None
    first = rows[0]
    return Manifest(
        n_shards=first["n_shards"],
        catalog_version=first["catalog_version"],
        state=first["state"],
        full_build_id=first["full_build_id"],
        staleness=first["staleness"],
        shard_rows={r[SHARD]: json.loads(r["rows"]) for r in rows},
        shard_builds={r[SHARD]: r["build_id"] for r in rows},
    )


def write_manifest(home: Path, family: str, manifest: Manifest, operation: str) -> int:
    """Replace the manifest in one commit; returns its new version."""
    now = datetime.now(UTC)
    rows = [
        {
            SHARD: shard,
            "n_shards": manifest.n_shards,
            "rows": json.dumps(manifest.shard_rows.get(shard, {}), sort_keys=True),
            "build_id": manifest.shard_builds.get(shard, manifest.full_build_id),
            "full_build_id": manifest.full_build_id,
            "catalog_version": manifest.catalog_version,
            "state": manifest.state,
            "staleness": manifest.staleness,
            "written_at": now,
        }
        for shard in range(manifest.n_shards)
    ]
    return delta.write_arrow(
        manifest_path(home, family), pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA), operation=operation
    )


def rows_per_shard(path: Path, version: int | None = None) -> dict[int, int]:
    """Rows of each shard of a sharded table, from the Delta log alone."""
    actions = pa.table(delta.open_table(path, version).get_add_actions(flatten=True)).to_pydict()
    counts: dict[int, int] = {}
    for value, rows in zip(actions.get(f"partition.{SHARD}", []), actions["num_records"]):
        counts[int(value)] = counts.get(int(value), 0) + int(rows or 0)
    return counts
