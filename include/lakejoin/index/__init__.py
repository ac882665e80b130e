"""Index families. Every family has the same shape (DESIGN "Layout"):

- ``lakejoin.spark.<family>.build_tables(spark, inputs, *, previous=None, changed=None, **params)
  -> dict[str, DataFrame]`` turns the lake's long-form cells (``lakejoin.lake.schemas.CELLS_SCHEMA``,
  restricted by the pipeline to the columns this family indexes; for PEXESO, their distinct values
  with embeddings) into the family's index tables. For an incremental build the pipeline also
  passes ``previous`` (the family's tables of the last build) and ``changed`` (dataset ids added,
  changed or removed since). It writes each returned DataFrame to the Delta table
  ``index/<family>/<name>`` and pins its version in the snapshot.
- ``lakejoin.index.<family>.load(tables: dict[str, pyarrow.Table], **params) -> Searcher`` builds
  the in-memory searcher from those tables read at the snapshot's pinned versions.
- ``Searcher.search(query, **params) -> list[dict]`` returns ranked results; each carries the
  candidate's ``column_id`` (or ``dataset_id`` for table-level families), its score and its
  evidence. ``lakejoin.query`` adds rank, dataset, table title and column name.
"""

from __future__ import annotations

from typing import Any, Protocol

FAMILIES = ("josie", "lshensemble", "mate", "pexeso")


class Searcher(Protocol):
    """What the query layer needs from a loaded index."""

    def search(self, query: Any, **params: Any) -> list[dict[str, Any]]: ...
