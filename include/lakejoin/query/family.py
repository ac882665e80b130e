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
read once per process. Each step is the family's own (``lakejoin.index.registry``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lakejoin.index.contract import FamilyQuery
from lakejoin.index.lshensemble.family import DEFAULT_THRESHOLD
from lakejoin.index.pexeso.family import DEFAULT_T, DEFAULT_TAU
from lakejoin.index.registry import REGISTRY, family
from lakejoin.query.shard_arrays import is_mapped

__all__ = [
    "DEFAULT_T",
    "DEFAULT_TAU",
    "DEFAULT_THRESHOLD",
    "FLOOR_SCORES",
    "FamilyQuery",
    "ask",
    "bound",
    "family_query",
    "has_arrays",
    "load_columns",
    "load_searcher",
    "merge",
    "private_bytes",
    "results",
    "searcher_from_arrays",
]

# Indexes whose global part a process keeps for its shard loads (a served snapshot and the one
# being swapped in, per family), least recently used dropped first.
GLOBAL_PARTS_KEPT = 8
# The families whose searchers take a floor (``ask``), and the result field it bounds: a shard
# searched after others returns only results that reach the k-th score merged so far.
FLOOR_SCORES = {name: f.floor_score for name, f in REGISTRY.items() if f.floor_score is not None}

_global_parts: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
_global_parts_lock = threading.Lock()


class Catalog(Protocol):
    """What :func:`results` reads of a snapshot (``LoadedSnapshot`` provides it)."""

    datasets: dict[str, dict[str, Any]]

    @property
    def columns(self) -> Mapping[int, Any]: ...


def family_query(
    name: str,
    columns: list[str],
    values: list[list[Any]],
    k: int,
    params: dict[str, Any],
    *,
    dataset_id: str | None = None,
    own_columns: int = 0,
) -> FamilyQuery:
    """The query for family ``name``; ``own_columns``: the query dataset's columns the family indexes
    (asked for on top of ``k``, so that dropping them still leaves ``k``)."""
    return family(name).query(columns, values, k, params, dataset_id, own_columns)


def load_columns(name: str) -> dict[str, list[str]]:
    """The columns of each index table the family's ``load`` reads, where it names them (a table
    not named is read whole)."""
    return {table: list(columns) for table, columns in family(name).load_columns.items()}


def load_searcher(
    name: str,
    sharded: Mapping[str, pa.Table],
    global_names: Iterable[str],
    read_global: Callable[[str], pa.Table],
    key: Hashable,
) -> Any:
    """The searcher over some shards of family ``name``'s index, from those shards' ``sharded`` tables.

    The index's global tables are read (``read_global(name)``) once per process and ``key`` (what
    identifies their content: Delta paths and pinned versions, or data files); a family with
    shared state (JOSIE: the token dictionary and the fitted read costs) gets that state instead
    of the tables, so a shard's load builds nothing global again.
    """
    part = _global_part(name, global_names, read_global, key)
    if part["shared"] is not None:
        return family(name).load(dict(sharded), shared=part["shared"])
    return family(name).load({**sharded, **part["tables"]})


def has_arrays(name: str) -> bool:
    """Whether the family's searchers can be written as arrays and rebuilt from them
    (``lakejoin.query.shard_arrays``)."""
    return family(name).arrays_format is not None


def searcher_from_arrays(
    name: str,
    arrays: Mapping[str, np.ndarray],
    global_names: Iterable[str],
    read_global: Callable[[str], pa.Table],
    key: Hashable,
) -> Any:
    """The searcher the family's ``to_arrays`` gave ``arrays`` (``ValueError`` when they are not
    one searcher's), with the index's global part as :func:`load_searcher` keeps it."""
    part = _global_part(name, global_names, read_global, key)
    return family(name).from_arrays(arrays, shared=part["shared"])


def _global_part(
    name: str, global_names: Iterable[str], read_global: Callable[[str], pa.Table], key: Hashable
) -> dict[str, Any]:
    """The index's global part (its tables, and the family's shared state built from them), read
    once per process and ``key``."""
    with _global_parts_lock:
        part = _global_parts.get(key)
        if part is None:
            tables = {table: read_global(table) for table in global_names}
            part = _global_parts[key] = {"tables": tables, "shared": family(name).shared(tables)}
            while len(_global_parts) > GLOBAL_PARTS_KEPT:
                _global_parts.popitem(last=False)
        else:
            _global_parts.move_to_end(key)
    return part


def ask(searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
    """The part ``searcher`` answers for ``query`` (see the module docstring). ``floor``: the
    score (:data:`FLOOR_SCORES`) a result must reach to enter the merged answer, known from the
    shards asked before; only the families named there take one."""
    return family(query.family).ask(searcher, query, floor)


def bound(searcher: Any, query: FamilyQuery) -> int | None:
    """The best score (:data:`FLOOR_SCORES`) any result of ``searcher`` can have for ``query``,
    known without searching (JOSIE: how many of the query's tokens it holds); None where the
    family has no such bound."""
    return family(query.family).bound(searcher, query)


def private_bytes(name: str, searcher: Any) -> int | None:
    """The memory a searcher allocated for itself when its index arrays are memory-mapped from
    the shard cache (``lakejoin.query.shard_arrays``): mapped file pages are the OS's to share
    between processes and to evict, so a cache of such searchers costs their scratch space.
    None when its arrays are not mapped, or the family cannot tell (its load estimate stands)."""
    indexed = family(name)
    scratch = indexed.scratch_bytes(searcher)
    if scratch is None or not all(is_mapped(a) for a in indexed.to_arrays(searcher).values() if a.size):
        return None
    return scratch


def merge(query: FamilyQuery, parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The raw answer of the whole index from the parts of disjoint shards (exact)."""
    return family(query.family).merge(query, parts)


def results(catalog: Catalog, query: FamilyQuery, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's result rows (best first, without rank) from the merged raw answer."""
    if family(query.family).table_level:
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
