"""The query side's view of one published snapshot, and the per-process cache of it.

A :class:`LoadedSnapshot` reads the catalog and every index table at the versions the snapshot
pins, so everything a query touches comes from one consistent cut of the lake. Searchers are
built on first use per family (loading PEXESO compiles numba kernels; a process that only runs
JOSIE should not pay for it) and then kept for the snapshot's lifetime.

:class:`SnapshotCache` holds the latest published snapshot and swaps it when a newer one is
published. The swap is one reference assignment made after the new snapshot is fully loaded
(its catalog, plus the searchers the old one had already loaded), so a query sees either the
old snapshot or the new one, never a mix; a query that began on the old one finishes on it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES, registry
from lakejoin.index.shards import MANIFEST, SHARD
from lakejoin.lake import delta, snapshots
from lakejoin.lake.manifest import Manifest, read_manifest
from lakejoin.lake.schemas import COLUMNS, COLUMNS_SCHEMA, DATASETS
from lakejoin.query import shard_arrays
from lakejoin.query.columns import ColumnCatalog, ColumnInfo
from lakejoin.query.family import FamilyQuery, ask, has_arrays, load_columns, load_searcher, merge, searcher_from_arrays
from lakejoin.query.memory import IndexTooLarge, check_fits
from lakejoin.query.sharded import ShardedFamily

# How often the cache re-reads catalog/snapshots to notice a publish. A query arriving within
# this window after a publish may still be answered from the previous snapshot (and says so).
DEFAULT_REFRESH_SECONDS = 1.0
PINNED_SNAPSHOTS = 2  # explicitly requested older snapshots kept loaded (LRU)


class MethodUnavailable(LookupError):
    """The snapshot has no index for the requested family (not built, or not yet landed)."""


@dataclass
class _IndexTable:
    """One index table of a snapshot, its Delta log read once: schema, partitioning, rows (per
    shard for a sharded table) and data files (listed per shard on first use)."""

    path: Path
    log: DeltaTable
    schema: pa.Schema
    partition_columns: list[str]
    rows: int | None
    shard_rows: dict[int, int | None]
    _files: dict[int | None, list[str]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path, log: DeltaTable) -> _IndexTable:
        partition_columns = list(log.metadata().partition_columns)
        actions = pa.table(log.get_add_actions(flatten=True))
        counts = actions.column("num_records").to_pylist()
        shard_rows: dict[int, int | None] = {}
        if SHARD in partition_columns and actions.num_rows:  # an empty table may list no partition column
            for shard, count in zip(actions.column(f"partition.{SHARD}").cast(pa.int64()).to_pylist(), counts):
                known = shard_rows.get(shard, 0)
                shard_rows[shard] = None if known is None or count is None else known + count
        rows = None if any(c is None for c in counts) else int(sum(counts))
        return cls(path, log, pa.schema(log.schema().to_arrow()), partition_columns, rows, shard_rows)

    @property
    def sharded(self) -> bool:
        return SHARD in self.partition_columns

    def rows_of(self, shards: list[int] | None) -> int | None:
        """Rows of ``shards`` (None: every row), from the log's statistics."""
        if shards is None or not self.sharded:
            return self.rows
        counts = [self.shard_rows.get(s, 0) for s in shards]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)

    def read(
        self,
        shards: list[int] | None,
        columns: list[str] | None = None,
        where: pads.Expression | delta.ValuesIn | None = None,
    ) -> pa.Table:
        """The rows of ``shards`` (None, or a global table: every row) that match ``where`` if
        given, only ``columns`` if given."""
        keys: list[int | None] = [None] if shards is None or not self.sharded else list(shards)
        files = [uri for key in keys for uri in self.files_of(key)]
        return delta.read_files(self.path, files, self.schema, self.partition_columns, columns, where)

    def files_of(self, shard: int | None) -> list[str]:
        """The data files of ``shard`` (None, or a global table: every file), listed once."""
        if shard not in self._files:
            self._files[shard] = delta.files_of(self.log, None if shard is None else {SHARD: [shard]})
        return self._files[shard]


