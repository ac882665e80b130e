"""Delta tables through delta-rs (DESIGN "Delta without the Delta jars").

Small tables (catalog, snapshots) are written from Arrow on the driver with
``write_deltalake``. Large tables (cells, index tables) are written as Parquet files inside the
table directory by :func:`partition_writer` — in Spark executors (``lakejoin.spark.delta``), or
in this process for an index build small enough to run here (:func:`write_rows`) — and committed
here in one transaction from ``DataFile`` descriptions: that commit is the only thing the driver
does.
"""

from __future__ import annotations

import bisect
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from lakejoin.lake import lease

# Old snapshots pin old versions: their log entries must outlive delta-rs' default 30-day
# log cleanup, so retention is decided by `lakejoin vacuum`, not by the log's age.
TABLE_CONFIGURATION = {"delta.enableExpiredLogCleanup": "false"}
BUILD_KEY = "lakejoin.build"  # commitInfo key: the build that made the commit


@dataclass(frozen=True)
class FileLayout:
    """How a table's files are laid out inside: rows sorted by ``sort_by`` in row groups of at
    most ``row_group_rows`` rows (None: Parquet's defaults, unsorted)."""

    sort_by: str | None = None
    row_group_rows: int | None = None


DEFAULT_LAYOUT = FileLayout()


@dataclass(frozen=True)
class DataFile:
    """A Parquet file already written inside a table directory, ready to be added."""

    path: str  # relative to the table root, '/'-separated
    size: int
    num_records: int
    partition_values: dict[str, str | None] = field(default_factory=dict)
    stats: str = ""  # Delta per-file statistics JSON (numRecords, minValues, maxValues, nullCount)


def exists(path: Path) -> bool:
    """True if ``path`` holds a Delta table."""
    return DeltaTable.is_deltatable(str(path))


def open_table(path: Path, version: int | None = None) -> DeltaTable:
    """Open a table, pinned to ``version`` when given."""
    if not exists(path):
        raise FileNotFoundError(f"no Delta table at {path}")
    return DeltaTable(str(path), version=version)


def current_version(path: Path) -> int | None:
    """The table's latest version, or None if there is no table at ``path``."""
    return open_table(path).version() if exists(path) else None


def read_arrow(
    path: Path,
    version: int | None = None,
    columns: Sequence[str] | None = None,
    filter: pads.Expression | None = None,
    *,
    opened: DeltaTable | None = None,
    partitions: Mapping[str, Iterable[object]] | None = None,
) -> pa.Table:
    """Read a table (or its pinned version) into Arrow; ``opened`` is the table already opened
    at that version (:func:`open_table`), which saves reading its log again; ``partitions``
    (``{column: values}``) reads only the files of those partitions (e.g. some shards).

    delta-rs lists the version's files; pyarrow reads them (Hive-style partition folders give the
    partition columns back). Reading through delta-rs' own pyarrow filesystem instead made the
    interpreter abort at exit about every other run ("terminate called without an active
    exception", deltalake 1.6), so the CLI could die after printing its answer.
    """
    table = opened if opened is not None else open_table(path, version)
    schema = pa.schema(table.schema().to_arrow())
    return read_files(path, files_of(table, partitions), schema, table.metadata().partition_columns, columns, filter)


def read_matching(path: Path, column: str, keys: Iterable[str], columns: Sequence[str]) -> pa.Table:
    """The rows of an unpartitioned table whose ``column`` is one of ``keys``, reading only the
    row groups whose Parquet statistics can hold one of them: a point lookup that costs the
    groups it touches, not the table, when the files are sorted by ``column`` in small row groups
    (``embed/values``, see :data:`lakejoin.lake.schemas.EMBEDDINGS_LAYOUT`)."""
    wanted = sorted(set(keys))
    table = open_table(path)
    parts = []
    for uri in files_of(table) if wanted else []:
        parquet = pq.ParquetFile(uri)
        leaf = _leaf_index(parquet.metadata, column)
        groups = [
            g
            for g in range(parquet.metadata.num_row_groups)
            if _may_hold(parquet.metadata.row_group(g).column(leaf).statistics, wanted)
        ]
        if groups:
            parts.append(parquet.read_row_groups(groups, columns=list(columns)))
    if not parts:
        return pa.schema(table.schema().to_arrow()).empty_table().select(list(columns))
    rows = pa.concat_tables(parts)
    return rows.filter(pc.is_in(rows[column], value_set=pa.array(wanted, rows.schema.field(column).type)))


def _leaf_index(metadata: pq.FileMetaData, column: str) -> int:
    for index in range(metadata.num_columns):
        if metadata.schema.column(index).path == column:
            return index
    raise KeyError(f"no column {column!r} in the Parquet file")


