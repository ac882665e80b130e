"""Spark build of the LSH Ensemble index tables (``lakejoin.index.lshensemble.tables``).

MinHash signatures are computed inside executors with ``mapInArrow``: the cells are
repartitioned by ``column_id`` and sorted by ``(column_id, value)``, so every column is one run
of rows in one task; runs are de-duplicated and hashed block by block in numpy
(``lakejoin.index.lshensemble.minhash``), giving exactly ``datasketch.MinHash(num_perm, seed)``.

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
The limit says how far kept bounds may drift before search slows, measured on 2026-11-25
(2-core machine) on the tests' synthetic Open Data lake (1,500 sets of up to 3,000 values, 32
optimal partitions, 40 planted queries at t* 0.3-0.9, candidates per query 89.8 and recall 0.999
with fresh bounds), the bounds chosen without a share ``f`` of the sets (so staleness = ``f``):
with random or the smallest sets left out, candidates and recall stay within 3% and 0.001 up to
``f`` = 0.5; with the largest left out (sets inserted above the last bound, which the searcher
then widens), candidates grow +0.6% at 0.01, +1.0% at 0.02, +10.5% at 0.03, +24% at 0.05 and
+93% at 0.10, recall unchanged. Hence :data:`STALENESS_LIMIT` = 0.02.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.index.lshensemble.minhash import hash_values, signatures_from_hashes
from lakejoin.index.lshensemble.tables import (
    GLOBAL_TABLES,
    SETS_SCHEMA,
    SIGNATURES_SCHEMA,
    minhash_column,
    partitions_table,
    sizes_table,
)
from lakejoin.index.lshensemble.tables import staleness as partitioning_staleness
from lakejoin.index.shards import SHARD
from lakejoin.spark.shards import shard_column

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "staleness"]

APPEND_TABLES: frozenset[str] = frozenset()
STALENESS_LIMIT = 0.02

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
    sizes = values.groupBy("column_id").agg(F.countDistinct("value").alias("size")).select("size", F.lit(1).cast("long").alias("count"))
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
        "partitions": spark.createDataFrame(partitions_table(histogram, num_part, partitioning).to_pylist(), _PARTITIONS_DDL),
    }


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
    return sizes_table(np.array([r["size"] for r in rows], dtype=np.int64), np.array([r["count"] for r in rows], dtype=np.int64))


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
