"""Index builds shard by shard: what changed, which shards it touches, one commit per table.

For each family (``lakejoin.index`` states the contract its build module follows):

1. *Plan* (:func:`plan_family`). The family's manifest (``lakejoin.lake.manifest``) names the
   catalog version its index reflects; the datasets whose version or status differs from it now
   are the *changed* ones, and the shards holding them are rewritten. A full build replaces every
   shard instead when the family was never built sharded, its last build was interrupted
   (manifest ``pending``), or its staleness passed the family's limit.
2. *Inputs*. An incremental build reads only the changed datasets' cells (partition pruning on
   ``lake/cells``, partitioned by dataset) and only the rewritten shards of the family's sharded
   tables (partition pruning on ``shard``); global tables are read whole (they are small).
3. *Write*. Each sharded table is repartitioned by shard (one file per shard) and the rewritten
   shards' partitions are swapped in one Delta commit (add + remove actions), as ``lake/cells``
   swaps a dataset; global tables are replaced (or appended to) in one commit each; the manifest
   is committed ``pending`` before the first table and ``complete`` after the last.

*Where a build runs.* A Spark job costs about half a second to a second however little it
does, and a family's build on Spark is two to three dozen jobs (reads, broadcasts, shuffle
stages, one write per table), on a session that takes seconds to start. So a build whose rows
number at most :func:`local_build_rows` runs in this process instead — an incremental build's
rows are the rewritten shards' rows (the manifest counts them) plus the changed datasets'
cells, a full build's the lake's cells: delta-rs reads the same (pruned) partitions into Arrow,
the family's in-memory twin of its Spark build (``build_tables`` or ``update_tables``,
``lakejoin.index.contract``; the family tests hold them equal) computes the same tables, and
:func:`lakejoin.lake.delta.write_rows` writes one file per shard in one commit per table,
exactly as the Spark writer does. Builds past the limit run on Spark. Staleness is read from
the global tables as Arrow either way.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from lakejoin.config import LOCAL_BUILD_ROWS as LOCAL_BUILD_ROWS_SETTING
from lakejoin.config import LakeConfig
from lakejoin.embed import PEXESO_MODEL, embed, value_hash
from lakejoin.index.contract import IndexFamily
from lakejoin.index.shards import MANIFEST, SHARD, choose_shard_count, shards_of
from lakejoin.lake import catalog, delta
from lakejoin.lake.manifest import COMPLETE, PENDING, Manifest, read_manifest, rows_per_shard, write_manifest
from lakejoin.lake.schemas import (
    CELLS,
    CELLS_SCHEMA,
    COLUMNS,
    DATASETS,
    EMBEDDINGS,
    EMBEDDINGS_LAYOUT,
    EMBEDDINGS_SCHEMA,
)
from lakejoin.pause import pause_point
from lakejoin.progress import Progress
from lakejoin.spark import delta as spark_delta
from lakejoin.spark.builders import SparkBuild
from lakejoin.spark.embed import embed_values, vector_array
from lakejoin.spark.shards import column_values

# An incremental build of at most this many rows runs in this process (module docstring).
LOCAL_BUILD_ROWS = LOCAL_BUILD_ROWS_SETTING.default
LOCAL_BUILD_ROWS_ENV = LOCAL_BUILD_ROWS_SETTING.name


@dataclass
class FamilyPlan:
    """What one family's build will do."""

    family: str
    full: bool
    reason: str  # why a full build, or "incremental"
    n_shards: int
    changed: set[str] = field(default_factory=set)  # dataset ids (incremental builds)
    catalog_version: int | None = None
    manifest: Manifest | None = None  # the family's manifest when planned (None: never built sharded)
    local: bool = False  # a small build, run in this process (module docstring)

    @property
    def rewritten(self) -> list[int]:
        """The shards the build writes: every one in a full build, else those holding a changed dataset."""
        return list(range(self.n_shards)) if self.full else shards_of(self.changed, self.n_shards)

    @property
    def idle(self) -> bool:
        """Whether there is nothing to build: an incremental build without a changed dataset."""
        return not self.full and not self.changed