def _may_hold(statistics: pq.Statistics | None, wanted: list[str]) -> bool:
    """Whether a row group whose ``column`` has these statistics may hold a ``wanted`` key
    (sorted); a group without min/max may hold anything."""
    if statistics is None or not statistics.has_min_max:
        return True
    first = bisect.bisect_left(wanted, statistics.min)
    return first < len(wanted) and wanted[first] <= statistics.max


@dataclass(frozen=True)
class ValuesIn:
    """A row filter: the rows whose every column of ``wanted`` holds one of its values.
    :func:`read_files` reads the files' string columns through their Parquet dictionaries and
    tests each batch's distinct strings, not every row: on the MATE postings of the bundled lake
    (17.9 M rows, a few hundred values wanted) under half the CPU seconds of the same ``isin``
    expression, which decodes and hashes every row's string. With ``keep_codes`` the string
    columns come back dictionary-encoded (a dictionary per batch, holding the batch's strings
    whether a kept row uses them or not), for a reader that wants ids of strings anyway
    (``lakejoin.index.values.dictionary_codes``): no string is decoded per row. No ``wanted``
    column: every row."""

    wanted: Mapping[str, pa.Array]
    keep_codes: bool = False


def read_files(
    path: Path | str,
    files: Sequence[str],
    schema: pa.Schema,
    partition_columns: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    filter: pads.Expression | ValuesIn | None = None,
) -> pa.Table:
    """The rows of some of a table's data ``files`` (as :func:`files_of` lists them), partition
    columns recovered from their Hive-style folders: how a task that was handed file paths
    (a Spark executor) reads its part of a pinned version without opening the log."""
    selected = list(columns) if columns else None
    if not files:
        empty = schema.empty_table()
        return empty.select(selected) if selected else empty
    partitioning = (
        pads.partitioning(pa.schema([schema.field(c) for c in partition_columns]), flavor="hive")
        if partition_columns
        else None
    )
    if isinstance(filter, ValuesIn):
        return _read_values_in(path, files, schema, partitioning, selected or schema.names, filter)
    dataset = pads.dataset(
        list(files), schema=schema, format="parquet", partitioning=partitioning, partition_base_dir=str(path)
    )
    return dataset.to_table(columns=selected, filter=filter)


def _read_values_in(
    path: Path | str,
    files: Sequence[str],
    schema: pa.Schema,
    partitioning: pads.Partitioning | None,
    columns: list[str],
    filter: ValuesIn,
) -> pa.Table:
    """:func:`read_files` with a :class:`ValuesIn` filter: each batch keeps the rows whose codes
    point at wanted strings, and its string columns are decoded for those rows only."""
    partitions = set(partitioning.schema.names) if partitioning is not None else set()
    strings = [
        f.name
        for f in schema
        if f.name not in partitions and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
    ]
    encoded = pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in strings else f for f in schema])
    format = pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(dictionary_columns=strings))
    dataset = pads.dataset(
        list(files), schema=encoded, format=format, partitioning=partitioning, partition_base_dir=str(path)
    )
    wanted = {name: values.cast(schema.field(name).type) for name, values in filter.wanted.items()}
    kept = []
    for batch in dataset.to_batches(columns=sorted({*columns, *wanted})):
        mask = None
        for name, values in wanted.items():
            column = batch.column(name)
            # a null code is no match (take gives null, and filter drops it)
            hit = (
                pc.take(pc.is_in(column.dictionary, value_set=values), column.indices)
                if pa.types.is_dictionary(column.type)
                else pc.is_in(column, value_set=values)
            )
            mask = hit if mask is None else pc.and_kleene(mask, hit)
        rows = batch.filter(mask) if mask is not None else batch
        kept.append(
            rows
            if filter.keep_codes
            else pa.RecordBatch.from_arrays(
                [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in rows.columns],
                names=rows.schema.names,
            )
        )
    result_schema = pa.schema([(encoded if filter.keep_codes else schema).field(c) for c in columns])
    return pa.Table.from_batches(kept).select(columns).cast(result_schema) if kept else result_schema.empty_table()


def files_of(table: DeltaTable, partitions: Mapping[str, Iterable[object]] | None = None) -> list[str]:
    """URIs of the table's live files, only those of ``partitions`` (``{column: values}``) if given."""
    filters = partition_filters(partitions)
    return [] if filters and any(not values for _, _, values in filters) else table.file_uris(filters)


