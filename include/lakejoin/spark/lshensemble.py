"""Spark build of the LSH Ensemble index tables (``lakejoin.index.lshensemble.tables``).

MinHash signatures are computed inside executors, exactly ``datasketch.MinHash(num_perm, seed)``
(``lakejoin.index.lshensemble.minhash``: each column's distinct values hashed, minima per
permutation in compiled code).

- Full build (:func:`write_full_build`): one Spark task per group of shards
  (``lakejoin.spark.shards.shard_tasks``) reads its datasets' cell files, takes each column's
  distinct values and writes that shard's ``signatures`` and ``sets`` rows in the same task; the
  ``sizes`` histogram is then summed from the written signatures (one row per column). No cell
  crosses the JVM: the DataFrame build shuffled every cell three times (signatures, sets, sizes).
- Incremental builds (:func:`build_tables`, only the changed datasets' cells): the cells are
  repartitioned by ``column_id`` and sorted by ``(column_id, value)``, so every column is one run
  of rows in one task (``mapInArrow``).

Shards. ``signatures`` and ``sets`` are sharded by dataset; ``sizes`` (the set-size histogram)
and ``partitions`` are global. Only histograms reach the driver: at a full build the lake's, at
an incremental build the previous ``sizes`` plus the changed datasets' new sizes minus their old
ones (read from their ``previous`` signatures, which lie in the rewritten shards). The
partitioning is recomputed from that histogram at every build (thesis §2.4.6 chooses it
globally, from all sizes), so an incremental index is tuned exactly as a full build would be
and its candidates are a full build's.

Staleness (``lakejoin.index.lshensemble.tables.staleness``): the share of the indexed sets that
the stored partitioning did not count in the partition the searcher puts them in. Every build
recomputes ``partitions`` from the exact histogram, so the measure is always 0 here and drift
never forces a rebuild; it guards the rule "bounds are never kept" rather than an approximation.
The limit says how far kept bounds may drift before search slows: leaving the largest sets
out of the bounds grows the candidates quickly past a few percent, recall unchanged (measured
on the tests' synthetic open-data lake; the figures are in the benchmarks history, docs).
Hence :data:`STALENESS_LIMIT` = 0.02.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.config import LakeConfig
from lakejoin.index.lshensemble.minhash import hash_values, signatures_from_hashes
from lakejoin.index.lshensemble.tables import (
    GLOBAL_TABLES,
    SETS_SCHEMA,
    SIGNATURES_SCHEMA,
    STALENESS_LIMIT,
    minhash_column,
    partitions_table,
    sizes_table,
)
from lakejoin.index.lshensemble.tables import staleness as partitioning_staleness
from lakejoin.index.shards import SHARD
from lakejoin.lake import delta
from lakejoin.pause import pause_point
from lakejoin.spark import delta as spark_delta
from lakejoin.spark.shards import shard_column, shard_tasks, task_column_values, tasks_of

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "staleness", "write_full_build"]

APPEND_TABLES: frozenset[str] = frozenset()

_HASHED_SCHEMA = pa.schema([f for f in SIGNATURES_SCHEMA if f.name != SHARD])  # mapInArrow output
_HASHED_DDL = "column_id long, dataset_id string, size long, seed long, minhash binary"
_SIZES_DDL = "size long, count long"
_PARTITIONS_DDL = "partition int, lower long, upper long, num_sets long, method string"


def build_tables(
    spark: SparkSession,
    inputs: DataFrame,
    *,
    n_shards: int,
    previous: Mapping[str, DataFrame] | None = None,
    changed: set[str] | None = None,
    num_perm: int = 256,
    seed: int = 1,
    num_part: int = 32,
    partitioning: str = "optimal",
) -> dict[str, DataFrame]:
    """The ``signatures`` and ``sets`` (sharded), ``sizes`` and ``partitions`` (global) tables.

    ``inputs`` are cells (``lakejoin.lake.schemas.CELLS_SCHEMA``); a set is the distinct non-null
    ``value``s of one ``column_id``. With ``previous`` (the last build's ``signatures`` and
    ``sets`` cut to the rewritten shards, its ``sizes`` whole) and ``changed`` (dataset_ids
    added, changed or removed), only the cells of changed datasets are hashed; the rewritten
    shards' other rows are carried over, removed datasets (no cells left) drop out, and the
    histogram is updated by the difference (see the module docstring).
    """
    if (previous is None) != (changed is None):
        raise ValueError("pass both previous and changed for an incremental build, or neither")
    values = inputs.where(F.col("value").isNotNull()).select("dataset_id", "column_id", "value")
    if changed is not None:
        _check_previous(previous, num_perm, seed)
        changed_ids = sorted(changed)
        values = values.where(F.col("dataset_id").isin(changed_ids))
    signatures = (
        values.repartition("column_id")
        .sortWithinPartitions("column_id", "value")
        .mapInArrow(partial(_signature_batches, num_perm=num_perm, seed=seed), _HASHED_DDL)
        .withColumn(SHARD, shard_column(n_shards))
    )
    sets = values.groupBy("column_id", "dataset_id").agg(F.array_sort(F.collect_set("value")).alias("values"))
    sets = sets.withColumn(SHARD, shard_column(n_shards))
    sizes = (
        values.groupBy("column_id")
        .agg(F.countDistinct("value").alias("size"))
        .select("size", F.lit(1).cast("long").alias("count"))
    )
    if previous is not None:
        unchanged = ~F.col("dataset_id").isin(changed_ids)
        old = previous["signatures"].where(~unchanged).select("size", F.lit(-1).cast("long").alias("count"))
        sizes = sizes.unionByName(previous["sizes"].select("size", "count")).unionByName(old)
        signatures = previous["signatures"].where(unchanged).select(*SIGNATURES_SCHEMA.names).unionByName(signatures)
        sets = previous["sets"].where(unchanged).select(*SETS_SCHEMA.names).unionByName(sets)
    histogram = _histogram(sizes)
    return {
        "signatures": signatures,
        "sets": sets,
        "sizes": spark.createDataFrame(histogram.to_pylist(), _SIZES_DDL),
        "partitions": spark.createDataFrame(
            partitions_table(histogram, num_part, partitioning).to_pylist(), _PARTITIONS_DDL
        ),
    }


def write_full_build(
    spark: SparkSession,
    config: LakeConfig,
    n_shards: int,
    num_perm: int = 256,
    seed: int = 1,
    num_part: int = 32,
    partitioning: str = "optimal",
) -> dict[str, int]:
    """Build the index from the lake's cells in full and write its four tables (each replaced in
    one commit): the tables :func:`build_tables` makes, computed shard by shard in executor tasks
    that read the cell files themselves (module docstring). Returns the version written, by table."""
    tasks = shard_tasks(spark, config, n_shards, "lshensemble")
    sharded: dict[str, tuple[pa.Schema, Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]]] = {
        "signatures": (SIGNATURES_SCHEMA, partial(_signatures_of_tasks, num_perm, seed)),
        "sets": (SETS_SCHEMA, _sets_of_tasks),
    }
    versions = {}
    for name, (schema, produce) in sharded.items():
        path = config.table_path(f"index/lshensemble/{name}")
        versions[name] = spark_delta.write_table(
            tasks, path, schema, partition_by=[SHARD], replace="all", operation="index:lshensemble", produce=produce
        )
        pause_point("index", "lshensemble")
    sizes = delta.read_arrow(config.table_path("index/lshensemble/signatures"), columns=["size"])["size"].to_numpy()
    histogram = sizes_table(sizes)
    for name, table in {"sizes": histogram, "partitions": partitions_table(histogram, num_part, partitioning)}.items():
        versions[name] = delta.write_rows(
            config.table_path(f"index/lshensemble/{name}"),
            table,
            table.schema,
            replace="all",
            operation="index:lshensemble",
        )
    return versions


def _task_sets(task: dict) -> tuple[pa.Table, np.ndarray, pa.Array]:
    """A shard task's sets: its distinct (dataset_id, column_id, value) rows sorted by column and
    value, where each column's run starts, and each column's dataset id."""
    pairs = task_column_values(task)
    pairs = pairs.take(pc.sort_indices(pairs, sort_keys=[("column_id", "ascending"), ("value", "ascending")]))
    column_ids = pairs["column_id"].to_numpy()
    firsts = (
        np.flatnonzero(np.r_[True, column_ids[1:] != column_ids[:-1]]) if len(column_ids) else np.zeros(0, np.int64)
    )
    return pairs, firsts, pairs["dataset_id"].combine_chunks().take(pa.array(firsts))


def _signatures_of_tasks(num_perm: int, seed: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``write_table`` producer: each task shard's ``signatures`` rows."""
    for task in tasks_of(batches):
        pairs, firsts, dataset_ids = _task_sets(task)
        run = np.repeat(np.arange(len(firsts)), np.diff(np.r_[firsts, pairs.num_rows]))
        signatures = signatures_from_hashes(hash_values(pairs["value"].to_pylist()), run, len(firsts), num_perm, seed)
        sizes = np.diff(np.r_[firsts, pairs.num_rows])
        column_ids = pairs["column_id"].to_numpy()[firsts]
        columns = [
            pa.array(column_ids, pa.int64()),
            dataset_ids,
            pa.array(sizes, pa.int64()),
            pa.array(np.full(len(firsts), seed), pa.int64()),
            minhash_column(signatures),
        ]
        yield pa.RecordBatch.from_arrays(
            [*columns, pa.array(np.full(len(firsts), task["shard"], np.int32))], schema=SIGNATURES_SCHEMA
        )


