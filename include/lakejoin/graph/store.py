"""The graph's Delta tables under ``graph/``, pinned in snapshots, and the ``related`` answer.

- ``graph/edges``: one row per edge (``edges.EDGES_SCHEMA``), every query's ranked list;
- ``graph/tables``: one row per active dataset: its column ids (what an incremental graph
  compares to find changed datasets), its edges out and in per kind and its related datasets;
- ``graph/meta``: one row: ``k``, the kinds, the snapshot the graph was computed from and the
  versions of the tables it read (catalog and index manifests), and its build statistics.

``lakejoin.lake.snapshots.lake_tables`` pins the three like every table, so any snapshot carries
the latest graph; :func:`graph_status` says whether that graph was computed from the snapshot's
own tables or from an earlier snapshot's (a run published, its graph not yet computed).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.config import LakeConfig
from lakejoin.graph.build import Graph
from lakejoin.graph.edges import (
    EDGES_SCHEMA,
    JOSIE,
    KINDS,
    MATE,
    edge_lists,
    edges_table,
)
from lakejoin.index.shards import MANIFEST
from lakejoin.lake import delta
from lakejoin.lake.schemas import COLUMNS, GRAPH_TABLES, KEYS
from lakejoin.query.snapshot import LoadedSnapshot

EDGES, TABLES, META = GRAPH_TABLES

TABLES_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("column_ids", pa.list_(pa.int64())),
        ("edges_out", pa.int64()),
        ("edges_in", pa.int64()),
        ("related_datasets", pa.int64()),
    ]
)
META_SCHEMA = pa.schema(
    [
        ("k", pa.int32()),
        ("kinds", pa.list_(pa.string())),
        ("snapshot_id", pa.int64()),  # the snapshot the graph was computed from
        ("source_versions", pa.string()),  # JSON {table: version} of the tables it read
        ("computed_at", pa.timestamp("us", tz="UTC")),
        ("stats", pa.string()),  # JSON
    ]
)


def source_versions(loaded: LoadedSnapshot) -> dict[str, int]:
    """The versions a graph depends on: the catalog's columns and keys, each family's manifest."""
    tables = [COLUMNS, KEYS, *(f"index/{family}/{MANIFEST}" for family in KINDS)]
    return {t: v for t in tables if (v := loaded.snapshot.version_of(t)) is not None}


def write_graph(config: LakeConfig, loaded: LoadedSnapshot, graph: Graph) -> dict[str, int]:
    """Write the three tables (each whole: the graph is small); returns their new versions."""
    edges = edges_table(graph.lists)
    summary = _summary(graph)
    meta = {
        "k": graph.k,
        "kinds": list(graph.kinds),
        "snapshot_id": loaded.snapshot_id,
        "source_versions": json.dumps(source_versions(loaded), sort_keys=True),
        "computed_at": datetime.now(UTC),
        "stats": json.dumps(graph.stats),
    }
    return {
        EDGES: delta.write_arrow(config.table_path(EDGES), edges, operation="graph"),
        TABLES: delta.write_arrow(config.table_path(TABLES), summary, operation="graph"),
        META: delta.write_arrow(
            config.table_path(META), pa.Table.from_pylist([meta], schema=META_SCHEMA), operation="graph"
        ),
    }


def _summary(graph: Graph) -> pa.Table:
    out: dict[str, int] = defaultdict(int)
    into: dict[str, int] = defaultdict(int)
    related: dict[str, set[str]] = defaultdict(set)
    for edges in graph.lists.values():
        for e in edges:
            out[e.query_dataset_id] += 1
            into[e.dataset_id] += 1
            related[e.query_dataset_id].add(e.dataset_id)
            related[e.dataset_id].add(e.query_dataset_id)
    rows = [
        {
            "dataset_id": d,
            "column_ids": sorted(c),
            "edges_out": out[d],
            "edges_in": into[d],
            "related_datasets": len(related[d]),
        }
        for d, c in sorted(graph.columns.items())
    ]
    return pa.Table.from_pylist(rows, schema=TABLES_SCHEMA)


def latest_graph(config: LakeConfig) -> Graph | None:
    """The graph last written (whatever snapshot it was computed from), or None."""
    if not all(delta.exists(config.table_path(t)) for t in GRAPH_TABLES):
        return None
    return _graph(
        delta.read_arrow(config.table_path(EDGES)),
        delta.read_arrow(config.table_path(TABLES)),
        delta.read_arrow(config.table_path(META)),
    )


def pinned_graph(loaded: LoadedSnapshot) -> Graph | None:
    """The graph the snapshot pins, or None (a snapshot published before any graph)."""
    if any(loaded.snapshot.version_of(t) is None for t in GRAPH_TABLES):
        return None
    return _graph(loaded.read(EDGES), loaded.read(TABLES), loaded.read(META))


def _graph(edges: pa.Table, tables: pa.Table, meta: pa.Table) -> Graph:
    row = meta.to_pylist()[0]
    columns = {r["dataset_id"]: frozenset(r["column_ids"]) for r in tables.to_pylist()}
    stats = {
        **json.loads(row["stats"]),
        "snapshot_id": row["snapshot_id"],
        "source_versions": json.loads(row["source_versions"]),
    }
    return Graph(edge_lists(edges.cast(EDGES_SCHEMA)), columns, tuple(row["kinds"]), row["k"], stats)


def graph_status(loaded: LoadedSnapshot, graph: Graph | None) -> dict[str, Any]:
    """Whether ``graph`` was computed from ``loaded``'s own tables (``current``), and from which snapshot."""
    if graph is None:
        return {
            "current": False,
            "snapshot_id": None,
            "note": f"snapshot {loaded.snapshot_id} has no join graph yet (run `lakejoin graph`)",
        }
    current = graph.stats["source_versions"] == source_versions(loaded)
    status = {"current": current, "snapshot_id": graph.stats["snapshot_id"] if not current else loaded.snapshot_id}
    if not current:
        status["note"] = (
            f"the join graph is from snapshot {graph.stats['snapshot_id']}, an earlier state of the lake; the graph of snapshot {loaded.snapshot_id} is not computed yet"
        )
    return status


