"""Updates as [ICDE] allows them (notes/pexeso.md §2.7 "Updates"), and when they have drifted too far.

The paper appends a column by mapping its vectors with the existing pivots and posting them in
``HG_RV`` and ``I``, and deletes one from both; pivots (and so the grid bounds) are never
re-selected. The sharded index does exactly that (``lakejoin.spark.pexeso``): ``params`` and
``pivots`` are global and kept, ``mapped`` and ``cells`` are sharded and only the shards
holding a changed dataset are rewritten.

Staleness. What the kept pivots cost is filtering power: they were selected, and the bounds
``[lo, hi]`` fixed, on a sample of the data at the last full build; vectors inserted since come
from columns the sample never saw, may map outside the bounds (they are clamped into border
cells) and crowd cells the pivots do not separate. ``params`` counts, per partition, the
current vectors inserted since the last full build (``inserted``; a full build resets it to 0;
each ``mapped`` row records whether it was, so a replaced or removed column's vectors leave the
count) and how many insertions mapped outside the bounds (``outside``, a running count kept for
inspection). :func:`staleness` is the share of the current vectors that were inserted since the
last full build, ``Σ inserted / Σ n_vectors``. (Counting every insertion instead made a table
changed again and again look like a stale index: on the 100-table bundled lake, re-editing one
table forced a full rebuild within two runs.)

``tests/benchmarks/bench_pexeso_staleness.py`` measures the exact distance computations per
query of an incrementally updated index against a fresh build of the same columns (figures in
the benchmarks history, docs): up to half the vectors inserted since the build, the kept pivots
cost nothing measurable; past it the incremental index computes up to about twice the
distances. Hence :data:`STALENESS_LIMIT` = 0.5: rebuild once half the vectors are newer than
the pivots. Answers are exact whatever the staleness (the lemmas hold for any pivots and
bounds); only speed degrades.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.pexeso.build import (
    CELLS_SCHEMA,
    MAPPED_SCHEMA,
    PARAMS_SCHEMA,
    PIVOTS_SCHEMA,
    PartitionPlan,
    cells_table,
    check_vectors,
    pivot_rows,
    vector_list,
)
from lakejoin.index.pexeso.partition import nearest_region
from lakejoin.index.shards import SHARD, shard_column

GLOBAL_TABLES = frozenset({"params", "pivots"})  # kept on update; ``mapped`` and ``cells`` are sharded
APPEND_TABLES: frozenset[str] = frozenset()
STALENESS_LIMIT = 0.5


def staleness_of(params: Iterable[Mapping[str, Any]]) -> float:
    """The share of the index's vectors inserted since its last full build (``params`` rows)."""
    rows = list(params)
    inserted = sum(int(r["inserted"]) for r in rows)
    total = sum(int(r["n_vectors"]) for r in rows)
    if inserted == 0:
        return 0.0
    return inserted / total if total else float("inf")


def updated_sizes(
    before: Mapping[str, Any], removed: tuple[int, int, int, int], added: tuple[int, int, int, int]
) -> dict[str, int]:
    """A partition's sizes after an update, from the (vectors, columns, outside the bounds,
    inserted since the full build) of the changed datasets' old rows (``removed``) and new rows
    (``added``; all of them inserted)."""
    return {
        "n_vectors": int(before["n_vectors"]) - removed[0] + added[0],
        "n_columns": int(before["n_columns"]) - removed[1] + added[1],
        "inserted": int(before["inserted"]) - removed[3] + added[0],
        "outside": int(before["outside"]) + added[2],
    }


def update_tables(
    vectors: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
) -> dict[str, pa.Table]:
    """The incremental build of ``lakejoin.spark.pexeso.build_tables`` in this process, for an
    update small enough to run here (``lakejoin.spark.indexing``): the same tables.

    ``vectors``: the changed datasets' distinct values with their embeddings (``dataset_id,
    column_id, vector_id, value, vector``); ``previous``: ``params`` and ``pivots`` whole,
    ``mapped`` and ``cells`` cut to the rewritten shards. Pivots and grid bounds are kept; the
    changed datasets' old rows leave, their new vectors are mapped with the kept pivots (a new
    column joins the partition whose pivots' mean is nearest to most of its vectors, ties to the
    lowest partition) and counted as inserted.
    """
    settings = {r["partition"]: r for r in previous["params"].to_pylist()}
    if not settings:
        raise ValueError("the previous PEXESO params table is empty")
    metric, dim = next(iter(settings.values()))["metric"], int(next(iter(settings.values()))["dim"])
    plans = _kept_plans(settings, previous["pivots"], dim)
    gone = pc.is_in(previous["mapped"]["dataset_id"], value_set=pa.array(sorted(changed), pa.string()))
    old = previous["mapped"].filter(gone)
    removed = _partition_sizes(
        old["partition"].to_numpy(),
        old["column_id"].to_numpy(),
        np.zeros(old.num_rows, bool),
        old["inserted"].to_numpy(zero_copy_only=False),
    )
    kept_cells = previous["cells"].filter(
        pc.invert(pc.is_in(previous["cells"]["column_id"], value_set=pc.unique(old["column_id"])))
    )
    added: dict[int, tuple[int, int, int, int]] = {}
    mapped_parts, cells_parts = [previous["mapped"].filter(pc.invert(gone))], [kept_cells]
    if vectors.num_rows:
        new_mapped, new_cells, added = _map_new(vectors, plans, metric, dim, n_shards)
        mapped_parts.append(new_mapped)
        cells_parts.append(new_cells)
    params = [
        {**s, **updated_sizes(s, removed.get(p, (0, 0, 0, 0)), added.get(p, (0, 0, 0, 0)))}
        for p, s in sorted(settings.items())
    ]
    return {
        "params": pa.Table.from_pylist(params, schema=PARAMS_SCHEMA),
        "pivots": pa.Table.from_pylist(
            [row for p in sorted(plans) for row in pivot_rows(plans[p])], schema=PIVOTS_SCHEMA
        ),
        "mapped": pa.concat_tables([t.select(MAPPED_SCHEMA.names).cast(MAPPED_SCHEMA) for t in mapped_parts]),
        "cells": pa.concat_tables([t.select(CELLS_SCHEMA.names).cast(CELLS_SCHEMA) for t in cells_parts]),
    }


