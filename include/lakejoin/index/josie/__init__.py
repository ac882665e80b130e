"""JOSIE: exact top-k joinable-column search (Zhu, thesis Ch. 3 = SIGMOD 2019).

- ``tokens``: the index tables (global token order, integer sets, postings; sharded), the
  duplicate groups found on load, and :func:`build_in_memory` / :func:`update_in_memory`,
  the Spark-free full and incremental builds of the same tables.
- ``josie``: :class:`JosieSearcher` (``load(tables)``; ``to_arrays`` / ``from_arrays``: a
  searcher's arrays, for the shard cache of ``lakejoin.query.shard_arrays``).
- ``kernels``: Algorithm 2 and its decision step, compiled.
- ``dictionary``: the token dictionary and fitted read costs every shard's searcher of one index
  shares (``shared(tables)``), and a query looked up in it.
- ``arrays``: the searcher's CSR arrays, built from the tables or checked when read from a cache.
- ``cost``: the read-cost model of Eq. 3.15, fitted on load.
- ``baselines``: MergeList-D and ProbeSet-D.
- ``plans``: which of JOSIE, MergeList and ProbeSet answers a query, priced before any read by
  each plan's whole-query time, fitted on load.
- ``reads``: the list/set reads and top-k heap they all share.
"""

from lakejoin.index.josie.arrays import ARRAYS_FORMAT, LOAD_COLUMNS
from lakejoin.index.josie.cost import ReadCost
from lakejoin.index.josie.dictionary import TokenDictionary, shared
from lakejoin.index.josie.josie import JosieSearcher, from_arrays, load, to_arrays
from lakejoin.index.josie.tokens import (
    APPEND_TABLES,
    GLOBAL_TABLES,
    SCHEMAS,
    build_in_memory,
    update_in_memory,
    update_tables,
)

__all__ = [
    "APPEND_TABLES",
    "ARRAYS_FORMAT",
    "GLOBAL_TABLES",
    "LOAD_COLUMNS",
    "SCHEMAS",
    "JosieSearcher",
    "ReadCost",
    "TokenDictionary",
    "build_in_memory",
    "from_arrays",
    "load",
    "shared",
    "to_arrays",
    "update_in_memory",
    "update_tables",
]
