"""Spark jobs that turn fetched files into the lake: parse+stage, then melt into ``lake/cells``.

Both run inside executors. Parsing a file also profiles its columns (``lakejoin.profile``,
once per distinct value) and finds its composite keys (``lakejoin.profile.composite``) — the drift suite of a first
version is built from that profile,
and the pipeline's ``catalog/columns`` rows are those profiles, so no later stage reads the
cells again to profile them. The driver sees one small outcome per file: its status, its
quality validation row and one profile row per column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from lakejoin.ids import column_id
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import NormalizedColumn
from lakejoin.profile import finish_profile, table_aggregates
from lakejoin.profile.composite import key_rows
from lakejoin.quality.drift import normalized_table, validate_version
from lakejoin.quality.gate import validate_table
from lakejoin.sources.headers import recorded_headers
from lakejoin.sources.parse import UnparseableFile, parse_file


@dataclass
class ParseTask:
    """One file for a Spark task to parse, validate and stage."""

    dataset_id: str
    local_path: str
    format: str
    content_sha256: str
    staged_path: str  # raw/<sha256>.parquet: the file parsed to all-string columns
    max_bytes: int
    version: int  # the catalog version this content would become
    baseline_suite: str | None  # the dataset's expectation suite (from its first version), if any


@dataclass
class ParseOutcome:
    """What parsing one file gave: its rows and columns, or why it was rejected."""

    dataset_id: str
    ok: bool
    reason: str | None
    rows: int
    columns: list[str]
    warnings: list[str]
    validation: dict | None = None  # a quality/validations row (gate failure or drift check)
    profiles: list[dict] = field(default_factory=list)  # per column: its catalog/columns row (PROFILE_SCHEMA)
    keys: list[dict] = field(
        default_factory=list
    )  # its composite keys: catalog/keys rows (profile.composite.KEYS_SCHEMA)


def stage_file(task: ParseTask) -> ParseOutcome:
    """Parse one file, pass it through the quality gate, check it for drift against its
    dataset's suite, and keep it as Parquet. Content-addressed: a file whose bytes were staged
    before (renamed, re-downloaded) is not parsed again."""
    try:
        table, warnings = _parsed_or_staged(task)
        return _checked(task, table, warnings)
    except UnparseableFile as error:
        return _rejected(task, str(error))
    except Exception as error:  # noqa: BLE001 - one bad file (or a check that cannot run on it) must never fail the run
        return _rejected(task, f"{type(error).__name__}: {error}")


def _checked(task: ParseTask, table: pa.Table, warnings: list[str]) -> ParseOutcome:
    """The quality gate, the column profiles and the drift check of a staged table."""
    ragged = sum(int(w.split()[0]) for w in warnings if "ragged" in w)
    gate = validate_table(table, task.dataset_id, malformed_rows=ragged)
    if not gate.success:
        Path(task.staged_path).unlink(missing_ok=True)
        return _rejected(task, f"quality gate: {gate.reason}", gate.result_json)
    columns = NormalizedColumn.of_columns(table.columns)
    profiles = column_profiles(task, table, columns)
    normalized = normalized_table(columns, table.column_names)
    validation = validate_version(
        task.dataset_id, task.version, table, task.baseline_suite, profiles, normalized=normalized
    )
    keys = key_rows(task.dataset_id, columns, profiles)
    return ParseOutcome(
        task.dataset_id,
        True,
        None,
        table.num_rows,
        table.column_names,
        warnings,
        _serializable(validation),
        profiles,
        keys,
    )


def column_profiles(task: ParseTask, table: pa.Table, columns: list[NormalizedColumn]) -> list[dict]:
    """The ``catalog/columns`` row of every column of a staged table: its profile
    (``lakejoin.profile``), ids and recorded header."""
    ids = [column_id(task.dataset_id, task.content_sha256, ordinal) for ordinal in range(table.num_columns)]
    aggregates = table_aggregates(columns, table.column_names, column_ids=ids, dataset_id=task.dataset_id)
    return [finish_profile({**a, **header}) for a, header in zip(aggregates, recorded_headers(table.schema))]


def _parsed_or_staged(task: ParseTask) -> tuple[pa.Table, list[str]]:
    staged = Path(task.staged_path)
    if staged.exists():
        return pq.read_table(staged), []
    parsed = parse_file(Path(task.local_path), task.format, task.max_bytes)
    staged.parent.mkdir(parents=True, exist_ok=True)
    temporary = staged.with_suffix(f".{task.dataset_id}.tmp")
    pq.write_table(parsed.table, temporary, compression="zstd")
    temporary.replace(staged)
    return parsed.table, parsed.warnings


def _rejected(task: ParseTask, reason: str, result_json: str | None = None) -> ParseOutcome:
    validation = {
        "dataset_id": task.dataset_id,
        "version": task.version,
        "suite": None,
        "success": False,
        "drift": [{"kind": "rejected", "column": None, "detail": reason}],
        "validated_at": datetime.now(UTC).isoformat(),
        "result_json": result_json,
    }
    return ParseOutcome(task.dataset_id, False, reason, 0, [], [], validation)


def _serializable(row: dict) -> dict:
    return {**row, "validated_at": row["validated_at"].isoformat()}


def stage_files(spark: SparkSession | None, tasks: list[ParseTask]) -> list[ParseOutcome]:
    """Parse files in parallel on the executors (largest first, to balance the tasks); in this
    process, one after the other, without Spark (``spark`` None: a small ingest)."""
    if not tasks:
        return []
    if spark is None:
        return [stage_file(t) for t in tasks]
    ordered = sorted(tasks, key=lambda t: -Path(t.local_path).stat().st_size)
    slices = max(1, min(len(ordered), spark.sparkContext.defaultParallelism * 4))
    dicts = (
        spark.sparkContext.parallelize([asdict(t) for t in ordered], slices)
        .map(lambda d: asdict(stage_file(ParseTask(**d))))
        .collect()
    )
    return [ParseOutcome(**d) for d in dicts]


def melt_staged(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (dataset_id, content_sha256, staged_path) rows -> cells rows.

    Normalization runs once per distinct text of the table (``NormalizedColumn``), which keeps
    repetitive columns (codes, years) cheap.
    """
    for batch in batches:
        for task in batch.to_pylist():
            staged = pq.read_table(task["staged_path"])
            for ordinal, column in enumerate(NormalizedColumn.of_columns(staged.columns)):
                cells = _melt_column(
                    column, task["dataset_id"], column_id(task["dataset_id"], task["content_sha256"], ordinal)
                )
                if cells is not None:
                    yield from cells.to_batches(max_chunksize=1 << 16)