def _kept_plans(settings: Mapping[int, Mapping[str, Any]], pivots: pa.Table, dim: int) -> dict[int, PartitionPlan]:
    """Each partition's plan as the last full build made it (pivots, bounds, levels)."""
    rows = sorted(pivots.to_pylist(), key=lambda r: (r["partition"], r["pivot"]))
    plans = {}
    for p, s in settings.items():
        kept = np.asarray([r["vector"] for r in rows if r["partition"] == p], dtype=np.float32).reshape(-1, dim)
        plans[p] = PartitionPlan(
            p, kept, np.asarray(s["lo"]), np.asarray(s["hi"]), s["levels"], s["chosen_by"], s["sample_size"]
        )
    return plans


def _map_new(
    vectors: pa.Table, plans: Mapping[int, PartitionPlan], metric: str, dim: int, n_shards: int
) -> tuple[pa.Table, pa.Table, dict[int, tuple[int, int, int, int]]]:
    """The new rows' ``mapped`` and ``cells`` rows, and their sizes per partition."""
    flat = pc.list_flatten(vectors["vector"]).to_numpy(zero_copy_only=False)
    if flat.size != vectors.num_rows * dim:
        raise ValueError(f"new vectors do not have the index's dimension {dim}")
    matrix = check_vectors(flat.reshape(vectors.num_rows, dim), metric)
    column_ids = vectors["column_id"].to_numpy()
    partition = _nearest_partitions(matrix, column_ids, plans)
    mapped = np.zeros((len(matrix), len(next(iter(plans.values())).pivots)), dtype=np.float64)
    cells, outside = np.zeros(len(matrix), np.int64), np.zeros(len(matrix), bool)
    for p in np.unique(partition).tolist():
        rows = np.flatnonzero(partition == p)
        mapped_rows, cells[rows] = plans[p].map(matrix[rows])
        mapped[rows], outside[rows] = mapped_rows, plans[p].outside(mapped_rows)
    shards = shard_column(vectors["dataset_id"], n_shards).to_numpy()
    vector_ids = vectors["vector_id"].to_numpy()
    table = pa.table(
        {
            SHARD: pa.array(shards, pa.int32()),
            "partition": pa.array(partition, pa.int32()),
            "dataset_id": vectors["dataset_id"].cast(pa.string()),
            "column_id": pa.array(column_ids, pa.int64()),
            "vector_id": pa.array(vector_ids, pa.int64()),
            "value": vectors["value"].cast(pa.string()),
            "vector": vector_list(matrix, pa.float32()),
            "mapped": vector_list(mapped, pa.float64()),
            "inserted": pa.array(np.ones(len(matrix), bool)),
        },
        schema=MAPPED_SCHEMA,
    )
    sizes = _partition_sizes(partition, column_ids, outside, np.ones(len(matrix), bool))
    return table, cells_table(shards, partition, cells, column_ids, vector_ids), sizes


def _nearest_partitions(vectors: np.ndarray, column_ids: np.ndarray, plans: Mapping[int, PartitionPlan]) -> np.ndarray:
    """Each row's partition: the one whose pivots' mean is nearest to most of its column's
    vectors (ties: the lowest partition, as Spark's deterministic ``mode``)."""
    order = np.asarray(sorted(plans), dtype=np.int32)
    if len(order) == 1:
        return np.full(len(vectors), order[0], np.int32)
    centres = np.stack([plans[p].pivots.mean(axis=0) for p in order])
    votes = nearest_region(vectors, centres)
    columns, column_index = np.unique(column_ids, return_inverse=True)
    counts = np.zeros((len(columns), len(order)), dtype=np.int64)
    np.add.at(counts, (column_index, votes), 1)
    return order[counts.argmax(axis=1)][column_index]


def _partition_sizes(
    partition: np.ndarray, column_ids: np.ndarray, outside: np.ndarray, inserted: np.ndarray
) -> dict[int, tuple[int, int, int, int]]:
    """Per partition: (vectors, distinct columns, outside the bounds, inserted since the full build)."""
    return {
        int(p): (int(rows.sum()), len(np.unique(column_ids[rows])), int(outside[rows].sum()), int(inserted[rows].sum()))
        for p in np.unique(partition).tolist()
        for rows in [partition == p]
    }
