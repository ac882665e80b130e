"""A dataset's neighbour tables, each once, best join first (``lakejoin related``'s default order).

Every edge of the graph that starts or ends at one of the dataset's columns (or composite keys)
is a *join* with another table, scored by ``lakejoin.profile.join_quality`` on one scale whatever found
it: JOSIE's equal values, MATE's composite keys, PEXESO's semantic matches. A neighbour table is
listed once, by its best join; its other joins are folded under it (``also``), and a composite key
join subsumes the single-column joins whose column pair it holds. Tables whose best join scores
below ``quality.MIN_QUALITY`` are listed apart, as ``weak``.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakejoin.graph.edges import JOSIE, MATE, Edge
from lakejoin.normalize import NormalizedColumn
from lakejoin.profile.join_quality import (
    MIN_QUALITY,
    Quality,
    Side,
    composite_quality,
    name_similarity,
    names_agree,
    quality,
    semantic_quality,
)
from lakejoin.query.snapshot import LoadedSnapshot

FLIPPED = {"n:1": "1:n", "1:n": "n:1", "1:1": "1:1", "m:n": "m:n"}


@dataclass(frozen=True)
class Join:
    """One join between this dataset and a neighbour, as seen from this dataset."""

    dataset_id: str
    method: str
    own_ids: tuple[int, ...]
    other_ids: tuple[int, ...]
    quality: Quality
    raw: dict[str, Any]  # the method's own numbers (overlap, containment, ...)

    @property
    def pairs(self) -> set[tuple[int, int]]:
        """The (own column id, other column id) pairs the join matches: a single-column join whose pair a
        composite join holds is folded into it."""
        return set(zip(self.own_ids, self.other_ids))

    @property
    def order(self) -> tuple:
        """Best first; of joins as good (to the shown precision), a composite key's first, the
        smallest key first: a bigger key that contains as well adds a column the join does not need."""
        score = round(self.quality.score, 4)
        return (-score, self.method != MATE, len(self.own_ids), self.dataset_id, self.own_ids, self.other_ids)


def joins_of(loaded: LoadedSnapshot, dataset_id: str, edges: Iterable[tuple[Edge, bool]]) -> list[Join]:
    """Each ``(edge, outgoing)`` touching the dataset as a scored join, one per column pairing."""
    joins: dict[tuple, Join] = {}
    tuples = functools.cache(lambda column_ids: distinct_tuples(loaded, column_ids))
    for edge, outgoing in edges:
        join = _join(loaded, edge, outgoing, tuples)
        key = (join.method, join.dataset_id, join.own_ids, join.other_ids)
        if key not in joins or join.order < joins[key].order:
            joins[key] = join
    return sorted(joins.values(), key=lambda j: j.order)


def by_table(loaded: LoadedSnapshot, joins: Sequence[Join]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The neighbour tables, best join first: those worth joining, and the weak ones."""
    per_table: dict[str, list[Join]] = defaultdict(list)
    for join in joins:
        per_table[join.dataset_id].append(join)
    entries = [_table_entry(loaded, sorted(found, key=lambda j: j.order)) for found in per_table.values()]
    entries.sort(key=lambda e: (-e["quality"], e["dataset_id"]))
    return [e for e in entries if e["quality"] >= MIN_QUALITY], [e for e in entries if e["quality"] < MIN_QUALITY]


def _table_entry(loaded: LoadedSnapshot, joins: list[Join]) -> dict[str, Any]:
    best = joins[0]
    composite = [j for j in joins if j.method == MATE]
    folded = [j for j in joins[1:] if not (j.method == JOSIE and any(j.pairs <= c.pairs for c in composite))]
    return {
        **_join_entry(loaded, best),
        "table": _title(loaded, best.dataset_id),
        "also": [_join_entry(loaded, j) for j in folded],
        "subsumed": len(joins) - 1 - len(folded),
    }


def _join_entry(loaded: LoadedSnapshot, join: Join) -> dict[str, Any]:
    return {
        "dataset_id": join.dataset_id,
        "method": join.method,
        "semantic": join.method not in (JOSIE, MATE),
        "columns": [[_name(loaded, a), _name(loaded, b)] for a, b in zip(join.own_ids, join.other_ids)],
        "quality": round(join.quality.score, 4),
        "reason": join.quality.reason,
        "evidence": {**join.raw, "quality": join.quality.evidence()},
    }


