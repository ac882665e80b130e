"""PEXESO: exact joinable-table search under a high-dimensional similarity predicate.

Dong, Takeoka, Xiao, Oyamada, "Efficient Joinable Table Discovery in Data Lakes: A
High-Dimensional Similarity-Based Approach" (ICDE), with the numeric/spatial columns and the
top-k mode of the earlier "PEXESO: Finding Joinable Tables by Distance-based Similarities".
The modules follow the paper:

- ``pivots``: PCA-based pivot selection [22] and pivot mapping (§III-D);
- ``grid``: the hierarchical grid with sparse Morton cell keys (§III-E);
- ``inverted``: the inverted index from leaf cells to columns (§III-E);
- ``lemmas``: Lemmas 1–7 with conservative floating-point handling (§III-B, C);
- ``block``: quick browsing and Block (Algorithm 1); ``verify``: Verify (Algorithm 2);
- ``projection``: principal-axis heads, Verify's lower bound before an exact distance;
- ``search``: PEXESO (Algorithm 3), the searcher and ``load``;
- ``cost``: choosing ``|P|`` and ``m`` (§III-F); ``partition``: column clustering (§IV);
- ``build``: index construction shared by the Spark build and ``build_in_memory``;
- ``update``: updates with kept pivots, the global tables of the sharded layout, staleness.

Metrics: ``l2-unit`` (L2-normalized text embeddings; τ is a fraction of the maximum
distance 2) and ``l2-absolute`` (vectors built from numbers such as (latitude, longitude);
τ is absolute).
"""

from typing import Any

from lakejoin.index.pexeso.build import METRICS, build_in_memory
from lakejoin.index.pexeso.update import update_tables

__all__ = ["METRICS", "PexesoSearcher", "build_in_memory", "load", "update_tables"]


def __getattr__(name: str) -> Any:
    # The search side compiles numba kernels; Spark executors that only map vectors
    # (they import lakejoin.index.pexeso.build) should not pay for loading numba.
    if name in ("PexesoSearcher", "load"):
        from lakejoin.index.pexeso import search

        return getattr(search, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
