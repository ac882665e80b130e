"""MATE discovery, the paper's Algorithm 1 (§6): top-k tables joinable on a composite key.

Joinability (Eq. 1/2, set semantics): for a candidate table S,
``ȷ(d, S) = max over one-to-one mappings Y' of |π_Q(d) ∩ π_Y'(S)|``, the number of distinct
query key tuples found aligned in one row of S, each query column on its own column of S.
(The reference code counts candidate rows, i.e. bag semantics, and does not enforce
one-to-one; both are deliberate departures, see the note §1 and §5.7.)

The four phases, as in Algorithm 1:

1. Initialization (§6.1, lines 1-6): normalize the key cells with
   ``lakejoin.normalize.normalize_value`` (the index was built from the same values), drop rows
   with a null key value, de-duplicate on Q; pick the initial column q' of lowest cardinality
   (overridable); fetch the posting lists of q''s values in one go; group them by table and
   order tables by their number of PL items ``L_t``, descending; compute each query row's key.
2. Table filtering (§6.2), once k tables are in the top-k list with worst score ȷ_k:
   rule 1 (line 10) stops the search when ``L_t ≤ ȷ_k``; rule 2 (line 17) drops a table when
   ``L_t − r_checked + r_match ≤ ȷ_k``. ``≤`` prunes ties, which cannot enter the list anyway.
3. Row filtering (§6.3, lines 20-25): each PL item meets only the query rows with its value
   (a dictionary on q'); a pair survives iff the query key is contained in the row's super key.
   The high word, which holds the length bits, is tested first.
4. ``calculateJ`` (line 27): the surviving rows' cells are compared with the key values to find
   every one-to-one mapping they support, and ȷ_t is the best mapping's count of distinct tuples.
   Each table is verified right after its row filter, so the top-k list is never stale and no
   batch of candidates is left unverified at the end (the reference code loses its last batch).
   A table none of whose rows passes the filter is never verified: ȷ_t = 0.

Why the bounds hold under set semantics: under one mapping, a row holds exactly one key tuple,
and only PL items in the mapping's initial column count, so ȷ_t ≤ L_t, and a table's final
score is at most the distinct rows that passed the filter plus the items not yet checked.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.mate.scr import no_filter
from lakejoin.index.mate.xash import bytes_to_words, xash_words
from lakejoin.normalize import normalize_value

# A row filter takes (index, query, candidate rows g, query rows x) and returns a keep-mask.
RowFilter = Callable[["MateIndex", "PreparedQuery", np.ndarray, np.ndarray], np.ndarray]

PAIRS_PER_CHUNK = 1 << 20  # (PL item, query row) pairs filtered at once (bounds memory)
SAMPLE_SIZE = 5


@dataclass
class MateIndex:
    """The index tables laid out as arrays; rows of the lake are numbered g = 0..n_rows-1."""

    bits: int
    dataset_ids: np.ndarray  # dataset index -> dataset_id
    values: pd.Index  # value id -> normalized value
    pl_offsets: np.ndarray  # PL(v) is items pl_offsets[v]:pl_offsets[v+1]
    pl_dataset: np.ndarray
    pl_column: np.ndarray
    pl_row: np.ndarray  # g
    superkeys: np.ndarray  # (n_rows, bits/64) uint64, word 0 most significant
    cell_keys: np.ndarray  # sorted g * n_values + value id, one per cell
    cell_columns: np.ndarray  # column_id of each cell_keys entry


@dataclass
class PreparedQuery:
    """The query after initialization (Algorithm 1 lines 1-6)."""

    columns: list[str]
    initial: int  # position of q' in columns
    tuples: np.ndarray  # (n, m) normalized distinct key tuples
    value_ids: np.ndarray  # (n, m) value ids in the index, -1 where absent
    keys: np.ndarray  # (n, bits/64) query super keys


@dataclass
class SearchStats:
    """Counters of one search; a pair is (PL item, query row)."""

    pl_items: int = 0
    tables: int = 0
    tables_verified: int = 0
    pruned_rule1: int = 0
    pruned_rule2: int = 0
    pairs_checked: int = 0
    pairs_passed: int = 0
    pairs_joinable: int = 0

    @property
    def precision(self) -> float:
        """Share of pairs passing the row filter that verification confirms (paper Table 3)."""
        return self.pairs_joinable / self.pairs_passed if self.pairs_passed else 1.0

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "precision": self.precision}


def load_index(tables: dict[str, pa.Table]) -> MateIndex:
    """Arrays for search from the ``postings`` and ``superkeys`` tables."""
    for name in ("postings", "superkeys"):
        if name not in tables:
            raise ValueError(f"MATE index needs a {name!r} table, got {sorted(tables)}")
    postings, superkeys = tables["postings"], tables["superkeys"]
    bit_sizes = pc.unique(superkeys["bits"]).to_pylist()
    if len(bit_sizes) > 1:
        raise ValueError(f"super keys mix hash sizes {bit_sizes}; rebuild the index with one size")
    bits = bit_sizes[0] if bit_sizes else 128

    datasets = pc.unique(pa.chunked_array(superkeys["dataset_id"].chunks + postings["dataset_id"].chunks))
    dataset_ids = np.sort(datasets.to_numpy(zero_copy_only=False).astype(object))
    dataset_index = pd.Index(dataset_ids)
    row_span = int(max(pc.max(superkeys["row_id"]).as_py() or 0, pc.max(postings["row_id"]).as_py() or 0)) + 1

    def row_key(table: pa.Table) -> np.ndarray:
        ds = dataset_index.get_indexer(table["dataset_id"].to_numpy())
        return ds.astype(np.int64) * row_span + table["row_id"].to_numpy()

    sk_keys = row_key(superkeys)
    sk_order = np.argsort(sk_keys, kind="stable")
    sk_keys = sk_keys[sk_order]
    if len(sk_keys) and (np.diff(sk_keys) == 0).any():
        raise ValueError("superkeys has more than one key for a row")
    blob = b"".join(superkeys["superkey"].to_pylist())
    keys = bytes_to_words(blob, bits)[sk_order] if len(blob) else np.zeros((0, bits // 64), np.uint64)

    pl_key = row_key(postings)
    g = np.searchsorted(sk_keys, pl_key)
    if len(pl_key) and ((g >= len(sk_keys)).any() or (sk_keys[np.minimum(g, len(sk_keys) - 1)] != pl_key).any()):
        raise ValueError("postings reference rows that have no super key")

    encoded = pc.dictionary_encode(postings["value"]).combine_chunks()
    values = pd.Index(encoded.dictionary.to_numpy(zero_copy_only=False))
    vid = encoded.indices.to_numpy().astype(np.int64)
    column = postings["column_id"].to_numpy()
    dataset = (sk_keys[g] // row_span).astype(np.int32) if len(g) else np.zeros(0, np.int32)

    pl_order = np.lexsort((column, g, vid))
    cell_keys = g * len(values) + vid
    cell_order = np.lexsort((column, cell_keys))
    return MateIndex(
        bits=bits,
        dataset_ids=dataset_ids,
        values=values,
        pl_offsets=np.r_[0, np.cumsum(np.bincount(vid, minlength=len(values)))].astype(np.int64),
        pl_dataset=dataset[pl_order],
        pl_column=column[pl_order],
        pl_row=g[pl_order],
        superkeys=keys,
        cell_keys=cell_keys[cell_order],
        cell_columns=column[cell_order],
    )


def prepare_query(index: MateIndex, query: pd.DataFrame, columns: list[str], initial_column: str | None) -> PreparedQuery:
    """Initialization: normalized, de-duplicated key tuples, q', value ids and query keys."""
    if not isinstance(query, pd.DataFrame) or query.empty:
        raise ValueError("the query table is empty")
    columns = list(columns)
    if not columns:
        raise ValueError("no key columns given")
    if len(set(columns)) != len(columns):
        raise ValueError(f"key columns repeat: {columns}")
    unknown = [c for c in columns if c not in query.columns]
    if unknown:
        raise ValueError(f"key columns not in the query table: {unknown} (it has {list(query.columns)})")
    if initial_column is not None and initial_column not in columns:
        raise ValueError(f"initial column {initial_column!r} is not one of the key columns {columns}")

    keys = pd.DataFrame({c: query[c].map(normalize_value) for c in columns}).dropna().drop_duplicates()
    if keys.empty:
        raise ValueError(f"no query row has a non-null value in every key column {columns}")
    if initial_column is None:
        initial = int(np.argmin([keys[c].nunique() for c in columns]))
    else:
        initial = columns.index(initial_column)
    tuples = keys.to_numpy(dtype=object)
    value_ids = index.values.get_indexer(tuples.ravel()).reshape(tuples.shape).astype(np.int64)
    distinct = pd.unique(tuples.ravel())
    value_words = dict(zip(distinct, xash_words(distinct, index.bits)))
    query_keys = np.bitwise_or.reduce(np.stack([np.stack([value_words[v] for v in col]) for col in tuples.T]), axis=0)
    return PreparedQuery(columns, initial, tuples, value_ids, query_keys)


