"""The index-family contract: what every family provides, as one typed base class.

A family is a subclass of :class:`IndexFamily` and one line in :data:`lakejoin.index.registry.REGISTRY`. Every
layer asks the registry and these methods, never a family's name:

- **build** (the pipeline): the Spark builds (``lakejoin.spark.builders``) and their in-process twins for small lakes
  and changes, :meth:`IndexFamily.build_tables` (full) and :meth:`IndexFamily.update_tables` (incremental), turn the
  lake's long-form cells (``lakejoin.lake.schemas.CELLS_SCHEMA``, restricted to the columns the family indexes; with
  :attr:`IndexFamily.embeds`, their distinct values with embeddings) into the family's index tables. Tables in
  :attr:`IndexFamily.global_tables` are small and shared by every shard; every other table carries an ``int32``
  ``shard`` column and is Delta-partitioned by it. An incremental build gets the changed datasets' cells and the
  previous tables of the shards that hold them (the *rewritten shards*; global tables whole) and returns the new
  content of those shards, each global table whole, except the :attr:`IndexFamily.append_tables`, of which it returns
  only the rows to append. :meth:`IndexFamily.staleness` measures from the global tables how far updates have drifted
  from a fresh build; past :attr:`IndexFamily.staleness_limit` the next run rebuilds in full.
- **load** (the query side): :meth:`IndexFamily.load` builds the in-memory searcher from the tables read at a
  snapshot's pinned versions, for any subset of shards, answering exactly as one built over those shards alone.
  :attr:`IndexFamily.load_columns` names the columns ``load`` reads; :meth:`IndexFamily.shared` is what every shard's
  searcher of one index shares (built once per process from the global tables: JOSIE's token dictionary). A family
  with an :attr:`IndexFamily.arrays_format` writes a shard's searcher as arrays once per snapshot
  (:meth:`IndexFamily.to_arrays`, :meth:`IndexFamily.from_arrays`; ``lakejoin.query.shard_arrays``).
- **search**: :meth:`IndexFamily.ask` runs a searcher on a :class:`FamilyQuery` and returns a *part* (JSON-ready, so
  a Spark task can ship it); :meth:`IndexFamily.merge` combines the parts of disjoint shards exactly
  (``lakejoin.index.merge``); :meth:`IndexFamily.bound` and :attr:`IndexFamily.floor_score` let a shard that cannot
  reach the k-th score merged so far be skipped. Results carry ``column_id`` (``dataset_id`` for a
  :attr:`IndexFamily.table_level` family), the family's score and its evidence.
- **auto**: :attr:`IndexFamily.auto_ranked_by_quality` and :attr:`IndexFamily.auto_falls_back` say what the query
  layer's ``auto`` method does with the answer of a family it picked.
- **text**: :meth:`IndexFamily.result_notes` explains a search's scores under the CLI's table of results, and
  :meth:`IndexFamily.describe_evidence` words the evidence of a join-graph edge the family found.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa

from lakejoin.index.merge import Result, merge_top_k


class Searcher(Protocol):
    """What the query layer needs from a loaded index."""

    def search(self, query: Any, **params: Any) -> list[dict[str, Any]]:
        """The results for ``query``, each a dict naming a column (a table, for MATE) with its score and evidence;
        ``params``: the family's search parameters (``k``, thresholds)."""
        ...


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
    _prepared: Any = field(default=None, repr=False, compare=False)  # normalized once for every shard's searcher

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_prepared": None}  # JOSIE's refers to the index's whole token dictionary

    def embedded(self, searcher: Any, model: str) -> tuple[list[str], np.ndarray]:
        """The query's values and vectors under ``model``, embedded once per query (PEXESO)."""
        if model not in self._embedded:
            self._embedded[model] = searcher.embed_query(self.values[0], model)
        return self._embedded[model]


