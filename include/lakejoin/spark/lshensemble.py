"""Spark build of the LSH Ensemble index tables (``lakejoin.index.lshensemble.tables``).

MinHash signatures are computed inside executors with ``mapInArrow``: the cells are
repartitioned by ``column_id`` and sorted by ``(column_id, value)``, so every column is one run
of rows in one task; runs are de-duplicated and hashed block by block in numpy
(``lakejoin.index.lshensemble.minhash``), giving exactly ``datasketch.MinHash(num_perm, seed)``.
Only the size histogram (distinct set sizes and their counts) reaches the driver, where the
partitioning is computed (thesis §2.4.6: the partitioning is global, so it is recomputed at every
snapshot build from all sizes, which is what makes incremental inserts possible).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.index.lshensemble.minhash import hash_values, signatures_from_hashes
from lakejoin.index.lshensemble.tables import SIGNATURES_SCHEMA, minhash_column, partitions_from_histogram

_SIGNATURES_DDL = "column_id long, dataset_id string, size long, seed long, minhash binary"
_PARTITIONS_DDL = "partition int, lower long, upper long, num_sets long, method string"


def build_tables(
    spark: SparkSession,
    cells: DataFrame,
    *,
    previous: Mapping[str, DataFrame] | None = None,
    changed: set[str] | None = None,
    num_perm: int = 256,
    seed: int = 1,
    num_part: int = 32,
    partitioning: str = "optimal",
) -> dict[str, DataFrame]:
    """The ``signatures``, ``partitions`` and ``sets`` tables of the columns in ``cells``.

    ``cells`` has ``lakejoin.lake.schemas.CELLS_SCHEMA``; a set is the distinct non-null
    ``value``s of one ``column_id``. With ``previous`` (the last snapshot's ``signatures`` and
    ``sets``) and ``changed`` (dataset_ids added, changed or removed), only the cells of changed
    datasets are hashed; other rows are reused as they are, and removed datasets (no cells left)
    drop out. The partitioning is always recomputed over all sizes.
    """
    if (previous is None) != (changed is None):
        raise ValueError("pass both previous and changed for an incremental build, or neither")
    values = cells.where(F.col("value").isNotNull()).select("dataset_id", "column_id", "value")
    if changed is not None:
        _check_previous(previous, num_perm, seed)
        changed_ids = sorted(changed)
        values = values.where(F.col("dataset_id").isin(changed_ids))
    signatures = (
        values.repartition("column_id")
        .sortWithinPartitions("column_id", "value")
        .mapInArrow(partial(_signature_batches, num_perm=num_perm, seed=seed), _SIGNATURES_DDL)
    )
    sets = values.groupBy("column_id", "dataset_id").agg(F.array_sort(F.collect_set("value")).alias("values"))
    sizes = values.groupBy("column_id").agg(F.countDistinct("value").alias("size"))
    if previous is not None:
        unchanged = ~F.col("dataset_id").isin(changed_ids)
        signatures = previous["signatures"].where(unchanged).select(*SIGNATURES_SCHEMA.names).unionByName(signatures)
        sets = previous["sets"].where(unchanged).select("column_id", "dataset_id", "values").unionByName(sets)
        sizes = previous["signatures"].where(unchanged).select("column_id", "size").unionByName(sizes)
    return {
        "signatures": signatures,
        "partitions": _partitions(spark, sizes, num_part, partitioning),
        "sets": sets,
    }


def _check_previous(previous: Mapping[str, DataFrame] | None, num_perm: int, seed: int) -> None:
    missing = {"signatures", "sets"} - set(previous or {})
    if missing:
        raise ValueError(f"previous lacks the tables {sorted(missing)}")
    first = previous["signatures"].select("seed", F.length("minhash").alias("bytes")).limit(1).collect()
    if first and (first[0]["seed"] != seed or first[0]["bytes"] != 4 * num_perm):
        raise ValueError("previous signatures were built with another num_perm or seed; rebuild them all")


def _partitions(spark: SparkSession, sizes: DataFrame, num_part: int, partitioning: str) -> DataFrame:
    """Partition bounds from the size histogram (one row per distinct size on the driver)."""
    histogram = sorted((row["size"], row["count"]) for row in sizes.groupBy("size").count().collect())
    table = partitions_from_histogram(
        np.array([s for s, _ in histogram], dtype=np.int64),
        np.array([c for _, c in histogram], dtype=np.int64),
        num_part,
        partitioning,
    )
    return spark.createDataFrame(table.to_pylist(), _PARTITIONS_DDL)


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
        schema=SIGNATURES_SCHEMA,
    )