@dataclass
class FamilyBuild:
    """What one family's build did (the run summary and the DAG's task result show it)."""

    family: str
    full: bool
    reason: str
    n_shards: int
    rewritten: list[int]
    changed_datasets: int
    rows: dict[str, int]  # rows per table after the build
    staleness: float
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The build as the run summary and the DAG's task result show it, JSON-ready."""
        return {
            "family": self.family,
            "build": "full" if self.full else "incremental",
            "reason": self.reason,
            "n_shards": self.n_shards,
            "shards_rewritten": self.rewritten,
            "changed_datasets": self.changed_datasets,
            "rows": self.rows,
            "staleness": round(self.staleness, 4),
            "seconds": round(self.seconds, 2),
        }


def plan_family(config: LakeConfig, family: str, builder: SparkBuild, shards: int | None = None) -> FamilyPlan:
    """Decide between a full and an incremental build, and what changed (see the module docstring).

    ``shards`` sets the shard count of a first (or unsharded-layout) build; afterwards the count is
    the one the manifest keeps.
    """
    plan = _plan(config, family, builder, shards)
    plan.local = in_process(config, plan)
    return plan


def _plan(config: LakeConfig, family: str, builder: SparkBuild, shards: int | None) -> FamilyPlan:
    catalog_version = delta.current_version(config.table_path(DATASETS))
    manifest = read_manifest(config.home, family)
    if manifest is None:
        first = not any(delta.exists(p) for p in _table_dirs(config, family))
        n_shards = shards or choose_shard_count(_lake_cells(config))
        return FamilyPlan(
            family, True, "first build" if first else "unsharded layout", n_shards, catalog_version=catalog_version
        )
    if not manifest.complete:
        return FamilyPlan(
            family,
            True,
            "last build interrupted",
            manifest.n_shards,
            catalog_version=catalog_version,
            manifest=manifest,
        )
    if manifest.staleness > builder.family.staleness_limit:
        reason = f"stale ({manifest.staleness:.3f} > {builder.family.staleness_limit})"
        return FamilyPlan(family, True, reason, manifest.n_shards, catalog_version=catalog_version, manifest=manifest)
    changed = changed_datasets(config, manifest.catalog_version)
    return FamilyPlan(family, False, "incremental", manifest.n_shards, changed, catalog_version, manifest)


def changed_datasets(config: LakeConfig, since_version: int | None) -> set[str]:
    """Datasets whose version or status differs between ``catalog/datasets`` now and at ``since_version``."""
    path = config.table_path(DATASETS)
    now = _states(catalog.load_datasets(path))
    before = _states(catalog.load_datasets(path, since_version)) if since_version is not None else {}
    return {d for d in set(now) | set(before) if now.get(d) != before.get(d)}


def _states(datasets: dict[str, dict[str, Any]]) -> dict[str, tuple[int, str]]:
    return {d: (row["version"], row["status"]) for d, row in datasets.items()}


def build_family(
    config: LakeConfig,
    spark: SparkSession | None,
    plan: FamilyPlan,
    builder: SparkBuild,
    build_id: str,
    progress: Progress,
) -> FamilyBuild:
    """Run ``plan``: build the family's tables and write them shard by shard."""
    started = time.perf_counter()
    family, rewritten, previous_manifest = plan.family, plan.rewritten, plan.manifest
    progress.say(
        f"  {family}: {'full build (' + plan.reason + ')' if plan.full else 'incremental'}, {len(plan.changed)} "
        f"changed dataset(s), {len(rewritten)} of {plan.n_shards} shard(s) to write"
    )
    write_manifest(
        config.home,
        family,
        _manifest(plan, previous_manifest, PENDING, build_id, {}, 0.0),
        operation=f"index:{family}:pending",
    )
    if plan.local:
        progress.say(f"  {family}: {'a small lake' if plan.full else 'a small update'}, built in this process")
        tables = _build_in_process(config, plan, builder)
    elif spark is None:
        raise ValueError(f"{family}: a build on Spark needs a Spark session")
    else:
        tables = _build_on_spark(config, spark, plan, builder)
    global_tables = {
        n: delta.read_arrow(config.table_path(f"index/{family}/{n}")) for n in builder.family.global_tables
    }
    staleness = 0.0 if not global_tables else float(builder.family.staleness(global_tables))
    shard_rows = _shard_rows(config, family, tables, builder.family.global_tables)
    write_manifest(
        config.home,
        family,
        _manifest(plan, previous_manifest, COMPLETE, build_id, shard_rows, staleness),
        operation=f"index:{family}",
    )
    rows = {
        n: delta.open_table(config.table_path(f"index/{family}/{n}")).count()
        if n in builder.family.global_tables
        else sum(r.get(n, 0) for r in shard_rows.values())
        for n in tables
    }
    return FamilyBuild(
        family,
        plan.full,
        plan.reason,
        plan.n_shards,
        rewritten,
        len(plan.changed),
        rows,
        staleness,
        time.perf_counter() - started,
    )


