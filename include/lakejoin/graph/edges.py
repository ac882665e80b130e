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

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from lakejoin.index.mate import KeyQuery, key_query
from lakejoin.profile.join_quality import (
    DECIMAL_SHAPE,
    KEY_UNIQUENESS,
    MEASURE_SHAPE,
    Side,
    content_scores,
    quality,
)

JOSIE, MATE, PEXESO = "josie", "mate", "pexeso"
KINDS = (JOSIE, MATE, PEXESO)
DEFAULT_K = 10
PEXESO_TAU = 0.06  # the engine's defaults (lakejoin.query.engine)
PEXESO_T = 0.6
WEIGHT_SCALE = 1 << 20  # informativeness weights as integers in units of 2**-20
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
        ("quality", pa.float64()),  # JOSIE: the join's quality (lakejoin.profile.join_quality), its rank order
        ("informativeness", pa.float64()),  # JOSIE: the shared values' mean informativeness
    ]
)


@dataclass(frozen=True)
class Edge:
    """One edge of the join graph: a query column (or key) and a column (or key) that joins with it."""

    kind: str
    query_dataset_id: str
    query_column_ids: tuple[int, ...]
    dataset_id: str
    column_ids: tuple[int, ...]
    overlap: int
    containment: float
    containment_reverse: float | None = None
    jaccard: float | None = None
    quality: float | None = None
    informativeness: float | None = None

    @property
    def order(self) -> tuple:
        """JOSIE edges rank by quality, MATE's and PEXESO's by overlap (their searches prune by it)."""
        strength = -self.quality if self.quality is not None else -self.overlap
        return (strength, self.dataset_id, self.column_ids)

    @property
    def neighbour(self) -> tuple[str, tuple[int, ...]]:
        """The column (or key) the edge reaches: its dataset and column ids, one edge kept per neighbour."""
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
            "quality": e.quality,
            "informativeness": e.informativeness,
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
            row.get("quality"),
            row.get("informativeness"),
        )
        lists.setdefault((edge.kind, edge.query_column_ids), []).append(edge)
    return lists


@dataclass
class SetProfiles:
    """What the catalog knows of each JOSIE set (a column), aligned with the sets: the parts of
    its join quality (``lakejoin.profile.join_quality``) that do not depend on the other side."""

    rows: np.ndarray  # non-null cells
    types: np.ndarray  # object: the column's type
    names: np.ndarray  # object: the column's name
    titles: np.ndarray  # object: its dataset's title
    row_numbers: np.ndarray  # bool: its values are its table's row numbers 1..n

    @classmethod
    def unknown(cls, n: int) -> SetProfiles:
        """Profiles of sets the catalog does not describe: every set a key of unknown type."""
        empty = np.full(n, "", object)
        return cls(np.zeros(n, np.int64), np.full(n, None, object), empty, empty, np.zeros(n, bool))

    def side(self, row: int, distinct: int) -> Side:
        """Set ``row`` as one side of a join with ``distinct`` distinct values; a set whose row count the
        catalog lacks counts one row per distinct value."""
        rows = int(self.rows[row]) or distinct
        return Side(
            self.names[row] or "", self.types[row], rows, distinct, self.titles[row] or "", bool(self.row_numbers[row])
        )