def partition_filters(partitions: Mapping[str, Iterable[object]] | None) -> list[tuple[str, str, list[str]]] | None:
    """delta-rs partition filters selecting ``{column: values}`` (None: every file)."""
    if not partitions:
        return None
    return [(column, "in", sorted({str(v) for v in values})) for column, values in partitions.items()]


def row_count(
    path: Path,
    version: int | None = None,
    *,
    opened: DeltaTable | None = None,
    partitions: Mapping[str, Iterable[object]] | None = None,
) -> int | None:
    """Rows of the table (or its pinned version, or some of its ``partitions``) from the log's
    file statistics, reading no data file; None when a file was committed without
    ``numRecords``. ``opened`` and ``partitions`` as in :func:`read_arrow`."""
    table = opened if opened is not None else open_table(path, version)
    actions = pa.table(table.get_add_actions(flatten=True))
    for column, values in (partitions or {}).items():
        wanted = pa.array(sorted({str(v) for v in values}), pa.string())
        actions = actions.filter(pc.is_in(actions[f"partition.{column}"].cast(pa.string()), value_set=wanted))
    counts = actions.column("num_records").to_pylist()
    return None if any(c is None for c in counts) else int(sum(counts))


def write_arrow(
    path: Path,
    table: pa.Table,
    mode: Literal["error", "append", "overwrite", "ignore"] = "overwrite",
    partition_by: Sequence[str] | None = None,
    operation: str | None = None,
) -> int:
    """Write a small table from the driver in one commit; returns the new version."""
    path.mkdir(parents=True, exist_ok=True)
    with committing(path, operation) as properties:
        write_deltalake(
            str(path),
            table,
            mode=mode,
            partition_by=list(partition_by) if partition_by else None,
            schema_mode="overwrite" if mode == "overwrite" else None,
            configuration=TABLE_CONFIGURATION,
            commit_properties=properties,
        )
    return current_version(path)  # type: ignore[return-value]


def layout_differs(path: Path, schema: pa.Schema, partition_by: Sequence[str]) -> bool:
    """True when the table at ``path`` has another schema or partitioning than given."""
    table = open_table(path)
    return pa.schema(table.schema().to_arrow()) != schema or list(table.metadata().partition_columns) != list(
        partition_by
    )


def reset_layout(path: Path, schema: pa.Schema, partition_by: Sequence[str], operation: str | None = None) -> int:
    """Give an existing table a new schema and partitioning, emptying it, in one commit (a full
    rebuild of a table written with an older layout; its earlier versions stay readable)."""
    with committing(path, operation) as properties:
        write_deltalake(
            str(path),
            schema.empty_table(),
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=list(partition_by) or None,
            configuration=TABLE_CONFIGURATION,
            commit_properties=properties,
        )
    return current_version(path)  # type: ignore[return-value]


def commit_files(
    path: Path,
    schema: pa.Schema,
    added: Iterable[DataFile],
    removed_paths: Iterable[str] = (),
    partition_by: Sequence[str] = (),
    operation: str | None = None,
) -> int:
    """Commit files written by executors, and remove replaced ones, as ONE transaction.

    Creates the table on first use. Replacing a dataset's rows is "remove its old files, add its
    new files" in the same commit, so a reader sees either all old or all new rows.
    """
    now_ms = int(time.time() * 1000)
    adds = [
        AddAction(
            f.path, f.size, dict(f.partition_values), now_ms, True, f.stats or json.dumps({"numRecords": f.num_records})
        )
        for f in added
    ]
    if not exists(path):
        from deltalake.transaction import create_table_with_add_actions

        path.mkdir(parents=True, exist_ok=True)
        with committing(path, operation) as properties:
            create_table_with_add_actions(
                str(path),
                Schema.from_arrow(schema),
                adds,
                mode="error",
                partition_by=list(partition_by) or None,
                configuration=TABLE_CONFIGURATION,
                commit_properties=properties,
            )
        return current_version(path)  # type: ignore[return-value]
    table = DeltaTable(str(path))
    removes = _remove_actions(table, set(removed_paths), now_ms)
    with committing(path, operation) as properties:
        table.create_write_transaction(
            [*adds, *removes],
            mode="append",
            schema=schema,
            partition_by=list(partition_by) or None,
            commit_properties=properties,
        )
    return current_version(path)  # type: ignore[return-value]


def prepare_layout(
    path: Path, schema: pa.Schema, partition_by: Sequence[str], replace: str, operation: str | None = None
) -> None:
    """Before a write: create the folder; a full replace (``replace="all"``) of a table written
    with another schema or partitioning first gives it the new layout in a commit of its own."""
    path.mkdir(parents=True, exist_ok=True)
    if replace == "all" and exists(path) and layout_differs(path, schema, partition_by):
        reset_layout(path, schema, partition_by, operation)


