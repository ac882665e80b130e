"""The q-gram family: candidate columns for transformation-aware discovery (issue 19, thesis Ch. 4).

Each text column is indexed as the set of its sub-value tokens (:mod:`.tokens`: letter and digit
runs, character 3-grams, number bags, canonical numbers; bottom-k capped per column), and the
index *is* JOSIE's (``lakejoin.index.josie``) over those sets: the same tables (the global
``tokens`` dictionary and ``dictionary`` row; ``sets`` and ``postings`` sharded by dataset), the
same incremental rule and staleness, the same exact top-k overlap search. Only the input differs:
the build turns cells into token rows and hands them to JOSIE's build
(``lakejoin.spark.qgram``, or :func:`update_tables` in this process), and the searcher tokenizes
the query the same way before JOSIE's search. Its results are *candidates*: columns sharing the
most tokens with the query; ``lakejoin.transform.discover`` learns and verifies a transformation
for each.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lakejoin.index import josie
from lakejoin.index.josie.tokens import APPEND_TABLES, GLOBAL_TABLES, SCHEMAS
from lakejoin.index.qgram.tokens import column_tokens, query_tokens, value_tokens
from lakejoin.index.shards import column_sets

__all__ = [
    "APPEND_TABLES",
    "ARRAYS_FORMAT",
    "GLOBAL_TABLES",
    "LOAD_COLUMNS",
    "SCHEMAS",
    "QgramSearcher",
    "build_in_memory",
    "column_tokens",
    "from_arrays",
    "load",
    "query_tokens",
    "shared",
    "to_arrays",
    "update_tables",
    "value_tokens",
]
LOAD_COLUMNS = josie.LOAD_COLUMNS  # JOSIE's tables, read as JOSIE reads them
ARRAYS_FORMAT = josie.ARRAYS_FORMAT  # a shard's cached arrays are its JOSIE searcher's


class QgramSearcher:
    """JOSIE's searcher over token sets: :meth:`search` tokenizes the query column first."""

    def __init__(self, tables: Mapping[str, pa.Table], **params: Any) -> None:
        self.josie = josie.load(tables, **params)

    def search(self, query: Iterable[object], k: int = 10, *, floor: int = 0) -> list[dict[str, Any]]:
        """The ``k`` columns sharing the most tokens with the query column's values: ``column_id``,
        ``overlap`` (tokens shared), ``containment`` (their share of the query's tokens) and
        ``matched_sample`` (shared tokens, rarest first); with a ``floor``, only those sharing at
        least that many (``JosieSearcher.search``)."""
        if isinstance(query, (str, bytes)):
            raise ValueError("query must be an iterable of values, not a single string")
        tokens = query_tokens(query)
        if not tokens:
            raise ValueError("empty query: no non-null value after normalization")
        return self.josie.search(sorted(tokens), k=k, floor=floor)


def load(tables: Mapping[str, pa.Table], **params: Any) -> QgramSearcher:
    """The searcher over the family's tables (any subset of shards; ``params`` as ``josie.load``,
    ``shared`` included)."""
    return QgramSearcher(tables, **params)


def shared(tables: Mapping[str, pa.Table]) -> josie.TokenDictionary:
    """What every shard's searcher shares (JOSIE's token dictionary), from the global tables."""
    return josie.shared(tables)


def to_arrays(searcher: QgramSearcher) -> dict[str, np.ndarray]:
    """The arrays of the searcher's JOSIE index (family shape, ``lakejoin.index``)."""
    return josie.to_arrays(searcher.josie)


def from_arrays(arrays: Mapping[str, np.ndarray], *, shared: josie.TokenDictionary, **params: Any) -> QgramSearcher:
    """The searcher :func:`to_arrays` was given (family shape; ``params`` as ``josie.load``)."""
    searcher = QgramSearcher.__new__(QgramSearcher)
    searcher.josie = josie.from_arrays(arrays, shared=shared, **params)
    return searcher


def build_in_memory(cells: pa.Table, *, n_shards: int = 1) -> dict[str, pa.Table]:
    """The family's tables from ``lake/cells`` rows without Spark (equal to the Spark full build)."""
    sets, dataset_ids = column_sets(column_tokens(cells))
    return josie.build_in_memory(sets, dataset_ids=dataset_ids, normalize=False, n_shards=n_shards)


def update_tables(
    cells: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
) -> dict[str, pa.Table]:
    """The incremental build of ``lakejoin.spark.qgram.build_tables`` in this process: ``cells``
    are the changed datasets' ``lake/cells`` rows of the columns the family indexes."""
    return josie.update_tables(column_tokens(cells), n_shards=n_shards, previous=previous, changed=changed)