@dataclass
class LoadedSnapshot:
    """The catalog of one snapshot in memory, and its searchers once loaded."""

    config: LakeConfig
    snapshot: snapshots.Snapshot
    datasets: dict[str, dict[str, Any]]
    columns: ColumnCatalog
    _searchers: dict[str, Any] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=lambda: {f: threading.Lock() for f in FAMILIES})
    _load_lock: threading.Lock = field(default_factory=threading.Lock)
    _sharded: dict[str, ShardedFamily] = field(default_factory=dict)  # families over the memory budget
    _index_tables: dict[str, _IndexTable] = field(default_factory=dict)  # index tables' logs, opened once

    @property
    def snapshot_id(self) -> int:
        """The id of the snapshot this catalog is of."""
        return self.snapshot.snapshot_id

    def families(self) -> list[str]:
        """Index families whose tables this snapshot pins."""
        return [f for f in FAMILIES if self.index_tables_of(f)]

    def index_tables_of(self, family: str) -> list[str]:
        """The family's index tables this snapshot pins (its shard manifest left out)."""
        prefix = f"index/{family}/"
        names = (t.removeprefix(prefix) for t in self.snapshot.table_versions if t.startswith(prefix))
        return sorted(n for n in names if n != MANIFEST)

    def manifest(self, family: str) -> Manifest | None:
        """The family's shard manifest at this snapshot's pinned version (None: not built sharded)."""
        version = self.snapshot.version_of(f"index/{family}/{MANIFEST}")
        return read_manifest(self.config.home, family, version) if version is not None else None

    def shard_count(self, family: str) -> int | None:
        """How many shards the family's index has in this snapshot (None: not built sharded)."""
        manifest = self.manifest(family)
        return manifest.n_shards if manifest else None

    def loaded_families(self) -> list[str]:
        """The families whose searcher over every shard is in memory, sorted."""
        return sorted(self._searchers)

    def searcher(self, family: str) -> tuple[Any, threading.Lock]:
        """The family's searcher over every shard (built on first use) and the lock that
        serializes its queries."""
        if family not in FAMILIES:
            raise ValueError(f"unknown index family {family!r}; choose one of {', '.join(FAMILIES)}")
        searcher = self._searchers.get(family)
        if searcher is None:
            with self._load_lock:
                searcher = self._searchers.get(family)
                if searcher is None:
                    searcher = self._searchers[family] = self.load_shards(family)
        return searcher, self._locks[family]

    def answer(self, family: str, query: FamilyQuery) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        """``query``'s merged raw answer (``lakejoin.query.family``) from the family's whole
        searcher, or, when its index does not fit the memory budget, from every shard's searcher
        in turn (``lakejoin.query.sharded``), with how many shards that asked, read and skipped
        (else None)."""
        sharded = self._sharded.get(family)
        if sharded is not None:
            return sharded.answer(query)
        try:
            searcher, lock = self.searcher(family)
        except IndexTooLarge:
            sharded = ShardedFamily(self, family)
            answered = sharded.answer(query)  # IndexTooLarge still when one shard alone does not fit
            with self._load_lock:
                self._sharded.setdefault(family, sharded)
            return answered
        with lock:
            return merge(query, [ask(searcher, query)]), None

    def load_shards(
        self,
        family: str,
        shards: Iterable[int] | None = None,
        filters: Mapping[str, pads.Expression | delta.ValuesIn] | None = None,
        *,
        mapped_only: bool = False,
    ) -> Any:
        """A new searcher over ``shards`` of the family's index (every shard when None): it reads
        only those shards' partitions of each sharded table; the global tables are read whole, and
        for a subset of shards once per process (``lakejoin.query.family.load_searcher``). Not
        cached: the caller owns it. ``filters`` (sharded table -> filter) keeps only the matching rows
        of those tables: a searcher for queries that read no other row (the join graph's MATE
        searchers hold only the postings of their keys' values). ``mapped_only``: one shard's
        searcher only if its arrays are in the shard cache (``lakejoin.query.shard_arrays``: a map,
        no table read), else None."""
        names = self.index_tables_of(family)
        if not names:
            raise MethodUnavailable(
                f"snapshot {self.snapshot_id} has no {family} index (built families: "
                f"{', '.join(self.families()) or 'none'})"
            )
        opened = {name: self._index_table(family, name) for name in names}
        wanted = sorted(set(shards)) if shards is not None else None
        rows = {name: table.rows_of(wanted) for name, table in opened.items()}
        check_fits(family, {name: count for name, count in rows.items() if count is not None}, self.snapshot_id)
        columns = load_columns(family)
        if wanted is None:
            return registry.family(family).load(
                {
                    name: table.read(None, columns.get(name), (filters or {}).get(name) if table.sharded else None)
                    for name, table in opened.items()
                }
            )
        global_names = sorted(name for name, table in opened.items() if not table.sharded)
        key = (
            str(self.config.home),
            family,
            tuple((name, self.snapshot.version_of(f"index/{family}/{name}")) for name in global_names),
        )

        def read_global(name: str) -> pa.Table:
            return opened[name].read(None, columns.get(name))

        def build() -> Any:
            sharded = {
                name: table.read(wanted, columns.get(name), (filters or {}).get(name))
                for name, table in opened.items()
                if table.sharded
            }
            return load_searcher(family, sharded, global_names, read_global, key)

        if len(wanted) != 1 or not has_arrays(family) or filters:
            return None if mapped_only else build()
        # one shard: its searcher's arrays are written once per snapshot and memory-mapped after
        folder, shard_key = (
            shard_arrays.shard_folder(self.config, self.snapshot_id, family, wanted[0]),
            self._shard_key(family, wanted[0], opened),
        )

        def restore(arrays: dict[str, np.ndarray]) -> Any:
            return searcher_from_arrays(family, arrays, global_names, read_global, key)

        if mapped_only:
            return shard_arrays.mapped_searcher(folder, shard_key, restore)
        return shard_arrays.cached_searcher(folder, shard_key, build, registry.family(family).to_arrays, restore)

    def _shard_key(self, family: str, shard: int, opened: dict[str, _IndexTable]) -> dict[str, Any]:
        """What a shard's cached arrays are built from (``lakejoin.query.shard_arrays``): the
        family's array format and the data files read, the shard's own and those of the global
        tables its arrays depend on (the family's ``arrays_globals``; default all). A data file
        never changes once written, so a later snapshot whose shard has the same key has the
        same arrays."""
        indexed = registry.family(family)
        embedded = indexed.arrays_globals
        tables = {
            name: sorted(table.files_of(shard if table.sharded else None))
            for name, table in opened.items()
            if table.sharded or embedded is None or name in embedded
        }
        return {"format": indexed.arrays_format, "family": family, "shard": shard, "tables": tables}

    def index_rows(
        self, family: str, name: str, columns: list[str], where: pads.Expression | delta.ValuesIn
    ) -> pa.Table:
        """The rows of the family's table ``name`` (every shard) that match ``where``: a lookup
        of a few keys that does not load the index."""
        return self._index_table(family, name).read(None, columns, where)

    def _index_table(self, family: str, name: str) -> _IndexTable:
        """``index/<family>/<name>`` at the pinned version, its Delta log read once per snapshot."""
        table = f"index/{family}/{name}"
        found = self._index_tables.get(table)
        if found is None:
            found = self._index_tables[table] = _IndexTable.open(self.config.table_path(table), self.open(table))
        return found

    def open(self, table: str) -> DeltaTable:
        """``table``'s Delta log at this snapshot's pinned version."""
        version = self.snapshot.version_of(table)
        if version is None:
            raise LookupError(f"snapshot {self.snapshot_id} does not pin table {table}")
        return delta.open_table(self.config.table_path(table), version)

    def row_count(self, table: str, opened: DeltaTable | None = None) -> int | None:
        """Rows of ``table`` at this snapshot's pinned version, from the Delta log alone
        (``opened``: the table as :meth:`open` returned it, to read the log once)."""
        return delta.row_count(self.config.table_path(table), opened=opened if opened is not None else self.open(table))

    def read(self, table: str, opened: DeltaTable | None = None) -> pa.Table:
        """``table`` at this snapshot's pinned version (``opened`` as in :meth:`row_count`)."""
        return delta.read_arrow(
            self.config.table_path(table), opened=opened if opened is not None else self.open(table)
        )

    def dataset(self, dataset_id: str) -> dict[str, Any]:
        """The catalog row of ``dataset_id``; ``LookupError`` when the snapshot lacks it or it is not active."""
        row = self.datasets.get(dataset_id)
        if row is None:
            raise LookupError(f"dataset {dataset_id!r} is not in snapshot {self.snapshot_id}")
        if row["status"] != "active":
            raise LookupError(f"dataset {dataset_id!r} is {row['status']} in snapshot {self.snapshot_id}")
        return row

    def staged_table(self, dataset_id: str) -> pa.Table:
        """The dataset's staged copy (Parquet, every column text), column names from the catalog."""
        row = self.dataset(dataset_id)
        if not row.get("staged_path"):
            raise LookupError(f"dataset {dataset_id!r} has no staged copy")
        path = Path(row["staged_path"])
        return pq.read_table(path if path.is_absolute() else self.config.home / path)

    def columns_of(self, dataset_id: str) -> list[ColumnInfo]:
        """The columns of ``dataset_id`` in the snapshot's catalog."""
        return self.columns.of_dataset(dataset_id)


