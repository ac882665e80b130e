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
   ``initial_column_selection``); fetch the posting lists of q''s values in one go, each PL
   item with its row's super key as in the paper's per-cell layout (``fetch_candidates``; the
   keys are stored per row, §5.3, and gathered here; SCR fetches none); group them by table
   and order tables by their number of PL items ``L_t``, descending; compute each query row's
   key.
2. Table filtering (§6.2), once k tables are in the top-k list with worst score ȷ_k:
   rule 1 (line 10) stops the search when ``L_t ≤ ȷ_k``; rule 2 (line 17) drops a table when
   ``L_t − r_checked + r_match ≤ ȷ_k``. ``≤`` prunes ties, which cannot enter the list anyway.
3. Row filtering (§6.3, lines 20-25): each PL item meets only the query rows with its value
   (a dictionary on q'); a pair survives iff the query key is contained in the row's super key.
   The words that reject most pairs of a sample are tested first (``filter_word_order``). Where
   q''s value has more query rows than the item's row has cells, the dictionary is on two
   columns: only the query rows whose value in a second key column sits in the row are tested
   (``kernels._item_pairs``), the pairs every joining pair is among.
4. ``calculateJ`` (line 27): the surviving rows' cells are compared with the key values (the
   key columns with the most distinct values looked up first, ``check_order``) to find
   every one-to-one mapping they support, and ȷ_t is the best mapping's count of distinct tuples.
   Phases 2-4 run in one compiled pass over the ranked tables (``kernels.scan_tables``); SCR
   runs the same pass without the filter. Each table is verified right after its row filter,
   so the top-k list is never stale and no batch of candidates is left unverified at the end
   (the reference code loses its last batch). A table none of whose rows passes the filter is
   never verified: ȷ_t = 0.

Why the bounds hold under set semantics: under one mapping, a row holds exactly one key tuple,
and only PL items in the mapping's initial column count, so ȷ_t ≤ L_t, and a table's final
score is at most the distinct rows that passed the filter plus the items not yet checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.mate import kernels
from lakejoin.index.mate.kernels import STATS, scan_tables
from lakejoin.index.mate.layout import int_dtype, offsets, postings_layout
from lakejoin.index.mate.xash import words_per_key, xash_array
from lakejoin.index.values import ValueDictionary, dictionary_codes, string_buffers, strings_of_buffers
from lakejoin.normalize import NormalizedColumn, normalize_value

SAMPLE_SIZE = 5


@dataclass
class MateIndex:
    """The index tables laid out as arrays; rows of the lake are numbered g = 0..n_rows-1.

    Rows are numbered by (dataset, row id), so each dataset's rows are one range of g and no
    per-posting dataset array is needed (``datasets_of``). Columns are numbered by column_id
    (``column_ids``; the Spark build's ids are 64-bit hashes), in id order, so comparing and
    ordering numbers is comparing and ordering ids. Ids and positions are int32 while they
    fit (int64 beyond): about 16 bytes per posting plus the super keys.
    """

    bits: int
    dataset_ids: np.ndarray  # dataset index -> dataset_id
    values: ValueDictionary  # value id <-> normalized value
    pl_offsets: np.ndarray  # PL(v) is items pl_offsets[v]:pl_offsets[v+1]
    column_ids: np.ndarray  # column number -> column_id (int64, ascending)
    pl_column: np.ndarray  # column number
    pl_row: np.ndarray  # g
    superkeys: np.ndarray  # (n_rows, bits/64) uint64, word 0 most significant
    dataset_rows: np.ndarray  # dataset d's rows are g in dataset_rows[d]:dataset_rows[d+1]
    row_offsets: np.ndarray  # row g's cells are cell_*[row_offsets[g]:row_offsets[g+1]]
    cell_values: np.ndarray  # value id of each cell, ascending within a row
    cell_columns: np.ndarray  # column number of each cell, ascending within (row, value)

    def datasets_of(self, rows: np.ndarray) -> np.ndarray:
        """Dataset index of each row g."""
        return np.searchsorted(self.dataset_rows, rows, side="right") - 1


