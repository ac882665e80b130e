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
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.config import LakeConfig
from lakejoin.graph import neighbours
from lakejoin.graph.build import Graph
from lakejoin.graph.edges import (
    EDGES_SCHEMA,
    JOSIE,
    KINDS,
    MATE,
    Edge,
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
    for missing in (f for f in EDGES_SCHEMA if f.name not in edges.column_names):  # a graph written before the field
        edges = edges.append_column(missing, pa.nulls(edges.num_rows, missing.type))
    return Graph(
        edge_lists(edges.select(EDGES_SCHEMA.names).cast(EDGES_SCHEMA)), columns, tuple(row["kinds"]), row["k"], stats
    )


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
            f"the join graph is from snapshot {graph.stats['snapshot_id']}, an earlier state of the lake; "
            f"the graph of snapshot {loaded.snapshot_id} is not computed yet"
        )
    return status


RANKS = ("quality", "overlap")
SHOWN_KEYS = 5  # composite keys listed per table: a handful a person reads, not every accidental one


def related(loaded: LoadedSnapshot, dataset_id: str, rank: str = "quality") -> dict[str, Any]:
    """The ``lakejoin related`` answer.

    ``rank="quality"`` (the default): each neighbour table once, best join first
    (``lakejoin.graph.neighbours``: ``{"dataset_id", "table", "method", "columns", "quality",
    "reason", "evidence", "also", "subsumed"}``), and the tables whose best join is weak apart
    (``weak``). ``rank="overlap"``: every edge of each column's raw list (its best ``k`` by overlap)
    as ``{"dataset_id", "table", "method", "columns", "evidence"}``, by kind then overlap (an edge
    found both ways is listed once, from this dataset's side)."""
    if rank not in RANKS:
        raise ValueError(f"unknown rank {rank!r}; known: {', '.join(RANKS)}")
    loaded.dataset(dataset_id)
    graph = pinned_graph(loaded)
    answer: dict[str, Any] = {
        "snapshot_id": loaded.snapshot_id,
        "dataset_id": dataset_id,
        "table": (loaded.datasets.get(dataset_id) or {}).get("title"),
        "rank": rank,
        "graph": graph_status(loaded, graph),
        "composite_keys": composite_keys(loaded, dataset_id),
    }
    if rank == "overlap":
        return {**answer, "related": _by_overlap(loaded, graph, dataset_id)}
    joins = neighbours.joins_of(loaded, dataset_id, _touching(graph, dataset_id) if graph else ())
    good, weak = neighbours.by_table(loaded, joins)
    return {**answer, "related": good, "weak": weak}


def _touching(graph: Graph, dataset_id: str, k: int | None = None) -> Iterator[tuple[Edge, bool]]:
    """Every edge from one of the dataset's query units, then every edge into its columns (of
    each list only its best ``k`` by overlap, when given: the raw lists)."""
    lists = [sorted(edges, key=_overlap_order)[:k] if k is not None else edges for edges in graph.lists.values()]
    for edges in lists:
        yield from ((e, True) for e in edges if e.query_dataset_id == dataset_id)
    for edges in lists:
        yield from ((e, False) for e in edges if e.dataset_id == dataset_id)


def _by_overlap(loaded: LoadedSnapshot, graph: Graph | None, dataset_id: str) -> list[dict[str, Any]]:
    """The raw order: each list's best ``k`` by overlap (a JOSIE list also holds its best by
    quality), every edge once, by kind then overlap."""
    entries: dict[tuple, dict[str, Any]] = {}
    for e, outgoing in _touching(graph, dataset_id, graph.k) if graph else ():
        own, other = (e.query_column_ids, e.column_ids) if outgoing else (e.column_ids, e.query_column_ids)
        neighbour = e.dataset_id if outgoing else e.query_dataset_id
        entries.setdefault(
            (e.kind, neighbour, own, other), _entry(loaded, e.kind, neighbour, own, other, _evidence(e, outgoing))
        )
    ranked = sorted(
        entries.values(),
        key=lambda r: (KINDS.index(r["method"]), -r["evidence"]["strength"], r["dataset_id"], r["columns"]),
    )
    for r in ranked:
        del r["evidence"]["strength"]
    return ranked


def _overlap_order(e: Edge) -> tuple:
    return (-e.overlap, e.dataset_id, e.column_ids)


def composite_keys(loaded: LoadedSnapshot, dataset_id: str, most: int | None = SHOWN_KEYS) -> list[list[str]]:
    """The dataset's composite keys in ``catalog/keys`` in their stored order, the one a person
    reads them in (``join_quality.key_order``, ``lakejoin.profile.composite.discover``), at most
    ``most`` (None: all)."""
    if loaded.snapshot.version_of(KEYS) is None:
        return []
    table = loaded.read(KEYS)
    keys = table.filter(pc.equal(table["dataset_id"], dataset_id)).sort_by("key_index").to_pylist()
    return [list(key["columns"]) for key in keys[:most]]


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