def _build_on_spark(config: LakeConfig, spark: SparkSession, plan: FamilyPlan, builder: SparkBuild) -> list[str]:
    """Build and write the family's tables with Spark; the names of the tables written."""
    if plan.full and builder.write_full_build is not None:  # executor tasks read the cell files, write by shard
        return list(builder.write_full_build(spark, config, plan.n_shards))
    previous = (
        None if plan.full else family_tables(config, spark, plan.family, builder.family.global_tables, plan.rewritten)
    )
    inputs, params = family_inputs(config, spark, builder.family, None if plan.full else plan.changed, plan.n_shards)
    # Read several times by the build: the changed datasets' rows (small), and PEXESO's embedded
    # distinct values, which would otherwise re-read and re-deduplicate the cells each time.
    if not plan.full or builder.family.embeds:
        inputs = inputs.persist(StorageLevel.MEMORY_AND_DISK)
    incremental = {} if plan.full else {"previous": previous, "changed": plan.changed}
    try:
        tables = builder.build_tables(spark, inputs, n_shards=plan.n_shards, **incremental, **params)
        for name, frame in tables.items():
            _write(config, plan.family, name, frame, plan, builder)
            pause_point("index", plan.family)
    finally:
        inputs.unpersist()
    return list(tables)


def local_build_rows() -> int:
    """The most rows a build may have to run in this process (module docstring)."""
    return LOCAL_BUILD_ROWS_SETTING.read()


def in_process(config: LakeConfig, plan: FamilyPlan) -> bool:
    """Whether ``plan`` is small enough to run in this process: a full build of a lake of at
    most :func:`local_build_rows` cells that holds a value the family indexes (a family with
    nothing to index builds its empty tables on Spark), or an incremental build whose rewritten
    shards' rows (as the manifest counts them) plus the changed datasets' cells are as few."""
    limit = local_build_rows()
    if plan.full:
        lake_cells = _lake_cells(config)
        if not 0 < lake_cells <= limit:
            return False
        return _holds_indexed_value(config, plan.family)
    if plan.manifest is None:
        return False
    rows = sum(sum(plan.manifest.shard_rows.get(s, {}).values()) for s in plan.rewritten)
    if rows > limit:
        return False
    changed_cells = (
        delta.row_count(config.table_path(CELLS), partitions={"dataset_id": plan.changed}) if plan.changed else 0
    )
    return changed_cells is not None and rows + changed_cells <= limit


def _holds_indexed_value(config: LakeConfig, family: str) -> bool:
    """Whether a column ``family`` indexes has a value, from the catalog's profiles (``count``: its
    non-null cells), not from the cells, which the build then reads."""
    columns = delta.read_arrow(config.table_path(COLUMNS), columns=["indexed_by", "count"])
    indexed_by = columns["indexed_by"].combine_chunks()
    rows = pc.list_parent_indices(indexed_by).filter(pc.equal(pc.list_flatten(indexed_by), family))
    return bool(pc.any(pc.greater(columns["count"].take(rows), 0)).as_py())