@dataclass
class KeyQuery:
    """The part of initialization that needs no index (line 1): the query's distinct normalized
    key tuples without a null value, as codes into their distinct values. Made once per query
    and prepared for each index it searches (a searcher of every shard in turn)."""

    columns: list[str]
    distinct: np.ndarray  # the tuples' distinct values (object)
    codes: np.ndarray  # (n, m) each tuple's values as positions in ``distinct``
    _words: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # hash size -> each value's XASH words

    @property
    def tuples(self) -> np.ndarray:
        """(n, m) normalized distinct key tuples."""
        return self.distinct[self.codes]

    def keys(self, bits: int) -> np.ndarray:
        """(n, bits/64) each tuple's super key: its values' XASH words OR-ed."""
        if bits not in self._words:
            self._words[bits] = xash_array(pa.array(self.distinct, pa.string()), bits)
        return np.ascontiguousarray(np.bitwise_or.reduce(self._words[bits][self.codes], axis=1))


@dataclass
class PreparedQuery:
    """The query after initialization (Algorithm 1 lines 1-6)."""

    key: KeyQuery
    initial: int  # position of q' in columns
    value_ids: np.ndarray  # (n, m) value ids in the index, -1 where absent
    keys: np.ndarray  # (n, bits/64) query super keys
    checks: np.ndarray  # the positions other than q', in the order calculateJ looks their values up

    @property
    def columns(self) -> list[str]:
        return self.key.columns


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


ROW_BATCH = 1 << 21  # postings given row numbers at a time: bounds the int64 keys in flight