def _join(
    loaded: LoadedSnapshot, e: Edge, outgoing: bool, tuples: Callable[[tuple[int, ...]], pa.Table | None]
) -> Join:
    own, other = (e.query_column_ids, e.column_ids) if outgoing else (e.column_ids, e.query_column_ids)
    neighbour = e.dataset_id if outgoing else e.query_dataset_id
    found = "from_this" if outgoing else "to_this"
    raw: dict[str, Any]
    if e.kind == JOSIE:
        mine, theirs = (e.containment, e.containment_reverse) if outgoing else (e.containment_reverse, e.containment)
        a = _side(loaded, own[0], _distinct(e.overlap, mine))
        b = _side(loaded, other[0], _distinct(e.overlap, theirs))
        judged = quality(a, b, e.overlap, e.informativeness if e.informativeness is not None else 1.0)
        raw = {"overlap": e.overlap, "containment": mine, "containment_reverse": theirs, "jaccard": e.jaccard}
    elif e.kind == MATE:
        key_ids, other_side = (own, other) if outgoing else (other, own)
        other_side = _named_mapping(loaded, key_ids, other_side, e.overlap, tuples) or other_side
        own, other = (key_ids, other_side) if outgoing else (other_side, key_ids)
        held = tuples(tuple(other_side))
        theirs = held.num_rows if held is not None else _tuples_bound(loaded, other_side)
        judged = composite_quality(
            e.containment,
            e.overlap / theirs if theirs else 0.0,
            [_side(loaded, c) for c in key_ids],
            outgoing,
            [_side(loaded, c) for c in other_side],
        )
        raw = {"joinability": e.overlap, "share": e.containment, "key_of": "this" if outgoing else "other"}
    else:
        query, target = (own[0], other[0]) if outgoing else (other[0], own[0])
        judged = semantic_quality(_side(loaded, query), _side(loaded, target), e.containment)
        if not outgoing:
            judged = replace(judged, cardinality=FLIPPED[judged.cardinality])
        raw = {"matched": e.overlap, "joinability": e.containment, "semantic": True}
    return Join(neighbour, e.kind, tuple(own), tuple(other), judged, {**raw, "found": found})


def _distinct(overlap: int, containment: float | None) -> int | None:
    return round(overlap / containment) if containment else None


def _side(loaded: LoadedSnapshot, column_id: int, distinct: int | None = None) -> Side:
    info = loaded.columns.get(column_id)
    if info is None:
        return Side("", None, distinct or 0, distinct or 0)
    values = distinct if distinct is not None else info.distinct or 0
    return Side(
        info.name, info.type, info.count or values, values, _title(loaded, info.dataset_id) or "", info.row_numbers
    )


def distinct_tuples(loaded: LoadedSnapshot, column_ids: Sequence[int]) -> pa.Table | None:
    """The distinct tuples the columns (of one dataset) hold together, normalized as MATE compares
    them and none with a null value, one column per id (named by position): the referencing side
    of a composite key join repeats its tuples (a contestant once per episode), so its containment
    is the join's tuples over these, not over its rows. Read from the dataset's staged copy (those
    columns alone); None where it cannot be read."""
    infos = [info for c in column_ids if (info := loaded.columns.get(c)) is not None]
    staged = (loaded.datasets.get(infos[0].dataset_id) or {}).get("staged_path") if infos else None
    if not staged or len(infos) < len(column_ids):
        return None
    path = Path(staged)
    names = [i.name for i in infos]
    try:
        table = pq.read_table(path if path.is_absolute() else loaded.config.home / path, columns=names)
    except (OSError, pa.ArrowException):
        return None
    normalized = NormalizedColumn.of_columns([table.column(name) for name in names])
    tuples = pa.table({str(i): column.values() for i, column in enumerate(normalized)}).drop_null()
    return tuples.group_by(tuples.column_names).aggregate([])


def _named_mapping(
    loaded: LoadedSnapshot,
    key_ids: Sequence[int],
    mapped: Sequence[int],
    joinability: int,
    tuples: Callable[[tuple[int, ...]], pa.Table | None],
) -> tuple[int, ...] | None:
    """MATE's joinability is its best mapping's; where several map as many tuples, which one it
    reports is arbitrary, and a key of small numbers meets a table of small numbers in many. Names
    break the tie: where MATE's mapping pairs a key column with a column named unlike it, the other
    table's columns named like the key's, one each, when they hold as many of the key's tuples."""
    keys = [_side(loaded, c) for c in key_ids]
    other = loaded.columns.get(mapped[0]) if mapped else None
    if other is None or all(names_agree(name_similarity(k, _side(loaded, m))) for k, m in zip(keys, mapped)):
        return None
    candidates = [(c.column_id, _side(loaded, c.column_id)) for c in loaded.columns_of(other.dataset_id)]
    named: list[int] = []
    for key in keys:
        similarity, column_id = max(
            ((name_similarity(key, side), column_id) for column_id, side in candidates if column_id not in named),
            default=(0.0, 0),
        )
        if not names_agree(similarity):
            return None
        named.append(column_id)
    ours, theirs = tuples(tuple(key_ids)), tuples(tuple(named))
    if ours is None or theirs is None:
        return None
    shared = ours.join(theirs, keys=ours.column_names, join_type="inner").num_rows  # both distinct
    return tuple(named) if shared >= joinability else None


def _tuples_bound(loaded: LoadedSnapshot, column_ids: Sequence[int]) -> int:
    """At most how many distinct tuples the columns hold: their rows, and the product of their
    distinct counts (a composite key's referencing side is often a grid: origin x hour x day)."""
    infos = [loaded.columns.get(c) for c in column_ids]
    if any(i is None for i in infos):
        return 0
    rows = max((i.count or 0) for i in infos if i is not None)
    product = math.prod(max(i.distinct or 1, 1) for i in infos if i is not None)
    return min(rows, product) if rows else product


def _title(loaded: LoadedSnapshot, dataset_id: str) -> str | None:
    return (loaded.datasets.get(dataset_id) or {}).get("title")


def _name(loaded: LoadedSnapshot, column_id: int) -> str | None:
    info = loaded.columns.get(column_id)
    return info.name if info else None