def _sets_of_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``write_table`` producer: each task shard's ``sets`` rows (values ascending)."""
    for task in tasks_of(batches):
        pairs, firsts, dataset_ids = _task_sets(task)
        values = pa.ListArray.from_arrays(
            pa.array(np.r_[firsts, pairs.num_rows], pa.int32()), pairs["value"].combine_chunks()
        )
        column_ids = pa.array(pairs["column_id"].to_numpy()[firsts], pa.int64())
        yield pa.RecordBatch.from_arrays(
            [column_ids, dataset_ids, values, pa.array(np.full(len(firsts), task["shard"], np.int32))],
            schema=SETS_SCHEMA,
        )


def staleness(tables: Mapping[str, pa.Table]) -> float:
    """``lakejoin.index.lshensemble.tables.staleness`` of the global tables just written (read as
    Arrow; always 0 for this build, see the module docstring)."""
    return partitioning_staleness(tables["sizes"], tables["partitions"])


def _check_previous(previous: Mapping[str, DataFrame] | None, num_perm: int, seed: int) -> None:
    missing = {"signatures", "sets", "sizes"} - set(previous or {})
    if previous is None or missing:
        raise ValueError(f"previous lacks the tables {sorted(missing)}")
    first = previous["signatures"].select("seed", F.length("minhash").alias("bytes")).limit(1).collect()
    if first and (first[0]["seed"] != seed or first[0]["bytes"] != 4 * num_perm):
        raise ValueError("previous signatures were built with another num_perm or seed; rebuild them all")