def load_index(tables: dict[str, pa.Table]) -> MateIndex:
    """Arrays for search from the ``postings`` and ``superkeys`` tables.

    The string columns are never turned into Python objects (dataset ids and values are
    numbered by their distinct strings, ``dictionary_codes``: read through Parquet's
    dictionaries when the tables come dictionary-encoded, and values stay in Arrow's buffers;
    super keys are read from the binary column's data buffer), so the load's peak is the index
    tables plus a few int32 arrays per posting.

    The sharded tables may hold any subset of shards (a table lives in one shard, so each
    loaded table is whole); the hash size comes from the global ``params`` table when present,
    so a subset without keys still hashes queries as the index does. The ``widths`` table and
    the ``shards`` manifest are not read.
    """
    for name in ("postings", "superkeys"):
        if name not in tables:
            raise ValueError(f"MATE index needs a {name!r} table, got {sorted(tables)}")
    postings, superkeys = tables["postings"], tables["superkeys"]
    bit_sizes = pc.unique(superkeys["bits"]).to_pylist()
    if "params" in tables:
        bit_sizes = sorted({*bit_sizes, tables["params"]["bits"][0].as_py()})
    if len(bit_sizes) > 1:
        raise ValueError(f"super keys mix hash sizes {bit_sizes}; rebuild the index with one size")
    bits = bit_sizes[0] if bit_sizes else 128

    sk_codes, sk_datasets = dictionary_codes(superkeys["dataset_id"])
    pl_codes, pl_datasets = dictionary_codes(postings["dataset_id"])
    dataset_ids = np.sort(
        pc.unique(pa.concat_arrays([sk_datasets.cast(pa.string()), pl_datasets.cast(pa.string())]))
        .to_numpy(zero_copy_only=False)
        .astype(object)
    )
    dataset_values = pa.array(dataset_ids, pa.string())
    row_span = int(max(pc.max(superkeys["row_id"]).as_py() or 0, pc.max(postings["row_id"]).as_py() or 0)) + 1

    sk_keys = _row_keys(_dataset_index(sk_codes, sk_datasets, dataset_values), superkeys["row_id"], row_span)
    sk_order = np.argsort(sk_keys, kind="stable")
    sk_keys = sk_keys[sk_order]
    if len(sk_keys) and (np.diff(sk_keys) == 0).any():
        raise ValueError("superkeys has more than one key for a row")
    keys = _superkey_words(superkeys["superkey"], bits, sk_order)
    rows_per_dataset = np.bincount(sk_keys // row_span, minlength=len(dataset_ids))

    value_codes, values = dictionary_codes(postings["value"])
    column_ids = pc.unique(postings["column_id"]).to_numpy().astype(np.int64)
    column_ids.sort()
    layout = postings_layout(
        value_codes,
        _posting_rows(_dataset_index(pl_codes, pl_datasets, dataset_values), postings["row_id"], row_span, sk_keys),
        pc.index_in(postings["column_id"], value_set=pa.array(column_ids)).to_numpy(),  # int32
        len(values),
        len(sk_keys),
    )
    return MateIndex(
        bits=bits,
        dataset_ids=dataset_ids,
        column_ids=column_ids,
        values=ValueDictionary(values),
        superkeys=keys,
        dataset_rows=offsets(rows_per_dataset),
        **layout,
    )


def _dataset_index(codes: np.ndarray, datasets: pa.Array, dataset_values: pa.Array) -> np.ndarray:
    """Each row's dataset index (position in the sorted ``dataset_values``, int32), from its
    code among the column's distinct ``datasets``: only the distinct ids are matched."""
    return pc.index_in(datasets.cast(pa.string()), value_set=dataset_values).to_numpy().astype(np.int32)[codes]


def _row_keys(dataset: np.ndarray, row_id: pa.ChunkedArray, row_span: int) -> np.ndarray:
    """``dataset index * row_span + row_id`` (int64) of each row: one key per lake row."""
    return dataset.astype(np.int64) * row_span + row_id.to_numpy()


def _posting_rows(dataset: np.ndarray, row_id: pa.ChunkedArray, row_span: int, sk_keys: np.ndarray) -> np.ndarray:
    """Row number g (position in the sorted ``sk_keys``) of every posting, ``ROW_BATCH`` postings
    at a time so that their int64 keys never exist all at once."""
    rows: np.ndarray = np.empty(len(dataset), int_dtype(len(sk_keys)))
    for start in range(0, len(dataset), ROW_BATCH):
        key = _row_keys(dataset[start : start + ROW_BATCH], row_id.slice(start, ROW_BATCH), row_span)
        g = np.searchsorted(sk_keys, key)
        if (g >= len(sk_keys)).any() or (sk_keys[np.minimum(g, len(sk_keys) - 1)] != key).any():
            raise ValueError("postings reference rows that have no super key")
        rows[start : start + len(key)] = g
    return rows


def _superkey_words(column: pa.ChunkedArray, bits: int, order: np.ndarray) -> np.ndarray:
    """The ``superkey`` column as (n, bits/64) uint64 words, row ``order[i]`` of the column in
    row i. Read chunk by chunk from Arrow's data buffers straight into the result (no Python
    bytes object per row, no whole-column intermediate copies)."""
    width = bits // 8
    words = np.empty((len(column), words_per_key(bits)), np.uint64)
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    start = 0
    for chunk in column.chunks:
        fixed = chunk.cast(pa.binary(width))  # raises on a key of another length
        if fixed.null_count:
            raise ValueError("superkeys has a row without a key")
        if len(fixed):
            data = np.frombuffer(fixed.buffers()[1], np.uint8)[
                fixed.offset * width : (fixed.offset + len(fixed)) * width
            ]
            words[position[start : start + len(fixed)]] = data.view(">u8").reshape(len(fixed), -1)
        start += len(fixed)
    return words


INITIAL_RULES = ("pl_items", "cardinality")


def key_query(query: pd.DataFrame | pa.Table, columns: list[str]) -> KeyQuery:
    """Line 1 for ``query`` (a frame, or an Arrow table: normalized in Arrow) on the key
    ``columns``: the index-free part of ``prepare_query``."""
    if not isinstance(query, pd.DataFrame | pa.Table) or not len(query):
        raise ValueError("the query table is empty")
    columns = list(columns)
    if not columns:
        raise ValueError("no key columns given")
    if len(set(columns)) != len(columns):
        raise ValueError(f"key columns repeat: {columns}")
    names = list(query.columns) if isinstance(query, pd.DataFrame) else query.column_names
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise ValueError(f"key columns not in the query table: {unknown} (it has {names})")
    tuples = _key_tuples(query, columns)
    if not len(tuples):
        raise ValueError(f"no query row has a non-null value in every key column {columns}")
    codes, distinct = pd.factorize(tuples.ravel())
    return KeyQuery(columns, np.asarray(distinct, dtype=object), codes.reshape(tuples.shape))


def prepare_query(
    index: MateIndex,
    query: pd.DataFrame | KeyQuery,
    columns: list[str],
    initial_column: str | None,
    initial_rule: str = "pl_items",
) -> PreparedQuery:
    """Initialization: normalized, de-duplicated key tuples (``query`` as a ``KeyQuery`` when
    already made), q', value ids and query keys."""
    key = query if isinstance(query, KeyQuery) else key_query(query, columns)
    if initial_column is not None and initial_column not in key.columns:
        raise ValueError(f"initial column {initial_column!r} is not one of the key columns {key.columns}")
    if initial_rule not in INITIAL_RULES:
        raise ValueError(f"initial_rule must be one of {INITIAL_RULES}, got {initial_rule!r}")
    value_ids = index.values.get_indexer(key.distinct.tolist()).astype(np.int64)[key.codes]
    if initial_column is None:
        initial = initial_column_selection(index, key.codes, value_ids, initial_rule)
    else:
        initial = key.columns.index(initial_column)
    return PreparedQuery(key, initial, value_ids, key.keys(index.bits), check_order(key.codes, initial))


def check_order(codes: np.ndarray, initial: int) -> np.ndarray:
    """The key positions other than q' by distinct values, most first: a value of a column with
    many values is the likeliest to be missing from a candidate row, so a pair that does not join
    mostly stops at the first lookup (weather's hour and day before its month and its one year).
    The order changes only the work: a pair joins when every value is found."""
    cardinality = [len(np.unique(codes[:, p])) for p in range(codes.shape[1])]
    return np.array(
        sorted((p for p in range(codes.shape[1]) if p != initial), key=lambda p: (-cardinality[p], p)), np.int64
    )


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
    pl_items = [
        int(_pl_lengths(index, v[v >= 0]).sum()) for v in (np.unique(value_ids[:, p]) for p in range(codes.shape[1]))
    ]
    return min(range(len(pl_items)), key=lambda p: (pl_items[p], cardinality[p]))


def _pl_lengths(index: MateIndex, value_ids: np.ndarray) -> np.ndarray:
    """|PL(v)| of each value id (int64)."""
    return index.pl_offsets[value_ids + 1].astype(np.int64) - index.pl_offsets[value_ids]


def _key_tuples(query: pd.DataFrame | pa.Table, columns: list[str]) -> np.ndarray:
    """The distinct normalized key tuples without a null value, in order of first occurrence.

    ``normalize_value`` runs once per distinct raw value of a column, as in the index build (an
    Arrow table goes through the cells' own ``NormalizedColumn``, which tests most texts in Arrow).
    """
    if isinstance(query, pa.Table):
        normalized = [
            column.values().to_numpy(zero_copy_only=False)
            for column in NormalizedColumn.of_columns([query.column(c) for c in columns])
        ]
    else:
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


@dataclass
class Candidates:
    """Lines 4-6: the PL items of q''s values grouped by table, tables by ``L_t`` descending.

    Table r (rank order) owns items ``table_start[r]:table_start[r+1]``; item i meets the query
    rows ``query_rows[slot_start[s] : slot_start[s] + slot_count[s]]``, s = ``item_slots[i]``,
    whose keys are ``bucket_keys`` in the same order (line 6's dictionary). ``item_keys[i]``
    is item i's super key (the PL items come with them, paper §6.1); SCR fetches none. Both
    hold only the words that can reject a pair, in the order the filter tests them
    (``filter_word_order``). A bucket's rows are ordered by their ``probe`` value: the row filter
    tests only those whose probe value is in the item's row (``kernels._item_pairs``).
    """

    tables: np.ndarray  # dataset index of each rank
    table_start: np.ndarray
    item_rows: np.ndarray
    item_columns: np.ndarray
    item_slots: np.ndarray
    query_rows: np.ndarray
    slot_start: np.ndarray
    slot_count: np.ndarray
    bucket_keys: np.ndarray
    probe: (
        np.ndarray
    )  # each bucket row's value id in the first column calculateJ checks, ascending within a bucket; empty: no probe
    item_keys: np.ndarray


def fetch_candidates(
    index: MateIndex, query: PreparedQuery, exclude_datasets: Iterable[str] = (), with_superkeys: bool = True
) -> Candidates:
    """Lines 4-6: every PL item of q''s values (one bulk fetch) with its row's super key unless
    ``with_superkeys`` is False (SCR), grouped and ordered by table."""
    exclude = np.flatnonzero(np.isin(index.dataset_ids, list(exclude_datasets)))
    v0 = query.value_ids[:, query.initial]
    probing = with_superkeys and len(query.checks) > 0
    probe = query.value_ids[:, query.checks[0]] if probing else np.zeros(0, np.int64)
    query_rows = np.lexsort((probe, v0)) if probing else np.argsort(v0, kind="stable")
    query_rows = query_rows[v0[query_rows] >= 0]
    slots, slot_start, slot_count = np.unique(v0[query_rows], return_index=True, return_counts=True)
    lengths = _pl_lengths(index, slots)
    item_slots = np.repeat(np.arange(len(slots)), lengths)
    items = np.repeat(index.pl_offsets[slots] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
    datasets = index.datasets_of(index.pl_row[items])
    if len(exclude):
        keep = ~np.isin(datasets, exclude)
        items, item_slots, datasets = items[keep], item_slots[keep], datasets[keep]
    # Line 5: group by table, tables by L_t descending (then dataset id).
    tables, table_of_item, sizes = np.unique(datasets, return_inverse=True, return_counts=True)
    table_order = np.lexsort((tables, -sizes))
    rank_of_table = np.empty(len(tables), np.int64)
    rank_of_table[table_order] = np.arange(len(tables))
    by_rank = np.argsort(rank_of_table[table_of_item], kind="stable")
    items, item_slots = items[by_rank], item_slots[by_rank].astype(np.int64)
    item_rows = index.pl_row[items]
    slot_start, slot_count = slot_start.astype(np.int64), slot_count.astype(np.int64)
    bucket_keys = query.keys[query_rows]
    words = (
        filter_word_order(index.superkeys, item_rows, item_slots, slot_start, slot_count, bucket_keys)
        if with_superkeys
        else np.arange(bucket_keys.shape[1])
    )
    return Candidates(
        tables=tables[table_order],
        table_start=np.r_[0, np.cumsum(sizes[table_order])].astype(np.int64),
        item_rows=item_rows,
        item_columns=index.pl_column[items].astype(np.int64),
        item_slots=item_slots,
        query_rows=query_rows.astype(np.int64),
        slot_start=slot_start,
        slot_count=slot_count,
        bucket_keys=np.ascontiguousarray(bucket_keys[:, words]),
        probe=np.ascontiguousarray(probe[query_rows]) if probing else probe,
        item_keys=np.ascontiguousarray(index.superkeys[:, words])[item_rows] if with_superkeys else index.superkeys[:0],
    )


FILTER_SAMPLE_ITEMS = 256  # PL items, each with up to FILTER_SAMPLE_ROWS of its query rows, to rank the words on
FILTER_SAMPLE_ROWS = 16


def filter_word_order(
    superkeys: np.ndarray,
    item_rows: np.ndarray,
    item_slots: np.ndarray,
    slot_start: np.ndarray,
    slot_count: np.ndarray,
    bucket_keys: np.ndarray,
) -> np.ndarray:
    """The super-key words in the order the row filter tests them: only words where some query
    key has a bit (a word of zeros never rejects), the ones that reject most pairs of a sample
    first. A pair passes when every word does, so the order changes only the work: with small
    numbers as values the length bits of word 0 reject about a fifth of the pairs and words 1-4
    none, and testing from word 0 read five words of most pairs (weather's key against flights)."""
    words = np.flatnonzero(bucket_keys.any(axis=0))
    if len(words) < 2 or not len(item_rows):
        return words
    items = np.unique(np.linspace(0, len(item_rows) - 1, min(FILTER_SAMPLE_ITEMS, len(item_rows))).astype(np.int64))
    taken = np.minimum(slot_count[item_slots[items]], FILTER_SAMPLE_ROWS)
    pair_items = np.repeat(items, taken)
    pair_rows = np.repeat(slot_start[item_slots[items]] - np.r_[0, np.cumsum(taken)[:-1]], taken) + np.arange(
        taken.sum()
    )
    rejects = (bucket_keys[pair_rows][:, words] & ~superkeys[item_rows[pair_items]][:, words] != 0).sum(axis=0)
    return words[np.argsort(-rejects, kind="stable")]


class MateRefused(ValueError):
    """MATE refused the query: verifying the table of ``dataset_id`` built over
    ``kernels.SUPPORTED_LIMIT`` supported (column mapping, query tuple, row) triples, a count that
    depends on the query and that table alone. ``joining_rows``: rows of that table where some
    query tuple joins, counted up to one more than the query's distinct tuples (then: every row
    filter and rule passes that many rows, more than any score or ``min_score`` can be, so the
    table is verified, and refuses the query, in every index that holds it)."""

    def __init__(self, message: str, dataset_id: str, joining_rows: int) -> None:
        super().__init__(message)
        self.dataset_id, self.joining_rows = dataset_id, joining_rows


REFUSAL_PAIRS = 100_000  # (row, query tuple) pairs a refusal's joining rows are counted on, at most


def _joining_rows(index: MateIndex, query: PreparedQuery, c: Candidates, rank: int) -> int:
    """Distinct rows among the candidate items of table ``rank`` where some query tuple has each of
    its values in its own cell (a value repeated in the tuple in as many cells), counted up to
    ``len(query.value_ids) + 1`` over at most ``REFUSAL_PAIRS`` pairs: a lower bound."""
    wanted, pairs, found = len(query.value_ids) + 1, 0, set()
    needs = [Counter(row) for row in query.value_ids.tolist()]
    for i in range(int(c.table_start[rank]), int(c.table_start[rank + 1])):
        g, slot = int(c.item_rows[i]), int(c.item_slots[i])
        if g in found:
            continue
        cells = Counter(index.cell_values[index.row_offsets[g] : index.row_offsets[g + 1]].tolist())
        tuples = c.query_rows[c.slot_start[slot] : c.slot_start[slot] + c.slot_count[slot]].tolist()
        if any(all(v >= 0 and cells[v] >= n for v, n in needs[x].items()) for x in tuples):
            found.add(g)
        pairs += len(tuples)
        if len(found) >= wanted or pairs >= REFUSAL_PAIRS:
            break
    return len(found)


def scan(
    index: MateIndex,
    query: PreparedQuery,
    candidates: Candidates,
    k: int,
    use_superkeys: bool = True,
    min_score: int = 0,
) -> tuple[list[dict], SearchStats]:
    """Lines 7-30 (table filtering, row filtering, calculateJ) in one compiled pass,
    ``kernels.scan_tables``; tables that cannot reach ``min_score`` are pruned."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if use_superkeys and len(candidates.item_keys) != len(candidates.item_rows):
        raise ValueError("the row filter needs candidates fetched with their super keys")
    c = candidates
    stats = SearchStats(pl_items=len(c.item_rows), tables=len(c.tables))
    if not len(c.item_rows):
        return [], stats
    at = np.array([-1, 0], np.int64)  # the rank of the table being verified; 1 when its verification was refused
    scores, ranks, mappings, samples, verified, counters = scan_tables(
        c.table_start,
        c.item_rows,
        c.item_columns,
        c.item_slots,
        c.slot_start,
        c.slot_count,
        c.query_rows,
        c.bucket_keys,
        c.probe,
        c.item_keys,
        use_superkeys,
        query.value_ids,
        query.initial,
        query.checks,
        index.row_offsets,
        index.cell_values,
        index.cell_columns,
        k,
        SAMPLE_SIZE,
        kernels.PAIR_BUFFER,
        min_score,
        at,
    )
    if at[1]:
        raise MateRefused(
            kernels.REFUSAL, str(index.dataset_ids[c.tables[int(at[0])]]), _joining_rows(index, query, c, int(at[0]))
        )
    for name, value in zip(STATS, counters.tolist()):
        setattr(stats, name, value)
    results = [
        {
            "dataset_id": str(index.dataset_ids[c.tables[rank]]),
            "joinability": score,
            "share": score / len(query.key.codes),
            "mapping": {col: int(index.column_ids[column]) for col, column in zip(query.columns, mapping)},
            "matched_sample": [list(query.key.distinct[query.key.codes[i]]) for i in sample if i >= 0],
            "rows_verified": pairs,
        }
        for score, rank, mapping, sample, pairs in zip(
            scores.tolist(), ranks.tolist(), mappings.tolist(), samples.tolist(), verified.tolist()
        )
    ]
    return sorted(results, key=lambda res: (-res["joinability"], res["dataset_id"])), stats


def discover(
    index: MateIndex,
    query: PreparedQuery,
    k: int,
    use_superkeys: bool = True,
    exclude_datasets: Iterable[str] = (),
    min_score: int = 0,
) -> tuple[list[dict], SearchStats]:
    """Algorithm 1 after initialization; ``use_superkeys=False`` is SCR (no row filter)."""
    return scan(
        index, query, fetch_candidates(index, query, exclude_datasets, use_superkeys), k, use_superkeys, min_score
    )


class MateSearcher:
    """The loaded MATE index (``lakejoin.index.mate.load``)."""

    def __init__(self, index: MateIndex):
        self.index = index

    @property
    def bits(self) -> int:
        return self.index.bits

    def held(self, query: KeyQuery) -> tuple[int, int]:
        """(the query's distinct key tuples whose every value this index holds, the PL items of
        the query's values here). No table here can join more tuples than the first (Eq. 1: a
        joined tuple has each value in a cell of the row), so a shard whose ``held`` is below the
        k-th joinability found elsewhere can be left unsearched; the second says where the
        query's values are common, the likelier place of its best tables."""
        ids = self.index.values.get_indexer(query.distinct.tolist())
        present = ids >= 0
        return int(present[query.codes].all(axis=1).sum()), int(_pl_lengths(self.index, ids[present]).sum())

    def search(
        self,
        query: pd.DataFrame | KeyQuery,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
        initial_rule: str = "pl_items",
        min_score: int = 0,
    ) -> list[dict]:
        """Top-k tables joinable with ``query`` on the composite key ``columns`` (Algorithm 1).

        Each result: ``dataset_id``, ``joinability`` (distinct query key tuples found, an int),
        ``share`` (``joinability`` over the query's distinct non-null key tuples), ``mapping`` {query column: candidate column_id}, ``matched_sample`` (up to 5 matched
        key tuples, normalized) and ``rows_verified`` (pairs of candidate row and query row
        that passed the super-key filter), ranked by joinability, then dataset id.
        ``initial_rule`` chooses q' when ``initial_column`` is None: ``"pl_items"`` (fewest PL
        items) or the paper's ``"cardinality"`` (see ``initial_column_selection``). ``query``
        may be ``key_query(frame, columns)``, made once to search several indexes (shards).
        ``min_score``: only tables joining at least that many tuples are wanted (the top k of
        those); the others are pruned unverified.
        """
        return self.search_with_stats(
            query, columns, k, initial_column, exclude_datasets, True, initial_rule, min_score
        )[0]

    def search_with_stats(
        self,
        query: pd.DataFrame | KeyQuery,
        columns: list[str],
        k: int = 10,
        initial_column: str | None = None,
        exclude_datasets: Iterable[str] = (),
        use_superkeys: bool = True,
        initial_rule: str = "pl_items",
        min_score: int = 0,
    ) -> tuple[list[dict], SearchStats]:
        """``search`` plus its counters; ``use_superkeys=False`` runs SCR (no super-key filter)."""
        prepared = prepare_query(self.index, query, columns, initial_column, initial_rule)
        return discover(self.index, prepared, k, use_superkeys, exclude_datasets, min_score)

    def search_scr(
        self,
        query: pd.DataFrame | KeyQuery,
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


# Bump when what MATE's cached arrays mean changes: a shard's folder written under another
# version is rebuilt (``lakejoin.query.shard_arrays``).
ARRAYS_FORMAT = 1
# The global tables a shard's arrays depend on (``lakejoin.query.shard_arrays``): none, since the
# hash size travels in the arrays and a new one rewrites every shard's super keys.
ARRAYS_GLOBALS: frozenset[str] = frozenset()
_INDEX_ARRAYS = (
    "pl_offsets",
    "column_ids",
    "pl_column",
    "pl_row",
    "superkeys",
    "dataset_rows",
    "row_offsets",
    "cell_values",
    "cell_columns",
)


def to_arrays(searcher: MateSearcher) -> dict[str, np.ndarray]:
    """The searcher's index as arrays for the shard cache: :func:`from_arrays` gives it back."""
    index = searcher.index
    ids_data, ids_offsets = string_buffers(pa.array(index.dataset_ids, pa.string()))
    return {
        "bits": np.array([index.bits], np.int64),
        "dataset_id_data": ids_data,
        "dataset_id_offsets": ids_offsets,
        **{f"value_{name}": array for name, array in index.values.arrays().items()},
        **{name: getattr(index, name) for name in _INDEX_ARRAYS},
    }


def from_arrays(arrays: Mapping[str, np.ndarray], shared: object = None) -> MateSearcher:
    """The searcher :func:`to_arrays` was given (family shape, ``lakejoin.index``; MATE has no
    shared part): its arrays are views of ``arrays``, only the dataset ids become Python strings.
    Raises ``ValueError`` when they are not one index's."""
    try:
        names = strings_of_buffers(arrays["dataset_id_data"], arrays["dataset_id_offsets"])
        index = MateIndex(
            bits=int(arrays["bits"][0]),
            dataset_ids=np.array(names.to_pylist(), dtype=object),
            values=ValueDictionary.from_arrays(arrays["value_data"], arrays["value_offsets"], arrays["value_keys"]),
            **{name: arrays[name] for name in _INDEX_ARRAYS},
        )
    except (KeyError, IndexError, TypeError, pa.ArrowException) as error:
        raise ValueError(f"these arrays are not one MATE index's: {error}") from error
    if (
        len(index.pl_offsets) != len(index.values) + 1
        or len(index.row_offsets) != len(index.superkeys) + 1
        or len(index.dataset_rows) != len(index.dataset_ids) + 1
    ):
        raise ValueError("these arrays are not one MATE index's: their lengths disagree")
    return MateSearcher(index)


def load(tables: dict[str, pa.Table], **params: object) -> MateSearcher:
    """``MateSearcher`` from the index tables read at a snapshot (family shape, DESIGN)."""
    if params:
        raise ValueError(f"unknown MATE load parameters: {sorted(params)}")
    return MateSearcher(load_index(tables))
