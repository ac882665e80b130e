"""One family's query: asked of any searcher (the whole index, or one shard), merged exactly, and
turned into the result rows the CLI, the REST API and batch discovery return.

The three steps are separate so that every way of serving an index gives the same answer:

- :func:`family_query` reads the query's values once (PEXESO embeds them once, on first use);
- :func:`ask` runs the family's searcher on it and returns a *part*: the searcher's raw results
  (LSH Ensemble: its threshold steps), JSON-serializable so that a Spark task can ship it;
- :func:`merge` combines the parts of disjoint shards exactly (``lakejoin.index.merge``): one
  part (the whole index in memory) gives that searcher's own answer;
- :func:`results` adds dataset, table title and column names from the snapshot's catalog and
  drops the query's own dataset (the searcher was asked ``k`` plus the number of its columns).

:func:`load_searcher` builds one shard's searcher (shard by shard in the engine, one Spark task
per shard in batch discovery) reading only that shard's tables: what is global to the index is
read once per process.
"""

from __future__ import annotations

import importlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from lakejoin.index.merge import RANK_KEYS, merge_threshold, merge_threshold_steps, merge_top_k
from lakejoin.query.shard_arrays import is_mapped

DEFAULT_THRESHOLD = 0.5  # LSH Ensemble containment threshold t*
DEFAULT_TAU = 0.06  # PEXESO τ: a fraction of the maximum distance 2 of unit vectors
DEFAULT_T = 0.6  # PEXESO T: the share of query records that must match (threshold mode)
# Indexes whose global part a process keeps for its shard loads (a served snapshot and the one
# being swapped in, per family), least recently used dropped first.
GLOBAL_PARTS_KEPT = 8
# The families whose searchers take a floor (``ask``), and the result field it bounds: a shard
# searched after others returns only results that reach the k-th score merged so far.
FLOOR_SCORES = {"josie": "overlap", "qgram": "overlap"}

_global_parts: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
_global_parts_lock = threading.Lock()


class Catalog(Protocol):
    """What :func:`results` reads of a snapshot (``LoadedSnapshot`` provides it)."""

    datasets: dict[str, dict[str, Any]]

    @property
    def columns(self) -> Mapping[int, Any]: ...


@dataclass
class FamilyQuery:
    """A query prepared for one family: ``values`` holds one list per query column."""

    family: str
    columns: list[str]
    values: list[list[Any]]
    k: int
    ask_k: int  # asked of each searcher: k plus the query dataset's own indexed columns
    params: dict[str, Any]
    dataset_id: str | None = None  # the query is this lake dataset: never returned
    _embedded: dict[str, tuple[list[str], np.ndarray]] = field(default_factory=dict, repr=False)
    _prepared: Any = field(
        default=None, repr=False, compare=False
    )  # JOSIE, LSH Ensemble: prepared once for every shard

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_prepared": None}  # JOSIE's refers to the index's whole token dictionary

    def embedded(self, searcher: Any, model: str) -> tuple[list[str], np.ndarray]:
        """PEXESO: the query's values and vectors under ``model``, embedded once per query."""
        if model not in self._embedded:
            self._embedded[model] = searcher.embed_query(self.values[0], model)
        return self._embedded[model]


def family_query(
    family: str,
    columns: list[str],
    values: list[list[Any]],
    k: int,
    params: dict[str, Any],
    *,
    dataset_id: str | None = None,
    own_columns: int = 0,
) -> FamilyQuery:
    """The query for ``family``; ``own_columns``: the query dataset's columns the family indexes
    (asked for on top of ``k``, so that dropping them still leaves ``k``)."""
    if family != "mate" and len(columns) != 1:
        raise ValueError(f"{family} searches one column; use mate (or auto) for {len(columns)} columns")
    if family == "pexeso":
        values = [[v for v in values[0] if v is not None]]
    ask_k = k if family == "mate" else k + own_columns
    return FamilyQuery(family, list(columns), values, k, ask_k, dict(params), dataset_id)


