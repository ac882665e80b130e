"""Spark <-> Delta without the Delta jars (DESIGN "Delta without the Delta jars").

Write: each executor task writes its rows as Parquet files inside the table directory
(``lakejoin.lake.delta.partition_writer``: Hive-style ``col=value/`` folders for partition
columns, which Delta keeps out of the data files) and returns one small row per file; the driver collects only those
rows and commits
them in one Delta transaction through ``lakejoin.lake.delta.commit_files``. A job that dies
before the commit leaves unreferenced files, which readers never see and vacuum deletes.

Read: the driver asks delta-rs for the files of a pinned version and Spark reads them as
Parquet, recovering partition columns from the paths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.lake import delta

_FILE_ROWS = (
    "path string, size long, num_records long, partition_values string, stats string"  # delta.partition_writer's rows
)


def write_table(
    df: DataFrame,
    table_path: Path,
    schema: pa.Schema,
    *,
    partition_by: Sequence[str] = (),
    replace: str = "all",
    replace_values: Sequence[str] = (),
    operation: str | None = None,
    produce: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]] | None = None,
    layout: delta.FileLayout = delta.DEFAULT_LAYOUT,
) -> int:
    """Write ``df`` into a Delta table in one commit and return the new version.

    ``produce``, when given, turns each task's input batches into the rows to write inside the
    same executor task (``df`` then holds task descriptions, not rows), which saves moving every
    produced row through the JVM and back.

    ``replace="all"`` replaces every live file (overwrite; a table written with another schema or
    partitioning first gets the new layout in a commit of its own); ``"partitions"`` replaces only the
    files of the partitions named in ``replace_values`` (plus those ``df`` writes to), which is
    how one dataset's cells are swapped without touching the others; ``"none"`` appends.
    Each task writes its rows as ``layout`` says (sorted, row-group size).
    """
    delta.prepare_layout(table_path, schema, partition_by, replace, operation)
    writer = delta.partition_writer(str(table_path), schema, list(partition_by), layout)
    if produce is None:
        rows = df.select([f.name for f in schema]).mapInArrow(writer, _FILE_ROWS).collect()
    else:
        rows = df.mapInArrow(lambda batches: writer(produce(batches)), _FILE_ROWS).collect()
    added = [delta.data_file(r.asDict()) for r in rows]
    return delta.commit_replacing(table_path, schema, added, partition_by, replace, replace_values, operation)


def read_table(
    spark: SparkSession,
    table_path: Path,
    version: int | None = None,
    schema: pa.Schema | None = None,
    partitions: Mapping[str, Iterable[object]] | None = None,
) -> DataFrame:
    """A pinned version of a Delta table as a Spark DataFrame (no driver-side data);
    ``partitions`` (``{column: values}``) prunes it to those partitions' files."""
    table = delta.open_table(table_path, version)
    arrow_schema = schema or pa.schema(table.schema().to_arrow())
    files = delta.files_of(table, partitions)
    spark_schema = from_arrow_schema(arrow_schema)
    if not files:
        return spark.createDataFrame([], spark_schema)
    frame = spark.read.option("basePath", str(table_path)).schema(spark_schema).parquet(*files)
    return frame.select([f.name for f in arrow_schema])
