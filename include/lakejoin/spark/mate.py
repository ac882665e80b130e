"""MATE's index build in Spark: the same tables as ``lakejoin.index.mate.build`` (paper §5.3),
computed in executors.

- Full build (:func:`write_full_build`): one Spark task per group of shards reads its datasets'
  ``lake/cells`` files itself (pyarrow, the columns MATE indexes) and writes that shard's
  ``postings`` or ``superkeys`` file in the same task (``write_table(produce=...)``); a first
  pass of the same tasks returns only the row-width histogram that chooses the hash size. No
  cell crosses the JVM: the DataFrame build below read the cells in Spark three times (width
  histogram, postings, super keys) and shuffled them twice, and hashed values in Python.
- Super keys (:func:`build_tables`, incremental builds): the cells are shuffled once, by shard (a table and so each of
its rows lives in
  one shard), and each shard's rows get their keys from the library's ``row_superkeys`` in the
  executors (``applyInArrow``): XASH once per distinct value of the shard, OR per row, packed
  into ``bits/8`` big-endian bytes. (Hashing distinct values lake-wide, joining the words back
  to the cells and OR-ing them per row in Spark shuffled every cell twice more.)
- Shards: ``postings`` and ``superkeys`` are sharded by dataset; a table lives in one shard.
  Incremental builds (paper §5.4: maintenance is local to a table) hash only the changed
  datasets' cells and carry the rewritten shards' other rows over from ``previous``; a removed
  dataset is in ``changed`` and has no cells, so it simply disappears.
- Global: ``params`` (the hash size, one for the whole index) and ``widths`` (the histogram of
  non-null cells per row, updated by the changed datasets' new rows minus their old ones, whose
  widths are counted from their ``previous`` postings). Only histograms reach the driver.

Hash size: at a full build ``bits`` if given, else ``choose_bits`` on the 90th percentile of the
row widths; an incremental build keeps the index's size (a different ``bits`` is refused: every
key would have to be rehashed).

Staleness (``lakejoin.index.mate.build.staleness``): 1.0 when ``choose_bits`` on the current
row-width percentile picks another size than the index was built with (the pipeline then
rebuilds in full and the size follows the lake), else 0.0; a size fixed by the caller is never
stale. The answers are the same at every size, but a key filter too narrow for the lake's rows
passes many more (PL item, query row) pairs and searches about a third slower, while the sizes
the rule could pick next to each other are within noise (figures in the benchmarks history,
docs). So a flip of the rule is worth a rebuild, and anything short of a flip is not:
:data:`STALENESS_LIMIT` = 0.5 on this 0/1 measure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.config import LakeConfig
from lakejoin.index.mate.build import (
    GLOBAL_TABLES,
    PARAMS_SCHEMA,
    POSTINGS_SCHEMA,
    STALENESS_LIMIT,
    SUPERKEYS_SCHEMA,
    check_bits,
    choose_bits,
    params_table,
    row_superkeys,
    row_widths,
    width_quantile,
    widths_table,
)
from lakejoin.index.mate.build import staleness as width_staleness
from lakejoin.index.shards import SHARD
from lakejoin.lake import delta
from lakejoin.pause import pause_point
from lakejoin.spark import delta as spark_delta
from lakejoin.spark.shards import shard_column, shard_tasks, task_cells, tasks_of

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "staleness", "write_full_build"]

APPEND_TABLES: frozenset[str] = frozenset()
_PARAMS_DDL = "bits int, chosen boolean"
_WIDTHS_DDL = "width long, rows long"


def build_tables(
    spark: SparkSession,
    inputs: DataFrame,
    *,
    n_shards: int,
    previous: Mapping[str, DataFrame] | None = None,
    changed: set[str] | None = None,
    bits: int | None = None,
) -> dict[str, DataFrame]:
    """``postings``, ``superkeys`` (sharded), ``params`` and ``widths`` (global) from ``inputs``
    cells (``CELLS_SCHEMA``); incremental with ``previous`` and ``changed`` (module docstring)."""
    if (previous is None) != (changed is None):
        raise ValueError("pass both previous and changed for an incremental build, or neither")
    cells = inputs.where(F.col("value").isNotNull())
    if previous is not None and changed is not None:  # both or neither (checked above)
        params = _previous_params(previous, bits)
        changed_ids = sorted(changed)
        cells = cells.where(F.col("dataset_id").isin(changed_ids))
    widths = _row_widths(cells).select("width", F.lit(1).cast("long").alias("rows"))
    if previous is None:
        histogram = _histogram(widths)
        params = params_table(bits or choose_bits(width_quantile(histogram)), bits is None)
    else:
        old = _row_widths(previous["postings"].where(F.col("dataset_id").isin(changed_ids)))
        retracted = old.select("width", F.lit(-1).cast("long").alias("rows"))
        histogram = _histogram(widths.unionByName(previous["widths"].select("width", "rows")).unionByName(retracted))
    postings = cells.select("value", "dataset_id", "column_id", "row_id", shard_column(n_shards))
    superkeys = _superkeys(cells, params["bits"][0].as_py(), n_shards)
    if previous is not None:
        unchanged = ~F.col("dataset_id").isin(changed_ids)
        postings = previous["postings"].where(unchanged).select(*POSTINGS_SCHEMA.names).unionByName(postings)
        superkeys = previous["superkeys"].where(unchanged).select(*SUPERKEYS_SCHEMA.names).unionByName(superkeys)
    return {
        "postings": postings,
        "superkeys": superkeys,
        "params": spark.createDataFrame(params.to_pylist(), _PARAMS_DDL),
        "widths": spark.createDataFrame(histogram.to_pylist(), _WIDTHS_DDL),
    }


def staleness(tables: Mapping[str, pa.Table]) -> float:
    """``lakejoin.index.mate.build.staleness`` of the global tables just written (read as Arrow)."""
    return width_staleness(tables["params"], tables["widths"])


def _previous_params(previous: Mapping[str, DataFrame], bits: int | None) -> pa.Table:
    """The index's ``params`` (one row); a ``bits`` other than its size is refused."""
    missing = {"postings", "superkeys", "params", "widths"} - set(previous)
    if missing:
        raise ValueError(f"previous lacks the tables {sorted(missing)}")
    params = pa.Table.from_pylist([row.asDict() for row in previous["params"].collect()], PARAMS_SCHEMA)
    check_bits(params, bits)
    return params


