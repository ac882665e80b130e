"""Index construction, [ICDE] §III-D/E and §IV (notes/pexeso.md §2.5, §2.8).

``BuildIndex``: select pivots on a sample, map every vector to pivot space, place it in a
leaf of the hierarchical grid and post it in the inverted index under its column. Lakes
larger than memory are first split by column clustering (``partition.py``), each partition
with its own pivots and grid.

The same functions serve the Spark build (``lakejoin.spark.pexeso``, mapping in executors)
and ``build_in_memory``; both pick the sample by a hash of (column_id, vector_id), so they
choose the same pivots and produce the same tables.

Tables (one row per ...):

- ``params`` (global): partition: metric, embedding model, dim, ``|P|``, ``m``, grid bounds,
  sizes, how ``|P|``/``m`` were chosen (``cost-model`` or ``given``), and the vectors inserted
  since the last full build (``update.py``);
- ``pivots`` (global): pivot of a partition, its vector;
- ``mapped`` (sharded): indexed vector: ids, value, vector and mapped vector ``x'``;
- ``cells`` (sharded): (partition, leaf cell, column): the inverted index, with the column's
  vector ids in that leaf. Leaf cells are Morton keys (``grid.py``); upper levels derive from
  them.

Sharded tables carry ``shard`` = ``shard_of(dataset_id)`` (``lakejoin.index.shards``): a column
lives in one shard, so its mapped vectors and its postings do too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakejoin.index.pexeso.grid import check_shape, leaf_keys
from lakejoin.index.pexeso.partition import cluster_columns, nearest_region
from lakejoin.index.pexeso.pivots import map_to_pivot_space, select_pivots
from lakejoin.index.shards import SHARD, shard_of

# metric -> the maximum distance that user-facing τ is a fraction of (1: τ is absolute)
METRICS = {"l2-unit": 2.0, "l2-absolute": 1.0}
DEFAULT_SAMPLE_SIZE = 4096
MAX_PIVOTS = 24  # pivots selected; the cost model then picks |P| among cost.PIVOT_CHOICES
REFERENCES = 32
UNIT_NORM_TOLERANCE = 1e-3
CHECK_CHUNK = 65536

PARAMS_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("metric", pa.string()),
        ("model", pa.string()),
        ("dim", pa.int32()),
        ("n_pivots", pa.int32()),
        ("levels", pa.int32()),
        ("lo", pa.list_(pa.float64())),
        ("hi", pa.list_(pa.float64())),
        ("n_vectors", pa.int64()),
        ("n_columns", pa.int64()),
        ("sample_size", pa.int64()),
        ("chosen_by", pa.string()),
        ("inserted", pa.int64()),  # vectors inserted since the last full build (update.py)
        ("outside", pa.int64()),  # of those, mapped outside [lo, hi]
    ]
)
PIVOTS_SCHEMA = pa.schema([("partition", pa.int32()), ("pivot", pa.int32()), ("vector", pa.list_(pa.float32()))])
MAPPED_SCHEMA = pa.schema(
    [
        (SHARD, pa.int32()),
        ("partition", pa.int32()),
        ("dataset_id", pa.string()),
        ("column_id", pa.int64()),
        ("vector_id", pa.int64()),
        ("value", pa.string()),
        ("vector", pa.list_(pa.float32())),
        ("mapped", pa.list_(pa.float64())),
        ("inserted", pa.bool_()),  # mapped after the last full build, with its kept pivots (update.py)
    ]
)
CELLS_SCHEMA = pa.schema(
    [
        (SHARD, pa.int32()),
        ("partition", pa.int32()),
        ("cell", pa.int64()),
        ("column_id", pa.int64()),
        ("vector_ids", pa.list_(pa.int64())),
    ]
)


def check_metric(metric: str) -> float:
    """The τ scale of ``metric``; unknown metrics are a ValueError."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    return METRICS[metric]


