"""Serving a family whose index does not fit the memory budget: shard by shard.

Every query is asked of each shard's searcher in turn and the parts are merged exactly
(``lakejoin.query.family.merge``), so the answer equals the whole index's. Shards are loaded
on demand and kept in an LRU whose estimated load sizes (``lakejoin.query.memory``: the index's
global part once, each cached shard's own rows) stay within the budget measured when the family
went shard by shard; the shards still cached are searched first, so a query reads from disk
only the shards that did not fit. A single shard over the budget is refused with
``IndexTooLarge``, as a whole index would be.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakejoin.index.shards import MANIFEST
from lakejoin.lake.manifest import read_manifest
from lakejoin.query.memory import available_bytes, estimated_load_bytes

if TYPE_CHECKING:
    from lakejoin.query.snapshot import LoadedSnapshot


class ShardedFamily:
    """One family of one snapshot, served shard by shard (see the module docstring)."""

    def __init__(self, loaded: LoadedSnapshot, family: str) -> None:
        self.loaded = loaded
        self.family = family
        manifest = read_manifest(loaded.config.home, family, loaded.snapshot.version_of(f"index/{family}/{MANIFEST}"))
        if manifest is None:
            raise LookupError(f"the {family} index of snapshot {loaded.snapshot_id} has no shard manifest, so it cannot be served shard by shard")
        global_rows = {name: loaded.row_count(f"index/{family}/{name}") or 0 for name in loaded.index_tables_of(family) if name not in _sharded_tables(manifest.shard_rows)}
        # a shard's load: its rows of the sharded tables and the global tables whole; the global
        # part is loaded once per process (lakejoin.query.family.load_searcher), so the cache
        # holds it once and each cached shard's own rows
        self.global_bytes = estimated_load_bytes(family, global_rows)
        self.load_bytes = {shard: estimated_load_bytes(family, {**global_rows, **rows}) for shard, rows in sorted(manifest.shard_rows.items()) if sum(rows.values()) > 0}
        self.budget = available_bytes()
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def shards(self) -> list[int]:
        """The shards that hold any row (the others answer nothing)."""
        return list(self.load_bytes)

    def answer(self, ask: Callable[[Any], Any], merge: Callable[[list[Any]], list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """``merge`` of ``ask`` over every shard's searcher, and how many shards were searched
        and how many of them were read from disk for it."""
        with self._lock:
            order = list(self._cache) + [s for s in self.shards if s not in self._cache]
            parts, read = [], 0
            for shard in order:
                searcher = self._cache.get(shard)
                if searcher is None:
                    searcher, read = self._load(shard), read + 1
                else:
                    self._cache.move_to_end(shard)
                parts.append(ask(searcher))
            return merge(parts), {"searched": len(order), "read": read, "cached": len(self._cache)}

    def _load(self, shard: int) -> Any:
        needed = self.load_bytes[shard]
        budget = self.budget if self.budget is not None else float("inf")
        while self._cache and sum(self.load_bytes[s] - self.global_bytes for s in self._cache) + needed > budget:
            self._cache.popitem(last=False)
        searcher = self.loaded.load_shards(self.family, [shard])
        if needed <= budget:
            self._cache[shard] = searcher
        return searcher


def _sharded_tables(shard_rows: dict[int, dict[str, int]]) -> set[str]:
    return {name for rows in shard_rows.values() for name in rows}