class IndexFamily(ABC):
    """One index family (see the module docstring). Subclasses set the class attributes and implement the
    abstract methods; the defaults fit a family with no shared state, no cached arrays and a top-k answer."""

    name: ClassVar[str]
    global_tables: ClassVar[frozenset[str]] = frozenset()
    append_tables: ClassVar[frozenset[str]] = frozenset()
    staleness_limit: ClassVar[float]
    load_columns: ClassVar[Mapping[str, Sequence[str]]] = {}  # table -> columns ``load`` reads (others: whole)
    # table -> peak bytes of ``load`` per row of that table (``lakejoin.query.memory``; measured, with headroom)
    load_bytes_per_row: ClassVar[Mapping[str, int]] = {}
    arrays_format: ClassVar[int | None] = None  # bumped when what the arrays mean changes; None: no arrays
    arrays_globals: ClassVar[frozenset[str] | None] = None  # global tables a shard's arrays depend on (None: all)
    floor_score: ClassVar[str | None] = None  # the result field :meth:`bound` bounds; None: no floor
    table_level: ClassVar[bool] = False  # results are tables (a composite key), not columns
    multi_column: ClassVar[bool] = False  # a query may hold several columns
    embeds: ClassVar[bool] = False  # built from the distinct values' embeddings, not the cells
    searched_by_score: ClassVar[bool] = True  # False: only proposes candidates to another search
    # when ``auto`` picks the family (``lakejoin.query.engine``): re-rank its best candidates by join quality
    # (``lakejoin.query.ranking``, which reads the family's tables); run transformation-aware discovery instead
    # when it finds nothing (on ``registry.TRANSFORM_CANDIDATES``)
    auto_ranked_by_quality: ClassVar[bool] = False
    auto_falls_back: ClassVar[bool] = False

    # -- build -------------------------------------------------------------------------------------------------
    @abstractmethod
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        """The full build in this process (the Spark full build's twin), for a lake small enough to build here:
        ``inputs`` as :meth:`update_tables` takes them, of every column the family indexes; ``params`` as the
        Spark build takes them (PEXESO: the embedding ``model``)."""

    @abstractmethod
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        """The incremental build in this process (the Spark incremental build's twin): ``inputs`` are the changed
        datasets' rows, ``changed`` the ids of the datasets added, changed or removed, ``previous`` the last build's
        global tables whole and its other tables cut to the rewritten shards. Returns those shards' new content, each
        global table whole, and of the :attr:`append_tables` only the rows to append."""

    @abstractmethod
    def staleness(self, global_tables: Mapping[str, pa.Table]) -> float:
        """How far incremental updates have drifted from a fresh build, from the global tables just written."""

    # -- load --------------------------------------------------------------------------------------------------
    @abstractmethod
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> Any:
        """The searcher over ``tables`` (any subset of shards); with :meth:`shared` state, ``tables`` hold only the
        sharded tables and ``shared`` is that state."""

    def shared(self, global_tables: Mapping[str, pa.Table]) -> Any:
        """What every shard's searcher of one index shares, built once per process; None: the global tables
        themselves are passed to :meth:`load`."""
        return None

    def to_arrays(self, searcher: Any) -> dict[str, np.ndarray]:
        """The searcher as arrays (only for a family with an :attr:`arrays_format`)."""
        raise NotImplementedError(f"{self.name} keeps no arrays")

    def from_arrays(self, arrays: Mapping[str, np.ndarray], shared: Any = None) -> Any:
        """The searcher :meth:`to_arrays` gave ``arrays``; ``ValueError`` when they are not one searcher's."""
        raise NotImplementedError(f"{self.name} keeps no arrays")

    def scratch_bytes(self, searcher: Any) -> int | None:
        """The memory a searcher allocates beyond its :meth:`to_arrays` arrays (when those are memory-mapped, the
        pages are the OS's to share and evict, and this is what the searcher costs); None: the family cannot tell."""
        return None

    # -- search ------------------------------------------------------------------------------------------------
    @abstractmethod
    def rank_key(self, result: Result) -> tuple:
        """The family's ranking, as its searcher sorts: best score first, then the smaller id."""

    def query(
        self,
        columns: list[str],
        values: list[list[Any]],
        k: int,
        params: dict[str, Any],
        dataset_id: str | None,
        own_columns: int,
    ) -> FamilyQuery:
        """The query for this family; ``own_columns``: the query dataset's columns the family indexes (asked for on
        top of ``k``, so that dropping them still leaves ``k``)."""
        if not self.multi_column and len(columns) != 1:
            raise ValueError(f"{self.name} searches one column; use mate (or auto) for {len(columns)} columns")
        ask_k = k if self.table_level else k + own_columns
        return FamilyQuery(self.name, list(columns), self.query_values(values), k, ask_k, dict(params), dataset_id)

    def query_values(self, values: list[list[Any]]) -> list[list[Any]]:
        """The query's values as this family searches them (one list per column)."""
        return values

    @abstractmethod
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        """The part ``searcher`` answers; ``floor``: the :attr:`floor_score` a result must reach (families with one)."""

    def bound(self, searcher: Any, query: FamilyQuery) -> int | None:
        """The best :attr:`floor_score` any result of ``searcher`` can have, known without searching; None: unknown."""
        return None

    def merge(self, query: FamilyQuery, parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """The whole index's raw answer from the parts of disjoint shards (exact)."""
        return merge_top_k(parts, query.ask_k, self.rank_key)

    def score(self, result: Result) -> float:
        """The one number batch discovery reports for a result."""
        return -float(self.rank_key(result)[0])

    # -- text --------------------------------------------------------------------------------------------------
    def result_notes(self, results: Sequence[Result]) -> list[str]:
        """Lines printed under a search's table of ``results`` to explain scores that are not exact counts and
        shares (an estimate); none by default."""
        return []

    def describe_evidence(self, evidence: Mapping[str, Any]) -> str:
        """The evidence of a join-graph edge the family found (``lakejoin.graph.store``), in words for ``lakejoin
        related``; by default each field as ``name value``."""
        return ", ".join(f"{name} {value}" for name, value in evidence.items())


def prepared(searcher: Any, query: FamilyQuery) -> Any:
    """The query normalized (and signed) by the first searcher asked, reused by every other shard's."""
    query._prepared = searcher.prepare(query._prepared if query._prepared is not None else query.values[0])
    return query._prepared
