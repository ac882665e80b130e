"""The main job: ingest every source -> cells -> columns -> index builds -> publish snapshot.

Each stage is a function the Airflow tasks call one by one; ``run`` chains them for the CLI.
Every stage is idempotent: Delta commits are the only side effects that count, and the
snapshot row written last is the publish (a run that dies earlier leaves the previous
snapshot serving, and the next run redoes what was not committed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lakejoin.config import LOCAL_INGEST_BYTES as INGEST_BYTES
from lakejoin.config import LOCAL_INGEST_FILES as INGEST_FILES
from lakejoin.config import LakeConfig
from lakejoin.graph.publish import graph_of_versions
from lakejoin.ids import sha256_file
from lakejoin.index import FAMILIES
from lakejoin.lake import catalog, compaction, delta, snapshots
from lakejoin.lake.schemas import CELLS, CELLS_SCHEMA, COLUMNS, DATASETS, KEYS, VALIDATIONS
from lakejoin.pause import pause_point
from lakejoin.profile import PROFILE_SCHEMA
from lakejoin.profile.composite import KEYS_SCHEMA
from lakejoin.progress import Progress
from lakejoin.quality.docs import build_docs
from lakejoin.quality.drift import validations_table
from lakejoin.sources import SourceUnavailable, open_source
from lakejoin.sources.base import Resource
from lakejoin.sources.bundled import DEFAULT_TABLES, bundled_portal
from lakejoin.sources.parse import DEFAULT_MAX_BYTES
from lakejoin.spark import delta as spark_delta
from lakejoin.spark.builders import SparkBuild, builder_of
from lakejoin.spark.cells import ParseTask, cells_tasks, melt_staged, stage_files
from lakejoin.spark.indexing import FamilyBuild, FamilyPlan, build_family, plan_family
from lakejoin.spark.progress import spark_tasks
from lakejoin.spark.session import get_spark

# A run that adds or changes at most this many files, of at most this many bytes in all, parses
# and melts them in this process (``small_ingest``): Spark's start and per-job latency would
# cost more than the work.
LOCAL_INGEST_FILES, LOCAL_INGEST_FILES_ENV = INGEST_FILES.default, INGEST_FILES.name
LOCAL_INGEST_BYTES, LOCAL_INGEST_BYTES_ENV = INGEST_BYTES.default, INGEST_BYTES.name
SparkFactory = Callable[[str | None], SparkSession]  # get_spark's signature: a master URL (None: the default)


@dataclass
class RunOptions:
    """What a run does: its sources, lake size, families, publishing, sharding and lease wait."""

    sources: list[str] = field(default_factory=list)  # empty: the bundled real-data lake
    tables: int | None = DEFAULT_TABLES  # bundled lake size; None = all
    allow_private_hosts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    publish: bool = True
    graph: bool = True  # publish the join graph with the snapshot
    families: tuple[str, ...] = FAMILIES  # index families to build
    source_options: dict[str, Any] = field(default_factory=dict)  # passed to portal sources (rate limits...)
    shards: int | None = None  # shard count of a family's first build (default: from the lake's size)
    build_id: str | None = None  # the build the run's commits belong to (default: a new one)
    wait: float = 0.0  # seconds to wait for another writer's lease (lakejoin.lake.lease)


@dataclass
class IngestResult:
    """What ingestion changed: the datasets rewritten or removed, the counts, and each failed dataset's reason."""

    changed: set[str]  # datasets whose cells were (re)written or removed
    counts: dict[str, int]
    errors: dict[str, str]


def ingest(
    config: LakeConfig, options: RunOptions, progress: Progress, spark_factory: SparkFactory | None = None
) -> IngestResult:
    """Bring the catalog, cells and columns up to date with the sources, holding the lake's
    write lease. Spark starts only when something changed, so an unchanged re-run costs a
    listing (and a hash per file)."""
    with snapshots.writing(config, "ingest", options.build_id, options.wait):
        return _ingest(config, options, progress, spark_factory)


