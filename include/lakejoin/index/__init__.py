"""Index families. Every family has the same shape (DESIGN "Layout"), sharded (``shards``):

- ``lakejoin.spark.<family>.build_tables(spark, inputs, *, n_shards, previous=None, changed=None,
  **params) -> dict[str, DataFrame]`` turns the lake's long-form cells
  (``lakejoin.lake.schemas.CELLS_SCHEMA``, restricted by the pipeline to the columns this family
  indexes; for PEXESO, their distinct values with embeddings) into the family's index tables.
  Tables named in the module's ``GLOBAL_TABLES`` are small and shared by every shard; every
  other table carries an ``int32`` ``shard`` column (``lakejoin.spark.shards.shard_column``) and
  is Delta-partitioned by it.

  *Full build* (``previous=None``): ``inputs`` hold the whole family; every table is returned.
  *Incremental build*: ``changed`` is the dataset ids added, changed or removed since the last
  build; ``inputs`` hold the cells of the changed datasets only (a removed dataset has none);
  ``previous`` holds the last build's tables — the sharded ones restricted to the shards that
  hold a changed dataset (the *rewritten shards*), the global ones whole. The build returns the
  complete new content of the rewritten shards (their unchanged datasets' rows carried over from
  ``previous``) and each global table whole, except the tables in ``APPEND_TABLES``, for which
  it returns only the rows to append (JOSIE's new tokens).
  ``staleness(tables) -> float`` measures, from the global tables of the build just written, how
  far incremental updates have drifted from a fresh build; past ``STALENESS_LIMIT`` the next
  run rebuilds the family in full.

  The pipeline writes each sharded table by replacing the rewritten shards' partitions in one
  Delta commit, the global tables whole (or appended), and ``index/<family>/shards`` (one row
  per shard: datasets, columns, rows, the build that last wrote it); a snapshot pins them all.
- ``lakejoin.index.<family>.load(tables: dict[str, pyarrow.Table], **params) -> Searcher`` builds
  the in-memory searcher from those tables read at the snapshot's pinned versions; the sharded
  tables may hold any subset of shards, and the searcher then answers exactly as one built over
  those shards' columns alone. Optional, for loading one shard at a time
  (``lakejoin.query.family.load_searcher``): ``LOAD_COLUMNS`` (table -> the columns ``load``
  reads; others are not read) and ``shared(global_tables) -> object``, what every shard's
  searcher of one index shares, built once per process and passed as ``load(sharded_tables,
  shared=...)`` instead of the global tables (JOSIE: its token dictionary and fitted read costs).
  Optional, so that a shard is built once per snapshot and memory-mapped by later loads
  (``lakejoin.query.shard_arrays``): ``to_arrays(searcher) -> dict[str, numpy.ndarray]``,
  ``from_arrays(arrays, shared=...) -> Searcher`` (the same searcher around those arrays;
  ``ValueError`` when they do not have its arrays' shape) and ``ARRAYS_FORMAT`` (an int, bumped
  when what the arrays mean changes: cached arrays of another format are rebuilt); optionally
  ``ARRAYS_GLOBALS``, the global tables whose content a shard's arrays depend on (default: all),
  so a later snapshot reuses the arrays of a shard whose files and those tables are unchanged.
- ``Searcher.search(query, **params) -> list[dict]`` returns ranked results; each carries the
  candidate's ``column_id`` (or ``dataset_id`` for table-level families), its score and its
  evidence. ``lakejoin.query`` adds rank, dataset, table title and column name.
"""

from __future__ import annotations

from typing import Any, Protocol

FAMILIES = ("josie", "lshensemble", "mate", "pexeso", "qgram")
# the families a query searches by their own score; qgram only proposes candidates to `search transform`
SEARCH_FAMILIES = ("josie", "lshensemble", "mate", "pexeso")


class Searcher(Protocol):
    """What the query layer needs from a loaded index."""

    def search(self, query: Any, **params: Any) -> list[dict[str, Any]]: ...
