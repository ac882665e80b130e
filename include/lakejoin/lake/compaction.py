"""Compaction: merge the small files that partition swaps and appends leave behind.

A rewritten shard is one file per index table (the build writes one task per shard), but
appends accumulate: JOSIE's token dictionary gains a file per incremental run, ``embed/values``
one per embedding batch, ``quality/validations`` one per run, and an index table whose shards
were each rewritten by different runs is many files. :func:`compact` finds, per table, the
partitions holding at least ``min_files`` files and rewrites each into a few large files with
delta-rs' optimize (one commit per table, ``dataChange = false``: readers see the same rows).
A table with small row groups (``embed/values``, sorted for point lookups) keeps them: optimize
streams the merged files in order, so the new file is their sorted runs in the same group size.

Compaction never deletes a file: the files it replaces are tombstoned, and
``snapshots.vacuum`` deletes them only once no retained snapshot pins a version that reads them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, WriterProperties

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import EMBEDDINGS, EMBEDDINGS_LAYOUT

MIN_FILES = 8  # a partition with fewer files is left alone
TARGET_FILE_BYTES = 128 * 1024 * 1024
ROW_GROUP_ROWS = {EMBEDDINGS: EMBEDDINGS_LAYOUT.row_group_rows}  # tables not written in Parquet's default groups


def compact(
    config: LakeConfig, tables: list[str] | None = None, min_files: int = MIN_FILES
) -> dict[str, dict[str, Any]]:
    """Compact the lake's tables (or ``tables``); returns, per compacted table, the files removed
    and added and the partitions touched."""
    done: dict[str, dict[str, Any]] = {}
    for name in tables if tables is not None else snapshots.lake_tables(config):
        path = config.table_path(name)
        if not delta.exists(path):
            continue
        table = DeltaTable(str(path))
        crowded = _crowded_partitions(table, min_files)
        if crowded is None:
            continue
        column, values = crowded
        filters = [(column, "in", values)] if column else None
        with delta.committing(path, "compact") as properties:
            metrics = table.optimize.compact(
                partition_filters=filters,
                target_size=TARGET_FILE_BYTES,
                writer_properties=_writer_properties(name),
                commit_properties=properties,
            )
        done[name] = {
            "files_removed": metrics["numFilesRemoved"],
            "files_added": metrics["numFilesAdded"],
            "partitions": len(values) if column else 1,
        }
    return done


def _crowded_partitions(table: DeltaTable, min_files: int) -> tuple[str | None, list[str]] | None:
    """(partition column, its values holding >= ``min_files`` files), (None, []) for an unpartitioned
    table with that many files, or None when nothing needs compacting."""
    columns = table.metadata().partition_columns
    actions = pa.table(table.get_add_actions(flatten=True))
    if len(columns) > 1:
        raise ValueError(f"{table.table_uri}: compaction handles one partition column, found {columns}")
    if not columns:
        return (None, []) if actions.num_rows >= min_files else None
    counts = Counter(str(v) for v in actions[f"partition.{columns[0]}"].to_pylist())
    crowded = sorted(v for v, n in counts.items() if n >= min_files)
    return (columns[0], crowded) if crowded else None


def _writer_properties(table: str) -> WriterProperties | None:
    rows = ROW_GROUP_ROWS.get(table)
    return WriterProperties(max_row_group_size=rows, compression="ZSTD") if rows else None