def _ingest(
    config: LakeConfig, options: RunOptions, progress: Progress, spark_factory: SparkFactory | None = None
) -> IngestResult:
    if not options.sources:  # the embedded default: crawl the bundled lake through the local portal
        with bundled_portal(config.home, options.tables) as spec:
            progress.say(f"  serving the bundled lake ({options.tables or 'all'} tables) at {spec}")
            local = replace(
                options, sources=[spec], allow_private_hosts=True, source_options={"requests_per_second": 0}
            )
            return ingest(config, local, progress, spark_factory)
    previous = catalog.load_datasets(config.table_path(DATASETS))
    with progress.stage("discover", f"{len(options.sources)} source(s)"):
        listed, failed = _list_resources(config, options.sources, previous, options, progress)
        hashes = {
            r.dataset_id: sha256_file(r.local_path)
            for r in progress.iterate(listed, "hashing", len(listed))
            if r.local_path
        }
        plan = catalog.plan_run(previous, listed, hashes, failed)
    counts = {
        "listed": len(listed),
        "to_parse": len(plan.to_parse),
        "removed": len(plan.removed),
        "fetch_errors": len(plan.errors),
    }
    progress.say(
        f"  {len(listed)} datasets listed, {len(plan.to_parse)} new or changed, {len(plan.removed)} removed, "
        f"{len(plan.errors)} fetch errors"
    )
    rewritten: list[dict[str, Any]] = []
    spark = _ingest_session(config, plan, spark_factory)
    if plan.to_parse:
        where = f"on {spark.sparkContext.defaultParallelism} cores" if spark else "in this process"
        with progress.stage("parse", f"{len(plan.to_parse)} files {where}"), spark_tasks(spark, progress, "parse"):
            rewritten = _parse(config, spark, plan, options)
    changed = {r["dataset_id"] for r in rewritten} | plan.removed
    if changed:
        with progress.stage("cells", f"{len(rewritten)} datasets"):
            with spark_tasks(spark, progress, "cells"):
                version = _write_cells(config, spark, rewritten, changed)
            progress.say(f"  lake/cells at version {version}")
        pause_point("cells")
        with progress.stage("columns"):
            _write_columns(config, rewritten, changed)
    with progress.stage("catalog"):
        delta.write_arrow(config.table_path(DATASETS), catalog.to_arrow(plan.rows), operation="ingest")
    statuses = [r["status"] for r in plan.rows.values()]
    counts.update({s: statuses.count(s) for s in (catalog.ACTIVE, catalog.REMOVED, catalog.QUARANTINED)})
    counts["rewritten"] = len(rewritten)
    return IngestResult(
        changed,
        counts,
        {**plan.errors, **{d: plan.rows[d]["reason"] for d in plan.to_parse if plan.rows[d].get("reason")}},
    )


def build_indexes(
    config: LakeConfig,
    progress: Progress,
    spark: SparkSession | None = None,
    families: tuple[str, ...] = FAMILIES,
    *,
    build_id: str | None = None,
    shards: int | None = None,
    wait: float = 0.0,
) -> dict[str, FamilyBuild]:
    """Bring each family's index up to date with the catalog, shard by shard
    (``lakejoin.spark.indexing``): only the shards holding a dataset changed since the family's
    last build are rebuilt. ``shards`` sets the shard count of a family's first build.

    The families' builds run side by side (they share no table): incremental builds are small
    (most run in this process, ``lakejoin.spark.indexing``), and full builds on the one Spark
    session fill the cores one family's job leaves idle (single-task stages, driver-side
    planning, collects and Delta commits). Holds the lake's write lease."""
    with snapshots.writing(config, "build_indexes", build_id, wait) as held:
        return _build_indexes(config, progress, spark, families, held.build_id, shards)


