"""The edges of the join graph, one kind per index family, and how a neighbour list is ranked.

An *edge* goes from a query unit (one column; for MATE, one composite key of a table) to a
neighbour in another dataset. Every kind ranks a query's candidates by ``overlap`` descending,
then neighbour dataset id and column ids ascending (a total order, so the top k is one list,
whoever computes it), and keeps the best ``k``:

- ``josie``: ``overlap`` = |Q ∩ X| over distinct normalized values; ``containment`` =
  overlap / |Q|, ``containment_reverse`` = overlap / |X|, ``jaccard`` = overlap / |Q ∪ X|.
  Computed exactly from the JOSIE index's integer sets (the index's own token ids), as a sparse
  product of the query rows with the candidate sets: JOSIE's search answers the same top-k
  overlaps, but breaks ties at the k-th place by its read order, which would make an
  incremental graph and a full one differ on tied columns.
- ``mate``: ``overlap`` = MATE's joinability (distinct key tuples of the query table found in
  one row of the neighbour), ``containment`` = its share of the query's tuples; ``columns`` are
  the neighbour's columns mapped to the key's.
- ``pexeso`` (``semantic``): ``overlap`` = distinct values of the query column with a match
  within τ in the neighbour, ``containment`` = their share (PEXESO's joinability over distinct
  values), kept when at least ``T``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from lakejoin.index.mate import KeyQuery, key_query

JOSIE, MATE, PEXESO = "josie", "mate", "pexeso"
KINDS = (JOSIE, MATE, PEXESO)
DEFAULT_K = 10
PEXESO_TAU = 0.06  # the engine's defaults (lakejoin.query.engine)
PEXESO_T = 0.6
MATE_SEARCH_K = 100  # MATE drops ties at its k-th place: ask for more, keep the best k by the total order
QUERY_BLOCK = 512  # query rows per sparse product (bounds the dense scratch to QUERY_BLOCK x sets)

EDGES_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("query_dataset_id", pa.string()),
        ("query_column_ids", pa.list_(pa.int64())),
        ("dataset_id", pa.string()),
        ("column_ids", pa.list_(pa.int64())),
        ("rank", pa.int32()),
        ("overlap", pa.int64()),
        ("containment", pa.float64()),
        ("containment_reverse", pa.float64()),
        ("jaccard", pa.float64()),
        ("semantic", pa.bool_()),
    ]
)


@dataclass(frozen=True)
class Edge:
    kind: str
    query_dataset_id: str
    query_column_ids: tuple[int, ...]
    dataset_id: str
    column_ids: tuple[int, ...]
    overlap: int
    containment: float
    containment_reverse: float | None = None
    jaccard: float | None = None

    @property
    def order(self) -> tuple:
        return (-self.overlap, self.dataset_id, self.column_ids)

    @property
    def neighbour(self) -> tuple[str, tuple[int, ...]]:
        return (self.dataset_id, self.column_ids)


Query = tuple[str, tuple[int, ...]]  # (kind, query column ids)


def best(edges: Iterable[Edge], k: int) -> list[Edge]:
    """The top ``k`` of ``edges`` (one query's) by the total order, each neighbour once."""
    unique = {e.neighbour: e for e in edges}
    return sorted(unique.values(), key=lambda e: e.order)[:k]


def edges_table(lists: Mapping[Query, list[Edge]]) -> pa.Table:
    """The ``EDGES_SCHEMA`` rows of every query's ranked list, in a stable order."""
    rows = [
        {
            "kind": e.kind,
            "query_dataset_id": e.query_dataset_id,
            "query_column_ids": list(e.query_column_ids),
            "dataset_id": e.dataset_id,
            "column_ids": list(e.column_ids),
            "rank": rank,
            "overlap": e.overlap,
            "containment": e.containment,
            "containment_reverse": e.containment_reverse,
            "jaccard": e.jaccard,
            "semantic": e.kind == PEXESO,
        }
        for query in sorted(lists)
        for rank, e in enumerate(lists[query], 1)
    ]
    return pa.Table.from_pylist(rows, schema=EDGES_SCHEMA)


def edge_lists(table: pa.Table) -> dict[Query, list[Edge]]:
    """``edges_table``'s inverse."""
    lists: dict[Query, list[Edge]] = {}
    for row in table.sort_by([("rank", "ascending")]).to_pylist():
        edge = Edge(
            row["kind"],
            row["query_dataset_id"],
            tuple(row["query_column_ids"]),
            row["dataset_id"],
            tuple(row["column_ids"]),
            row["overlap"],
            row["containment"],
            row["containment_reverse"],
            row["jaccard"],
        )
        lists.setdefault((edge.kind, edge.query_column_ids), []).append(edge)
    return lists


@dataclass
class OverlapIndex:
    """The JOSIE index's integer sets as a sparse 0/1 matrix (sets x tokens), for exact
    overlaps of many query sets with many candidate sets at once."""

    column_ids: np.ndarray
    dataset_ids: np.ndarray
    sizes: np.ndarray
    matrix: sparse.csr_matrix
    _row_of: dict[int, int] = field(default_factory=dict)
    _dataset_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # each set's dataset as an int
    _tie_rank: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )  # each set's place by (dataset id, column id)

    @classmethod
    def of_sets(cls, sets: pa.Table) -> OverlapIndex:
        """From JOSIE's ``sets`` table (set_id = column_id, dataset_id, size, tokens)."""
        sets = sets.sort_by("set_id")
        lengths = pc.list_value_length(sets["tokens"]).to_numpy(zero_copy_only=False).astype(np.int64)
        tokens = pc.list_flatten(sets["tokens"].combine_chunks()).to_numpy(zero_copy_only=False)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        n_tokens = int(tokens.max()) + 1 if len(tokens) else 0
        matrix = sparse.csr_matrix((np.ones(len(tokens), np.int32), tokens, indptr), shape=(sets.num_rows, n_tokens))
        index = cls(sets["set_id"].to_numpy(), np.array(sets["dataset_id"].to_pylist(), dtype=object), lengths, matrix)
        index._row_of = {int(c): i for i, c in enumerate(index.column_ids)}
        index._dataset_codes = (
            np.unique(index.dataset_ids, return_inverse=True)[1].astype(np.int64).ravel()
            if len(index.dataset_ids)
            else np.zeros(0, np.int64)
        )
        index._tie_rank = np.empty(len(index.column_ids), np.int64)
        index._tie_rank[np.lexsort((index.column_ids, index._dataset_codes))] = np.arange(len(index.column_ids))
        return index

    def rows_of(self, column_ids: Iterable[int]) -> np.ndarray:
        return np.array([self._row_of[c] for c in column_ids if c in self._row_of], dtype=np.int64)

    def top_k(self, query_rows: np.ndarray, k: int, candidates: np.ndarray | None = None) -> dict[Query, list[Edge]]:
        """For each query row, its best ``k`` candidate sets of other datasets (``candidates``:
        rows to consider, default all) by overlap."""
        candidates = np.arange(len(self.column_ids)) if candidates is None else candidates
        target = (
            self.matrix[candidates].T.tocsr() if len(candidates) else None
        )  # CSR: the product does not convert it again per block
        lists: dict[Query, list[Edge]] = {}
        for start in range(0, len(query_rows), QUERY_BLOCK):
            block = query_rows[start : start + QUERY_BLOCK]
            products = (
                (self.matrix[block] @ target).tocsr() if target is not None else sparse.csr_matrix((len(block), 0))
            )
            for i, row in enumerate(block.tolist()):
                lists[(JOSIE, (int(self.column_ids[row]),))] = self._ranked(row, candidates, products, i, k)
        return lists

    def _ranked(self, row: int, candidates: np.ndarray, products: sparse.csr_matrix, i: int, k: int) -> list[Edge]:
        """The row's best ``k`` by the total order, chosen in arrays: a column shares a value
        with most of the lake's columns (small integers, codes), and an ``Edge`` per candidate
        would cost more than the product."""
        lo, hi = products.indptr[i], products.indptr[i + 1]
        found, overlaps = candidates[products.indices[lo:hi]], products.data[lo:hi].astype(np.int64)
        other = self._dataset_codes[found] != self._dataset_codes[row]
        found, overlaps = found[other], overlaps[other]
        if len(found) > k:  # overlap descending, then (dataset id, column id): one int64 key per candidate
            top = np.argpartition(-overlaps * len(self._tie_rank) + self._tie_rank[found], k - 1)[:k]
            found, overlaps = found[top], overlaps[top]
        size = int(self.sizes[row])
        edges = [
            Edge(
                JOSIE,
                self.dataset_ids[row],
                (int(self.column_ids[row]),),
                self.dataset_ids[x],
                (int(self.column_ids[x]),),
                int(o),
                o / size,
                o / int(self.sizes[x]),
                o / (size + int(self.sizes[x]) - o),
            )
            for x, o in zip(found.tolist(), overlaps.tolist())
        ]
        return best(edges, k)


