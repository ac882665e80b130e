"""Serving a family whose index does not fit the memory budget: shard by shard.

Every query is asked of each shard's searcher in turn and the parts are merged exactly
(``lakejoin.query.family.merge``), so the answer equals the whole index's. Shards are loaded
on demand and kept in an LRU within the budget measured when the family went shard by shard:
the index's global part once, and per cached shard its estimated load
(``lakejoin.query.memory``), or, for a searcher over arrays memory-mapped from the shard cache,
the scratch it allocated (``lakejoin.query.family.private_bytes``: mapped pages are the OS's
page cache, shared and evicted as it needs). A single shard over the budget is refused with
``IndexTooLarge``, as a whole index would be.

For a top-k family whose searchers take a floor (JOSIE: ``FLOOR_SCORES``), the k-th score
merged so far is passed to each later shard, which then returns only what can still enter, and
a shard whose bound (``lakejoin.query.family.bound``: the query tokens it holds) is below that
floor is not asked at all. The cached shards are asked first, highest bound first, so the
floor rises early; this is the threshold broadcast of distributed top-k search
(``lakejoin.query.broadcast``), and exact: a shard's result that ties the floor is still
returned, for the merge to break the tie.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from lakejoin.query.broadcast import threshold_broadcast
from lakejoin.query.family import FLOOR_SCORES, FamilyQuery, ask, bound, merge, private_bytes
from lakejoin.query.memory import available_bytes, estimated_load_bytes

if TYPE_CHECKING:
    from lakejoin.query.snapshot import LoadedSnapshot


class ShardedFamily:
    """One family of one snapshot, served shard by shard (see the module docstring)."""

    def __init__(self, loaded: LoadedSnapshot, family: str) -> None:
        self.loaded = loaded
        self.family = family
        manifest = loaded.manifest(family)
        if manifest is None:
            raise LookupError(
                f"the {family} index of snapshot {loaded.snapshot_id} has no shard manifest, so it cannot be served "
                "shard by shard"
            )
        global_rows = {
            name: loaded.row_count(f"index/{family}/{name}") or 0
            for name in loaded.index_tables_of(family)
            if name not in _sharded_tables(manifest.shard_rows)
        }
        # a shard's load: its rows of the sharded tables and the global tables whole; the global
        # part is loaded once per process (lakejoin.query.family.load_searcher), so the cache
        # holds it once and each cached shard's own rows
        self.global_bytes = estimated_load_bytes(family, global_rows)
        self.load_bytes = {
            shard: estimated_load_bytes(family, {**global_rows, **rows})
            for shard, rows in sorted(manifest.shard_rows.items())
            if sum(rows.values()) > 0
        }
        self.budget = available_bytes()
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._charged: dict[int, int] = {}  # cached shard -> the bytes it counts against the budget
        self._lock = threading.Lock()

    @property
    def shards(self) -> list[int]:
        """The shards that hold any row (the others answer nothing)."""
        return list(self.load_bytes)

    def answer(self, query: FamilyQuery) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """The merged answer to ``query`` over every shard, and how many shards were asked,
        loaded for it (mapped, or read from Delta), skipped by their bound, and are cached."""
        score = FLOOR_SCORES.get(query.family)
        with self._lock:
            searchers = dict(self._cache)  # shard -> its searcher: the cached ones, and those loaded below
            bounds = {shard: bound(searcher, query) for shard, searcher in searchers.items()}
            cached = sorted(self._cache, key=lambda s: -(bounds[s] or 0))  # a stable sort: LRU order without bounds
            best: list[int] = []  # min-heap of the ask_k best scores merged so far
            parts: list[list[dict[str, Any]]] = []

            def bound_of(shard: int) -> int | None:
                if shard not in searchers:  # a shard not cached is loaded to learn its bound
                    searchers[shard] = self._load(shard)
                    bounds[shard] = bound(searchers[shard], query)
                return bounds[shard]

            def ask_shard(shard: int, floor: int | None) -> bool:
                if shard in self._cache:
                    self._cache.move_to_end(shard)
                part = ask(searchers[shard], query, floor)
                parts.append(part)
                if score is not None:
                    for result in part:
                        _keep_best(best, result[score], query.ask_k)
                return True

            skipped = threshold_broadcast(
                cached + [s for s in self.shards if s not in self._cache],
                bound_of,
                lambda: best[0] if len(best) == query.ask_k else None,
                ask_shard,
            )
            read = len(searchers) - len(cached)  # the shards loaded for this query
            reads = {"searched": len(parts), "read": read, "skipped": skipped, "cached": len(self._cache)}
            return merge(query, parts), reads

    def _load(self, shard: int) -> Any:
        """The shard's searcher, kept in the cache when it fits: mapped from the shard cache
        (charged its scratch), else built from its Delta files, after making room for its
        estimated load."""
        searcher = self.loaded.load_shards(self.family, [shard], mapped_only=True)
        if searcher is None:
            self._make_room(self.load_bytes[shard] - self.global_bytes)
            searcher = self.loaded.load_shards(self.family, [shard])
        charge = private_bytes(self.family, searcher)
        charge = charge if charge is not None else self.load_bytes[shard] - self.global_bytes
        if self.global_bytes + charge <= self._budget():
            self._make_room(charge)
            self._cache[shard], self._charged[shard] = searcher, charge
        return searcher

    def _make_room(self, size: int) -> None:
        """Drop the least recently used shards until ``size`` more bytes fit the budget."""
        while self._cache and self.global_bytes + sum(self._charged.values()) + size > self._budget():
            self._charged.pop(self._cache.popitem(last=False)[0])

    def _budget(self) -> float:
        return self.budget if self.budget is not None else float("inf")


def _keep_best(best: list[int], score: int, k: int) -> None:
    """Keep ``best`` the min-heap of the ``k`` best scores offered."""
    if len(best) < k:
        heapq.heappush(best, score)
    elif score > best[0]:
        heapq.heapreplace(best, score)


def _sharded_tables(shard_rows: dict[int, dict[str, int]]) -> set[str]:
    return {name for rows in shard_rows.values() for name in rows}
