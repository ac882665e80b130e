"""MATE (Esmailoghli, Quiané-Ruiz, Abedjan, VLDB 2022): n-ary joinable-table discovery.

- ``xash``: the XASH hash and row super keys (paper §5), bit-compatible with the authors' code.
- ``build``: the index tables (``postings``, ``superkeys`` sharded by dataset; ``params``,
  ``widths`` global) in memory; the Spark build is ``lakejoin.spark.mate.build_tables``.
- ``index``: the tables loaded as arrays for search (``MateIndex``), and those arrays for the
  shard cache of ``lakejoin.query.shard_arrays``.
- ``query``: initialization (Algorithm 1 lines 1-6): the query's key tuples, q', the query
  super keys and the candidate PL items grouped by table.
- ``search``: Algorithm 1 (§6) behind ``load(tables) -> MateSearcher``; the SCR baseline
  (no super keys, §7.1) is ``MateSearcher.search_scr``; ``to_arrays`` / ``from_arrays``: a
  searcher's arrays.
- ``kernels``: Algorithm 1's table loop compiled as one pass (rules 1-2, row filter, calculateJ).
- ``layout``: the loaded index's posting-list and cell orders, built by counting sorts.
- ``values``: the value dictionary, kept in Arrow's buffers and searched in byte order.
- ``duckdb_join``: the brute-force n-ary join over all column mappings (oracle and baseline).
"""

from lakejoin.index.mate.build import build_from_cells, build_in_memory, cells_from_frames, choose_bits, update_tables
from lakejoin.index.mate.index import ARRAYS_FORMAT, ARRAYS_GLOBALS
from lakejoin.index.mate.query import KeyQuery, key_query
from lakejoin.index.mate.search import MateSearcher, SearchStats, from_arrays, load, to_arrays
from lakejoin.index.mate.xash import super_key, xash

__all__ = [
    "ARRAYS_FORMAT",
    "ARRAYS_GLOBALS",
    "KeyQuery",
    "MateSearcher",
    "SearchStats",
    "build_from_cells",
    "build_in_memory",
    "cells_from_frames",
    "choose_bits",
    "from_arrays",
    "key_query",
    "load",
    "super_key",
    "to_arrays",
    "update_tables",
    "xash",
]