def commit_replacing(
    path: Path,
    schema: pa.Schema,
    added: list[DataFile],
    partition_by: Sequence[str],
    replace: str,
    replace_values: Sequence[str] = (),
    operation: str | None = None,
) -> int:
    """Commit ``added`` files with the remove actions ``replace`` asks for, in one transaction:
    ``"all"`` replaces every live file, ``"partitions"`` the files of the partitions named in
    ``replace_values`` (plus those ``added`` writes to), ``"none"`` appends."""
    removed = _files_to_replace(path, partition_by, replace, replace_values, added)
    return commit_files(path, schema, added, removed, partition_by, operation)


def write_rows(
    path: Path,
    rows: pa.Table | Iterator[pa.RecordBatch],
    schema: pa.Schema,
    *,
    partition_by: Sequence[str] = (),
    replace: str = "all",
    replace_values: Sequence[str] = (),
    operation: str | None = None,
    layout: FileLayout = DEFAULT_LAYOUT,
) -> int:
    """Write ``rows`` (a table, or batches) from this process as the Spark writer does (one file
    per partition laid out as ``layout`` says, one commit, ``replace`` as in
    :func:`commit_replacing`); returns the new version."""
    prepare_layout(path, schema, partition_by, replace, operation)
    writer = partition_writer(str(path), schema, list(partition_by), layout)
    batches = iter(rows.cast(schema).to_batches()) if isinstance(rows, pa.Table) else rows
    added = [data_file(row) for batch in writer(batches) for row in batch.to_pylist()]
    return commit_replacing(path, schema, added, partition_by, replace, replace_values, operation)


def data_file(row: Mapping[str, Any]) -> DataFile:
    """A :func:`partition_writer` row as a :class:`DataFile`."""
    return DataFile(
        str(row["path"]),
        int(row["size"]),
        int(row["num_records"]),
        json.loads(str(row["partition_values"])),
        str(row["stats"]),
    )


def live_files(path: Path, partition_column: str | None = None) -> dict[str, str | None]:
    """Relative path of every live file -> its value of ``partition_column`` (None if unpartitioned)."""
    if not exists(path):
        return {}
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pydict()
    values = actions.get(f"partition.{partition_column}") if partition_column else None
    return {p: (values[i] if values else None) for i, p in enumerate(actions["path"])}


def history(path: Path, limit: int | None = None) -> list[dict]:
    """The table's commits, newest first (the ``limit`` newest only, when given)."""
    return open_table(path).history(limit)


def _remove_actions(table: DeltaTable, paths: set[str], now_ms: int) -> list[RemoveAction]:
    if not paths:
        return []
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    partition_keys = [k for k in actions if k.startswith("partition.")]
    removes = []
    for i, p in enumerate(actions["path"]):
        if p in paths:
            partition_values = {k.removeprefix("partition."): _partition_text(actions[k][i]) for k in partition_keys}
            removes.append(
                RemoveAction(
                    p,
                    data_change=True,
                    deletion_timestamp=now_ms,
                    size=actions["size_bytes"][i],
                    partition_values=partition_values,
                )
            )
    missing = paths - set(actions["path"])
    if missing:
        raise ValueError(f"cannot remove files that are not live in {table.table_uri}: {sorted(missing)[:3]}")
    return removes


def _files_to_replace(
    table_path: Path, partition_by: Sequence[str], replace: str, replace_values: Sequence[str], added: list[DataFile]
) -> list[str]:
    if replace == "none":
        return []
    live = live_files(table_path, partition_by[0] if partition_by else None)
    if replace == "all":
        return list(live)
    if replace != "partitions" or not partition_by:
        raise ValueError(f"replace={replace!r} needs one of all|partitions|none (partitions needs partition_by)")
    # The log may type partition values (an int shard); compare their text, as Delta stores them.
    targets = {str(v) for v in replace_values} | {str(f.partition_values[partition_by[0]]) for f in added}
    return [p for p, value in live.items() if str(value) in targets]


