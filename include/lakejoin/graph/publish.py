"""Bring the graph up to date with the lake's snapshots.

A build publishes its snapshot with its graph (:func:`graph_of_versions`, called by
``lakejoin.spark.pipeline.publish`` under the build's write lease): the graph of the table
versions about to be pinned is computed, incrementally from the graph last written, and its
tables are pinned in the same snapshot.

:func:`refresh` (``lakejoin graph``, the graph DAG) is for a snapshot published without one (a build
run with ``--no-graph``, or another ``k``): the graph of snapshot N is computed (incrementally from
the graph last written, when there is one), written to ``graph/``, and published as snapshot N+1:
N's table versions plus the new graph tables, so a reader of N+1 gets N's data with its own graph.
Publishing holds the lake's write lease like every build; if a newer snapshot appeared meanwhile the
graph is written but not published (the newer snapshot's own graph run will publish one).
"""

from __future__ import annotations

import time
from typing import Any

from lakejoin.config import LakeConfig
from lakejoin.graph.build import compute
from lakejoin.graph.edges import DEFAULT_K
from lakejoin.graph.store import (
    GRAPH_TABLES,
    graph_status,
    latest_graph,
    pinned_graph,
    write_graph,
)
from lakejoin.lake import snapshots
from lakejoin.query.snapshot import load_snapshot


def graph_of_versions(config: LakeConfig, versions: dict[str, int], k: int = DEFAULT_K) -> tuple[dict[str, int], dict]:
    """Compute and write the graph of the lake at ``versions`` (the snapshot about to be
    published, under the caller's write lease); returns the graph tables' versions to pin with
    them and the graph's stats."""
    pending = snapshots.pending(config, {t: v for t, v in versions.items() if t not in GRAPH_TABLES})
    loaded = load_snapshot(config, pending)
    graph = compute(loaded, latest_graph(config), k)
    return write_graph(config, loaded, graph), graph.stats


def refresh(
    config: LakeConfig,
    *,
    k: int = DEFAULT_K,
    full: bool = False,
    publish: bool = True,
    build_id: str | None = None,
    wait: float = 0.0,
) -> dict[str, Any]:
    """Compute, write and publish the latest snapshot's graph; a no-op when it has its graph.
    ``build_id`` and ``wait`` are the write lease's (``snapshots.writing``)."""
    started = time.perf_counter()
    with snapshots.writing(config, "graph", build_id, wait):
        loaded = load_snapshot(config, snapshots.resolve(config))
        if graph_status(loaded, pinned_graph(loaded))["current"] and not full:
            return {"snapshot_id": loaded.snapshot_id, "graph": "current", "published": None}
        previous = None if full else latest_graph(config)
        graph = compute(loaded, previous, k)
        versions = write_graph(config, loaded, graph)
        published = None
        if publish and snapshots.resolve(config).snapshot_id == loaded.snapshot_id:
            pinned = {t: v for t, v in loaded.snapshot.table_versions.items() if t not in GRAPH_TABLES}
            stats = {"graph_of_snapshot": loaded.snapshot_id, "graph": graph.stats}
            published = snapshots.publish(config, {**pinned, **versions}, stats).snapshot_id
    return {
        "snapshot_id": loaded.snapshot_id,
        "published": published,
        "edges": sum(len(v) for v in graph.lists.values()),
        "queries": len(graph.lists),
        "stats": graph.stats,
        "seconds": round(time.perf_counter() - started, 2),
    }
