"""Batch discovery on Spark: many queries against one pinned snapshot, one task per shard.

Three stages, none of which moves index data through the driver:

1. **Queries.** The driver resolves the query set (``resolve_queries``: a table file, a folder of
   tables, dataset ids, or ``all``: every column the family indexes, the lake against itself)
   into small descriptions; executors read each lake dataset's values from its staged copy and
   write the query table as Parquet beside the output (``_queries/<run>``).
2. **Shards.** One task per non-empty shard (per slice of the queries, when there are fewer
   shards than twice the cores: ``query_slices``) is handed the paths of its shard's data files and
   of the family's global tables (listed by the driver from the Delta log), loads that shard's
   searcher (``lakejoin.query.family.load_searcher``: the global tables, and what the family
   builds from them, once per Python worker, which Spark reuses across tasks) and asks it every
   query (``lakejoin.query.family.ask``). A shard file missing on disk is named before any task
   runs.
3. **Merge.** The parts are grouped by query and merged exactly
   (``lakejoin.query.family.merge``), turned into the API's result rows with the snapshot's
   catalog, and written as one Delta table (``OUTPUT_SCHEMA``) in one commit: a task retried by
   Spark contributes only its successful attempt's files, so no row is written twice.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.config import FAIL_DISCOVER_SHARD, LakeConfig
from lakejoin.index import registry
from lakejoin.index.shards import SHARD
from lakejoin.lake import delta, snapshots
from lakejoin.query.engine import check_params
from lakejoin.query.family import FamilyQuery, ask, family_query, load_columns, load_searcher, merge, results
from lakejoin.query.snapshot import LoadedSnapshot, load_snapshot
from lakejoin.query.tables import dataset_table, in_lake, read_table_file
from lakejoin.spark.delta import write_table

FAIL_FIRST_ATTEMPT_VARIABLE = FAIL_DISCOVER_SHARD.name  # a test fault switch
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".json", ".jsonl", ".ndjson", ".parquet")

OUTPUT_SCHEMA = pa.schema(
    [
        ("snapshot_id", pa.int64()),
        ("method", pa.string()),
        ("parameters", pa.string()),  # JSON: {"k", **params}, as `lakejoin search --json` reports them
        ("query_id", pa.int64()),
        ("query_dataset_id", pa.string()),  # null for a query table file
        ("query_table", pa.string()),
        ("query_columns", pa.list_(pa.string())),
        ("rank", pa.int32()),  # 0 on a query's error row
        ("dataset_id", pa.string()),
        ("table", pa.string()),
        ("columns", pa.list_(pa.string())),  # one for a column family, MATE's mapped columns
        ("column_ids", pa.list_(pa.int64())),
        ("score", pa.float64()),  # the family's ranking score (``IndexFamily.score``)
        ("result", pa.string()),  # JSON: the result exactly as `lakejoin search --json` gives it
        ("error", pa.string()),  # why this query gave no answer (e.g. no value after normalization)
    ]
)
QUERY_SCHEMA = pa.schema(
    [
        ("query_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("table", pa.string()),
        ("columns", pa.list_(pa.string())),
        ("own_columns", pa.int32()),
        ("staged_path", pa.string()),  # where an executor reads a lake dataset's values
        ("values", pa.list_(pa.list_(pa.string()))),  # a file's values, read by the driver
    ]
)


def discover(
    spark: SparkSession,
    config: LakeConfig,
    method: str,
    queries: str | Sequence[str],
    out: Path,
    *,
    k: int = 10,
    params: dict[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """Answer every query of ``queries`` with ``method`` on the snapshot (the latest published
    one by default) and write the ranked results as a Delta table at ``out``; returns a summary."""
    started = time.perf_counter()
    if method not in registry.search_families():
        raise ValueError(
            f"unknown method {method!r} for batch discovery; choose one of {', '.join(registry.search_families())}"
        )
    params = check_params(method, params or {})
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    loaded = load_snapshot(config, snapshots.resolve(config, snapshot_id))
    described = resolve_queries(loaded, method, queries, columns)
    if not described:
        raise ValueError(f"the query set {queries!r} is empty: no table or column to search with {method}")
    shard_files = _shard_files(loaded, method)
    run_id = uuid.uuid4().hex
    staging = Path(out).parent / f"_{Path(out).name}_queries" / run_id
    described_json = spark.sparkContext.parallelize(
        [(json.dumps(d),) for d in described], max(1, min(len(described) // 64, 64))
    )
    described_json.toDF("query string").mapInArrow(
        _read_values(str(config.home)), from_arrow_schema(QUERY_SCHEMA)
    ).write.parquet(str(staging))
    task = _AnswerShard(method, str(staging), k, params, FAIL_DISCOVER_SHARD.read())
    slices = query_slices(len(shard_files), len(described), spark.sparkContext.defaultParallelism)
    tasks = [(s, n, slices, json.dumps(f)) for s, f in shard_files.items() for n in range(slices)]
    shards = spark.sparkContext.parallelize(tasks, max(1, len(tasks)))
    parts = shards.toDF(f"{SHARD} int, slice int, slices int, files string").mapInArrow(
        task, "query_id long, part string"
    )
    grouped = parts.groupBy("query_id").agg(F.collect_list("part").alias("parts"))
    header = spark.read.parquet(str(staging)).drop("values", "staged_path")
    rows = grouped.join(header, "query_id")
    produce = _WriteAnswers(method, str(config.home), loaded.snapshot_id, k, params)
    version = write_table(rows, Path(out), OUTPUT_SCHEMA, operation=f"discover:{method}", produce=produce)
    shutil.rmtree(staging.parent, ignore_errors=True)
    return {
        "snapshot_id": loaded.snapshot_id,
        "method": method,
        "params": {"k": k, **params},
        "queries": len(described),
        "shards": len(shard_files),
        "out": str(out),
        "version": version,
        "rows": delta.row_count(Path(out), version),
        "seconds": round(time.perf_counter() - started, 2),
    }


def resolve_queries(
    loaded: LoadedSnapshot, family: str, spec: str | Sequence[str], columns: Sequence[str] | None
) -> list[dict[str, Any]]:
    """Query descriptions (``QUERY_SCHEMA`` rows) for ``spec``: ``"all"``, a table file, a folder
    of table files, or dataset ids (a list, or one comma-separated string). A column family
    searches each of ``columns`` (default: every column it indexes, every column of a file);
    MATE searches the composite key ``columns`` of every query table that has them all."""
    if registry.family(family).multi_column and not columns:
        raise ValueError(f"{family} searches a composite key: name its columns (--columns A,B)")
    described: list[dict[str, Any]] = []
    for table in _query_tables(loaded, spec):
        catalog_columns = loaded.columns_of(table["dataset_id"]) if table["dataset_id"] is not None else []
        names = (
            list(table["frame"])
            if table["frame"] is not None
            else [c.name for c in catalog_columns if columns or family in c.indexed_by]
        )
        own = sum(family in c.indexed_by for c in catalog_columns)
        for query_columns in _query_columns(family, names, columns):
            values = [table["frame"][c] for c in query_columns] if table["frame"] is not None else None
            described.append(
                {
                    "query_id": len(described),
                    "dataset_id": table["dataset_id"],
                    "table": table["table"],
                    "columns": query_columns,
                    "own_columns": own,
                    "staged_path": table["staged_path"],
                    "values": values,
                }
            )
    return described


def _query_tables(loaded: LoadedSnapshot, spec: str | Sequence[str]) -> list[dict[str, Any]]:
    if isinstance(spec, str) and spec == "all":
        ids = sorted(d for d, row in loaded.datasets.items() if row["status"] == "active")
    elif isinstance(spec, str) and _is_path(spec):
        path = Path(spec)
        files = (
            sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES)
            if path.is_dir()
            else [path]
        )
        return [_file_query(loaded, f) for f in files]
    else:
        ids = [d.strip() for d in spec.split(",")] if isinstance(spec, str) else list(spec)
        ids = [d for d in ids if d]
    return [_dataset_query(loaded, d) for d in ids]


def _is_path(spec: str) -> bool:
    """Whether ``spec`` names a file or folder (a long list of dataset ids is no file name)."""
    try:
        return Path(spec).exists()
    except OSError:
        return False


def _file_query(loaded: LoadedSnapshot, path: Path) -> dict[str, Any]:
    """A table file as a query; a file with a lake dataset's bytes is that dataset (not its own result)."""
    table = in_lake(loaded, read_table_file(path))
    return {
        "dataset_id": table.dataset_id,
        "table": table.name,
        "staged_path": None,
        "frame": {c: table.column_values(c) for c in table.table.column_names},
    }


