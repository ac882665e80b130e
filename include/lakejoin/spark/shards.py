"""Shards on Spark: the shard rule of ``lakejoin.index.shards`` as a column expression, and
shard tasks, the unit of the full builds that read ``lake/cells`` files in executor tasks
instead of shuffling cells through Spark (MATE, LSH Ensemble).

A shard task is one row: a shard, its datasets with their cell files (of the table's current
version) and the columns the family indexes there. A family's full build maps each task to the
rows it writes (``lakejoin.spark.delta.write_table(produce=...)``): a table and so all of its
columns live in one dataset's files, so whatever a family computes per column or per row needs
no data from another task. The families whose full build is global (JOSIE and q-gram number
tokens lake-wide, PEXESO embeds distinct values) start from :func:`column_values`, each
column's distinct values taken in the same tasks, instead of deduplicating every cell in a
shuffle.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.config import LakeConfig
from lakejoin.index.shards import SHARD, shard_of
from lakejoin.lake import delta
from lakejoin.lake.schemas import CELLS, COLUMNS

# Cells a task reads at most (about, on average): the writer holds a task's rows at once, ~120
# bytes a posting with its dataset id; the whole bundled lake (102 M cells) gets 51 tasks, not 8.
TASK_CELLS = 2_000_000
_TASKS_DDL = "shard int, datasets array<struct<dataset_id: string, files: array<string>>>, columns array<long>"
_CELLS_DDL = "dataset_id string, column_id long, row_id long, value string, raw string"


def shard_column(n_shards: int, dataset_id: str = "dataset_id") -> Column:
    """``shard_of(dataset_id, n_shards)`` computed by Spark, as an ``int`` named ``shard``."""
    if n_shards < 1:
        raise ValueError(f"n_shards must be at least 1, got {n_shards}")
    high_bits = F.conv(F.substring(F.sha2(F.col(dataset_id), 256), 1, 15), 16, 10).cast("long")
    return (high_bits % F.lit(n_shards)).cast("int").alias(SHARD)


def shard_tasks(spark: SparkSession, config: LakeConfig, n_shards: int, family: str) -> DataFrame:
    """One row per shard that holds cells of a column ``family`` indexes (module docstring),
    spread over the cores in Spark partitions of about :data:`TASK_CELLS` cells at most."""
    catalog = delta.read_arrow(
        config.table_path(COLUMNS), columns=["dataset_id", "column_id", "indexed_by"]
    ).to_pydict()
    columns: dict[str, list[int]] = {}
    for dataset_id, column_id, indexed_by in zip(catalog["dataset_id"], catalog["column_id"], catalog["indexed_by"]):
        if indexed_by and family in indexed_by:
            columns.setdefault(dataset_id, []).append(column_id)
    cells = delta.open_table(config.table_path(CELLS))
    files: dict[str, list[str]] = {}
    for uri in delta.files_of(cells):
        folder = uri.rsplit("/", 2)[-2]  # dataset_id=<quoted id>/part-....parquet, as the writer names it
        files.setdefault(unquote(folder.removeprefix("dataset_id=")), []).append(uri)
    shards: dict[int, dict] = {}
    for dataset_id in sorted(files.keys() & columns.keys()):
        task = shards.setdefault(shard_of(dataset_id, n_shards), {"datasets": [], "columns": []})
        task["datasets"].append({"dataset_id": dataset_id, "files": files[dataset_id]})
        task["columns"].extend(columns[dataset_id])
    rows = [{"shard": shard, **task} for shard, task in sorted(shards.items())]
    actions = pa.table(cells.get_add_actions(flatten=True)).to_pydict()
    stored = sum(n for d, n in zip(actions["partition.dataset_id"], actions["num_records"]) if d in columns and n)
    tasks = max(spark.sparkContext.defaultParallelism * 4, -(-stored // TASK_CELLS))
    return spark.createDataFrame(rows, _TASKS_DDL).repartition(max(1, min(len(rows), tasks)))


def tasks_of(batches: Iterator[pa.RecordBatch]) -> Iterator[dict]:
    """The shard tasks in a ``mapInArrow`` partition, as dicts."""
    for batch in batches:
        yield from batch.to_pylist()


def task_cells(task: dict, columns: tuple[str, ...] = ("column_id", "row_id", "value")) -> pa.Table:
    """The task's cells with a value in the family's columns: ``columns`` of ``lake/cells`` and
    ``dataset_id`` (dictionary encoded: one entry per dataset, not a string per cell)."""
    wanted = pa.array(task["columns"], pa.int64())
    datasets = pa.array([d["dataset_id"] for d in task["datasets"]], pa.string())
    parts = []
    for code, dataset in enumerate(task["datasets"]):
        for path in dataset["files"]:
            cells = pq.ParquetFile(path).read(columns=list(columns))
            cells = cells.filter(pc.and_(pc.is_in(cells["column_id"], value_set=wanted), pc.is_valid(cells["value"])))
            codes = pa.array(np.full(cells.num_rows, code, np.int32))
            parts.append(cells.append_column("dataset_id", pa.DictionaryArray.from_arrays(codes, datasets)))
    return pa.concat_tables(parts)  # a task has a dataset, and a dataset a file


def column_values(spark: SparkSession, config: LakeConfig, n_shards: int, family: str) -> DataFrame:
    """Every distinct (dataset_id, column_id, value) of the columns ``family`` indexes, as
    cells-shaped rows (``row_id`` and ``raw`` null), deduplicated inside the shard tasks."""
    return shard_tasks(spark, config, n_shards, family).mapInArrow(_distinct_values, _CELLS_DDL)


def _distinct_values(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each shard task's distinct (dataset, column, value) rows."""
    for task in tasks_of(batches):
        values = task_column_values(task)
        rows = values.num_rows
        columns = [
            values["dataset_id"],
            values["column_id"],
            pa.nulls(rows, pa.int64()),
            values["value"],
            pa.nulls(rows, pa.string()),
        ]
        yield pa.RecordBatch.from_arrays(
            [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns],
            names=["dataset_id", "column_id", "row_id", "value", "raw"],
        )


def task_column_values(task: dict) -> pa.Table:
    """The distinct (dataset_id, column_id, value) of a shard task's cells (a column's values as a set)."""
    cells = task_cells(task, ("column_id", "value"))
    codes = pa.table(
        {"code": cells["dataset_id"].combine_chunks().indices, "column_id": cells["column_id"], "value": cells["value"]}
    )
    distinct = codes.group_by(["code", "column_id", "value"]).aggregate([])
    datasets = pa.array([d["dataset_id"] for d in task["datasets"]], pa.string())
    return pa.table(
        {
            "dataset_id": datasets.take(distinct["code"].combine_chunks()),
            "column_id": distinct["column_id"],
            "value": distinct["value"],
        }
    )
