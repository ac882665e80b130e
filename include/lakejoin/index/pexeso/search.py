"""PEXESO search, [ICDE] Algorithm 3, and the searcher built from the index tables.

Per partition: map ``Q`` with the partition's pivots, build ``HG_Q`` with the same bounds and
``m`` as ``HG_RV``, block (quick browsing + Algorithm 1), verify (Algorithm 2 with exact
per-record counting). Partitions are searched one at a time; the union is exact because a
column lives in exactly one partition (§IV).

Semantics (notes §1.1): ``Q`` is the multiset of the query column's non-null values, one
vector per record; a record matches ``S`` when some vector of ``S`` lies within Euclidean
distance ``τ`` (Def. 1, inclusive); ``jn(Q, S) = |Q_M| / |Q|``; joinable iff
``|Q_M| ≥ ⌈T·|Q|⌉``. Identical query vectors are searched once with their multiplicity.
Top-k ([v1] Def. 3) returns the k columns with the most matched records.

Scores are exact: a column that reaches ``T_cnt`` is verified to the end, so its ``jn`` is the
true share, and results rank by it (ties by column id). Only columns that are not returned
stop early (Lemma 7). ``lower_bound=True`` is the paper's Algorithm 2 as written: a column stops
at ``T_cnt``, faster, and its ``jn`` is then a lower bound near ``T`` (notes §5.1 item 9).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.pexeso.block import block
from lakejoin.index.pexeso.build import check_metric, check_vectors
from lakejoin.index.pexeso.grid import HierarchicalGrid, leaf_keys
from lakejoin.index.pexeso.inverted import InvertedIndex
from lakejoin.index.pexeso.lemmas import required_matches, tolerance
from lakejoin.index.pexeso.pivots import map_to_pivot_space
from lakejoin.index.pexeso.projection import head_bound, heads, largest_norm, principal_axes
from lakejoin.index.pexeso.verify import PRUNED, Repository, Verified, verify
from lakejoin.normalize import normalize_value

MODES = ("threshold", "topk")
SAMPLE_PAIRS = 5


@dataclass
class SearchStats:
    """Work done by the last search: the benchmark's distance-computation count."""

    distances: int = 0  # exact distances in verification plus pivot mapping of Q
    matching_pairs: int = 0
    candidate_pairs: int = 0


@dataclass
class PartitionIndex:
    """One partition's PEXESO: pivots, ``HG_RV``, ``I`` and its vectors in posting order
    (:func:`posting_order`), with their principal-axis heads (``projection.py``)."""

    partition: int
    pivots: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    levels: int
    column_ids: np.ndarray  # column index -> column_id
    dataset_ids: list[str | None]  # column index -> dataset_id
    vectors: np.ndarray
    mapped: np.ndarray
    columns: np.ndarray  # vector -> column index
    values: list[str | None]
    vector_ids: np.ndarray
    keys: np.ndarray
    axes: np.ndarray  # principal axes of the heads (projection.py)
    vector_heads: np.ndarray  # each vector's head on ``axes``, float32
    repository: Repository = field(init=False)  # the vectors as Verify reads them
    magnitude: float = field(init=False)  # the largest vector norm: the heads' rounding scale
    grid: HierarchicalGrid = field(init=False)
    inverted: InvertedIndex = field(init=False)
    eps: float = field(init=False)

    def __post_init__(self) -> None:
        self.magnitude = largest_norm(self.vectors)
        self.repository = Repository(
            self.vectors, self.mapped, self.vector_heads[:, 0].astype(np.float64), self.vector_heads
        )
        self.grid = HierarchicalGrid(self.keys, self.mapped, len(self.pivots), self.levels)
        self.inverted = InvertedIndex.build(self.keys, self.columns, self.mapped, self.grid.leaves.keys)
        self.eps = tolerance(float(np.abs(np.r_[self.lo, self.hi]).max(initial=1.0)))

    def search(
        self,
        queries: np.ndarray,
        weights: np.ndarray,
        tau: float,
        required: int,
        top_k: int,
        stop_when_joinable: bool,
        use_lemmas: bool,
        stats: SearchStats,
    ) -> tuple[Verified, np.ndarray]:
        """Algorithm 3 on this partition; also returns the query order (hits index into it)."""
        q_mapped = map_to_pivot_space(queries, self.pivots)
        keys = leaf_keys(q_mapped, self.lo, self.hi, self.levels)
        order = np.argsort(keys, kind="stable")
        q_mapped = q_mapped[order]
        query_grid = HierarchicalGrid(keys[order], q_mapped, len(self.pivots), self.levels)
        pairs = block(query_grid, q_mapped, self.grid, tau, self.eps, use_matching=use_lemmas)
        inv = self.inverted
        queries = queries[order]
        magnitude = max(self.magnitude, largest_norm(queries))
        verified = verify(
            weights[order],
            queries,
            q_mapped,
            heads(queries, self.axes),
            self.repository,
            (inv.leaf_start, inv.column, inv.vector_start, inv.vector_end, inv.lo, inv.hi),
            tuple(p.csr(len(order)) for p in (pairs.matching, pairs.browsing, pairs.candidate)),
            len(self.column_ids),
            required=required,
            top_k=top_k,
            stop_when_joinable=stop_when_joinable,
            use_lemmas=use_lemmas,
            tau=tau,
            head_bound=head_bound(tau, self.axes, magnitude),
            eps=self.eps,
        )
        stats.distances += verified.distances + len(queries) * len(self.pivots)
        stats.matching_pairs += len(pairs.matching.query)
        stats.candidate_pairs += len(pairs.candidate.query) + len(pairs.browsing.query)
        return verified, order