def _build_in_process(config: LakeConfig, plan: FamilyPlan, builder: SparkBuild) -> list[str]:
    """The build on Arrow (the family's ``build_tables`` or ``update_tables``), written as the
    Spark path writes it: every shard replaced (a full build) or the rewritten shards'
    partitions swapped, global tables replaced or appended to; the names of the tables written."""
    family = builder.family
    previous = {} if plan.full else _previous_tables(config, plan, family)
    cells = _indexed_cells(config, family.name, None if plan.full else plan.changed)
    inputs = _embedded_in_process(config, cells, PEXESO_MODEL, previous.get("mapped")) if family.embeds else cells
    if plan.full:
        tables = family.build_tables(inputs, n_shards=plan.n_shards, **_build_params(family))
    else:
        tables = family.update_tables(inputs, n_shards=plan.n_shards, previous=previous, changed=plan.changed)
    for name, table in tables.items():
        path, operation = config.table_path(f"index/{family.name}/{name}"), f"index:{family.name}"
        schema = previous[name].schema if name in previous else table.schema
        if name in family.global_tables:
            append = not plan.full and name in family.append_tables
            delta.write_rows(path, table, schema, replace="none" if append else "all", operation=operation)
        else:
            delta.write_rows(
                path,
                table,
                schema,
                partition_by=[SHARD],
                replace="all" if plan.full else "partitions",
                replace_values=[str(s) for s in plan.rewritten],
                operation=operation,
            )
        pause_point("index", family.name)
    return list(tables)


def _previous_tables(config: LakeConfig, plan: FamilyPlan, family: IndexFamily) -> dict[str, pa.Table]:
    """What an incremental build starts from: the global tables whole, the sharded ones cut to
    the rewritten shards."""
    return {
        path.name: delta.read_arrow(
            path, partitions=None if path.name in family.global_tables else {SHARD: plan.rewritten}
        )
        for path in _table_dirs(config, plan.family)
        if path.name != MANIFEST and delta.exists(path)
    }


def _indexed_cells(config: LakeConfig, family: str, datasets: Collection[str] | None) -> pa.Table:
    """The ``lake/cells`` rows of the columns ``family`` indexes, of ``datasets`` (None: all)."""
    if datasets is not None and not datasets:
        return CELLS_SCHEMA.empty_table()
    path = config.table_path(CELLS)
    cells = delta.read_arrow(path, partitions={"dataset_id": datasets} if datasets is not None else None)
    return cells.filter(pc.is_in(cells["column_id"], value_set=_indexed_columns(config, family, datasets)))


def _build_params(family: IndexFamily) -> dict[str, Any]:
    """What a family's build takes beside its inputs and shard count: PEXESO's embedding model."""
    return {"model": PEXESO_MODEL} if family.embeds else {}


def _indexed_columns(config: LakeConfig, family: str, datasets: Collection[str] | None) -> pa.Array:
    """The ids of the columns of ``datasets`` (None: all) that ``family`` indexes
    (``catalog/columns.indexed_by``)."""
    if datasets is not None and not datasets:
        return pa.array([], pa.int64())
    wanted = pc.field("dataset_id").isin(sorted(datasets)) if datasets is not None else None
    columns = delta.read_arrow(config.table_path(COLUMNS), columns=["column_id", "indexed_by"], filter=wanted)
    indexed_by = columns["indexed_by"].combine_chunks()
    hits = pc.equal(pc.list_flatten(indexed_by), family)
    rows = pc.list_parent_indices(indexed_by).filter(hits)
    return pc.unique(columns["column_id"].take(rows)).cast(pa.int64())