def _row_widths(cells: DataFrame) -> DataFrame:
    """``width``: non-null cells of each (dataset, row)."""
    return cells.groupBy("dataset_id", "row_id").agg(F.count(F.lit(1)).alias("width"))


def _histogram(widths: DataFrame) -> pa.Table:
    """The ``widths`` table from (width, rows) rows, summed per width on the executors."""
    rows = widths.groupBy("width").agg(F.sum("rows").alias("rows")).collect()
    return widths_table(
        np.array([r["width"] for r in rows], dtype=np.int64), np.array([r["rows"] for r in rows], dtype=np.int64)
    )


def _superkeys(cells: DataFrame, bits: int, n_shards: int) -> DataFrame:
    """OR of XASH over every cell of each (dataset, row), as big-endian key bytes, per shard."""

    def shard_keys(shard_cells: pa.Table) -> pa.Table:
        return row_superkeys(shard_cells, bits, n_shards)

    by_shard = cells.select("dataset_id", "row_id", "value", shard_column(n_shards))
    return by_shard.groupBy(SHARD).applyInArrow(shard_keys, from_arrow_schema(SUPERKEYS_SCHEMA))


def write_full_build(spark: SparkSession, config: LakeConfig, n_shards: int, bits: int | None = None) -> dict[str, int]:
    """Build MATE's index from the lake's cells in full and write its four tables (each replaced
    in one commit): the tables :func:`build_tables` makes, computed shard by shard in executor
    tasks that read the cell files themselves (module docstring). Returns the version written, by table."""
    tasks = shard_tasks(spark, config, n_shards, "mate")
    rows = tasks.mapInArrow(_width_counts, _WIDTHS_DDL).collect()
    histogram = widths_table(
        np.array([r["width"] for r in rows], np.int64), np.array([r["rows"] for r in rows], np.int64)
    )
    params = params_table(bits or choose_bits(width_quantile(histogram)), bits is None)
    key_bits = params["bits"][0].as_py()
    sharded: dict[str, tuple[pa.Schema, Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]]] = {
        "postings": (POSTINGS_SCHEMA, _postings),
        "superkeys": (SUPERKEYS_SCHEMA, partial(_superkeys_of_tasks, key_bits, n_shards)),
    }
    versions = {}
    for name, (schema, produce) in sharded.items():
        path = config.table_path(f"index/mate/{name}")
        versions[name] = spark_delta.write_table(
            tasks, path, schema, partition_by=[SHARD], replace="all", operation="index:mate", produce=produce
        )
        pause_point("index", "mate")
    for name, table in {"params": params, "widths": histogram}.items():
        versions[name] = delta.write_rows(
            config.table_path(f"index/mate/{name}"), table, table.schema, replace="all", operation="index:mate"
        )
    return versions


def _width_counts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each task shard's histogram of non-null cells per row (width, rows)."""
    for task in tasks_of(batches):
        cells = task_cells(task)
        widths = row_widths(
            pa.table({"dataset_id": cells["dataset_id"].combine_chunks().indices, "row_id": cells["row_id"]})
        )
        histogram = widths_table(widths)
        yield pa.RecordBatch.from_arrays(
            [histogram["width"].combine_chunks(), histogram["rows"].combine_chunks()], names=["width", "rows"]
        )


def _postings(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``write_table`` producer: each task shard's ``postings`` rows (``POSTINGS_SCHEMA``)."""
    for task in tasks_of(batches):
        cells = task_cells(task)
        shard = pa.array(np.full(cells.num_rows, task["shard"], np.int32))
        yield from (
            cells.select(["value", "dataset_id", "column_id", "row_id"])
            .append_column(SHARD, shard)
            .cast(POSTINGS_SCHEMA)
            .to_batches()
        )


def _superkeys_of_tasks(bits: int, n_shards: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``write_table`` producer: each task shard's ``superkeys`` rows (``row_superkeys``)."""
    for task in tasks_of(batches):
        yield from row_superkeys(task_cells(task), bits, n_shards).to_batches()
