"""The PEXESO index build in Spark ([ICDE] §III-D/E, §IV; ``lakejoin.index.pexeso.build``).

Input: one row per distinct value of each indexed column,
``(dataset_id, column_id, vector_id, value, vector array<float>)``. Steps:

1. (``n_partitions > 1``) column clustering: every vector's nearest reference region is
   found in the executors, the driver clusters the per-column region histograms (§IV);
2. per partition, the driver collects a hash-ordered sample (``sample_size`` rows), selects
   pivots by the PCA-based method and chooses ``|P|``/``m`` by the cost model unless given;
3. executors map every vector to pivot space and its leaf cell (``mapInArrow``);
4. the inverted index groups vector ids by (partition, leaf cell, column).

The sample is picked by the same hash as ``build_in_memory``, so both produce equal tables.

Incremental (``previous`` + ``changed``): pivots and grids are kept, as the paper does on
updates; rows of the ``changed`` datasets are dropped and ``vectors`` (the current rows of
those datasets) are mapped and inserted. A new column joins the partition whose pivots'
mean is nearest to most of its vectors (placement affects speed only: search is exact
whatever the partition, since every column lives in exactly one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from lakejoin.index.pexeso.build import (
    CELLS_SCHEMA,
    DEFAULT_SAMPLE_SIZE,
    MAPPED_SCHEMA,
    PARAMS_SCHEMA,
    PIVOTS_SCHEMA,
    REFERENCES,
    PartitionPlan,
    check_metric,
    check_vectors,
    column_partitions,
    params_row,
    pivot_rows,
    plan_partition,
    sample_hash,
    vector_list,
)
from lakejoin.index.pexeso.partition import nearest_region

INPUT_COLUMNS = ("dataset_id", "column_id", "vector_id", "value", "vector")
_SIGN = np.uint64(1 << 63)


def _vectors_of(batch: pa.RecordBatch, metric: str) -> np.ndarray:
    flat = pc.list_flatten(batch.column("vector")).to_numpy(zero_copy_only=False)
    return check_vectors(flat.reshape(batch.num_rows, -1), metric)


def _with_sample_key(vectors: DataFrame) -> DataFrame:
    """Adds ``h``: the sample hash as a signed long whose order is the hash's unsigned order."""

    def add_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            h = sample_hash(batch.column("column_id").to_numpy(), batch.column("vector_id").to_numpy())
            yield batch.append_column("h", pa.array((h ^ _SIGN).view(np.int64)))

    schema = StructType([*vectors.schema.fields, StructField("h", LongType(), nullable=False)])  # add() would mutate
    return vectors.mapInArrow(add_key, schema)


def _sample_order() -> list:
    return [F.col("h"), F.col("column_id"), F.col("vector_id")]


def _collect_vectors(rows: list, dim: int) -> np.ndarray:
    return np.asarray([r["vector"] for r in rows], dtype=np.float32).reshape(len(rows), dim)


def _assign_partitions(spark: SparkSession, keyed: DataFrame, n_partitions: int, iterations: int, dim: int, metric: str) -> DataFrame:
    """``keyed`` with a ``partition`` column from column clustering (§IV)."""
    if n_partitions <= 1:
        return keyed.withColumn("partition", F.lit(0).cast("int"))
    references = _collect_vectors(keyed.orderBy(*_sample_order()).limit(REFERENCES).select("vector").collect(), dim)

    def regions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            region = nearest_region(_vectors_of(batch, metric), references)
            yield pa.record_batch({"column_id": batch.column("column_id"), "region": pa.array(region)})

    counts = (
        keyed.select("column_id", "vector")
        .mapInArrow(regions, "column_id long, region long")
        .groupBy("column_id", "region")
        .count()
        .collect()
    )
    columns, labels = column_partitions(
        np.asarray([r["column_id"] for r in counts], dtype=np.int64),
        np.asarray([r["region"] for r in counts], dtype=np.int64),
        np.asarray([r["count"] for r in counts], dtype=np.int64),
        len(references),
        n_partitions,
        iterations,
    )
    assignment = spark.createDataFrame(list(zip(columns.tolist(), labels.tolist())), "column_id long, partition int")
    return keyed.join(F.broadcast(assignment), "column_id")


