"""Spark <-> Delta without the Delta jars (DESIGN "Delta without the Delta jars").

Write: each executor task writes its rows as Parquet files inside the table directory
(Hive-style ``col=value/`` folders for partition columns, which Delta keeps out of the data
files) and returns one small row per file; the driver collects only those rows and commits
them in one Delta transaction through ``lakejoin.lake.delta.commit_files``. A job that dies
before the commit leaves unreferenced files, which readers never see and vacuum deletes.

Read: the driver asks delta-rs for the files of a pinned version and Spark reads them as
Parquet, recovering partition columns from the paths.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.lake import delta

_FILE_ROWS = "path string, size long, num_records long, partition_values string, stats string"


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
) -> int:
    """Write ``df`` into a Delta table in one commit and return the new version.

    ``produce``, when given, turns each task's input batches into the rows to write inside the
    same executor task (``df`` then holds task descriptions, not rows), which saves moving every
    produced row through the JVM and back.

    ``replace="all"`` replaces every live file (overwrite; a table written with another schema or
    partitioning first gets the new layout in a commit of its own); ``"partitions"`` replaces only the
    files of the partitions named in ``replace_values`` (plus those ``df`` writes to), which is
    how one dataset's cells are swapped without touching the others; ``"none"`` appends.
    """
    table_path.mkdir(parents=True, exist_ok=True)
    if replace == "all" and delta.exists(table_path) and delta.layout_differs(table_path, schema, partition_by):
        delta.reset_layout(table_path, schema, partition_by, operation)
    writer = _partition_writer(str(table_path), schema, list(partition_by))
    if produce is None:
        rows = df.select([f.name for f in schema]).mapInArrow(writer, _FILE_ROWS).collect()
    else:
        rows = df.mapInArrow(lambda batches: writer(produce(batches)), _FILE_ROWS).collect()
    added = [
        delta.DataFile(r.path, r.size, r.num_records, json.loads(r.partition_values), r.stats)
        for r in rows
    ]
    removed = _files_to_replace(table_path, partition_by, replace, replace_values, added)
    return delta.commit_files(table_path, schema, added, removed, partition_by, operation)


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


def _files_to_replace(table_path: Path, partition_by: Sequence[str], replace: str, replace_values: Sequence[str], added: list[delta.DataFile]) -> list[str]:
    if replace == "none":
        return []
    live = delta.live_files(table_path, partition_by[0] if partition_by else None)
    if replace == "all":
        return list(live)
    if replace != "partitions" or not partition_by:
        raise ValueError(f"replace={replace!r} needs one of all|partitions|none (partitions needs partition_by)")
    # The log may type partition values (an int shard); compare their text, as Delta stores them.
    targets = {str(v) for v in replace_values} | {str(f.partition_values[partition_by[0]]) for f in added}
    return [p for p, value in live.items() if str(value) in targets]


def _partition_writer(table_root: str, schema: pa.Schema, partition_by: list[str]):
    """The function each executor task runs over its Arrow batches (see module docstring)."""
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = list(batches)
        if not collected or sum(b.num_rows for b in collected) == 0:
            return
        table = pa.Table.from_batches(collected)
        table = table.cast(schema)
        for values, part in _split_by_partition(table, partition_by):
            relative_dir = "/".join(f"{quote(c, safe='')}={quote(str(v), safe='')}" for c, v in zip(partition_by, values))
            relative = f"{relative_dir}/" if relative_dir else ""
            relative += f"part-{uuid.uuid4().hex}.parquet"
            absolute = Path(table_root) / relative
            absolute.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(part.select(data_schema.names), absolute, compression="zstd")
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "path": relative,
                        "size": absolute.stat().st_size,
                        "num_records": part.num_rows,
                        "partition_values": json.dumps({c: str(v) for c, v in zip(partition_by, values)}),
                        "stats": parquet_stats(absolute),
                    }
                ]
            )

    return write


def _split_by_partition(table: pa.Table, partition_by: list[str]):
    if not partition_by:
        yield (), table
        return
    keys = table.select(partition_by).group_by(partition_by).aggregate([]).to_pylist()
    for key in keys:
        mask = None
        for column, value in key.items():
            condition = pc.equal(table[column], value)
            mask = condition if mask is None else pc.and_(mask, condition)
        yield tuple(key[c] for c in partition_by), table.filter(mask)


def parquet_stats(path: Path) -> str:
    """Delta file statistics read from the Parquet footer (numRecords, min/max, null counts)."""
    metadata = pq.ParquetFile(path).metadata
    stats: dict = {"numRecords": metadata.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for column_index in range(metadata.num_columns):
        name = metadata.schema.column(column_index).path
        mins, maxes, nulls = [], [], 0
        for group in range(metadata.num_row_groups):
            column_stats = metadata.row_group(group).column(column_index).statistics
            if column_stats is None:
                break
            nulls += column_stats.null_count or 0
            if column_stats.has_min_max:
                mins.append(column_stats.min)
                maxes.append(column_stats.max)
        else:
            stats["nullCount"][name] = nulls
            if mins and all(isinstance(v, (int, float, str)) for v in mins + maxes):
                stats["minValues"][name] = min(mins)
                stats["maxValues"][name] = max(maxes)
    return json.dumps(stats)
