"""Embed distinct values with Spark, once per (model, value) (DESIGN ``embed/values``).

``embed_values`` looks every input value up in the cache table ``embed/values`` (keyed by
model and ``value_hash``, hex SHA-256 of the value, equal to ``lakejoin.embed.value_hash``)
and embeds only the misses, inside the executors: ``mapInArrow`` hands each Python worker
Arrow batches of values, which ``lakejoin.embed.embed`` encodes in model batches with the
model loaded once per worker process (``lakejoin.embed.load_model``'s cache; Spark reuses
Python workers, ``spark.python.worker.reuse``). The newly embedded rows are checkpointed
locally, so writing both returned frames runs the model once.

Each task runs the model on the cores Spark gave it (``spark.task.cpus``, 1 by default), not on
every core of the machine: with a worker per core each using all cores, the model's threads
contend and wait on each other at every operator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.embed import MODELS, embed
from lakejoin.embed.models.minilm_onnx import THREADS_ENV

VECTORS_DDL = "value string, value_hash string, vector array<float>"
CACHE_COLUMNS = ("model", "value_hash", "vector")


def vector_array(vectors: np.ndarray) -> pa.ListArray:
    """The rows of a vector matrix as an Arrow list array (float32)."""
    rows, dim = vectors.shape
    offsets = pa.array(np.arange(0, (rows + 1) * dim, dim, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1), pa.float32()))


def _task_threads() -> None:
    """Cap the model's threads at this task's cores before the worker process loads it (a
    value set by the user stays)."""
    context = TaskContext.get()
    os.environ.setdefault(THREADS_ENV, str(context.cpus() if context is not None else 0))


def _embedder(model: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def embed_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _task_threads()
        for batch in batches:
            if batch.num_rows:
                vectors = embed(batch.column("value").to_pylist(), model)
                yield pa.RecordBatch.from_arrays(
                    [batch.column("value"), batch.column("value_hash"), vector_array(vectors)],
                    names=["value", "value_hash", "vector"],
                )

    return embed_batches


def embed_values(
    spark: SparkSession, values: DataFrame, model: str, cache: DataFrame | None = None
) -> tuple[DataFrame, DataFrame]:
    """Vectors for every distinct input value, and the cache rows to append.

    ``values`` has a string column ``value`` holding normalized values (``lake/cells.value``;
    nulls are dropped); ``cache`` is the ``embed/values`` table (model, value_hash,
    vector) or None. Returns ``(vectors, new_cache)``: ``vectors`` has one row per distinct
    input value (value, value_hash, vector array<float>), ``new_cache`` one row per value
    embedded now (model, value_hash, vector). Unchanged input embeds nothing; changed input
    embeds only values the cache has never seen for ``model``.
    """
    if model not in MODELS:
        raise ValueError(f"unknown embedding model {model!r}; choose one of {', '.join(MODELS)}")
    if "value" not in values.columns:
        raise ValueError("values DataFrame needs a column 'value'")
    distinct = values.select(F.col("value").cast("string")).where(F.col("value").isNotNull()).distinct()
    keyed = distinct.withColumn("value_hash", F.sha2(F.col("value"), 256))
    if cache is None:
        known = spark.createDataFrame([], "value_hash string, vector array<float>")
    else:
        missing = sorted(set(CACHE_COLUMNS) - set(cache.columns))
        if missing:
            raise ValueError(f"cache DataFrame lacks columns {missing}")
        # Only the cache rows of the values asked for, before anything holds vectors: on the
        # whole bundled lake the cache has 543k vectors (650 MB), an incremental run needs a
        # few hundred, and deduplicating the whole cache ran the JVM out of heap.
        wanted = (
            cache.where(F.col("model") == model)
            .select("value_hash", "vector")
            .join(keyed.select("value_hash"), "value_hash", "left_semi")
        )
        known = wanted.dropDuplicates(["value_hash"])
    hits = keyed.join(known, "value_hash").select("value", "value_hash", "vector")
    misses = keyed.join(known, "value_hash", "left_anti").repartition(spark.sparkContext.defaultParallelism)
    embedded = misses.mapInArrow(_embedder(model), VECTORS_DDL).localCheckpoint(eager=True)
    new_cache = embedded.select(F.lit(model).alias("model"), "value_hash", "vector")
    return hits.unionByName(embedded), new_cache