def _histogram(sizes: DataFrame) -> pa.Table:
    """The ``sizes`` table from (size, count) rows, summed per size on the executors."""
    rows = sizes.groupBy("size").agg(F.sum("count").alias("count")).collect()
    return sizes_table(
        np.array([r["size"] for r in rows], dtype=np.int64), np.array([r["count"] for r in rows], dtype=np.int64)
    )


def _signature_batches(batches: Iterator[pa.RecordBatch], num_perm: int, seed: int) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: rows sorted by (column_id, value) in, one signature row per column out.

    A column may span Arrow batches, so the rows of the last column of a batch wait for the next.
    """
    pending = None
    for batch in batches:
        table = pa.Table.from_batches([batch])
        if pending is not None:
            table = pa.concat_tables([pending, table])
        if table.num_rows == 0:
            continue
        column_ids = table["column_id"].to_numpy()
        cut = int(np.searchsorted(column_ids, column_ids[-1]))
        if cut:
            yield _sign_columns(table.slice(0, cut), num_perm, seed)
        pending = table.slice(cut)
    if pending is not None and pending.num_rows:
        yield _sign_columns(pending, num_perm, seed)


def _sign_columns(table: pa.Table, num_perm: int, seed: int) -> pa.RecordBatch:
    """Signatures of the complete columns in ``table`` (rows sorted by column_id, value)."""
    column_ids = table["column_id"].to_numpy()
    values = np.asarray(table["value"].to_numpy(zero_copy_only=False), dtype=object)
    new_column = np.r_[True, column_ids[1:] != column_ids[:-1]]
    distinct = new_column | np.r_[True, values[1:] != values[:-1]]
    column_ids, values = column_ids[distinct], values[distinct]
    firsts = np.flatnonzero(new_column[distinct])
    run = np.cumsum(np.r_[True, column_ids[1:] != column_ids[:-1]]) - 1
    signatures = signatures_from_hashes(hash_values(values), run, len(firsts), num_perm, seed)
    dataset_ids = table["dataset_id"].filter(pa.array(distinct)).take(pa.array(firsts))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(column_ids[firsts], pa.int64()),
            dataset_ids.combine_chunks() if isinstance(dataset_ids, pa.ChunkedArray) else dataset_ids,
            pa.array(np.diff(np.r_[firsts, len(column_ids)]), pa.int64()),
            pa.array(np.full(len(firsts), seed), pa.int64()),
            minhash_column(signatures),
        ],
        schema=_HASHED_SCHEMA,
    )