def _map_rows(parts: DataFrame, plans: dict[int, PartitionPlan], metric: str) -> DataFrame:
    """Pivot mapping and leaf cells, in the executors."""

    def map_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            partition = batch.column("partition").to_numpy()
            vectors = _vectors_of(batch, metric)
            for p in np.unique(partition).tolist():
                rows = np.flatnonzero(partition == p)
                mapped, cells = plans[p].map(vectors[rows])
                taken = batch.take(pa.array(rows))
                yield pa.record_batch(
                    {
                        "partition": pa.array(partition[rows], pa.int32()),
                        "dataset_id": taken.column("dataset_id").cast(pa.string()),
                        "column_id": taken.column("column_id").cast(pa.int64()),
                        "vector_id": taken.column("vector_id").cast(pa.int64()),
                        "value": taken.column("value").cast(pa.string()),
                        "vector": vector_list(vectors[rows], pa.float32()),
                        "mapped": vector_list(mapped, pa.float64()),
                        "cell": pa.array(cells, pa.int64()),
                    }
                )

    schema = from_arrow_schema(MAPPED_SCHEMA.append(pa.field("cell", pa.int64())))
    return parts.select("partition", *INPUT_COLUMNS).mapInArrow(map_batches, schema)


def _cells(mapped: DataFrame) -> DataFrame:
    """The inverted index: sorted vector ids per (partition, leaf cell, column)."""
    return mapped.groupBy("partition", "cell", "column_id").agg(
        F.sort_array(F.collect_list("vector_id")).alias("vector_ids")
    )


def _tables(
    spark: SparkSession, mapped: DataFrame, cells: DataFrame, plans: dict[int, PartitionPlan], metric: str, model: str | None, dim: int
) -> dict[str, DataFrame]:
    sizes = {
        r["partition"]: (r["n_vectors"], r["n_columns"])
        for r in mapped.groupBy("partition").agg(F.count("*").alias("n_vectors"), F.countDistinct("column_id").alias("n_columns")).collect()
    }
    params = [params_row(plans[p], metric, model, dim, *sizes[p]) for p in sorted(sizes)]
    pivots = [row for p in sorted(sizes) for row in pivot_rows(plans[p])]
    return {
        "params": spark.createDataFrame(params, from_arrow_schema(PARAMS_SCHEMA)),
        "pivots": spark.createDataFrame(pivots, from_arrow_schema(PIVOTS_SCHEMA)),
        "mapped": mapped.select(*MAPPED_SCHEMA.names),
        "cells": cells.select(*CELLS_SCHEMA.names),
    }


def _check_input(vectors: DataFrame) -> int:
    missing = [c for c in INPUT_COLUMNS if c not in vectors.columns]
    if missing:
        raise ValueError(f"PEXESO vectors lack column(s) {', '.join(missing)}")
    sizes = vectors.agg(F.min(F.size("vector")).alias("lo"), F.max(F.size("vector")).alias("hi"), F.count("*").alias("n")).first()
    if sizes["n"] == 0:
        raise ValueError("no vectors to index")
    if sizes["lo"] != sizes["hi"] or sizes["lo"] < 1:
        raise ValueError(f"vectors must share one positive dimension, got sizes {sizes['lo']}..{sizes['hi']}")
    return int(sizes["lo"])