@dataclass
class OverlapIndex:
    """The JOSIE index's integer sets as a sparse 0/1 matrix (sets x tokens), for exact
    overlaps of many query sets with many candidate sets at once, ranked by join quality.

    A token's informativeness is ``1 - ln f / ln N``, ``f`` the number of sets holding it (its
    posting-list length) and ``N`` the lake's columns, so a second product with the matrix's
    entries weighted by it gives each pair's summed informativeness beside its overlap. The
    weights are fixed-point integers (``WEIGHT_SCALE``): integer sums do not depend on the order
    of the tokens, so a graph built from an incrementally numbered index equals a full rebuild's
    to the bit."""

    column_ids: np.ndarray
    dataset_ids: np.ndarray
    sizes: np.ndarray
    matrix: sparse.csr_matrix
    profiles: SetProfiles
    weighted: sparse.csr_matrix = field(default_factory=lambda: sparse.csr_matrix((0, 0)))
    _row_of: dict[int, int] = field(default_factory=dict)
    _dataset_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # each set's dataset as an int
    _tie_rank: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # place by (dataset id, column id)
    _uniqueness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    _numeric_shape: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per set: its type's shape factor

    @classmethod
    def of_sets(
        cls,
        sets: pa.Table,
        profiles: Callable[[np.ndarray], SetProfiles] | None = None,
        lake_columns: int = 0,
    ) -> OverlapIndex:
        """From JOSIE's ``sets`` table (set_id = column_id, dataset_id, size, tokens) and the
        catalog's profiles of those columns (``profiles(column_ids)``; unknown when not given).
        ``lake_columns``: the lake's ``N`` for informativeness, every column of the catalog (at
        least the sets: JOSIE holds the textual ones)."""
        sets = sets.sort_by("set_id")
        lengths = pc.list_value_length(sets["tokens"]).to_numpy(zero_copy_only=False).astype(np.int64)
        tokens = pc.list_flatten(sets["tokens"].combine_chunks()).to_numpy(zero_copy_only=False)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        n_tokens = int(tokens.max()) + 1 if len(tokens) else 0
        matrix = sparse.csr_matrix((np.ones(len(tokens), np.int32), tokens, indptr), shape=(sets.num_rows, n_tokens))
        column_ids = sets["set_id"].to_numpy()
        index = cls(
            column_ids,
            np.array(sets["dataset_id"].to_pylist(), dtype=object),
            lengths,
            matrix,
            profiles(column_ids) if profiles else SetProfiles.unknown(len(column_ids)),
        )
        frequency = np.asarray(matrix.sum(axis=0)).ravel()
        weights = 1.0 - np.log(np.maximum(frequency, 1)) / np.log(max(sets.num_rows, lake_columns, 2))
        fixed = np.round(weights * WEIGHT_SCALE).astype(np.int64)
        index.weighted = sparse.csr_matrix((fixed[tokens], tokens, indptr), shape=matrix.shape)
        index._row_of = {int(c): i for i, c in enumerate(column_ids)}
        index._dataset_codes = (
            np.unique(index.dataset_ids, return_inverse=True)[1].astype(np.int64).ravel()
            if len(index.dataset_ids)
            else np.zeros(0, np.int64)
        )
        index._tie_rank = np.empty(len(column_ids), np.int64)
        index._tie_rank[np.lexsort((column_ids, index._dataset_codes))] = np.arange(len(column_ids))
        rows = np.where(index.profiles.rows > 0, index.profiles.rows, lengths)
        index._uniqueness = np.minimum(1.0, lengths / np.maximum(rows, 1))
        types = index.profiles.types
        index._numeric_shape = np.where(types == "decimal", DECIMAL_SHAPE, np.where(types == "integer", -1.0, 1.0))
        return index

    def top_k(self, query_rows: np.ndarray, k: int) -> dict[Query, list[Edge]]:
        """For each query row, its best ``k`` sets of other datasets by join quality (and by
        overlap: ``_ranked``)."""
        target = self.matrix.T.tocsr()  # CSR: not converted again per block
        weighted = self.weighted.T.tocsr()
        lists: dict[Query, list[Edge]] = {}
        for start in range(0, len(query_rows), QUERY_BLOCK):
            block = query_rows[start : start + QUERY_BLOCK]
            products = (self.matrix[block] @ target).tocsr()
            informative = (self.matrix[block] @ weighted).tocsr()
            for i, row in enumerate(block.tolist()):
                lists[(JOSIE, (int(self.column_ids[row]),))] = self._ranked(row, products, informative, i, k)
        return lists

    def _ranked(
        self, row: int, products: sparse.csr_matrix, informative: sparse.csr_matrix, i: int, k: int
    ) -> list[Edge]:
        """The row's best ``k`` by overlap (the raw order ``--rank overlap`` shows) and its best
        ``k`` by quality, in one list by quality. Content scores are computed in arrays (a column
        shares a value with most of the lake's columns, and an ``Edge`` per candidate would cost
        more than the product); the name part, which only lowers a score, is computed for the
        best by content until the next one's content cannot reach the k-th score."""
        lo, hi = products.indptr[i], products.indptr[i + 1]
        found, overlaps = products.indices[lo:hi], products.data[lo:hi].astype(np.int64)
        informativeness = informative.data[lo:hi] / WEIGHT_SCALE / np.maximum(overlaps, 1)  # products' sparsity
        other = self._dataset_codes[found] != self._dataset_codes[row]
        found, overlaps, informativeness = found[other], overlaps[other], informativeness[other]
        content = content_scores(
            overlaps.astype(np.float64),
            np.full(len(found), float(self.sizes[row])),
            self.sizes[found].astype(np.float64),
            np.full(len(found), self._uniqueness[row]),
            self._uniqueness[found],
            self._shape(row, found),
            informativeness,
        )
        chosen: dict[int, Edge] = {}
        for position in self._by_overlap(found, overlaps, k):  # today's raw order, kept for `--rank overlap`
            chosen[position] = self._edge(row, int(found[position]), int(overlaps[position]), informativeness[position])
        by_quality: list[Edge] = []
        for position in np.lexsort((self._tie_rank[found], -content)).tolist():
            if len(by_quality) >= k and content[position] < (by_quality[k - 1].quality or 0.0):
                break
            edge = chosen.get(position) or self._edge(
                row, int(found[position]), int(overlaps[position]), informativeness[position]
            )
            chosen[position] = edge
            by_quality = sorted([*by_quality, edge], key=lambda e: e.order)[:k]
        return sorted(chosen.values(), key=lambda e: e.order)

    def _by_overlap(self, found: np.ndarray, overlaps: np.ndarray, k: int) -> list[int]:
        """Positions of the best ``k`` by overlap, then (dataset id, column id)."""
        order = -overlaps * len(self._tie_rank) + self._tie_rank[found]  # one int64 key per candidate
        top = np.argpartition(order, k - 1)[:k] if len(found) > k else np.arange(len(found))
        return top[np.argsort(order[top])].tolist()

    def _shape(self, row: int, found: np.ndarray) -> np.ndarray:
        """The type part of each pair (``quality.shape_of`` in arrays)."""
        mine, theirs = self._numeric_shape[row], self._numeric_shape[found]
        decimal = np.minimum(mine, theirs) == DECIMAL_SHAPE
        numeric = (mine < 0) | (theirs < 0)
        key_like = np.maximum(self._uniqueness[row], self._uniqueness[found]) >= KEY_UNIQUENESS
        return np.where(decimal, DECIMAL_SHAPE, np.where(numeric & ~key_like, MEASURE_SHAPE, 1.0))

    def _edge(self, row: int, x: int, overlap: int, informativeness: float) -> Edge:
        size, other = int(self.sizes[row]), int(self.sizes[x])
        judged = quality(self.profiles.side(row, size), self.profiles.side(x, other), overlap, float(informativeness))
        return Edge(
            JOSIE,
            self.dataset_ids[row],
            (int(self.column_ids[row]),),
            self.dataset_ids[x],
            (int(self.column_ids[x]),),
            overlap,
            overlap / size,
            overlap / other,
            overlap / (size + other - overlap),
            judged.score,
            float(informativeness),
        )


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
