"""The datasets catalog: what changed since the last run, decided on the driver from small rows.

Rules (the foundation issue's contract):
- a dataset's ``version`` increments only when its content hash changes;
- unchanged content is skipped (no parse, no cells written);
- a dataset its source no longer lists becomes ``removed``;
- content that cannot be parsed is ``quarantined`` with the reason — unless an earlier
  version was good: then that version stays ``active`` (nothing stored is lost) and the
  rejection is recorded in ``reason``; the next run retries because the stored hash still
  differs from the file's;
- a fetch error keeps the stored row as it is, with the error as ``reason``;
- a source whose listing failed keeps all its datasets as they were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakejoin.lake import delta
from lakejoin.lake.schemas import DATASETS_SCHEMA
from lakejoin.sources.base import Resource

ACTIVE, REMOVED, QUARANTINED = "active", "removed", "quarantined"


def load_datasets(path: Path, version: int | None = None) -> dict[str, dict[str, Any]]:
    """dataset_id -> catalog row (empty before the first run)."""
    if not delta.exists(path):
        return {}
    return {row["dataset_id"]: row for row in delta.read_arrow(path, version).to_pylist()}


@dataclass
class Plan:
    """What this run must do, decided before any Spark work starts."""

    rows: dict[str, dict[str, Any]]  # the catalog after the run (parse outcomes applied later)
    to_parse: dict[str, Resource] = field(default_factory=dict)  # dataset_id -> fetched resource
    content_sha: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)


def plan_run(
    previous: dict[str, dict[str, Any]], listed: Iterable[Resource], hashes: dict[str, str], failed_sources: set[str]
) -> Plan:
    """Compare what the sources listed with the stored catalog."""
    rows = {k: dict(v) for k, v in previous.items()}
    plan = Plan(rows)
    seen_sources: set[str] = set()
    listed_ids: set[str] = set()
    for resource in listed:
        seen_sources.add(resource.source)
        listed_ids.add(resource.dataset_id)
        stored = rows.get(resource.dataset_id)
        if resource.error:
            plan.errors[resource.dataset_id] = resource.error
            rows[resource.dataset_id] = _with_error(stored, resource)
            continue
        if resource.unchanged and stored is not None:
            continue
        sha = hashes[resource.dataset_id]
        if stored is not None and stored["content_sha256"] == sha and stored["status"] != REMOVED:
            continue
        plan.to_parse[resource.dataset_id] = resource
        plan.content_sha[resource.dataset_id] = sha
    for dataset_id, row in rows.items():
        gone = row["source"] in seen_sources and dataset_id not in listed_ids
        if gone and row["source"] not in failed_sources and row["status"] != REMOVED:
            row.update(status=REMOVED, reason="no longer listed by its source")
            plan.removed.add(dataset_id)
    return plan


def apply_parse_outcome(
    plan: Plan, dataset_id: str, ok: bool, reason: str | None, rows: int, columns: int, staged_path: str
) -> bool:
    """Record one parse result; returns True when the dataset's cells must be (re)written."""
    resource = plan.to_parse[dataset_id]
    stored = plan.rows.get(dataset_id)
    was_good = stored is not None and stored["status"] == ACTIVE
    if not ok and was_good and stored is not None:
        stored["reason"] = f"latest content rejected, previous version kept: {reason}"
        return False
    row = _metadata_row(resource, stored)
    row.update(
        content_sha256=plan.content_sha[dataset_id],
        version=(stored["version"] + 1) if stored else 1,
        status=ACTIVE if ok else QUARANTINED,
        reason=None if ok else reason,
        rows=rows,
        columns=columns,
        staged_path=staged_path if ok else None,
    )
    plan.rows[dataset_id] = row
    return ok


def to_arrow(rows: dict[str, dict[str, Any]]) -> pa.Table:
    """The catalog rows as a ``DATASETS_SCHEMA`` table, in dataset-id order."""
    ordered = [rows[k] for k in sorted(rows)]
    return pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in DATASETS_SCHEMA} for r in ordered], schema=DATASETS_SCHEMA
    )


def _metadata_row(resource: Resource, stored: dict[str, Any] | None) -> dict[str, Any]:
    row = dict(stored or {})
    row.update(
        dataset_id=resource.dataset_id,
        source=resource.source,
        url=resource.url,
        title=resource.title,
        publisher=resource.publisher,
        license=resource.license,
        format=resource.format,
        fetched_at=datetime.now(UTC),
        etag=resource.etag,
        last_modified=resource.last_modified,
        metadata_modified=resource.metadata_modified,
    )
    return row


def _with_error(stored: dict[str, Any] | None, resource: Resource) -> dict[str, Any]:
    if stored is not None:
        return {**stored, "reason": f"fetch failed, stored version kept: {resource.error}"}
    row = _metadata_row(resource, None)
    row.update(
        content_sha256=None,
        version=0,
        status=QUARANTINED,
        reason=f"fetch failed: {resource.error}",
        rows=0,
        columns=0,
        staged_path=None,
    )
    return row