def build_tables(
    spark: SparkSession,
    vectors: DataFrame,
    *,
    previous: dict[str, DataFrame] | None = None,
    changed: Sequence[str] | None = None,
    metric: str = "l2-unit",
    model: str | None = None,
    n_pivots: int | None = None,
    levels: int | None = None,
    n_partitions: int = 1,
    iterations: int = 10,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
) -> dict[str, DataFrame]:
    """Index tables ``params``, ``pivots``, ``mapped``, ``cells`` (written to ``index/pexeso/<name>``).

    ``metric``: ``l2-unit`` for L2-normalized embeddings (``model`` names the embedding
    model), ``l2-absolute`` for vectors built from numbers. ``n_pivots``/``levels`` default
    to the cost model's choice; ``n_partitions`` > 1 clusters columns (§IV).
    With ``previous`` (the previous tables) and ``changed`` (dataset ids replaced or
    removed), only ``vectors`` of those datasets are mapped and inserted.
    """
    check_metric(metric)
    if previous is not None:
        if changed is None:
            raise ValueError("an incremental PEXESO build needs `changed`: the dataset ids replaced or removed")
        return _insert(spark, vectors, previous, list(changed))
    dim = _check_input(vectors)
    keyed = _assign_partitions(spark, _with_sample_key(vectors), n_partitions, iterations, dim, metric)
    rank = F.row_number().over(Window.partitionBy("partition").orderBy(*_sample_order()))
    sample = keyed.withColumn("rank", rank).where(F.col("rank") <= sample_size).select("partition", "rank", "vector").collect()
    plans = {}
    for p in sorted({r["partition"] for r in sample}):
        rows = sorted((r for r in sample if r["partition"] == p), key=lambda r: r["rank"])
        plans[p] = plan_partition(p, _collect_vectors(rows, dim), metric, n_pivots, levels)
    mapped = _map_rows(keyed, plans, metric).persist()
    return _tables(spark, mapped, _cells(mapped), plans, metric, model, dim)


def _insert(spark: SparkSession, vectors: DataFrame, previous: dict[str, DataFrame], changed: list[str]) -> dict[str, DataFrame]:
    """Keep pivots and grids (the paper never re-selects pivots on update); replace ``changed`` rows."""
    settings = previous["params"].orderBy("partition").collect()
    if not settings:
        raise ValueError("the previous PEXESO params table is empty")
    metric, model, dim = settings[0]["metric"], settings[0]["model"], int(settings[0]["dim"])
    pivot_rows_ = previous["pivots"].orderBy("partition", "pivot").collect()
    plans = {}
    for s in settings:
        pivots = _collect_vectors([r for r in pivot_rows_ if r["partition"] == s["partition"]], dim)
        plans[s["partition"]] = PartitionPlan(
            s["partition"], pivots, np.asarray(s["lo"]), np.asarray(s["hi"]), s["levels"], s["chosen_by"], s["sample_size"]
        )
    mapped = previous["mapped"].where(~F.col("dataset_id").isin(changed))
    removed_columns = previous["mapped"].where(F.col("dataset_id").isin(changed)).select("column_id").distinct()
    cells = previous["cells"].join(removed_columns, "column_id", "left_anti")
    new_rows = vectors.select(*INPUT_COLUMNS)
    if new_rows.limit(1).count():
        if _check_input(new_rows) != dim:
            raise ValueError(f"new vectors do not have the index's dimension {dim}")
        mapped_new = _map_rows(_nearest_partition(new_rows, plans, metric), plans, metric).persist()
        mapped = mapped.unionByName(mapped_new.select(*MAPPED_SCHEMA.names))
        cells = cells.unionByName(_cells(mapped_new).select(*CELLS_SCHEMA.names))
    return _tables(spark, mapped.persist(), cells, plans, metric, model, dim)


def _nearest_partition(rows: DataFrame, plans: dict[int, PartitionPlan], metric: str) -> DataFrame:
    """``rows`` with the partition whose pivots' mean is nearest to most of a column's vectors."""
    order = sorted(plans)
    centres = np.stack([plans[p].pivots.mean(axis=0) for p in order])

    def nearest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            region = nearest_region(_vectors_of(batch, metric), centres)
            yield pa.record_batch({"column_id": batch.column("column_id"), "partition": pa.array(np.asarray(order)[region], pa.int32())})

    votes = rows.select("column_id", "vector").mapInArrow(nearest, "column_id long, partition int")
    choice = votes.groupBy("column_id").agg(F.mode("partition", deterministic=True).alias("partition"))
    return rows.join(choice, "column_id")
