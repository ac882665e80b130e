"""JOSIE: exact top-k joinable-column search (Zhu, thesis Ch. 3 = SIGMOD 2019).

- ``tokens``: the index tables (global order, duplicate groups, integer sets, postings) and
  :func:`build_in_memory`, the Spark-free build of the same tables.
- ``josie``: Algorithm 2 and :class:`JosieSearcher` (``load(tables)``).
- ``cost``: the read-cost model of Eq. 3.15, fitted on load.
- ``baselines``: MergeList-D and ProbeSet-D.
- ``reads``: the list/set reads and top-k heap they all share.
"""

from lakejoin.index.josie.cost import ReadCost
from lakejoin.index.josie.josie import JosieSearcher, load
from lakejoin.index.josie.tokens import SCHEMAS, build_in_memory

__all__ = ["SCHEMAS", "JosieSearcher", "ReadCost", "build_in_memory", "load"]