def _dataset_query(loaded: LoadedSnapshot, dataset_id: str) -> dict[str, Any]:
    row = loaded.dataset(dataset_id)  # a clear error for an unknown or inactive dataset
    if not row.get("staged_path"):
        raise LookupError(f"dataset {dataset_id!r} has no staged copy")
    return {
        "dataset_id": dataset_id,
        "table": row.get("title") or dataset_id,
        "staged_path": row["staged_path"],
        "frame": None,
    }


def _query_columns(family: str, names: list[str], columns: Sequence[str] | None) -> list[list[str]]:
    if registry.family(family).multi_column and columns:  # always true: the caller refuses a key without columns
        return [list(columns)] if set(columns) <= set(names) else []
    return [[c] for c in names if not columns or c in columns]


def query_slices(shards: int, queries: int, cores: int) -> int:
    """Into how many slices each shard's queries are cut, one task per (shard, slice): one,
    unless there are fewer shards than twice the cores, so that every core gets tasks (each
    slice's task loads the shard again; the index's global part is loaded once per worker)."""
    return max(1, min(queries, -(-2 * cores // max(shards, 1))))


def _shard_files(loaded: LoadedSnapshot, family: str) -> dict[int, dict[str, Any]]:
    """Per non-empty shard, what its task reads: every index table's files (the sharded tables'
    of that shard, the global tables' all), with their schema and partition columns."""
    if not loaded.index_tables_of(family):
        raise LookupError(
            f"snapshot {loaded.snapshot_id} has no {family} index (built families: "
            f"{', '.join(loaded.families()) or 'none'})"
        )
    manifest = loaded.manifest(family)
    if manifest is None:
        raise LookupError(
            f"the {family} index of snapshot {loaded.snapshot_id} is not sharded; rebuild it with `lakejoin run`"
        )
    shards = sorted(s for s, rows in manifest.shard_rows.items() if sum(rows.values()) > 0)
    tables = {}
    for name in loaded.index_tables_of(family):
        opened = loaded.open(f"index/{family}/{name}")
        partition_columns = opened.metadata().partition_columns
        by_shard = {
            s: delta.files_of(opened, {SHARD: [s]}) if SHARD in partition_columns else delta.files_of(opened)
            for s in shards
        }
        for shard, files in by_shard.items():
            for uri in files:
                if _missing_locally(uri):
                    raise FileNotFoundError(
                        f"shard {shard} of index/{family}/{name} in snapshot {loaded.snapshot_id}: data file {uri} is "
                        "missing on disk (deleted by hand, or vacuumed while pinned?)"
                    )
        tables[name] = {
            "path": str(loaded.config.table_path(f"index/{family}/{name}")),
            "schema": pa.schema(opened.schema().to_arrow()).serialize().to_pybytes().hex(),
            "partition_columns": partition_columns,
            "by_shard": by_shard,
        }
    return {
        s: {
            name: {**{k: v for k, v in t.items() if k != "by_shard"}, "files": t["by_shard"][s]}
            for name, t in tables.items()
        }
        for s in shards
    }


def _missing_locally(uri: str) -> bool:
    """A local data file that is not on disk (object-store URIs are not checked here)."""
    path = uri.removeprefix("file://")
    return "://" not in path and not Path(path).exists()


def _read_values(home: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Executor side of stage 1: each lake dataset's query column values from its staged copy."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [json.loads(text) for text in batch.column("query").to_pylist()]
            for row in rows:
                if row["values"] is None:
                    staged = Path(row["staged_path"])
                    table = pq.read_table(
                        staged if staged.is_absolute() else Path(home) / staged, columns=row["columns"]
                    )
                    row["values"] = [table.column(c).cast(pa.string()).to_pylist() for c in row["columns"]]
            yield pa.RecordBatch.from_pylist(rows, QUERY_SCHEMA)

    return read


class _AnswerShard:
    """Executor side of stage 2: one shard's searcher, asked every query."""

    def __init__(self, family: str, staging: str, k: int, params: dict[str, Any], fail_shard: str | None) -> None:
        self.family, self.staging, self.k, self.params, self.fail_shard = family, staging, k, params, fail_shard

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = (batch.column(name).to_pylist() for name in (SHARD, "slice", "slices", "files"))
            for shard, part, slices, files in zip(*columns):
                yield from self._answer(shard, part, slices, json.loads(files))

    def _answer(self, shard: int, part: int, slices: int, files: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        if self.fail_shard == str(shard) and context is not None and context.attemptNumber() == 0:
            raise RuntimeError(
                f"{FAIL_FIRST_ATTEMPT_VARIABLE}={shard}: failing this task's first attempt on purpose (test)"
            )
        sharded = {name for name, t in files.items() if SHARD in t["partition_columns"]}
        global_names = sorted(set(files) - sharded)
        columns = load_columns(self.family)
        key = (
            self.family,
            tuple((name, *files[name]["files"]) for name in global_names),
        )  # Delta data files are immutable
        tables = {name: _read(files[name], columns.get(name)) for name in sharded}
        searcher = load_searcher(
            self.family, tables, global_names, lambda name: _read(files[name], columns.get(name)), key
        )
        ids, parts = [], []
        for query_id, asked in _staged_queries(
            self.staging, self.family, self.k, json.dumps(self.params, sort_keys=True)
        )[part::slices]:
            try:
                answer: Any = ask(searcher, asked)
            except ValueError as error:  # this query cannot be searched (e.g. no value left): said once per query
                answer = {"error": str(error)}
            ids.append(query_id)
            parts.append(json.dumps(answer, default=_plain))
        yield pa.RecordBatch.from_pydict({"query_id": pa.array(ids, pa.int64()), "part": pa.array(parts, pa.string())})


@lru_cache(maxsize=2)
def _staged_queries(staging: str, family: str, k: int, params: str) -> list[tuple[int, FamilyQuery]]:
    """The job's staged queries, prepared once per Python worker (Spark reuses workers across
    tasks): every shard's task asks all of them, and PEXESO embeds each query once here."""
    return [
        (
            row["query_id"],
            family_query(
                family,
                row["columns"],
                row["values"],
                k,
                json.loads(params),
                dataset_id=row["dataset_id"],
                own_columns=row["own_columns"],
            ),
        )
        for row in pq.read_table(staging).to_pylist()
    ]


def _read(table: dict[str, Any], columns: list[str] | None) -> pa.Table:
    """One index table's rows (only ``columns`` if given) from the data files the driver listed
    for a task."""
    return delta.read_files(
        table["path"],
        table["files"],
        pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(table["schema"]))),
        table["partition_columns"],
        columns,
    )


class _WriteAnswers:
    """Executor side of stage 3: each query's parts merged and turned into output rows."""

    def __init__(self, family: str, home: str, snapshot_id: int, k: int, params: dict[str, Any]) -> None:
        self.family, self.home, self.snapshot_id, self.k, self.params = family, home, snapshot_id, k, params

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        catalog = _catalog(self.home, self.snapshot_id)
        parameters = json.dumps({"k": self.k, **self.params})
        for batch in batches:
            out = [r for row in batch.to_pylist() for r in self._rows(catalog, row)]
            yield pa.RecordBatch.from_pylist(
                [{**r, "snapshot_id": self.snapshot_id, "method": self.family, "parameters": parameters} for r in out],
                OUTPUT_SCHEMA,
            )

    def _rows(self, catalog: LoadedSnapshot, row: dict[str, Any]) -> list[dict[str, Any]]:
        query = {
            "query_id": row["query_id"],
            "query_dataset_id": row["dataset_id"],
            "query_table": row["table"],
            "query_columns": row["columns"],
        }
        parts = [json.loads(p) for p in row["parts"]]
        errors = [p["error"] for p in parts if isinstance(p, dict)]
        if errors:
            return [{**query, "rank": 0, "error": errors[0]}]
        asked = family_query(
            self.family,
            row["columns"],
            [[] for _ in row["columns"]],
            self.k,
            self.params,
            dataset_id=row["dataset_id"],
            own_columns=row["own_columns"],
        )
        found = results(catalog, asked, merge(asked, parts))
        return [
            {
                **query,
                "rank": rank,
                "dataset_id": r["dataset_id"],
                "table": r["table"],
                "columns": r["column"] if isinstance(r["column"], list) else [r["column"]],
                "column_ids": r["column_id"] if isinstance(r["column_id"], list) else [r["column_id"]],
                "score": registry.family(self.family).score(r),
                "result": json.dumps({"rank": rank, **r}, default=_plain),
            }
            for rank, r in enumerate(found, 1)
        ]


@cache
def _catalog(home: str, snapshot_id: int) -> LoadedSnapshot:
    """The snapshot's catalog, read once per executor process."""
    config = LakeConfig(home=Path(home))
    return load_snapshot(config, snapshots.resolve(config, snapshot_id))


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def read_answers(out: Path) -> list[dict[str, Any]]:
    """The output table's rows, by query then rank (for the CLI's ``--spark`` and tests)."""
    table = delta.read_arrow(Path(out)).sort_by([("query_id", "ascending"), ("rank", "ascending")])
    return table.to_pylist()


def search_on_spark(
    spark: SparkSession,
    config: LakeConfig,
    method: str,
    columns: list[str],
    *,
    table_file: str | None = None,
    dataset_id: str | None = None,
    k: int = 10,
    params: dict[str, Any] | None = None,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """One query (a table file or a lake dataset, as ``lakejoin search`` takes it) through batch
    discovery, answered in ``QueryEngine.search``'s shape plus where it ran (``"spark"``)."""
    if (table_file is None) == (dataset_id is None):
        raise ValueError("give the query as exactly one of a table file or a dataset_id")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="search-", dir=config.home) as folder:  # executors see the lake home
        summary = discover(
            spark,
            config,
            method,
            table_file or dataset_id or "",
            Path(folder) / "answers",
            k=k,
            params=params,
            columns=columns,
            snapshot_id=snapshot_id,
        )
        rows = read_answers(Path(folder) / "answers")
    errors = [r["error"] for r in rows if r["error"]]
    if errors:
        raise ValueError(errors[0])
    loaded = load_snapshot(config, snapshots.resolve(config, summary["snapshot_id"]))
    query = in_lake(loaded, read_table_file(table_file)) if table_file else dataset_table(loaded, dataset_id or "")
    return {
        "snapshot_id": summary["snapshot_id"],
        "method": method,
        "query": query.describe(columns),
        "params": summary["params"],
        "results": [json.loads(r["result"]) for r in rows],
        "spark": {"master": spark.sparkContext.master, "shards": summary["shards"]},
        "seconds": round(time.perf_counter() - started, 4),
    }