def related(loaded: LoadedSnapshot, dataset_id: str) -> dict[str, Any]:
    """The ``lakejoin related`` answer: every edge from or to one of the dataset's columns, as
    ``{"dataset_id", "table", "method", "columns": [[its column, other column], ...], "evidence"}``,
    strongest first (an edge found both ways is listed once, from this dataset's side)."""
    loaded.dataset(dataset_id)
    graph = pinned_graph(loaded)
    entries: dict[tuple, dict[str, Any]] = {}
    for edges in graph.lists.values() if graph else ():
        for e in edges:
            if e.query_dataset_id == dataset_id:
                key = (e.kind, e.dataset_id, e.query_column_ids, e.column_ids)
                entries[key] = _entry(
                    loaded, e.kind, e.dataset_id, e.query_column_ids, e.column_ids, _evidence(e, outgoing=True)
                )
    for edges in graph.lists.values() if graph else ():
        for e in edges:
            if e.dataset_id == dataset_id:
                key = (e.kind, e.query_dataset_id, e.column_ids, e.query_column_ids)
                entries.setdefault(
                    key,
                    _entry(
                        loaded,
                        e.kind,
                        e.query_dataset_id,
                        e.column_ids,
                        e.query_column_ids,
                        _evidence(e, outgoing=False),
                    ),
                )
    ranked = sorted(
        entries.values(),
        key=lambda r: (KINDS.index(r["method"]), -r["evidence"]["strength"], r["dataset_id"], r["columns"]),
    )
    for r in ranked:
        del r["evidence"]["strength"]
    return {
        "snapshot_id": loaded.snapshot_id,
        "dataset_id": dataset_id,
        "graph": graph_status(loaded, graph),
        "composite_keys": composite_keys(loaded, dataset_id),
        "related": ranked,
    }


def composite_keys(loaded: LoadedSnapshot, dataset_id: str) -> list[list[str]]:
    """The dataset's composite keys in ``catalog/keys`` (tightest first)."""
    if loaded.snapshot.version_of(KEYS) is None:
        return []
    table = loaded.read(KEYS)
    keys = table.filter(pc.equal(table["dataset_id"], dataset_id)).sort_by("key_index")
    return [list(columns) for columns in keys["columns"].to_pylist()]


def _entry(
    loaded: LoadedSnapshot,
    method: str,
    other: str,
    own_ids: tuple[int, ...],
    other_ids: tuple[int, ...],
    evidence: dict[str, Any],
) -> dict[str, Any]:
    return {
        "dataset_id": other,
        "table": (loaded.datasets.get(other) or {}).get("title"),
        "method": method,
        "columns": [[_name(loaded, a), _name(loaded, b)] for a, b in zip(own_ids, other_ids)],
        "evidence": evidence,
    }


def _name(loaded: LoadedSnapshot, column_id: int) -> str | None:
    info = loaded.columns.get(column_id)
    return info.name if info else None


def _evidence(e: Any, outgoing: bool) -> dict[str, Any]:
    """The edge's scores seen from this dataset: ``containment`` is always the share of this
    side's values found in the other (for an incoming JOSIE edge, the reverse of the stored one)."""
    direction = "from_this" if outgoing else "to_this"
    if e.kind == JOSIE:
        mine, theirs = (e.containment, e.containment_reverse) if outgoing else (e.containment_reverse, e.containment)
        return {
            "overlap": e.overlap,
            "containment": mine,
            "containment_reverse": theirs,
            "jaccard": e.jaccard,
            "found": direction,
            "strength": e.overlap,
        }
    if e.kind == MATE:
        return {
            "joinability": e.overlap,
            "share": e.containment,
            "key_of": "this" if outgoing else "other",
            "found": direction,
            "strength": e.overlap,
        }
    return {
        "matched": e.overlap,
        "joinability": e.containment,
        "semantic": True,
        "found": direction,
        "strength": e.overlap,
    }