def _build_indexes(
    config: LakeConfig,
    progress: Progress,
    spark: SparkSession | None,
    families: tuple[str, ...],
    build_id: str,
    shards: int | None,
) -> dict[str, FamilyBuild]:
    if not delta.exists(config.table_path(COLUMNS)):
        progress.say("  nothing ingested yet: no index to build")
        return {}
    plans: list[tuple[FamilyPlan, SparkBuild]] = []
    for family in families:
        builder = builder_of(family)
        plan = plan_family(config, family, builder, shards)
        if not plan.idle:
            plans.append((plan, builder))
    if not plans:
        return {}
    if spark is None and not all(plan.local for plan, _ in plans):
        spark = get_spark(config.spark_master)

    def build(plan: FamilyPlan, builder: SparkBuild) -> FamilyBuild:
        with progress.stage(f"index:{plan.family}"), spark_tasks(spark, progress, plan.family):
            return build_family(config, spark, plan, builder, build_id, progress)

    with ThreadPoolExecutor(max_workers=len(plans), thread_name_prefix="lakejoin-index") as pool:
        futures = {plan.family: pool.submit(build, plan, builder) for plan, builder in plans}
    return {family: futures[family].result() for family in families if family in futures}


def publish(
    config: LakeConfig,
    stats: dict[str, Any],
    progress: Progress,
    *,
    graph: bool = True,
    build_id: str | None = None,
    wait: float = 0.0,
) -> snapshots.Snapshot:
    """Pin every table's current version in a new snapshot (one build's: ``snapshots.publish``),
    with the join graph of those versions unless ``graph`` is false (``lakejoin.graph.publish``:
    incremental from the graph last written, so a reader of the snapshot has its own graph)."""
    with snapshots.writing(config, "publish", build_id, wait):
        versions = snapshots.table_versions(config, snapshots.lake_tables(config))
        if graph:
            with progress.stage("graph"):
                graph_versions, graph_stats = graph_of_versions(config, versions)
            versions, stats = {**versions, **graph_versions}, {**stats, "graph": graph_stats}
        with progress.stage("publish"):
            pause_point("publish")
            return snapshots.publish(config, versions, stats)


def compact(
    config: LakeConfig, progress: Progress, *, build_id: str | None = None, wait: float = 0.0
) -> dict[str, Any]:
    """Maintenance after a publish: merge the small files appends and shard swaps left
    (``lakejoin.lake.compaction``); the next snapshot pins the compacted versions."""
    with snapshots.writing(config, "compact", build_id, wait), progress.stage("compact"):
        return compaction.compact(config)


def quality_docs(config: LakeConfig, progress: Progress) -> dict[str, Any]:
    """Great Expectations Data Docs of the published snapshot's latest validations
    (``lakejoin.quality.docs``). Reports are a view of the lake: failing to build them is
    reported, never fails the run."""
    with progress.stage("quality_docs"):
        try:
            return build_docs(config).to_json()
        except Exception as error:  # noqa: BLE001 - any failure here must leave the run's result standing
            progress.say(f"  warning: quality docs not built: {type(error).__name__}: {error}")
            return {"error": f"{type(error).__name__}: {error}"}


def run(config: LakeConfig, options: RunOptions, progress: Progress | None = None) -> dict[str, Any]:
    """The whole main job; returns the summary the CLI prints."""
    progress = progress or Progress(config.quiet)
    started = time.perf_counter()
    with snapshots.writing(config, "run", options.build_id, options.wait) as held:  # one lease for the whole run
        result = ingest(config, options, progress)
        builds = build_indexes(config, progress, families=options.families, shards=options.shards)
        summary = {**_summary(config, result, builds), "build_id": held.build_id}
        if options.publish:
            snapshot = publish(config, summary, progress, graph=options.graph)
            summary["snapshot_id"] = snapshot.snapshot_id
            if "graph" in snapshot.stats:
                summary["graph"] = snapshot.stats["graph"]
            summary["compacted"] = compact(config, progress)
    if options.publish:
        summary["quality_docs"] = quality_docs(config, progress)
    summary["seconds"] = round(time.perf_counter() - started, 2)
    summary["stage_seconds"] = {k: round(v, 2) for k, v in progress.timings.items()}
    summary["stage_cpu_seconds"] = {k: round(v, 2) for k, v in progress.cpu_timings.items()}
    return summary


def _list_resources(
    config: LakeConfig,
    sources: list[str],
    previous: dict[str, dict[str, Any]],
    options: RunOptions,
    progress: Progress,
) -> tuple[list[Resource], set[str]]:
    listed: list[Resource] = []
    failed: set[str] = set()
    workdir = config.home / "downloads"
    workdir.mkdir(parents=True, exist_ok=True)
    for spec in sources:
        settings = {
            "allow_private_hosts": options.allow_private_hosts,
            "max_bytes": options.max_bytes,
            **options.source_options,
        }
        source = open_source(spec, **settings)
        mine = {k: v for k, v in previous.items() if v["source"] == source.spec}
        try:
            listed.extend(source.resources(mine, workdir))
        except SourceUnavailable as error:
            failed.add(source.spec)
            progress.say(f"  source {source.spec} unavailable, its datasets are kept as they were: {error}")
    return listed, failed


def _parse(
    config: LakeConfig, spark: SparkSession | None, plan: catalog.Plan, options: RunOptions
) -> list[dict[str, Any]]:
    """Parse, gate and drift-check the new or changed files on the executors; record the
    validations (``quality/validations``) and apply each outcome to the catalog plan."""
    pause_point("parse")
    suites = _baseline_suites(config)
    tasks = [
        ParseTask(
            d,
            str(r.local_path),
            r.format,
            plan.content_sha[d],
            str(config.raw_dir / f"{plan.content_sha[d]}.parquet"),
            options.max_bytes,
            (plan.rows[d]["version"] + 1) if d in plan.rows else 1,
            suites.get(d),
        )
        for d, r in plan.to_parse.items()
    ]
    outcomes = stage_files(spark, tasks)
    validations = [o.validation for o in outcomes if o.validation]
    if validations:
        rows = [{**v, "validated_at": datetime.fromisoformat(v["validated_at"])} for v in validations]
        delta.write_arrow(config.table_path(VALIDATIONS), validations_table(rows), mode="append", operation="validate")
    rewritten = []
    for outcome in outcomes:
        staged = str(config.raw_dir / f"{plan.content_sha[outcome.dataset_id]}.parquet")
        if catalog.apply_parse_outcome(
            plan, outcome.dataset_id, outcome.ok, outcome.reason, outcome.rows, len(outcome.columns), staged
        ):
            rewritten.append(
                {
                    "dataset_id": outcome.dataset_id,
                    "content_sha256": plan.content_sha[outcome.dataset_id],
                    "staged_path": staged,
                    "profiles": outcome.profiles,
                    "keys": outcome.keys,
                }
            )
    return rewritten


def _baseline_suites(config: LakeConfig) -> dict[str, str]:
    """Each dataset's expectation suite: the one recorded with its first validated version."""
    path = config.table_path(VALIDATIONS)
    if not delta.exists(path):
        return {}
    first: dict[str, tuple[int, str]] = {}
    for row in delta.read_arrow(path, columns=["dataset_id", "version", "suite"]).to_pylist():
        if row["suite"] and (row["dataset_id"] not in first or row["version"] < first[row["dataset_id"]][0]):
            first[row["dataset_id"]] = (row["version"], row["suite"])
    return {k: suite for k, (_, suite) in first.items()}


def _ingest_session(config: LakeConfig, plan: catalog.Plan, spark_factory: SparkFactory | None) -> SparkSession | None:
    """The Spark session the ingest runs on; None when there is nothing to write, or when the
    files to parse are few and small enough to parse and melt in this process."""
    if not (plan.to_parse or plan.removed) or small_ingest(plan):
        return None
    return (spark_factory or get_spark)(config.spark_master)


def small_ingest(plan: catalog.Plan) -> bool:
    """Whether the files to parse are few and small enough to parse and melt in this process
    (at most ``LAKEJOIN_LOCAL_INGEST_FILES``, 16, files and ``LAKEJOIN_LOCAL_INGEST_BYTES``,
    16 MiB, in all; 0 keeps every ingest on Spark)."""
    files, size = INGEST_FILES.read(), INGEST_BYTES.read()
    paths = [Path(r.local_path) for r in plan.to_parse.values() if r.local_path]
    return len(paths) <= files and sum(p.stat().st_size for p in paths) <= size