def mate_key(query: pa.Table, key: Mapping[str, int]) -> KeyQuery:
    """The composite ``key``'s (column name -> column id) tuples of ``query`` (the dataset's
    table), normalized for MATE once for every index (shard group) it is searched in."""
    names = list(key)
    return key_query(query.select(names), names)


def mate_edges(
    searcher: Any,
    query: KeyQuery,
    dataset_id: str,
    key: Mapping[str, int],
    k: int,
    min_overlap: int = 0,
    among: AbstractSet[str] | None = None,
) -> list[Edge]:
    """The best ``k`` tables joinable with ``dataset_id`` on its composite ``key`` (column name
    -> column id; ``query`` its tuples, ``mate_key``) by MATE, among those joining at least
    ``min_overlap`` tuples (and of the datasets ``among`` only, when given)."""
    names = list(key)
    others = [] if among is None else [d for d in searcher.index.dataset_ids.tolist() if d not in among]
    found = searcher.search(
        query, names, k=MATE_SEARCH_K, exclude_datasets=[dataset_id, *others], min_score=min_overlap
    )
    edges = [
        Edge(
            MATE,
            dataset_id,
            tuple(key.values()),
            r["dataset_id"],
            tuple(int(r["mapping"][n]) for n in names),
            int(r["joinability"]),
            float(r["share"]),
        )
        for r in found
        if r["joinability"] > 0
    ]
    return best(edges, k)


def pexeso_edges(
    searcher: Any, vectors: np.ndarray, dataset_id: str, column_id: int, datasets: Mapping[int, str], k: int
) -> list[Edge]:
    """The best ``k`` columns of other datasets whose vectors match at least ``PEXESO_T`` of the
    column's distinct values (``vectors``, one each) within ``PEXESO_TAU``."""
    found = searcher.search(vectors, PEXESO_TAU, PEXESO_T, mode="threshold")
    edges = [
        Edge(
            PEXESO,
            dataset_id,
            (column_id,),
            datasets.get(r["column_id"]) or r["dataset_id"],
            (int(r["column_id"]),),
            int(r["matched"]),
            float(r["joinability"]),
        )
        for r in found
        if (datasets.get(r["column_id"]) or r["dataset_id"]) != dataset_id
    ]
    return best(edges, k)
