"""MATE discovery, the paper's Algorithm 1 (§6): top-k tables joinable on a composite key.

Joinability (Eq. 1/2, set semantics): for a candidate table S,
``ȷ(d, S) = max over one-to-one mappings Y' of |π_Q(d) ∩ π_Y'(S)|``, the number of distinct
query key tuples found aligned in one row of S, each query column on its own column of S.
(The reference code counts candidate rows, i.e. bag semantics, and does not enforce
one-to-one; both are deliberate departures, see the note §1 and §5.7.)

The four phases, as in Algorithm 1:

1. Initialization (§6.1, lines 1-6): normalize the key cells with
   ``lakejoin.normalize.normalize_value`` (the index was built from the same values), drop rows
   with a null key value, de-duplicate on Q; pick the initial column q' (overridable; see
   ``initial_column_selection``); fetch the posting lists of q''s values in one go; group them
   by table and order tables by their number of PL items ``L_t``, descending; compute each
   query row's key.
2. Table filtering (§6.2), once k tables are in the top-k list with worst score ȷ_k:
   rule 1 (line 10) stops the search when ``L_t ≤ ȷ_k``; rule 2 (line 17) drops a table when
   ``L_t − r_checked + r_match ≤ ȷ_k``. ``≤`` prunes ties, which cannot enter the list anyway.
3. Row filtering (§6.3, lines 20-25): each PL item meets only the query rows with its value
   (a dictionary on q'); a pair survives iff the query key is contained in the row's super key.
   The high word, which holds the length bits, is tested first.
4. ``calculateJ`` (line 27): the surviving rows' cells are compared with the key values to find
   every one-to-one mapping they support, and ȷ_t is the best mapping's count of distinct tuples.
   Phases 3 and 4 are compiled loops (``kernels``); SCR runs the same ones without the filter.
   Each table is verified right after its row filter, so the top-k list is never stale and no
   batch of candidates is left unverified at the end (the reference code loses its last batch).
   A table none of whose rows passes the filter is never verified: ȷ_t = 0.

Why the bounds hold under set semantics: under one mapping, a row holds exactly one key tuple,
and only PL items in the mapping's initial column count, so ȷ_t ≤ L_t, and a table's final
score is at most the distinct rows that passed the filter plus the items not yet checked.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.mate.kernels import row_filter, supported_mappings
from lakejoin.index.mate.xash import bytes_to_words, xash_words
from lakejoin.normalize import normalize_value

PAIRS_PER_CHUNK = 1 << 20  # (PL item, query row) pairs filtered in one pass (bounds memory)
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
    row_offsets: np.ndarray  # row g's cells are cell_*[row_offsets[g]:row_offsets[g+1]]
    cell_values: np.ndarray  # value id of each cell, ascending within a row
    cell_columns: np.ndarray  # column_id of each cell, ascending within (row, value)


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
    cell_order = np.lexsort((column, vid, g))
    return MateIndex(
        bits=bits,
        dataset_ids=dataset_ids,
        values=values,
        pl_offsets=np.r_[0, np.cumsum(np.bincount(vid, minlength=len(values)))].astype(np.int64),
        pl_dataset=dataset[pl_order],
        pl_column=column[pl_order],
        pl_row=g[pl_order],
        superkeys=np.ascontiguousarray(keys),
        row_offsets=np.r_[0, np.cumsum(np.bincount(g, minlength=len(sk_keys)))].astype(np.int64),
        cell_values=vid[cell_order],
        cell_columns=column[cell_order].astype(np.int64),
    )


INITIAL_RULES = ("pl_items", "cardinality")


def prepare_query(
    index: MateIndex,
    query: pd.DataFrame,
    columns: list[str],
    initial_column: str | None,
    initial_rule: str = "pl_items",
) -> PreparedQuery:
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
    if initial_rule not in INITIAL_RULES:
        raise ValueError(f"initial_rule must be one of {INITIAL_RULES}, got {initial_rule!r}")

    tuples = _key_tuples(query, columns)
    if not len(tuples):
        raise ValueError(f"no query row has a non-null value in every key column {columns}")
    codes, distinct = pd.factorize(tuples.ravel())
    value_ids = index.values.get_indexer(distinct).astype(np.int64)[codes].reshape(tuples.shape)
    if initial_column is None:
        initial = initial_column_selection(index, codes.reshape(tuples.shape), value_ids, initial_rule)
    else:
        initial = columns.index(initial_column)
    value_words = xash_words(distinct, index.bits)[codes].reshape(*tuples.shape, -1)
    query_keys = np.bitwise_or.reduce(value_words, axis=1)
    return PreparedQuery(columns, initial, tuples, value_ids, np.ascontiguousarray(query_keys))


def initial_column_selection(index: MateIndex, codes: np.ndarray, value_ids: np.ndarray, rule: str) -> int:
    """init_column_selection() (Algorithm 1 line 2, §6.1): the position of q' among the key columns.

    The paper's aim is the column "that leads to the smaller number of PL items"; it uses the
    lowest cardinality (``"cardinality"``) because PL sizes "cannot be known upfront" in its
    disk-resident index. Here they are known, so ``"pl_items"`` (the default) picks the column
    whose distinct values have the fewest PL items in total: §7.5.4's "Best" (ground truth).
    Ties go to the lower cardinality, then to the earlier column.
    """
    cardinality = [len(np.unique(codes[:, p])) for p in range(codes.shape[1])]
    if rule == "cardinality":
        return int(np.argmin(cardinality))
    pl_lengths = np.diff(index.pl_offsets)
    pl_items = [int(pl_lengths[v[v >= 0]].sum()) for v in (np.unique(value_ids[:, p]) for p in range(codes.shape[1]))]
    return min(range(len(pl_items)), key=lambda p: (pl_items[p], cardinality[p]))


def _key_tuples(query: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The distinct normalized key tuples without a null value, in order of first occurrence.

    ``normalize_value`` runs once per distinct raw value of a column, as in the index build.
    """
    normalized = []
    for column in columns:
        codes, uniques = pd.factorize(query[column], use_na_sentinel=True)
        values = np.array([normalize_value(u) for u in uniques] + [None], dtype=object)
        normalized.append(values[codes])  # code -1 picks the trailing None
    tuples = np.column_stack(normalized)
    tuples = tuples[~pd.isna(tuples).any(axis=1)]
    if not len(tuples):
        return tuples
    codes = np.column_stack([pd.factorize(column)[0] for column in tuples.T])
    return tuples[np.sort(np.unique(codes, axis=0, return_index=True)[1])]