def _melt_column(column: NormalizedColumn, dataset: str, column_ident: int) -> pa.Table | None:
    """The column's cells with a value: ``raw`` holds the original text where it differs."""
    raws = pc.if_else(pc.equal(column.originals, column.normalized), pa.scalar(None, pa.string()), column.originals)
    indices = column.indices
    keep = pc.is_valid(column.values())
    row_ids = pc.filter(pa.array(np.arange(len(indices), dtype=np.int64)), keep)
    if len(row_ids) == 0:
        return None
    kept = pc.filter(indices, keep)
    return pa.table(
        {
            "dataset_id": pa.array([dataset] * len(row_ids), pa.string()),
            "column_id": pa.array([column_ident] * len(row_ids), pa.int64()),
            "row_id": row_ids,
            "value": pc.take(column.normalized, kept),
            "raw": pc.take(raws, kept),
        },
        schema=CELLS_SCHEMA,
    )


def cells_tasks(spark: SparkSession, staged: list[dict]) -> DataFrame:
    """One task row per staged dataset, spread over the cores; ``melt_staged`` turns each into
    its cells inside the executor (see ``lakejoin.spark.delta.write_table(produce=...)``)."""
    tasks = spark.createDataFrame(staged, "dataset_id string, content_sha256 string, staged_path string")
    return tasks.repartition(max(1, min(len(staged), spark.sparkContext.defaultParallelism * 4)))
