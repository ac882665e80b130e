"""The query side: the latest published snapshot, every index family behind one search, and
joins materialized from the results (DESIGN "Query side").

- ``snapshot``: :class:`LoadedSnapshot` (one snapshot's catalog and searchers) and
  :class:`SnapshotCache` (once per process, swapped atomically on publish);
- ``tables``: query tables from files or lake datasets;
- ``engine``: :class:`QueryEngine` (``search``, ``auto`` method picking, result enrichment);
- ``join``: :func:`join` (one-to-many policies, transformations, provenance) and writing the
  augmented table as Parquet or CSV.

The CLI (``lakejoin search`` / ``lakejoin join``), the Airflow plugin's REST API and search page,
and the DAG operators all go through :func:`engine_for`.
"""

from lakejoin.query.engine import METHODS, Limits, QueryEngine, engine_for
from lakejoin.query.snapshot import LoadedSnapshot, MethodUnavailable, SnapshotCache
from lakejoin.query.tables import QueryTable, read_table_file

__all__ = [
    "METHODS",
    "Limits",
    "LoadedSnapshot",
    "MethodUnavailable",
    "QueryEngine",
    "QueryTable",
    "SnapshotCache",
    "engine_for",
    "read_table_file",
]