def calculate_j(index: MateIndex, query: PreparedQuery, g: np.ndarray, c0: np.ndarray, x: np.ndarray):
    """Algorithm 1 line 27: (ȷ_t, best mapping, its matched query rows, joinable pairs)."""
    cols, rows, joinable = supported_mappings(
        g, c0, x, query.value_ids, query.initial, index.row_offsets, index.cell_values, index.cell_columns
    )
    if not len(rows):
        return 0, None, rows, joinable
    # Sort by (mapping, query row); count the distinct query rows of each mapping.
    order = np.lexsort((rows, *cols.T[::-1]))
    cols, rows = cols[order], rows[order]
    new_mapping = np.r_[True, (cols[1:] != cols[:-1]).any(axis=1)]
    new_tuple = new_mapping | np.r_[True, rows[1:] != rows[:-1]]
    starts = np.flatnonzero(new_mapping)
    counts = np.add.reduceat(new_tuple, starts)
    best = int(np.argmax(counts))  # ties: the smallest column-id tuple, first in sort order
    group = slice(starts[best], starts[best + 1] if best + 1 < len(starts) else len(rows))
    return int(counts[best]), cols[starts[best]], rows[group][new_tuple[group]], joinable


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
    return items, slot_of_item, order.astype(np.int64), slot_start.astype(np.int64), slot_count.astype(np.int64)


def _rows_passed(item_rows: np.ndarray, passed_items: np.ndarray) -> int:
    """r_match of rule 2: distinct candidate rows among the items with a surviving pair."""
    items = passed_items[np.r_[True, passed_items[1:] != passed_items[:-1]]]  # ascending positions
    return len(np.unique(item_rows[items]))