def distinct_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of a 2-d array, the index of each one's first occurrence, its count.

    Rows are compared as raw bytes (one ``void`` item per row): ``np.unique(axis=0)`` compares
    them field by field and costs more than the whole search on 384-d query columns. (Rows that
    differ only in the sign of a zero stay apart; each keeps its own count, which is harmless.)
    """
    rows = np.ascontiguousarray(vectors)
    as_bytes = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, counts = np.unique(as_bytes, return_index=True, return_counts=True)
    return rows[first], first, counts


class PexesoSearcher:
    """Joinable-column search over PEXESO index tables (``load`` builds it)."""

    def __init__(self, partitions: list[PartitionIndex], metric: str, model: str | None, dim: int) -> None:
        self.partitions = partitions
        self.metric = metric
        self.model = model
        self.dim = dim
        self.tau_scale = check_metric(metric)
        self.last_stats = SearchStats()

    def search(
        self,
        query_vectors: np.ndarray,
        tau: float = 0.06,
        T: float = 0.6,
        *,
        mode: str = "threshold",
        k: int = 10,
        exact: bool = False,
        lower_bound: bool = False,
        query_values: Sequence[Any] | None = None,
        use_lemmas: bool = True,
    ) -> list[dict[str, Any]]:
        """Columns S with ``jn(Q, S) ≥ T`` (``mode="threshold"``) or the ``k`` best (``"topk"``).

        ``query_vectors`` has one row per query record (duplicates count). ``tau`` is a
        fraction of the maximum distance 2 under ``l2-unit`` (0.06 means 0.12) and absolute
        under ``l2-absolute``; ``T`` a fraction of ``|Q|`` (ignored by top-k). Each result's
        ``joinability`` is its exact ``jn(Q, S)`` (``matched`` records of ``|Q|``); results are
        ranked by it, ties by column id. ``lower_bound=True`` (threshold mode only) stops
        verifying a column once it reaches ``T``: faster, but ``joinability`` is then a lower
        bound, ``joinability_exact`` False, and the ranking is by those bounds. ``exact=True``
        returns the full record mapping (one pair per matched distinct query value) in
        ``sample_pairs`` instead of the first ``SAMPLE_PAIRS``. ``use_lemmas=False`` is the
        paper's PEXESO-H baseline (grid blocking, naive verification).
        """
        queries = np.asarray(query_vectors)
        if queries.ndim == 2 and queries.shape[1] != self.dim:
            raise ValueError(f"query vectors have dimension {queries.shape[1]}, the index {self.dim}")
        queries = check_vectors(queries, self.metric, "query vectors")
        n_records = self._check_query(queries, tau, T, mode, k, query_values)
        if lower_bound and (mode != "threshold" or exact):
            raise ValueError("lower_bound applies to threshold mode without exact (it stops counting at T)")
        unique, first, counts = distinct_rows(queries)
        required = required_matches(T, n_records) if mode == "threshold" else 0
        top_k = k if mode == "topk" else 0
        self.last_stats = SearchStats()
        results: list[dict[str, Any]] = []
        for part in self.partitions:
            verified, order = part.search(
                unique,
                counts.astype(np.int64),
                tau * self.tau_scale,
                required,
                top_k,
                lower_bound,
                use_lemmas,
                self.last_stats,
            )
            found = (verified.status != PRUNED) & (verified.matched >= max(required, 1))
            for col in np.flatnonzero(found).tolist():
                results.append(self._result(part, col, verified, first[order], n_records, query_values, exact))
        results.sort(key=lambda r: (-r["matched"], r["column_id"]))  # by jn: one |Q| for all
        return results[:k] if mode == "topk" else results

    def search_text(
        self, values: Sequence[Any], model: str, tau: float = 0.06, T: float = 0.6, **options: Any
    ) -> list[dict[str, Any]]:
        """Embed the query column's non-null values with ``model`` and search."""
        kept, vectors = self.embed_query(values, model)
        return self.search(vectors, tau, T, query_values=kept, **options)

    def embed_query(self, values: Sequence[Any], model: str) -> tuple[list[str], np.ndarray]:
        """The query column's normalized non-null values and their vectors under ``model``,
        which must be the index's embedding model: vectors of two models are not comparable."""
        if self.model is None:
            raise ValueError("this PEXESO index was built from numeric vectors, not text embeddings")
        if model != self.model:
            raise ValueError(
                f"the index was built with embedding model {self.model!r}, not {model!r}; embed the query with "
                f"{self.model!r}"
            )
        from lakejoin.embed import embed

        kept = [v for v in map(normalize_value, values) if v is not None]
        if not kept:
            raise ValueError("the query column has no non-null values")
        return kept, embed(kept, model)

    def _check_query(
        self, queries: np.ndarray, tau: float, T: float, mode: str, k: int, values: Sequence[Any] | None
    ) -> int:
        if len(queries) == 0:
            raise ValueError("the query column is empty")
        if not tau >= 0 or (self.metric == "l2-unit" and tau > 1):
            raise ValueError(f"tau must be in [0, 1] (a fraction of the maximum distance 2) for l2-unit, got {tau}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode == "threshold" and not 0 < T <= 1:
            raise ValueError(f"T must be a fraction of |Q| in (0, 1], got {T}")
        if mode == "topk" and k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if values is not None and len(values) != len(queries):
            raise ValueError(f"query_values has {len(values)} entries for {len(queries)} query vectors")
        return len(queries)

    @staticmethod
    def _result(
        part: PartitionIndex,
        col: int,
        verified: Verified,
        record_of: np.ndarray,
        n_records: int,
        values: Sequence[Any] | None,
        exact: bool,
    ) -> dict[str, Any]:
        hits = np.flatnonzero(verified.hit_column == col)
        hits = hits[np.argsort(record_of[verified.hit_query[hits]], kind="stable")]
        if not exact:
            hits = hits[:SAMPLE_PAIRS]
        pairs = []
        for h in hits.tolist():
            record = int(record_of[verified.hit_query[h]])
            x = int(verified.hit_vector[h])
            target = part.values[x] if part.values[x] is not None else int(part.vector_ids[x])
            pairs.append([values[record] if values is not None else record, target])
        matched = int(verified.matched[col])
        return {
            "column_id": int(part.column_ids[col]),
            "dataset_id": part.dataset_ids[col],
            "joinability": matched / n_records,
            "joinability_exact": bool(verified.undecided[col] == 0),  # every record reaching S decided
            "matched": matched,
            "sample_pairs": pairs,
        }


def posting_order(keys: np.ndarray, columns: np.ndarray, first_head: np.ndarray, vector_ids: np.ndarray) -> np.ndarray:
    """The permutation that groups vectors by posting (leaf cell, column) and orders each
    posting by first head coordinate: Verify bisects on it (the widest principal axis
    spreads a posting's vectors more than the distance to pivot 1 does, so its τ-slab keeps
    fewer)."""
    return np.lexsort((vector_ids, first_head, columns, keys))


def _flat(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    return pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def load(tables: Mapping[str, pa.Table], *, partitions: Sequence[int] | None = None) -> PexesoSearcher:
    """The searcher over index tables ``params``, ``pivots``, ``mapped`` and ``cells``.

    ``mapped`` and ``cells`` may hold any subset of shards (their ``shard`` column is not
    read; other tables, such as the pipeline's ``shards`` manifest, are ignored): every column
    lives in one shard and the global pivots and bounds serve any subset, so the searcher
    answers as one built over those shards' columns. A partition with no vector loaded is
    left out. ``partitions`` loads only those partitions (default: all). For a lake larger than memory,
    load and search one partition at a time and take the union of the threshold results (or
    the best k of the top-k results): every column lives in exactly one partition (§IV).
    Vectors are ordered by the inverted index (``cells``): by partition, leaf cell, column,
    then by first principal-axis head coordinate (:func:`posting_order`); each partition's
    axes and heads are computed from the Arrow buffer before its vectors are gathered, once,
    in that order.
    """
    missing = {"params", "pivots", "mapped", "cells"} - set(tables)
    if missing:
        raise ValueError(f"PEXESO index tables missing: {', '.join(sorted(missing))}")
    settings = tables["params"].to_pylist()
    if not settings:
        raise ValueError("the PEXESO params table is empty")
    for key in ("metric", "model", "dim"):
        if len({s[key] for s in settings}) > 1:
            raise ValueError(f"PEXESO partitions disagree on {key}")
    tables = dict(tables)
    if partitions is not None:
        unknown = set(partitions) - {s["partition"] for s in settings}
        if unknown:
            raise ValueError(f"unknown PEXESO partition(s): {sorted(unknown)}")
        settings = [s for s in settings if s["partition"] in set(partitions)]
        wanted = pa.array(sorted(set(partitions)), pa.int32())
        for name in ("pivots", "mapped", "cells"):
            tables[name] = tables[name].filter(pc.is_in(tables[name]["partition"], wanted))
    metric, model, dim = settings[0]["metric"], settings[0]["model"], int(settings[0]["dim"])
    vectors = tables["mapped"]
    cells = tables["cells"]
    exploded = pa.table(
        {
            "partition": pc.take(cells["partition"], pc.list_parent_indices(cells["vector_ids"])),
            "cell": pc.take(cells["cell"], pc.list_parent_indices(cells["vector_ids"])),
            "column_id": pc.take(cells["column_id"], pc.list_parent_indices(cells["vector_ids"])),
            "vector_id": pc.list_flatten(cells["vector_ids"]),
        }
    )
    indexed = vectors.select(["partition", "column_id", "vector_id"]).append_column(
        "row", pa.array(np.arange(vectors.num_rows))
    )
    joined = exploded.join(indexed, ["partition", "column_id", "vector_id"])
    if joined.num_rows != vectors.num_rows:
        raise ValueError("PEXESO tables 'cells' and 'mapped' do not list the same vectors")
    joined = joined.sort_by(
        [("partition", "ascending"), ("cell", "ascending"), ("column_id", "ascending"), ("vector_id", "ascending")]
    )
    rows = joined["row"].to_numpy()
    all_vectors = _flat(vectors["vector"], np.float32).reshape(vectors.num_rows, dim)  # in table order
    mapped_length = pc.list_value_length(vectors["mapped"]).to_numpy()
    mapped_start = np.cumsum(mapped_length) - mapped_length
    all_mapped = _flat(vectors["mapped"], np.float64)
    all_partitions = joined["partition"].to_numpy()
    all_columns = joined["column_id"].to_numpy()
    values = vectors["value"].to_pylist()
    dataset = vectors["dataset_id"].to_pylist()
    pivots = tables["pivots"]
    loaded: list[PartitionIndex] = []
    for s in sorted(settings, key=lambda s: s["partition"]):
        p, n_pivots = s["partition"], int(s["n_pivots"])
        # joined is sorted by partition: a partition is a slice of it
        sel = slice(*np.searchsorted(all_partitions, [p, p + 1]).tolist())
        if sel.start == sel.stop:
            continue
        if not (mapped_length[rows[sel]] == n_pivots).all():
            raise ValueError(f"partition {p}: mapped vectors do not have {n_pivots} coordinates")
        column_ids, column_index = np.unique(all_columns[sel], return_inverse=True)
        first_row = rows[sel][np.unique(column_index, return_index=True)[1]]
        axes = principal_axes(all_vectors, rows[sel])
        vector_heads = heads(all_vectors, axes, rows[sel])
        vector_ids, keys = joined["vector_id"].to_numpy()[sel], joined["cell"].to_numpy()[sel]
        order = posting_order(keys, column_index, vector_heads[:, 0], vector_ids)
        part_rows = rows[sel][order]
        piv = pivots.filter(pc.equal(pivots["partition"], p)).sort_by("pivot")
        loaded.append(
            PartitionIndex(
                partition=p,
                pivots=_flat(piv["vector"], np.float32).reshape(piv.num_rows, dim),
                lo=np.asarray(s["lo"], dtype=np.float64),
                hi=np.asarray(s["hi"], dtype=np.float64),
                levels=int(s["levels"]),
                column_ids=column_ids,
                dataset_ids=[dataset[r] for r in first_row.tolist()],
                vectors=all_vectors[part_rows],
                mapped=all_mapped[mapped_start[part_rows][:, None] + np.arange(n_pivots)],
                columns=column_index[order].astype(np.int64),
                values=[values[r] for r in part_rows.tolist()],
                vector_ids=vector_ids[order],
                keys=keys[order],
                axes=axes,
                vector_heads=vector_heads[order],
            )
        )
    return PexesoSearcher(loaded, metric, model, dim)