def load_snapshot(config: LakeConfig, snapshot: snapshots.Snapshot) -> LoadedSnapshot:
    """Read the catalog tables of ``snapshot`` at their pinned versions."""
    datasets: dict[str, dict[str, Any]] = {}
    if snapshot.version_of(DATASETS) is not None:
        for row in delta.read_arrow(config.table_path(DATASETS), snapshot.version_of(DATASETS)).to_pylist():
            datasets[row["dataset_id"]] = row
    columns = ColumnCatalog(
        delta.read_arrow(config.table_path(COLUMNS), snapshot.version_of(COLUMNS))
        if snapshot.version_of(COLUMNS) is not None
        else COLUMNS_SCHEMA.empty_table()
    )
    return LoadedSnapshot(config, snapshot, datasets, columns)


class SnapshotCache:
    """The latest published snapshot of one lake, loaded once per process and swapped on publish."""

    def __init__(
        self,
        config: LakeConfig,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._current: LoadedSnapshot | None = None
        self._checked_at = float("-inf")
        self._pinned: OrderedDict[int, LoadedSnapshot] = OrderedDict()
        self._swap_lock = threading.Lock()
        self._pinned_lock = threading.Lock()

    def get(self, snapshot_id: int | None = None) -> LoadedSnapshot:
        """The latest published snapshot (``snapshot_id=None``) or the given published one."""
        if snapshot_id is not None:
            return self._pinned_snapshot(snapshot_id)
        current = self._current
        if current is not None and self._clock() - self._checked_at < self.refresh_seconds:
            return current
        if current is None:
            self._swap_lock.acquire()
        elif not self._swap_lock.acquire(blocking=False):
            return current  # another thread is checking or loading: keep serving the current one
        try:
            latest = snapshots.resolve(self.config)
            if self._current is None or latest.snapshot_id != self._current.snapshot_id:
                self._current = self._warm(latest, self._current)
            self._checked_at = self._clock()
            return self._current
        finally:
            self._swap_lock.release()

    def _warm(self, snapshot: snapshots.Snapshot, previous: LoadedSnapshot | None) -> LoadedSnapshot:
        loaded = load_snapshot(self.config, snapshot)
        for family in previous.loaded_families() if previous else []:
            if family in loaded.families():
                loaded.searcher(family)
        return loaded

    def _pinned_snapshot(self, snapshot_id: int) -> LoadedSnapshot:
        current = self._current
        if current is not None and current.snapshot_id == snapshot_id:
            return current
        with self._pinned_lock:
            if snapshot_id in self._pinned:
                self._pinned.move_to_end(snapshot_id)
                return self._pinned[snapshot_id]
            loaded = load_snapshot(self.config, snapshots.resolve(self.config, snapshot_id))
            self._pinned[snapshot_id] = loaded
            while len(self._pinned) > PINNED_SNAPSHOTS:
                self._pinned.popitem(last=False)
            return loaded
