"""The lake's join graph: for every indexed column (and every table's composite keys) its top-k
joinable neighbours in other datasets, computed per snapshot and kept fresh incrementally.

- ``edges``: the edge kinds (JOSIE overlap, MATE composite-key joinability, PEXESO semantic)
  and the total order that ranks a neighbour list;
- ``build``: the full and the incremental computation over one ``LoadedSnapshot``;
- ``store``: the ``graph/`` Delta tables and the ``related`` answer;
- ``neighbours``: a dataset's neighbour tables, each once, ranked by join quality
  (``lakejoin.profile.join_quality``);
- ``publish``: the graph of a build's snapshot before it is published, or of the latest snapshot
  published without one.
"""

from lakejoin.graph.build import Graph, compute
from lakejoin.graph.edges import DEFAULT_K, KINDS, Edge
from lakejoin.graph.publish import refresh
from lakejoin.graph.store import GRAPH_TABLES, graph_status, related

__all__ = ["DEFAULT_K", "GRAPH_TABLES", "KINDS", "Edge", "Graph", "compute", "graph_status", "refresh", "related"]
