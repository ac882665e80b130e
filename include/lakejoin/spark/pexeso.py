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

Sharded (``lakejoin.index.shards``): ``mapped`` and ``cells`` carry ``shard`` =
``shard_of(dataset_id)`` and are rewritten per shard; ``params`` and ``pivots`` are global.

Incremental (``previous`` + ``changed``, ``update.py``): pivots and grids are kept, as the
paper does on updates; ``previous`` holds ``mapped``/``cells`` of the rewritten shards only.
Their rows of the ``changed`` datasets are dropped, the rest carried over, and ``vectors``
(the current rows of those datasets) are mapped and inserted. A new column joins the
partition whose pivots' mean is nearest to most of its vectors (placement affects speed only:
search is exact whatever the partition, since every column lives in exactly one). ``params``
sizes are updated from the dropped and inserted rows' counts, and the inserted vectors are
counted towards :func:`staleness`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

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
from lakejoin.index.pexeso.update import APPEND_TABLES, GLOBAL_TABLES, STALENESS_LIMIT, staleness_of, updated_sizes
from lakejoin.index.shards import SHARD
from lakejoin.spark.shards import shard_column

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "staleness"]

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


def _assign_partitions(
    spark: SparkSession, keyed: DataFrame, n_partitions: int, iterations: int, dim: int, metric: str
) -> DataFrame:
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


def _map_rows(
    parts: DataFrame, plans: dict[int, PartitionPlan], metric: str, n_shards: int, inserted: bool = False
) -> DataFrame:
    """Pivot mapping, leaf cells and whether outside the grid bounds, in the executors;
    ``inserted`` marks rows mapped by an incremental build (with pivots kept from the full one)."""

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
                        "inserted": pa.array(np.full(len(rows), inserted)),
                        "cell": pa.array(cells, pa.int64()),
                        "outside": pa.array(plans[p].outside(mapped)),
                    }
                )

    unsharded = pa.schema(
        [f for f in MAPPED_SCHEMA if f.name != SHARD] + [pa.field("cell", pa.int64()), pa.field("outside", pa.bool_())]
    )
    mapped = parts.select("partition", *INPUT_COLUMNS).mapInArrow(map_batches, from_arrow_schema(unsharded))
    return mapped.withColumn(SHARD, shard_column(n_shards))


def _cells(mapped: DataFrame) -> DataFrame:
    """The inverted index: sorted vector ids per (partition, leaf cell, column) (a column has one shard)."""
    return mapped.groupBy(SHARD, "partition", "cell", "column_id").agg(
        F.sort_array(F.collect_list("vector_id")).alias("vector_ids")
    )


def _sizes(mapped: DataFrame) -> dict[int, tuple[int, int, int, int]]:
    """Per partition of ``mapped`` rows (with ``outside``): (vectors, columns, outside the bounds,
    inserted since the last full build)."""
    counts = mapped.groupBy("partition").agg(
        F.count("*").alias("n"),
        F.countDistinct("column_id").alias("columns"),
        F.sum(F.col("outside").cast("long")).alias("outside"),
        F.sum(F.col("inserted").cast("long")).alias("inserted"),
    )
    return {r["partition"]: (r["n"], r["columns"], r["outside"] or 0, r["inserted"] or 0) for r in counts.collect()}


def _tables(
    spark: SparkSession, mapped: DataFrame, cells: DataFrame, plans: dict[int, PartitionPlan], params: list[dict]
) -> dict[str, DataFrame]:
    pivots = [row for p in sorted(plans) for row in pivot_rows(plans[p])]
    return {
        "params": spark.createDataFrame(sorted(params, key=lambda r: r["partition"]), from_arrow_schema(PARAMS_SCHEMA)),
        "pivots": spark.createDataFrame(pivots, from_arrow_schema(PIVOTS_SCHEMA)),
        "mapped": mapped.select(*MAPPED_SCHEMA.names),
        "cells": cells.select(*CELLS_SCHEMA.names),
    }


def _check_input(vectors: DataFrame) -> int:
    """The vectors' common dimension (a full build needs at least one vector)."""
    count, dim = _count_and_dimension(vectors)
    if count == 0:
        raise ValueError("no vectors to index")
    return dim


def _count_and_dimension(vectors: DataFrame) -> tuple[int, int]:
    """How many vectors, and their common dimension (0 when there are none), in one pass."""
    missing = [c for c in INPUT_COLUMNS if c not in vectors.columns]
    if missing:
        raise ValueError(f"PEXESO vectors lack column(s) {', '.join(missing)}")
    sizes = vectors.agg(
        F.min(F.size("vector")).alias("lo"), F.max(F.size("vector")).alias("hi"), F.count("*").alias("n")
    ).first()
    assert sizes is not None  # an aggregate without groups has exactly one row
    if sizes["n"] and (sizes["lo"] != sizes["hi"] or sizes["lo"] < 1):
        raise ValueError(f"vectors must share one positive dimension, got sizes {sizes['lo']}..{sizes['hi']}")
    return int(sizes["n"]), int(sizes["lo"] or 0)