def check_vectors(vectors: np.ndarray, metric: str, what: str = "vectors") -> np.ndarray:
    """float32 rows, finite, and of unit L2 norm under ``l2-unit`` (the lemmas need a metric)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] == 0:
        raise ValueError(f"{what} must be a 2-d array with at least one dimension, got shape {vectors.shape}")
    unit = check_metric(metric) == METRICS["l2-unit"]
    # in chunks: float64 temporaries of a whole lake's vectors would take GiBs
    for start in range(0, len(vectors), CHECK_CHUNK):
        chunk = vectors[start : start + CHECK_CHUNK]
        if not np.isfinite(chunk).all():
            raise ValueError(f"{what} contain NaN or infinite values")
        worst = float(np.abs(np.linalg.norm(chunk.astype(np.float64), axis=1) - 1.0).max()) if unit else 0.0
        if worst > UNIT_NORM_TOLERANCE:
            raise ValueError(f"{what} must be L2-normalized for metric 'l2-unit' (a row has norm off by {worst:.3g})")
    return vectors


def sample_hash(column_ids: np.ndarray, vector_ids: np.ndarray) -> np.ndarray:
    """splitmix64 of (column_id, vector_id): the sample order, equal in Spark and in memory."""
    with np.errstate(over="ignore"):
        x = np.asarray(column_ids, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x = x + np.asarray(vector_ids, dtype=np.int64).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sample_order(column_ids: np.ndarray, vector_ids: np.ndarray) -> np.ndarray:
    """Row order by (hash, column_id, vector_id); a sample is a prefix of it."""
    return np.lexsort((vector_ids, column_ids, sample_hash(column_ids, vector_ids)))


@dataclass(frozen=True)
class PartitionPlan:
    """What a partition's build decided before mapping: pivots, grid bounds and shape."""

    partition: int
    pivots: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    levels: int
    chosen_by: str
    sample_size: int

    def map(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pivot mapping and leaf cell of each vector."""
        mapped = map_to_pivot_space(vectors, self.pivots)
        return mapped, leaf_keys(mapped, self.lo, self.hi, self.levels)

    def outside(self, mapped: np.ndarray) -> np.ndarray:
        """Whether each mapped vector lies outside the grid bounds (clamped into a border cell)."""
        return np.asarray(((mapped < self.lo) | (mapped > self.hi)).any(axis=1))


def plan_partition(
    partition: int, sample: np.ndarray, metric: str, n_pivots: int | None = None, levels: int | None = None
) -> PartitionPlan:
    """Pivots by the PCA-based method; ``|P|``/``m`` by the cost model unless given."""
    sample = np.asarray(sample, dtype=np.float32)
    ranked = select_pivots(sample, n_pivots or min(MAX_PIVOTS, sample.shape[1]))
    chosen_by = "given"
    if n_pivots is None or levels is None:
        # imported here: Spark executors, which only map vectors, then never load numba
        from lakejoin.index.pexeso.cost import LEVEL_CHOICES, choose_shape

        max_distance = (
            METRICS["l2-unit"] if metric == "l2-unit" else float(map_to_pivot_space(sample, ranked[:1]).max())
        )
        n_pivots, levels = choose_shape(
            sample,
            ranked,
            max(max_distance, 1e-12),
            pivot_counts=[min(n_pivots, len(ranked))] if n_pivots else None,
            level_counts=[levels] if levels else LEVEL_CHOICES,
        )
        chosen_by = "cost-model"
    pivots = ranked[: min(n_pivots, len(ranked))]
    check_shape(len(pivots), levels)
    mapped = map_to_pivot_space(sample, pivots)
    return PartitionPlan(partition, pivots, mapped.min(axis=0), mapped.max(axis=0), levels, chosen_by, len(sample))


def assign_partitions(
    vectors: np.ndarray, column_ids: np.ndarray, order: np.ndarray, n_partitions: int, iterations: int
) -> np.ndarray:
    """The partition of every row: column clustering over region histograms (§IV)."""
    if n_partitions <= 1:
        return np.zeros(len(vectors), dtype=np.int32)
    references = vectors[order[:REFERENCES]]
    regions = nearest_region(vectors, references)
    columns, labels = column_partitions(
        column_ids, regions, np.ones(len(regions), np.int64), len(references), n_partitions, iterations
    )
    return labels[np.searchsorted(columns, column_ids)]


def column_partitions(
    column_ids: np.ndarray, regions: np.ndarray, counts: np.ndarray, n_regions: int, n_partitions: int, iterations: int
) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct column ids, their partitions) from (column, region, count) rows."""
    columns, column_index = np.unique(column_ids, return_inverse=True)
    histograms = np.zeros((len(columns), n_regions), dtype=np.int64)
    np.add.at(histograms, (column_index, regions), counts)
    return columns, cluster_columns(histograms, n_partitions, iterations).astype(np.int32)


def params_row(
    plan: PartitionPlan,
    metric: str,
    model: str | None,
    dim: int,
    n_vectors: int,
    n_columns: int,
    inserted: int = 0,
    outside: int = 0,
) -> dict:
    """A partition's ``params`` row; ``inserted``/``outside`` count since the last full build."""
    return {
        "partition": plan.partition,
        "metric": metric,
        "model": model,
        "dim": dim,
        "n_pivots": len(plan.pivots),
        "levels": plan.levels,
        "lo": plan.lo.tolist(),
        "hi": plan.hi.tolist(),
        "n_vectors": n_vectors,
        "n_columns": n_columns,
        "sample_size": plan.sample_size,
        "chosen_by": plan.chosen_by,
        "inserted": inserted,
        "outside": outside,
    }


def pivot_rows(plan: PartitionPlan) -> list[dict]:
    """One row per pivot of a partition: the partition, the pivot's number and its vector."""
    return [{"partition": plan.partition, "pivot": i, "vector": p.tolist()} for i, p in enumerate(plan.pivots)]


def cells_table(
    shards: np.ndarray, partition: np.ndarray, cells: np.ndarray, column_ids: np.ndarray, vector_ids: np.ndarray
) -> pa.Table:
    """The inverted index: vector ids grouped by (partition, leaf cell, column), sorted; a
    column's shard is its vectors' shard."""
    order = np.lexsort((vector_ids, column_ids, cells, partition))
    p, c, s, v = partition[order], cells[order], column_ids[order], vector_ids[order]
    start = (
        np.flatnonzero(np.r_[True, (p[1:] != p[:-1]) | (c[1:] != c[:-1]) | (s[1:] != s[:-1])])
        if len(p)
        else np.zeros(0, np.int64)
    )
    offsets = pa.array(np.r_[start, len(v)].astype(np.int32))
    return pa.table(
        {
            SHARD: pa.array(shards[order][start], pa.int32()),
            "partition": pa.array(p[start], pa.int32()),
            "cell": pa.array(c[start], pa.int64()),
            "column_id": pa.array(s[start], pa.int64()),
            "vector_ids": pa.ListArray.from_arrays(offsets, pa.array(v, pa.int64())),
        },
        schema=CELLS_SCHEMA,
    )


def vector_list(rows: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """A 2-d array as a list<dtype> column."""
    flat = pa.array(np.ascontiguousarray(rows).reshape(-1), dtype)
    offsets = pa.array(np.arange(0, rows.size + 1, max(rows.shape[1], 1), dtype=np.int32)[: len(rows) + 1])
    return pa.ListArray.from_arrays(offsets, flat)


def column_shards(column_ids: Sequence[int], dataset_ids: Mapping[int, str] | None, n_shards: int) -> dict[int, int]:
    """Each column's shard: its dataset's. Without dataset ids every column is in shard 0,
    which only one shard allows."""
    if dataset_ids is None:
        if n_shards != 1:
            raise ValueError("a sharded PEXESO build needs the columns' dataset_ids")
        return dict.fromkeys(column_ids, 0)
    return {c: shard_of(dataset_ids[c], n_shards) for c in column_ids}


def build_in_memory(
    columns: Mapping[int, np.ndarray],
    *,
    values: Mapping[int, Sequence[str]] | None = None,
    vector_ids: Mapping[int, Sequence[int]] | None = None,
    dataset_ids: Mapping[int, str] | None = None,
    n_shards: int = 1,
    metric: str = "l2-unit",
    model: str | None = None,
    n_pivots: int | None = None,
    levels: int | None = None,
    n_partitions: int = 1,
    iterations: int = 10,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
) -> dict[str, pa.Table]:
    """The index tables of ``columns`` (column_id → vectors, one row per value) without Spark.

    ``values`` gives each row's text and ``vector_ids`` its id (default: the row's position in
    its column; ids order the sample); ``n_shards`` > 1 needs ``dataset_ids`` (a column's shard
    is its dataset's).
    """
    check_metric(metric)
    if not columns:
        raise ValueError("no columns to index")
    shard_by_column = column_shards(list(columns), dataset_ids, n_shards)
    parts = [np.asarray(v, dtype=np.float32).reshape(len(v), -1) for v in columns.values()]
    vectors = check_vectors(np.concatenate(parts), metric)
    column_ids = np.concatenate([np.full(len(v), c, np.int64) for c, v in zip(columns, parts)])
    positions = [np.arange(len(v), dtype=np.int64) for v in parts]
    ids = np.concatenate([np.asarray(vector_ids[c], np.int64) for c in columns] if vector_ids else positions)
    shards = np.concatenate([np.full(len(v), shard_by_column[c], np.int32) for c, v in zip(columns, parts)])
    at = np.concatenate(positions).tolist()
    texts = [None if values is None else values[c][i] for c, i in zip(column_ids.tolist(), at)]
    order = sample_order(column_ids, ids)
    partition = assign_partitions(vectors, column_ids, order, n_partitions, iterations)
    cells = np.zeros(len(vectors), dtype=np.int64)
    params, pivots, mapped_parts = [], [], []
    for part in np.unique(partition).tolist():
        rows = np.flatnonzero(partition == part)
        sample_rows = order[partition[order] == part][:sample_size]
        plan = plan_partition(part, vectors[sample_rows], metric, n_pivots, levels)
        mapped, cells[rows] = plan.map(vectors[rows])
        mapped_parts.append((rows, mapped))
        params.append(params_row(plan, metric, model, vectors.shape[1], len(rows), len(np.unique(column_ids[rows]))))
        pivots.extend(pivot_rows(plan))
    rows = np.concatenate([r for r, _ in mapped_parts])
    in_order = len(mapped_parts) == 1  # one partition: rows are 0..n-1, no reordered copy
    mapped_table = pa.table(
        {
            SHARD: pa.array(shards[rows], pa.int32()),
            "partition": pa.array(partition[rows], pa.int32()),
            "dataset_id": pa.array(
                [None if dataset_ids is None else dataset_ids[c] for c in column_ids[rows].tolist()], pa.string()
            ),
            "column_id": pa.array(column_ids[rows], pa.int64()),
            "vector_id": pa.array(ids[rows], pa.int64()),
            "value": pa.array([texts[r] for r in rows.tolist()], pa.string()),
            "vector": vector_list(vectors if in_order else vectors[rows], pa.float32()),
            "mapped": pa.concat_arrays([vector_list(m, pa.float64()) for _, m in mapped_parts]),
            "inserted": pa.array(np.zeros(len(rows), dtype=bool)),
        },
        schema=MAPPED_SCHEMA,
    )
    return {
        "params": pa.Table.from_pylist(params, schema=PARAMS_SCHEMA),
        "pivots": pa.Table.from_pylist(pivots, schema=PIVOTS_SCHEMA),
        "mapped": mapped_table,
        "cells": cells_table(shards, partition, cells, column_ids, ids),
    }


def build_tables(vectors: pa.Table, *, n_shards: int, model: str | None = None) -> dict[str, pa.Table]:
    """The full build of ``lakejoin.spark.pexeso.build_tables`` in this process, for a lake small
    enough to build here (``lakejoin.spark.indexing``): ``vectors`` as the Spark build takes them,
    the distinct values with their embeddings (``dataset_id, column_id, vector_id, value,
    vector``). The same tables: the sample is ordered by the same ids."""
    table = vectors.sort_by("column_id")
    column_ids = table["column_id"].to_numpy()
    flat = table["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = flat.astype(np.float32).reshape(table.num_rows, -1)
    ids, texts, datasets = table["vector_id"].to_numpy(), table["value"].to_pylist(), table["dataset_id"].to_pylist()
    starts = np.flatnonzero(np.r_[True, column_ids[1:] != column_ids[:-1]]).tolist()
    spans = {int(column_ids[a]): slice(a, b) for a, b in zip(starts, [*starts[1:], len(column_ids)])}
    return build_in_memory(
        {c: matrix[span] for c, span in spans.items()},
        values={c: texts[span] for c, span in spans.items()},
        vector_ids={c: ids[span] for c, span in spans.items()},
        dataset_ids={c: datasets[span.start] for c, span in spans.items()},
        n_shards=n_shards,
        model=model,
    )