def load_columns(family: str) -> dict[str, list[str]]:
    """The columns of each index table the family's ``load`` reads, where it names them
    (``LOAD_COLUMNS``; a table not named is read whole)."""
    return dict(getattr(importlib.import_module(f"lakejoin.index.{family}"), "LOAD_COLUMNS", {}))


def load_searcher(
    family: str,
    sharded: Mapping[str, pa.Table],
    global_names: Iterable[str],
    read_global: Callable[[str], pa.Table],
    key: Hashable,
) -> Any:
    """The searcher over some shards of ``family``'s index, from those shards' ``sharded`` tables.

    The index's global tables are read (``read_global(name)``) once per process and ``key`` (what
    identifies their content: Delta paths and pinned versions, or data files); a family with a
    ``shared(global_tables)`` (JOSIE: the token dictionary and the fitted read costs) gets that
    state instead of the tables, so a shard's load builds nothing global again.
    """
    module, part = _global_part(family, global_names, read_global, key)
    if "shared" in part:
        return module.load(dict(sharded), shared=part["shared"])
    return module.load({**sharded, **part["tables"]})


def has_arrays(family: str) -> bool:
    """Whether ``family``'s searchers can be written as arrays and rebuilt from them
    (``to_arrays`` / ``from_arrays``: ``lakejoin.query.shard_arrays``)."""
    return hasattr(importlib.import_module(f"lakejoin.index.{family}"), "from_arrays")


def searcher_from_arrays(
    family: str,
    arrays: Mapping[str, np.ndarray],
    global_names: Iterable[str],
    read_global: Callable[[str], pa.Table],
    key: Hashable,
) -> Any:
    """The searcher ``family``'s ``to_arrays`` gave ``arrays`` (``ValueError`` when they are not
    one searcher's), with the index's global part as :func:`load_searcher` keeps it."""
    module, part = _global_part(family, global_names, read_global, key)
    return module.from_arrays(arrays, shared=part.get("shared"))


def _global_part(
    family: str, global_names: Iterable[str], read_global: Callable[[str], pa.Table], key: Hashable
) -> tuple[Any, dict[str, Any]]:
    """The family's module and the index's global part, read once per process and ``key``."""
    module = importlib.import_module(f"lakejoin.index.{family}")
    with _global_parts_lock:
        part = _global_parts.get(key)
        if part is None:
            tables = {name: read_global(name) for name in global_names}
            part = _global_parts[key] = (
                {"shared": module.shared(tables)} if hasattr(module, "shared") else {"tables": tables}
            )
            while len(_global_parts) > GLOBAL_PARTS_KEPT:
                _global_parts.popitem(last=False)
        else:
            _global_parts.move_to_end(key)
    return module, part