def partition_writer(
    table_root: str, schema: pa.Schema, partition_by: list[str], layout: FileLayout = DEFAULT_LAYOUT
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function that turns Arrow batches into Parquet files under ``table_root`` (one per
    partition of the batches, laid out as ``layout`` says) and yields one row per file (path, size,
    num_records, partition_values as JSON, stats): what each Spark executor task runs, and
    :func:`write_rows`."""
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = list(batches)
        if not collected or sum(b.num_rows for b in collected) == 0:
            return
        table = pa.Table.from_batches(collected)
        table = table.cast(schema)
        for values, part in _split_by_partition(table, partition_by):
            relative_dir = "/".join(
                f"{quote(c, safe='')}={quote(str(v), safe='')}" for c, v in zip(partition_by, values)
            )
            relative = f"{relative_dir}/" if relative_dir else ""
            relative += f"part-{uuid.uuid4().hex}.parquet"
            absolute = Path(table_root) / relative
            absolute.parent.mkdir(parents=True, exist_ok=True)
            if layout.sort_by:
                part = part.sort_by(layout.sort_by)
            pq.write_table(
                part.select(data_schema.names), absolute, compression="zstd", row_group_size=layout.row_group_rows
            )
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


def _split_by_partition(table: pa.Table, partition_by: list[str]) -> Iterator[tuple[tuple, pa.Table]]:
    """The table's rows per partition value, each in table order, as zero-copy slices: directly
    when each value's rows are one run (a cells task melts dataset after dataset), else after one
    grouping pass and one take that puts each partition's rows together. (A filter per partition
    scanned the whole table once per partition, and a take per partition concatenated its chunks
    each time: both grow with partitions x rows, minutes for a cells task of the whole bundled
    lake.)"""
    if not partition_by:
        yield (), table
        return
    runs = _runs(table[partition_by[0]]) if len(partition_by) == 1 else None
    if runs is not None:
        for value, start, length in runs:
            yield (value,), table.slice(start, length)
        return
    rows = table.select(partition_by).append_column("_row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    groups = rows.group_by(partition_by, use_threads=False).aggregate([("_row", "list")])
    row_lists = groups["_row_list"].combine_chunks()
    grouped = table.take(row_lists.values)
    offsets = row_lists.offsets.to_numpy()
    for i, key in enumerate(groups.select(partition_by).to_pylist()):
        yield tuple(key[c] for c in partition_by), grouped.slice(offsets[i], offsets[i + 1] - offsets[i])


def _runs(column: pa.ChunkedArray) -> list[tuple[Any, int, int]] | None:
    """(value, start, length) of each run of equal values, when every value forms one run and
    none is null; else None."""
    rows = len(column)
    if rows == 0 or column.null_count:
        return None
    changed = pc.not_equal(column.slice(1), column.slice(0, rows - 1)).to_numpy()
    starts = np.concatenate([[0], np.flatnonzero(changed) + 1])
    values = _values_at(column, starts)
    if len(set(values)) != len(values):
        return None
    lengths = np.diff(np.append(starts, rows))
    return list(zip(values, starts.tolist(), lengths.tolist()))


def _values_at(column: pa.ChunkedArray, positions: np.ndarray) -> list[Any]:
    """``column[positions]`` (sorted), taken chunk by chunk: a take over the whole chunked column
    concatenates it first, which overflows a string column past 2 GiB (a cells task of the
    whole bundled lake holds ~290 datasets' ids, one per cell)."""
    values: list[Any] = []
    first = 0
    for chunk in column.chunks:
        inside = positions[(positions >= first) & (positions < first + len(chunk))] - first
        values += chunk.take(pa.array(inside, pa.int64())).to_pylist()
        first += len(chunk)
    return values


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


class ConcurrentCommit(lease.LakeWriteError):
    """delta-rs' optimistic concurrency refused a commit: another writer committed in between."""


@contextmanager
def committing(path: Path, operation: str | None) -> Iterator[CommitProperties]:
    """The one gate every commit of the lake passes (lakejoin's writes and compaction, the Spark
    writer's through :func:`commit_files`): it checks the write lease
    (``lakejoin.lake.lease.check_commit``), yields the commit's properties — the operation and the
    build id recorded in the commit's ``commitInfo`` — and turns a delta-rs commit conflict into
    a :class:`ConcurrentCommit` that names the table."""
    build_id = lease.check_commit(path)
    metadata = {"lakejoin.operation": operation or "write", **({BUILD_KEY: build_id} if build_id else {})}
    try:
        yield CommitProperties(custom_metadata=metadata)
    except CommitFailedError as error:
        raise ConcurrentCommit(
            f"another writer committed to {path} at the same time; this commit was refused ({error})"
        ) from error


def commit_build(commit: Mapping[str, object]) -> str | None:
    """The build id recorded in a commit (an entry of :func:`history`); None for commits made
    before builds were recorded, or outside a lease."""
    value = commit.get(BUILD_KEY)
    return str(value) if value is not None else None


def _partition_text(value: object) -> str | None:
    """A partition value as the Delta log stores it (text), whatever type delta-rs read it as."""
    return None if value is None else str(value)