def discover(
    index: MateIndex,
    query: PreparedQuery,
    k: int,
    use_superkeys: bool = True,
    exclude_datasets: Iterable[str] = (),
) -> tuple[list[dict], SearchStats]:
    """Algorithm 1; ``use_superkeys=False`` is SCR (the same loop without the row filter).

    The row filter runs in one compiled pass over a run of tables holding about
    ``PAIRS_PER_CHUNK`` (PL item, query row) pairs, as far ahead as the next table needs, so
    rule 1 still stops the filtering. Rule 2 is evaluated once a table's items are all
    filtered: its bound ``L_t − r_checked + r_match`` never grows as items are checked (each
    item adds at most one passed row), so it ends at ``r_match`` and drops the table exactly
    when some point of the paper's item-by-item scan would have.
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
    by_rank = np.argsort(rank_of_table[np.searchsorted(tables, index.pl_dataset[items])], kind="stable")
    items, slot_of_item = items[by_rank], slot_of_item[by_rank]
    item_rows, item_columns = index.pl_row[items], index.pl_column[items]
    table_start = np.r_[0, np.cumsum(sizes[table_order])]
    pairs_before = np.r_[0, np.cumsum(slot_count[slot_of_item])][table_start]  # pairs of earlier tables
    table_pairs, table_sizes = np.diff(pairs_before).tolist(), sizes[table_order].tolist()
    bucket_keys = query.keys[query_rows]  # line 6's dictionary: keys in bucket order
    stats.tables = len(tables)

    filtered_to = 0  # tables [0, filtered_to) went through the row filter
    top: list[tuple[int, int, dict]] = []  # min-heap of (ȷ, -rank, result)
    for r, t in enumerate(table_order.tolist()):
        worst = top[0][0] if len(top) == k else None
        if worst is not None and table_sizes[r] <= worst:  # rule 1: no later table can enter the top-k
            stats.pruned_rule1 = len(tables) - r
            break
        if r == filtered_to:  # lines 15-26 for the next run of tables
            first = r
            filtered_to = max(r + 1, int(np.searchsorted(pairs_before, pairs_before[r] + PAIRS_PER_CHUNK, "right")) - 1)
            lo, hi = table_start[r], table_start[filtered_to]
            passed, passed_x = row_filter(
                item_rows[lo:hi], slot_of_item[lo:hi], slot_start, slot_count, query_rows, bucket_keys,
                index.superkeys, use_superkeys,
            )
            bounds = np.searchsorted(passed, table_start[first : filtered_to + 1] - lo).tolist()
        stats.pairs_checked += table_pairs[r]
        begin, end = bounds[r - first], bounds[r - first + 1]
        if begin == end:
            continue  # no row passed the filter: ȷ_t = 0
        lo, hi = table_start[r], table_start[r + 1]
        position, x = passed[begin:end] + (table_start[first] - lo), passed_x[begin:end]
        rows = item_rows[lo:hi]
        if worst is not None and _rows_passed(rows, position) <= worst:  # rule 2
            stats.pruned_rule2 += 1
            continue
        stats.tables_verified += 1
        stats.pairs_passed += len(x)
        g, c0 = rows[position], item_columns[lo:hi][position]
        score, mapping, matched, joinable = calculate_j(index, query, g, c0, x)
        stats.pairs_joinable += joinable
        if score == 0 or (worst is not None and score <= worst):
            continue
        result = {
            "dataset_id": str(index.dataset_ids[tables[t]]),
            "joinability": score,
            "mapping": {col: int(c) for col, c in zip(query.columns, mapping)},
            "matched_sample": [list(query.tuples[i]) for i in matched[:SAMPLE_SIZE]],
            "rows_verified": len(x),
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
        initial_rule: str = "pl_items",
    ) -> list[dict]:
        """Top-k tables joinable with ``query`` on the composite key ``columns`` (Algorithm 1).

        Each result: ``dataset_id``, ``joinability`` (distinct query key tuples found),
        ``mapping`` {query column: candidate column_id}, ``matched_sample`` (up to 5 matched
        key tuples, normalized) and ``rows_verified`` (pairs of candidate row and query row
        that passed the super-key filter), ranked by joinability, then dataset id.
        ``initial_rule`` chooses q' when ``initial_column`` is None: ``"pl_items"`` (fewest PL
        items) or the paper's ``"cardinality"`` (see ``initial_column_selection``).
        """
        return self.search_with_stats(query, columns, k, initial_column, exclude_datasets, True, initial_rule)[0]

    def search_with_stats(
        self,
        query: pd.DataFrame,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
        use_superkeys: bool = True,
        initial_rule: str = "pl_items",
    ) -> tuple[list[dict], SearchStats]:
        """``search`` plus its counters; ``use_superkeys=False`` runs SCR (no super-key filter)."""
        prepared = prepare_query(self.index, query, columns, initial_column, initial_rule)
        return discover(self.index, prepared, k, use_superkeys, exclude_datasets)

    def search_scr(
        self,
        query: pd.DataFrame,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
        initial_rule: str = "pl_items",
    ) -> list[dict]:
        """SCR, the paper's baseline (§7.1): MATE without super keys, the same answers.

        The single-column inverted index with all of MATE's other optimizations (initial
        column, tables in descending hit order, pruning rules); every (PL item, query row) pair
        goes to the same verification. By the Lemma of §6.3 (the filter has no false
        negatives) its answers equal MATE's.
        """
        return self.search_with_stats(query, columns, k, initial_column, exclude_datasets, False, initial_rule)[0]


def load(tables: dict[str, pa.Table], **params: object) -> MateSearcher:
    """``MateSearcher`` from the index tables read at a snapshot (family shape, DESIGN)."""
    if params:
        raise ValueError(f"unknown MATE load parameters: {sorted(params)}")
    return MateSearcher(load_index(tables))