def _embedded_in_process(config: LakeConfig, cells: pa.Table, model: str, mapped: pa.Table | None = None) -> pa.Table:
    """:func:`embedded_values` in this process: the changed datasets' distinct (column, value)
    rows with their vectors — taken from the rewritten shards' ``mapped`` rows where a value is
    already indexed there (a changed dataset's unchanged values), else from ``embed/values``
    where cached, else embedded here (and appended to the cache)."""
    distinct = cells.filter(pc.is_valid(cells["value"])).group_by(["dataset_id", "column_id", "value"]).aggregate([])
    hashes = {v: value_hash(v) for v in pc.unique(distinct["value"]).to_pylist()}
    vectors = _indexed_vectors(mapped, set(hashes.values()))
    vectors.update(_cached_vectors(config, model, {h for h in hashes.values() if h not in vectors}))
    misses = [v for v, h in hashes.items() if h not in vectors]
    if misses:
        embedded = vector_array(embed(misses, model))
        rows = pa.table(
            {"model": [model] * len(misses), "value_hash": [hashes[v] for v in misses], "vector": embedded},
            schema=EMBEDDINGS_SCHEMA,
        )
        delta.write_rows(
            config.table_path(EMBEDDINGS),
            rows,
            EMBEDDINGS_SCHEMA,
            replace="none",
            operation=f"embed:{model}",
            layout=EMBEDDINGS_LAYOUT,
        )
        vectors.update(zip((hashes[v] for v in misses), embedded.to_pylist()))
    texts = distinct["value"].to_pylist()
    return pa.table(
        {
            "dataset_id": distinct["dataset_id"],
            "column_id": distinct["column_id"],
            "vector_id": pa.array([vector_id(hashes[v]) for v in texts], pa.int64()),
            "value": distinct["value"],
            "vector": pa.array([vectors[hashes[v]] for v in texts], pa.list_(pa.float32())),
        }
    )


def _indexed_vectors(mapped: pa.Table | None, hashes: set[str]) -> dict[str, list[float]]:
    """The vectors of ``hashes`` that PEXESO's ``mapped`` rows already hold (value hash ->
    vector). A lookup in ``embed/values`` reads a 64-row group per value, so a changed
    dataset's values are cheaper here: its shard's old rows are read anyway."""
    if mapped is None or not hashes or not mapped.num_rows:
        return {}
    by_id = {vector_id(h): h for h in hashes}
    held = mapped.filter(pc.is_in(mapped["vector_id"], value_set=pa.array(list(by_id), pa.int64())))
    return {by_id[i]: v for i, v in zip(held["vector_id"].to_pylist(), held["vector"].to_pylist())}


def _cached_vectors(config: LakeConfig, model: str, hashes: set[str]) -> dict[str, list[float]]:
    """The cached ``embed/values`` vectors of ``hashes`` (value hash -> vector)."""
    path = config.table_path(EMBEDDINGS)
    if not hashes or not delta.exists(path):
        return {}
    cached = delta.read_matching(path, "value_hash", hashes, columns=["model", "value_hash", "vector"])
    cached = cached.filter(pc.equal(cached["model"], model))
    return dict(zip(cached["value_hash"].to_pylist(), cached["vector"].to_pylist()))


def vector_id(hex_hash: str) -> int:
    """A value's PEXESO ``vector_id``: the first 60 bits of its ``embed/values`` hash (unique
    within a column but for a 2^-60 chance; the Spark build computes the same from ``sha2``)."""
    return int(hex_hash[:15], 16)


def family_tables(
    config: LakeConfig, spark: SparkSession, family: str, global_tables: frozenset[str], shards: list[int]
) -> dict[str, DataFrame]:
    """The family's current tables: sharded ones pruned to ``shards``, global ones whole."""
    return {
        path.name: spark_delta.read_table(
            spark, path, partitions=None if path.name in global_tables else {SHARD: shards}
        )
        for path in _table_dirs(config, family)
        if path.name != MANIFEST and delta.exists(path)
    }


def family_inputs(
    config: LakeConfig, spark: SparkSession, family: IndexFamily, changed: set[str] | None, n_shards: int
) -> tuple[DataFrame, dict[str, Any]]:
    """What a family's build takes: the cells of the columns it indexes — for a full build each
    column's distinct values (``lakejoin.spark.shards.column_values``; the families that get
    here in full, JOSIE, q-gram and PEXESO, read a column as a set of values), for an
    incremental one the ``changed`` datasets' cells; for PEXESO, the distinct values embedded."""
    if changed is None:
        cells = column_values(spark, config, n_shards, family.name)
    else:
        columns = (
            spark_delta.read_table(spark, config.table_path(COLUMNS))
            .where(F.array_contains("indexed_by", family.name))
            .select("column_id")
        )
        cells = (
            spark_delta.read_table(spark, config.table_path(CELLS), partitions={"dataset_id": changed})
            .join(F.broadcast(columns), "column_id")
            .select(CELLS_SCHEMA.names)
        )
    if not family.embeds:
        return cells, {}
    return embedded_values(config, spark, cells, PEXESO_MODEL), _build_params(family)