def superkey_filter(index: MateIndex, query: PreparedQuery, g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Row filter of §6.3: keep a pair iff ``key(x) & ~superkey(g) == 0``, high word first."""
    keep = np.zeros(len(g), dtype=bool)
    alive = np.arange(len(g))
    for word in range(index.superkeys.shape[1]):
        contained = (query.keys[x[alive], word] & ~index.superkeys[g[alive], word]) == 0
        alive = alive[contained]
    keep[alive] = True
    return keep


def _mappings(index: MateIndex, query: PreparedQuery, g: np.ndarray, c0: np.ndarray, x: np.ndarray):
    """calculateJ's comparison: the one-to-one mappings each candidate pair supports.

    Returns (columns (N, m), query rows (N,), joinable pair count). A pair whose row holds
    each key value in exactly one cell is resolved with array operations; one whose row holds
    a value in several cells enumerates every injective choice.
    """
    m = len(query.columns)
    others = [p for p in range(m) if p != query.initial]
    n_values = len(index.values)
    lo = np.empty((len(g), m), np.int64)
    hi = np.empty((len(g), m), np.int64)
    for p in others:
        v = query.value_ids[x, p]
        key = g * n_values + v
        lo[:, p] = np.searchsorted(index.cell_keys, key, "left")
        hi[:, p] = np.where(v >= 0, np.searchsorted(index.cell_keys, key, "right"), lo[:, p])
    counts = (hi - lo)[:, others]
    found = (counts >= 1).all(axis=1)
    single = found & (counts == 1).all(axis=1)

    cols = np.empty((int(single.sum()), m), np.int64)
    cols[:, query.initial] = c0[single]
    for p in others:
        cols[:, p] = index.cell_columns[lo[single, p]]
    ordered = np.sort(cols, axis=1)
    injective = (np.diff(ordered, axis=1) != 0).all(axis=1)
    out_cols, out_x = [cols[injective]], [x[single][injective]]
    joinable = int(injective.sum())

    for i in np.flatnonzero(found & ~single):
        choices = [[c0[i]] if p == query.initial else index.cell_columns[lo[i, p] : hi[i, p]] for p in range(m)]
        supported = [combo for combo in itertools.product(*choices) if len(set(combo)) == m]
        if supported:
            joinable += 1
            out_cols.append(np.array(supported, np.int64).reshape(-1, m))
            out_x.append(np.full(len(supported), x[i]))
    return np.concatenate(out_cols), np.concatenate(out_x), joinable


def calculate_j(index: MateIndex, query: PreparedQuery, g: np.ndarray, c0: np.ndarray, x: np.ndarray):
    """Algorithm 1 line 27: (ȷ_t, best mapping, its matched query rows, joinable pairs)."""
    cols, rows, joinable = _mappings(index, query, g, c0, x)
    if not len(rows):
        return 0, None, rows, joinable
    distinct = np.unique(np.column_stack([cols, rows]), axis=0)
    mappings, owner, counts = np.unique(distinct[:, :-1], axis=0, return_inverse=True, return_counts=True)
    best = int(np.argmax(counts))  # ties: the smallest column-id tuple, as np.unique sorts
    return int(counts[best]), mappings[best], distinct[owner.ravel() == best, -1], joinable


def _fetch_pl_items(index: MateIndex, query: PreparedQuery, exclude: set[int]):
    """Line 4: every PL item of q''s values, with the query rows sharing its value (line 20)."""
    v0 = query.value_ids[:, query.initial]
    order = np.argsort(v0, kind="stable")
    order = order[v0[order] >= 0]
    slots, slot_start, slot_count = np.unique(v0[order], return_index=True, return_counts=True)
    lengths = index.pl_offsets[slots + 1] - index.pl_offsets[slots]
    slot_of_item = np.repeat(np.arange(len(slots)), lengths)
    items = np.repeat(index.pl_offsets[slots] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
    if exclude:
        keep = ~np.isin(index.pl_dataset[items], list(exclude))
        items, slot_of_item = items[keep], slot_of_item[keep]
    return items, slot_of_item, order, slot_start, slot_count


def _chunks(pairs_per_item: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive item ranges holding about ``budget`` pairs each (at least one item)."""
    ends = np.cumsum(pairs_per_item)
    cuts = np.searchsorted(ends, np.arange(budget, ends[-1], budget), side="right")
    return itertools.pairwise(np.unique(np.r_[0, cuts, len(ends)]).tolist())


def discover(
    index: MateIndex,
    query: PreparedQuery,
    k: int,
    row_filter: RowFilter,
    exclude_datasets: Iterable[str] = (),
) -> tuple[list[dict], SearchStats]:
    """Algorithm 1 with a pluggable row filter (XASH super keys for MATE, none for SCR).

    The row filter runs on chunks of about ``PAIRS_PER_CHUNK`` (PL item, query row) pairs in
    table order, as far ahead as the next table needs, so rule 1 still stops the filtering.
    Rule 2 is evaluated once a table's items are all filtered: its bound
    ``L_t − r_checked + r_match`` never grows as items are checked (each item adds at most one
    passed row), so it ends at ``r_match`` and drops the table exactly when some point of the
    paper's item-by-item scan would have.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    exclude = set(np.flatnonzero(np.isin(index.dataset_ids, list(exclude_datasets))).tolist())
    items, slot_of_item, query_rows, slot_start, slot_count = _fetch_pl_items(index, query, exclude)
    stats = SearchStats(pl_items=len(items))
    if not len(items):
        return [], stats

    # Line 5: group the PL items by table, tables by L_t descending (then dataset id).
    tables, sizes = np.unique(index.pl_dataset[items], return_counts=True)
    table_order = np.lexsort((tables, -sizes))
    rank_of_table = np.empty(len(tables), np.int64)
    rank_of_table[table_order] = np.arange(len(tables))
    rank = rank_of_table[np.searchsorted(tables, index.pl_dataset[items])]
    by_rank = np.argsort(rank, kind="stable")
    items, slot_of_item, rank = items[by_rank], slot_of_item[by_rank], rank[by_rank]
    last_item = np.cumsum(sizes[table_order]) - 1
    stats.tables = len(tables)

    pairs_per_item = slot_count[slot_of_item]
    chunks = _chunks(pairs_per_item, PAIRS_PER_CHUNK)
    filtered_to = 0  # items [0, filtered_to) went through the row filter
    survivors: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def filter_next_chunk() -> int:
        """Lines 15-26 for a chunk of PL items: pair each with its query rows, filter."""
        lo, hi = next(chunks)
        per_item = pairs_per_item[lo:hi]
        item_of_pair = np.repeat(np.arange(lo, hi), per_item)
        rank_in_item = np.arange(len(item_of_pair)) - np.repeat(np.cumsum(per_item) - per_item, per_item)
        x = query_rows[slot_start[slot_of_item[item_of_pair]] + rank_in_item]
        g = index.pl_row[items[item_of_pair]]
        keep = np.flatnonzero(row_filter(index, query, g, x))
        stats.pairs_checked += len(g)
        kept_items = item_of_pair[keep]
        kept_ranks, starts = np.unique(rank[kept_items], return_index=True)
        for r, part in zip(kept_ranks.tolist(), np.split(keep, starts[1:])):
            survivors.setdefault(r, []).append((g[part], index.pl_column[items[item_of_pair[part]]], x[part]))
        return hi

    top: list[tuple[int, int, dict]] = []  # min-heap of (ȷ, -rank, result)
    for r, t in enumerate(table_order):
        size = int(sizes[t])
        worst = top[0][0] if len(top) == k else None
        if worst is not None and size <= worst:  # rule 1: no later table can enter the top-k
            stats.pruned_rule1 = len(tables) - r
            break
        while filtered_to <= last_item[r]:
            filtered_to = filter_next_chunk()
        parts = survivors.pop(r, [])
        if not parts:
            continue  # no row passed the filter: ȷ_t = 0
        g, c0, x = (np.concatenate(a) for a in zip(*parts))
        if worst is not None and len(np.unique(g)) <= worst:  # rule 2
            stats.pruned_rule2 += 1
            continue
        stats.tables_verified += 1
        stats.pairs_passed += len(g)
        score, mapping, matched, joinable = calculate_j(index, query, g, c0, x)
        stats.pairs_joinable += joinable
        if score == 0 or (worst is not None and score <= worst):
            continue
        result = {
            "dataset_id": str(index.dataset_ids[tables[t]]),
            "joinability": score,
            "mapping": {col: int(c) for col, c in zip(query.columns, mapping)},
            "matched_sample": [list(query.tuples[i]) for i in matched[:SAMPLE_SIZE]],
            "rows_verified": len(g),
        }
        entry = (score, -r, result)
        if len(top) < k:
            heapq.heappush(top, entry)
        else:
            heapq.heapreplace(top, entry)
    ranked = sorted((entry[2] for entry in top), key=lambda res: (-res["joinability"], res["dataset_id"]))
    return ranked, stats


class MateSearcher:
    """The loaded MATE index (``lakejoin.index.mate.load``)."""

    def __init__(self, index: MateIndex):
        self.index = index

    @property
    def bits(self) -> int:
        return self.index.bits

    def search(
        self,
        query: pd.DataFrame,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
    ) -> list[dict]:
        """Top-k tables joinable with ``query`` on the composite key ``columns`` (Algorithm 1).

        Each result: ``dataset_id``, ``joinability`` (distinct query key tuples found),
        ``mapping`` {query column: candidate column_id}, ``matched_sample`` (up to 5 matched
        key tuples, normalized) and ``rows_verified`` (pairs of candidate row and query row
        that passed the super-key filter), ranked by joinability, then dataset id.
        """
        return self.search_with_stats(query, columns, k, initial_column, exclude_datasets)[0]

    def search_with_stats(
        self,
        query: pd.DataFrame,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
        row_filter: RowFilter = superkey_filter,
    ) -> tuple[list[dict], SearchStats]:
        """``search`` plus its counters; ``row_filter`` swaps the super-key test (SCR passes none)."""
        prepared = prepare_query(self.index, query, columns, initial_column)
        return discover(self.index, prepared, k, row_filter, exclude_datasets)

    def search_scr(
        self,
        query: pd.DataFrame,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
    ) -> list[dict]:
        """The SCR baseline (``lakejoin.index.mate.scr``): same answers, no super-key filter."""
        return self.search_with_stats(query, columns, k, initial_column, exclude_datasets, no_filter)[0]


def load(tables: dict[str, pa.Table], **params: object) -> MateSearcher:
    """``MateSearcher`` from the index tables read at a snapshot (family shape, DESIGN)."""
    if params:
        raise ValueError(f"unknown MATE load parameters: {sorted(params)}")
    return MateSearcher(load_index(tables))