def build_tables(
    spark: SparkSession,
    vectors: DataFrame,
    *,
    n_shards: int,
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
    """Index tables ``params``, ``pivots`` (global), ``mapped``, ``cells`` (sharded by dataset).

    ``metric``: ``l2-unit`` for L2-normalized embeddings (``model`` names the embedding
    model), ``l2-absolute`` for vectors built from numbers. ``n_pivots``/``levels`` default
    to the cost model's choice; ``n_partitions`` > 1 clusters columns (§IV).
    With ``previous`` (the previous tables, sharded ones cut to the shards holding a changed
    dataset) and ``changed`` (dataset ids added, replaced or removed), only ``vectors`` of those
    datasets are mapped; the rewritten shards and the global tables are returned.
    """
    check_metric(metric)
    if previous is not None:
        if changed is None:
            raise ValueError("an incremental PEXESO build needs `changed`: the dataset ids replaced or removed")
        return _insert(spark, vectors, previous, list(changed), n_shards)
    dim = _check_input(vectors)
    keyed = _assign_partitions(spark, _with_sample_key(vectors), n_partitions, iterations, dim, metric)
    rank = F.row_number().over(Window.partitionBy("partition").orderBy(*_sample_order()))
    sample = (
        keyed.withColumn("rank", rank)
        .where(F.col("rank") <= sample_size)
        .select("partition", "rank", "vector")
        .collect()
    )
    plans = {}
    for p in sorted({r["partition"] for r in sample}):
        rows = sorted((r for r in sample if r["partition"] == p), key=lambda r: r["rank"])
        plans[p] = plan_partition(p, _collect_vectors(rows, dim), metric, n_pivots, levels)
    mapped = _map_rows(keyed, plans, metric, n_shards).persist()
    params = [params_row(plans[p], metric, model, dim, n, columns) for p, (n, columns, *_) in _sizes(mapped).items()]
    return _tables(spark, mapped, _cells(mapped), plans, params)


def staleness(tables: Mapping[str, pa.Table]) -> float:
    """The share of vectors inserted since the last full build (``update.py``), from the
    ``params`` just written (read as Arrow)."""
    return staleness_of(tables["params"].to_pylist())


def _insert(
    spark: SparkSession, vectors: DataFrame, previous: dict[str, DataFrame], changed: list[str], n_shards: int
) -> dict[str, DataFrame]:
    """Keep pivots and grids (the paper never re-selects pivots on update); in the rewritten
    shards, replace the ``changed`` datasets' rows."""
    settings = {r["partition"]: r.asDict() for r in previous["params"].collect()}
    if not settings:
        raise ValueError("the previous PEXESO params table is empty")
    some = next(iter(settings.values()))
    metric, dim = some["metric"], int(some["dim"])
    pivot_rows_ = previous["pivots"].orderBy("partition", "pivot").collect()
    plans = {}
    for p, s in settings.items():
        pivots = _collect_vectors([r for r in pivot_rows_ if r["partition"] == p], dim)
        plans[p] = PartitionPlan(
            p, pivots, np.asarray(s["lo"]), np.asarray(s["hi"]), s["levels"], s["chosen_by"], s["sample_size"]
        )
    is_changed = F.col("dataset_id").isin(changed)
    old_rows = previous["mapped"].where(is_changed)
    removed = _sizes(old_rows.withColumn("outside", F.lit(False)))
    mapped = previous["mapped"].where(~is_changed)
    cells = previous["cells"].join(old_rows.select("column_id").distinct(), "column_id", "left_anti")
    added: dict[int, tuple[int, int, int, int]] = {}
    new_rows = vectors.select(*INPUT_COLUMNS)
    count, new_dim = _count_and_dimension(new_rows)
    if count:
        if new_dim != dim:
            raise ValueError(f"new vectors do not have the index's dimension {dim}")
        placed = (
            _nearest_partition(new_rows, plans, metric)
            if len(plans) > 1
            else new_rows.withColumn("partition", F.lit(next(iter(plans))).cast("int"))
        )
        mapped_new = _map_rows(placed, plans, metric, n_shards, inserted=True).persist()
        added = _sizes(mapped_new)
        mapped = mapped.unionByName(mapped_new.select(*MAPPED_SCHEMA.names))
        cells = cells.unionByName(_cells(mapped_new).select(*CELLS_SCHEMA.names))
    params = [
        {**s, **updated_sizes(s, removed.get(p, (0, 0, 0, 0)), added.get(p, (0, 0, 0, 0)))} for p, s in settings.items()
    ]
    return _tables(spark, mapped, cells, plans, params)


def _nearest_partition(rows: DataFrame, plans: dict[int, PartitionPlan], metric: str) -> DataFrame:
    """``rows`` with the partition whose pivots' mean is nearest to most of a column's vectors."""
    order = sorted(plans)
    centres = np.stack([plans[p].pivots.mean(axis=0) for p in order])

    def nearest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            region = nearest_region(_vectors_of(batch, metric), centres)
            yield pa.record_batch(
                {"column_id": batch.column("column_id"), "partition": pa.array(np.asarray(order)[region], pa.int32())}
            )

    votes = rows.select("column_id", "vector").mapInArrow(nearest, "column_id long, partition int")
    choice = votes.groupBy("column_id").agg(F.mode("partition", deterministic=True).alias("partition"))
    return rows.join(choice, "column_id")