def embedded_values(config: LakeConfig, spark: SparkSession, cells: DataFrame, model: str) -> DataFrame:
    """One row per distinct (column, value) with its vector; values are embedded once per model
    (``embed/values`` caches them by value hash, and only misses are embedded)."""
    cache_path = config.table_path(EMBEDDINGS)
    cache = spark_delta.read_table(spark, cache_path) if delta.exists(cache_path) else None
    distinct = cells.select("dataset_id", "column_id", "value").distinct()
    vectors, new_cache = embed_values(spark, distinct.select("value"), model, cache)
    spark_delta.write_table(
        new_cache, cache_path, EMBEDDINGS_SCHEMA, replace="none", operation=f"embed:{model}", layout=EMBEDDINGS_LAYOUT
    )
    keyed = distinct.join(vectors.select("value", "value_hash", "vector"), "value")
    vector_ids = F.conv(F.substring("value_hash", 1, 15), 16, 10).cast("long")  # as vector_id() computes it
    return keyed.withColumn("vector_id", vector_ids).select("dataset_id", "column_id", "vector_id", "value", "vector")


def _write(config: LakeConfig, family: str, name: str, frame: DataFrame, plan: FamilyPlan, builder: SparkBuild) -> None:
    path = config.table_path(f"index/{family}/{name}")
    schema = to_arrow_schema(frame.schema)
    operation = f"index:{family}"
    if name in builder.family.global_tables:
        append = not plan.full and name in builder.family.append_tables
        spark_delta.write_table(frame, path, schema, replace="none" if append else "all", operation=operation)
        return
    if SHARD not in frame.columns:
        raise ValueError(f"index/{family}/{name} is not a global table of {family} but has no {SHARD!r} column")
    # One task per shard, so each rewritten shard becomes one file.
    spark_delta.write_table(
        frame.repartition(SHARD),
        path,
        schema,
        partition_by=[SHARD],
        replace="all" if plan.full else "partitions",
        replace_values=[str(s) for s in plan.rewritten],
        operation=operation,
    )


def _shard_rows(
    config: LakeConfig, family: str, tables: Collection[str], global_tables: frozenset[str]
) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for name in tables:
        if name not in global_tables:
            for shard, rows in rows_per_shard(config.table_path(f"index/{family}/{name}")).items():
                counts.setdefault(shard, {})[name] = rows
    return counts


def _manifest(
    plan: FamilyPlan,
    previous: Manifest | None,
    state: str,
    build_id: str,
    shard_rows: dict[int, dict[str, int]],
    staleness: float,
) -> Manifest:
    kept = previous if previous is not None and not plan.full else None  # the shards this build keeps
    builds = dict(kept.shard_builds) if kept is not None else {}
    builds.update(dict.fromkeys(plan.rewritten, build_id))
    return Manifest(
        n_shards=plan.n_shards,
        catalog_version=plan.catalog_version if state == COMPLETE else (previous.catalog_version if previous else None),
        state=state,
        full_build_id=build_id if plan.full else previous.full_build_id,  # type: ignore[union-attr]
        staleness=staleness if state == COMPLETE else (kept.staleness if kept is not None else 0.0),
        shard_rows=shard_rows,
        shard_builds=builds,
    )


def _lake_cells(config: LakeConfig) -> int:
    path = config.table_path(CELLS)
    return (delta.row_count(path) or 0) if delta.exists(path) else 0


def _table_dirs(config: LakeConfig, family: str) -> list:
    folder = config.home / "index" / family
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []
