"""The main job: ingest every source -> cells -> columns -> index builds -> publish snapshot.

Each stage is a function the Airflow tasks call one by one; ``run`` chains them for the CLI.
Every stage is idempotent: Delta commits are the only side effects that count, and the
snapshot row written last is the publish (a run that dies earlier leaves the previous
snapshot serving, and the next run redoes what was not committed).
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from datetime import datetime
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.config import LakeConfig
from lakejoin.ids import sha256_file
from lakejoin.index import FAMILIES
from lakejoin.lake import catalog, delta, snapshots
from lakejoin.embed import PEXESO_MODEL
from lakejoin.lake.schemas import CELLS, CELLS_SCHEMA, COLUMNS, COLUMNS_SCHEMA, DATASETS, EMBEDDINGS, EMBEDDINGS_SCHEMA, VALIDATIONS
from lakejoin.progress import Progress
from lakejoin.quality.drift import validations_table
from lakejoin.sources import SourceUnavailable, open_source
from lakejoin.sources.bundled import DEFAULT_TABLES, bundled_portal
from lakejoin.sources.parse import DEFAULT_MAX_BYTES
from lakejoin.spark import delta as spark_delta
from lakejoin.spark.embed import embed_values
from lakejoin.spark.cells import ParseTask, cells_tasks, melt_staged, stage_files
from lakejoin.spark.session import get_spark


@dataclass
class RunOptions:
    sources: list[str] = field(default_factory=list)  # empty: the bundled real-data lake
    tables: int | None = DEFAULT_TABLES  # bundled lake size; None = all
    allow_private_hosts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    publish: bool = True
    families: tuple[str, ...] = FAMILIES  # index families to build
    source_options: dict[str, Any] = field(default_factory=dict)  # passed to portal sources (rate limits...)


@dataclass
class IngestResult:
    changed: set[str]  # datasets whose cells were (re)written or removed
    counts: dict[str, int]
    errors: dict[str, str]


def ingest(config: LakeConfig, options: RunOptions, progress: Progress, spark_factory=None) -> IngestResult:
    """Bring the catalog, cells and columns up to date with the sources. Spark starts only
    when something changed, so an unchanged re-run costs a listing (and a hash per file)."""
    if not options.sources:  # the embedded default: crawl the bundled lake through the local portal
        with bundled_portal(config.home, options.tables) as spec:
            progress.say(f"  serving the bundled lake ({options.tables or 'all'} tables) at {spec}")
            local = replace(options, sources=[spec], allow_private_hosts=True, source_options={"requests_per_second": 0})
            return ingest(config, local, progress, spark_factory)
    previous = catalog.load_datasets(config.table_path(DATASETS))
    with progress.stage("discover", f"{len(options.sources)} source(s)"):
        listed, failed = _list_resources(config, options.sources, previous, options, progress)
        hashes = {r.dataset_id: sha256_file(r.local_path) for r in progress.iterate(listed, "hashing", len(listed)) if r.local_path}
        plan = catalog.plan_run(previous, listed, hashes, failed)
    counts = {"listed": len(listed), "to_parse": len(plan.to_parse), "removed": len(plan.removed), "fetch_errors": len(plan.errors)}
    progress.say(f"  {len(listed)} datasets listed, {len(plan.to_parse)} new or changed, {len(plan.removed)} removed, {len(plan.errors)} fetch errors")
    rewritten: list[dict[str, Any]] = []
    if plan.to_parse:
        spark = (spark_factory or get_spark)(config.spark_master)
        with progress.stage("parse", f"{len(plan.to_parse)} files on {spark.sparkContext.defaultParallelism} cores"):
            rewritten = _parse(config, spark, plan, options)
    changed = {r["dataset_id"] for r in rewritten} | plan.removed
    if changed:
        spark = (spark_factory or get_spark)(config.spark_master)
        with progress.stage("cells", f"{len(rewritten)} datasets"):
            version = _write_cells(config, spark, rewritten, changed)
            progress.say(f"  lake/cells at version {version}")
        with progress.stage("columns"):
            _write_columns(config, spark, plan, rewritten, changed)
    with progress.stage("catalog"):
        delta.write_arrow(config.table_path(DATASETS), catalog.to_arrow(plan.rows), operation="ingest")
    statuses = [r["status"] for r in plan.rows.values()]
    counts.update({s: statuses.count(s) for s in (catalog.ACTIVE, catalog.REMOVED, catalog.QUARANTINED)})
    counts["rewritten"] = len(rewritten)
    return IngestResult(changed, counts, {**plan.errors, **{d: plan.rows[d]["reason"] for d in plan.to_parse if plan.rows[d].get("reason")}})


def changed_since_published(config: LakeConfig) -> set[str]:
    """Datasets whose version or status differs between the catalog now and the latest published
    snapshot: what an index build must account for after crawls that each committed on their own."""
    current = catalog.load_datasets(config.table_path(DATASETS))
    try:
        published = snapshots.resolve(config)
        before = catalog.load_datasets(config.table_path(DATASETS), published.version_of(DATASETS))
    except snapshots.NoSnapshot:
        before = {}
    return {d for d, row in current.items() if (row["version"], row["status"]) != (before.get(d, {}).get("version"), before.get(d, {}).get("status"))}


def build_indexes(config: LakeConfig, changed: set[str] | None, progress: Progress, spark: SparkSession | None = None, families: tuple[str, ...] = FAMILIES) -> dict[str, int]:
    """Rebuild each family's index tables from the current cells when anything changed (or the
    family has never been built). ``changed=None`` derives the changed datasets from the catalog.
    Returns rows written per table."""
    changed = changed_since_published(config) if changed is None else changed
    written: dict[str, int] = {}
    if not delta.exists(config.table_path(COLUMNS)):
        progress.say("  nothing ingested yet: no index to build")
        return written
    for family in families:
        builder = _family_builder(family)
        if builder is None or (not changed and _family_built(config, family)):
            continue
        spark = spark or get_spark(config.spark_master)
        with progress.stage(f"index:{family}"):
            previous = _family_tables(config, spark, family) or None
            inputs, params = _family_inputs(config, spark, family, previous, changed)
            incremental = {"previous": previous, "changed": changed} if previous is not None else {}
            tables = builder.build_tables(spark, inputs, **incremental, **params)
            for name, frame in tables.items():
                path = config.table_path(f"index/{family}/{name}")
                schema = _arrow_schema(frame)
                spark_delta.write_table(frame, path, schema, replace="all", operation=f"index:{family}")
                written[f"index/{family}/{name}"] = delta.open_table(path).count()
    return written


def publish(config: LakeConfig, stats: dict[str, Any], progress: Progress) -> snapshots.Snapshot:
    with progress.stage("publish"):
        versions = snapshots.table_versions(config, _all_tables(config))
        snapshot = snapshots.publish(config, versions, stats)
    return snapshot


def run(config: LakeConfig, options: RunOptions, progress: Progress | None = None) -> dict[str, Any]:
    """The whole main job; returns the summary the CLI prints."""
    progress = progress or Progress(config.quiet)
    started = time.perf_counter()
    result = ingest(config, options, progress)
    index_rows = build_indexes(config, result.changed, progress, families=options.families)
    summary = _summary(config, result, index_rows)
    if options.publish:
        snapshot = publish(config, summary, progress)
        summary["snapshot_id"] = snapshot.snapshot_id
    summary["seconds"] = round(time.perf_counter() - started, 2)
    summary["stage_seconds"] = {k: round(v, 2) for k, v in progress.timings.items()}
    return summary


def _list_resources(config, sources, previous, options, progress):
    listed, failed = [], set()
    workdir = config.home / "downloads"
    workdir.mkdir(parents=True, exist_ok=True)
    for spec in sources:
        settings = {"allow_private_hosts": options.allow_private_hosts, "max_bytes": options.max_bytes, **options.source_options}
        source = open_source(spec, **settings)
        mine = {k: v for k, v in previous.items() if v["source"] == source.spec}
        try:
            listed.extend(source.resources(mine, workdir))
        except SourceUnavailable as error:
            failed.add(source.spec)
            progress.say(f"  source {source.spec} unavailable, its datasets are kept as they were: {error}")
    return listed, failed


def _parse(config: LakeConfig, spark: SparkSession, plan: catalog.Plan, options: RunOptions) -> list[dict[str, Any]]:
    """Parse, gate and drift-check the new or changed files on the executors; record the
    validations (``quality/validations``) and apply each outcome to the catalog plan."""
    suites = _baseline_suites(config)
    tasks = [
        ParseTask(
            d, str(r.local_path), r.format, plan.content_sha[d], str(config.raw_dir / f"{plan.content_sha[d]}.parquet"),
            options.max_bytes, (plan.rows[d]["version"] + 1) if d in plan.rows else 1, suites.get(d),
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
        if catalog.apply_parse_outcome(plan, outcome.dataset_id, outcome.ok, outcome.reason, outcome.rows, len(outcome.columns), staged):
            rewritten.append({"dataset_id": outcome.dataset_id, "content_sha256": plan.content_sha[outcome.dataset_id], "staged_path": staged, "names": outcome.columns, "rows": outcome.rows})
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


def _write_cells(config: LakeConfig, spark: SparkSession, rewritten: list[dict[str, Any]], changed: set[str]) -> int:
    staged = [{k: r[k] for k in ("dataset_id", "content_sha256", "staged_path")} for r in rewritten]
    tasks = cells_tasks(spark, staged) if staged else spark.createDataFrame([], "dataset_id string, content_sha256 string, staged_path string")
    return spark_delta.write_table(
        tasks, config.table_path(CELLS), CELLS_SCHEMA, partition_by=["dataset_id"], replace="partitions",
        replace_values=sorted(changed), operation="cells", produce=melt_staged,
    )


def _write_columns(config: LakeConfig, spark: SparkSession, plan: catalog.Plan, rewritten: list[dict[str, Any]], changed: set[str]) -> None:
    """Profile the rewritten datasets' columns; keep the other datasets' rows as they were."""
    from lakejoin.ids import column_id
    from lakejoin.spark.profile import profile_columns

    path = config.table_path(COLUMNS)
    kept = delta.read_arrow(path) if delta.exists(path) else None
    base_rows = [
        {"column_id": column_id(r["dataset_id"], r["content_sha256"], i), "dataset_id": r["dataset_id"], "ordinal": i, "name": name, "rows": r["rows"]}
        for r in rewritten
        for i, name in enumerate(r["names"])
    ]
    profiled = None
    if base_rows:
        base = spark.createDataFrame(base_rows, "column_id long, dataset_id string, ordinal int, name string, rows long")
        cells = spark_delta.read_table(spark, config.table_path(CELLS)).where(F.col("dataset_id").isin([r["dataset_id"] for r in rewritten]))
        profiled = profile_columns(spark, cells, base).toArrow()
    tables = []
    if kept is not None:
        tables.append(kept.filter(pa.compute.invert(pa.compute.is_in(kept["dataset_id"], pa.array(sorted(changed), pa.string())))))
    if profiled is not None:
        tables.append(profiled.select(kept.schema.names if kept is not None else profiled.schema.names).cast(kept.schema if kept is not None else profiled.schema))
    combined = pa.concat_tables(tables) if tables else COLUMNS_SCHEMA.empty_table()
    delta.write_arrow(path, combined, operation="columns")


def _family_builder(family: str):
    name = f"lakejoin.spark.{family}"
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def _family_built(config: LakeConfig, family: str) -> bool:
    return (config.home / "index" / family).exists() and any(delta.exists(p) for p in (config.home / "index" / family).iterdir())


def _family_cells(config: LakeConfig, spark: SparkSession, family: str) -> DataFrame:
    columns = spark_delta.read_table(spark, config.table_path(COLUMNS)).where(F.array_contains("indexed_by", family)).select("column_id")
    return spark_delta.read_table(spark, config.table_path(CELLS)).join(F.broadcast(columns), "column_id").select(CELLS_SCHEMA.names)


def _family_inputs(config: LakeConfig, spark: SparkSession, family: str, previous: dict | None, changed: set[str]) -> tuple[DataFrame, dict[str, Any]]:
    """What a family's build takes: the cells of the columns it indexes — for PEXESO, their
    distinct values embedded (only the changed datasets' when the build is incremental)."""
    cells = _family_cells(config, spark, family)
    if family != "pexeso":
        return cells, {}
    if previous is not None:
        cells = cells.where(F.col("dataset_id").isin(sorted(changed)))
    return _embedded_values(config, spark, cells, PEXESO_MODEL), {"model": PEXESO_MODEL}


def _embedded_values(config: LakeConfig, spark: SparkSession, cells: DataFrame, model: str) -> DataFrame:
    """One row per distinct (column, value) with its vector; values are embedded once per model
    (``embed/values`` caches them by value hash, and only misses are embedded)."""
    cache_path = config.table_path(EMBEDDINGS)
    cache = spark_delta.read_table(spark, cache_path) if delta.exists(cache_path) else None
    distinct = cells.select("dataset_id", "column_id", "value").distinct()
    vectors, new_cache = embed_values(spark, distinct.select("value"), model, cache)
    spark_delta.write_table(new_cache, cache_path, EMBEDDINGS_SCHEMA, replace="none", operation=f"embed:{model}")
    keyed = distinct.join(vectors.select("value", "vector"), "value")
    return keyed.withColumn("vector_id", F.xxhash64("column_id", "value")).select("dataset_id", "column_id", "vector_id", "value", "vector")


def _family_tables(config: LakeConfig, spark: SparkSession, family: str) -> dict[str, DataFrame]:
    folder = config.home / "index" / family
    if not folder.exists():
        return {}
    return {p.name: spark_delta.read_table(spark, p) for p in sorted(folder.iterdir()) if delta.exists(p)}


def _arrow_schema(frame: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema)


def _all_tables(config: LakeConfig) -> list[str]:
    tables = [DATASETS, CELLS, COLUMNS, VALIDATIONS, EMBEDDINGS]
    index_root = config.home / "index"
    if index_root.exists():
        tables += [f"index/{f.name}/{t.name}" for f in sorted(index_root.iterdir()) for t in sorted(f.iterdir()) if delta.exists(t)]
    return tables


def _summary(config: LakeConfig, result: IngestResult, index_rows: dict[str, int]) -> dict[str, Any]:
    cells_path = config.table_path(CELLS)
    columns_path = config.table_path(COLUMNS)
    return {
        "home": str(config.home),
        "spark_master": config.spark_master,
        "datasets": result.counts,
        "changed_datasets": len(result.changed),
        "columns": delta.open_table(columns_path).count() if delta.exists(columns_path) else 0,
        "cells": delta.open_table(cells_path).count() if delta.exists(cells_path) else 0,
        "index_rows": index_rows,
        "errors": dict(sorted(result.errors.items())[:50]),
    }