def _write_cells(
    config: LakeConfig, spark: SparkSession | None, rewritten: list[dict[str, Any]], changed: set[str]
) -> int:
    staged = [{k: r[k] for k in ("dataset_id", "content_sha256", "staged_path")} for r in rewritten]
    if spark is None:  # a small ingest: the same melt and writer, in this process
        cells = melt_staged(iter([pa.RecordBatch.from_pylist(staged)])) if staged else iter(())
        return delta.write_rows(
            config.table_path(CELLS),
            cells,
            CELLS_SCHEMA,
            partition_by=["dataset_id"],
            replace="partitions",
            replace_values=sorted(changed),
            operation="cells",
        )
    tasks = (
        cells_tasks(spark, staged)
        if staged
        else spark.createDataFrame([], "dataset_id string, content_sha256 string, staged_path string")
    )
    return spark_delta.write_table(
        tasks,
        config.table_path(CELLS),
        CELLS_SCHEMA,
        partition_by=["dataset_id"],
        replace="partitions",
        replace_values=sorted(changed),
        operation="cells",
        produce=melt_staged,
    )


def _write_columns(config: LakeConfig, rewritten: list[dict[str, Any]], changed: set[str]) -> None:
    """The rewritten datasets' column profiles and composite keys (computed while parsing)
    replace their old rows; the other datasets' rows stay as they were."""
    profiled = pa.Table.from_pylist([p for r in rewritten for p in r["profiles"]], schema=PROFILE_SCHEMA)
    _replace_rows(config.table_path(COLUMNS), profiled, changed, "columns")
    keys = pa.Table.from_pylist([k for r in rewritten for k in r["keys"]], schema=KEYS_SCHEMA)
    _replace_rows(config.table_path(KEYS), keys, changed, "keys")


def _replace_rows(path: Path, rows: pa.Table, changed: set[str], operation: str) -> None:
    """Rewrite the table at ``path`` with ``rows`` in place of the ``changed`` datasets' rows."""
    if not delta.exists(path):
        delta.write_arrow(path, rows, operation=operation)
        return
    kept = delta.read_arrow(path)
    kept = _with_fields_of(
        kept.filter(pc.invert(pc.is_in(kept["dataset_id"], pa.array(sorted(changed), pa.string())))), rows.schema
    )
    delta.write_arrow(
        path, pa.concat_tables([kept, rows.select(kept.schema.names).cast(kept.schema)]), operation=operation
    )


def _with_fields_of(kept: pa.Table, schema: pa.Schema) -> pa.Table:
    """``kept`` (rows written by an earlier run) plus the fields of ``schema`` it lacks, as nulls:
    a lake written before a field existed (e.g. ``header``) keeps working, and the columns table,
    rewritten whole, gains the field."""
    for f in schema:
        if f.name not in kept.schema.names:
            kept = kept.append_column(f, pa.nulls(kept.num_rows, f.type))
    return kept


def _summary(config: LakeConfig, result: IngestResult, builds: dict[str, FamilyBuild]) -> dict[str, Any]:
    cells_path = config.table_path(CELLS)
    columns_path = config.table_path(COLUMNS)
    return {
        "home": str(config.home),
        "spark_master": config.spark_master,
        "datasets": result.counts,
        "changed_datasets": len(result.changed),
        "columns": delta.open_table(columns_path).count() if delta.exists(columns_path) else 0,
        "cells": delta.open_table(cells_path).count() if delta.exists(cells_path) else 0,
        "index_rows": {f"index/{b.family}/{name}": rows for b in builds.values() for name, rows in b.rows.items()},
        "index_builds": {family: b.to_json() for family, b in builds.items()},
        "errors": dict(sorted(result.errors.items())[:50]),
    }