def ask(searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
    """The part ``searcher`` answers for ``query`` (see the module docstring). ``floor``: the
    score (:data:`FLOOR_SCORES`) a result must reach to enter the merged answer, known from the
    shards asked before; only the families named there take one."""
    params = query.params
    if query.family in ("josie", "lshensemble"):
        prepared = _prepared(searcher, query)
        if query.family == "josie":
            return searcher.search(prepared, k=query.ask_k, floor=floor or 0)
        return searcher.search_steps(
            prepared, params.get("threshold", DEFAULT_THRESHOLD), verify=params.get("verify", False), k=query.ask_k
        )
    if query.family == "qgram":  # JOSIE over the query's tokens
        return searcher.search(query.values[0], k=query.ask_k, floor=floor or 0)
    if query.family == "pexeso":
        model = params.get("model", searcher.model)
        kept, vectors = query.embedded(searcher, model)
        options = {
            "mode": params.get("mode", "threshold"),
            "k": query.ask_k,
            "exact": params.get("exact", False),
            "lower_bound": params.get("lower_bound", False),
        }
        found = searcher.search(
            vectors, params.get("tau", DEFAULT_TAU), params.get("T", DEFAULT_T), query_values=kept, **options
        )
        return [{**r, "model": model} for r in found]
    if query.family == "mate":
        frame = pd.DataFrame(dict(zip(query.columns, query.values)))
        exclude = [query.dataset_id] if query.dataset_id else []
        return searcher.search(
            frame, query.columns, k=query.ask_k, initial_column=params.get("initial_column"), exclude_datasets=exclude
        )
    raise ValueError(f"unknown index family {query.family!r}")


def bound(searcher: Any, query: FamilyQuery) -> int | None:
    """The best score (:data:`FLOOR_SCORES`) any result of ``searcher`` can have for ``query``,
    known without searching (JOSIE: how many of the query's tokens it holds); None where the
    family has no such bound."""
    return searcher.held(_prepared(searcher, query)) if query.family == "josie" else None


def _prepared(searcher: Any, query: FamilyQuery) -> Any:
    """JOSIE's and LSH Ensemble's query, normalized (and signed) once for every shard's searcher."""
    query._prepared = searcher.prepare(query._prepared if query._prepared is not None else query.values[0])
    return query._prepared


def private_bytes(family: str, searcher: Any) -> int | None:
    """The memory a searcher allocated for itself when its index arrays are memory-mapped from
    the shard cache (``lakejoin.query.shard_arrays``): mapped file pages are the OS's to share
    between processes and to evict, so a cache of such searchers costs their scratch space.
    None when its arrays are not mapped, or the family cannot tell (its load estimate stands)."""
    if family not in ("josie", "qgram"):
        return None
    josie = searcher.josie if family == "qgram" else searcher
    return josie.scratch_bytes() if all(is_mapped(a) for a in josie.arrays().values() if a.size) else None


def merge(query: FamilyQuery, parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The raw answer of the whole index from the parts of disjoint shards (exact)."""
    if query.family == "lshensemble":
        return merge_threshold_steps(parts, query.ask_k)
    key = RANK_KEYS[query.family]
    if query.family == "pexeso" and query.params.get("mode", "threshold") == "threshold":
        return merge_threshold(parts, key)
    return merge_top_k(parts, query.ask_k, key)


def results(catalog: Catalog, query: FamilyQuery, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's result rows (best first, without rank) from the merged raw answer."""
    if query.family == "mate":
        return [_table_result(catalog, r) for r in found]
    rows = []
    for result in found:
        info = catalog.columns.get(result["column_id"])
        dataset_id = info.dataset_id if info else result.get("dataset_id")
        if query.dataset_id is not None and dataset_id == query.dataset_id:
            continue
        table = (catalog.datasets.get(dataset_id) or {}).get("title") if dataset_id is not None else None
        fields = {k: v for k, v in result.items() if k not in ("column_id", "dataset_id", "model")}
        rows.append(
            {
                "dataset_id": dataset_id,
                "table": table,
                "column": info.name if info else None,
                "column_id": result["column_id"],
                **fields,
                **({"model": result["model"]} if "model" in result else {}),
            }
        )
    return rows[: query.k]


def _table_result(catalog: Catalog, result: dict[str, Any]) -> dict[str, Any]:
    dataset_id = result["dataset_id"]
    mapping = {q: {"column_id": cid, "column": _column_name(catalog, cid)} for q, cid in result["mapping"].items()}
    return {
        "dataset_id": dataset_id,
        "table": (catalog.datasets.get(dataset_id) or {}).get("title"),
        "column": [m["column"] for m in mapping.values()],
        "column_id": [m["column_id"] for m in mapping.values()],
        "joinability": result["joinability"],
        "share": result["share"],
        "mapping": mapping,
        "matched_sample": result["matched_sample"],
        "rows_verified": result["rows_verified"],
    }


def _column_name(catalog: Catalog, column_id: int) -> str | None:
    info = catalog.columns.get(column_id)
    return info.name if info else None
