"""MATE's initialization (paper §6.1, Algorithm 1 lines 1-6): a query table made ready to search.

Line 1 (``key_query``) needs no index: the query's distinct normalized key tuples, made once and
searched in every shard. The rest (``prepare_query``) looks the values up in one index, picks the
initial column q' (line 2, ``initial_column_selection``) and hashes each tuple's super key (line 6);
``fetch_candidates`` reads q''s posting lists and groups their items by table (lines 4-5). The
scan over those tables is ``search.scan``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from lakejoin.index.mate.index import MateIndex
from lakejoin.index.mate.layout import items_by_table, row_words
from lakejoin.index.mate.xash import xash_array
from lakejoin.normalize import NormalizedColumn, normalize_value


@dataclass
class KeyQuery:
    """The part of initialization that needs no index (line 1): the query's distinct normalized
    key tuples without a null value, as codes into their distinct values. Made once per query
    and prepared for each index it searches (a searcher of every shard in turn)."""

    columns: list[str]
    distinct: np.ndarray  # the tuples' distinct values (object)
    codes: np.ndarray  # (n, m) each tuple's values as positions in ``distinct``
    _keys: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # hash size -> each tuple's super key

    @property
    def tuples(self) -> np.ndarray:
        """(n, m) normalized distinct key tuples."""
        return self.distinct[self.codes]

    @functools.cached_property
    def strings(self) -> pa.Array:
        """``distinct`` as an Arrow string array, for the lookups in each index searched."""
        return pa.array(self.distinct, pa.string())

    @functools.cached_property
    def cardinality(self) -> list[int]:
        """Each key column's distinct values among the tuples."""
        return [len(np.unique(self.codes[:, p])) for p in range(self.codes.shape[1])]

    def keys(self, bits: int) -> np.ndarray:
        """(n, bits/64) each tuple's super key: its values' XASH words OR-ed."""
        if bits not in self._keys:
            words = xash_array(self.strings, bits)
            self._keys[bits] = np.ascontiguousarray(np.bitwise_or.reduce(words[self.codes], axis=1))
        return self._keys[bits]


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
        """The query's key columns, as the key names them."""
        return self.key.columns

    @property
    def arrays(self) -> QueryValues:
        """What the compiled scan reads of the query (``kernels.scan_tables``)."""
        return QueryValues(self.value_ids, self.initial, self.checks)


class QueryValues(NamedTuple):
    """The prepared query's arrays, one argument to the compiled scan (a named tuple: numba takes it)."""

    value_ids: np.ndarray
    initial: int
    checks: np.ndarray


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
    value_ids = index.values.get_indexer(key.strings)[key.codes]
    if initial_column is None:
        initial = initial_column_selection(index, key.cardinality, value_ids, initial_rule)
    else:
        initial = key.columns.index(initial_column)
    return PreparedQuery(key, initial, value_ids, key.keys(index.bits), check_order(key.cardinality, initial))


def check_order(cardinality: list[int], initial: int) -> np.ndarray:
    """The key positions other than q' by distinct values, most first: a value of a column with
    many values is the likeliest to be missing from a candidate row, so a pair that does not join
    mostly stops at the first lookup (weather's hour and day before its month and its one year).
    The order changes only the work: a pair joins when every value is found."""
    return np.array(
        sorted((p for p in range(len(cardinality)) if p != initial), key=lambda p: (-cardinality[p], p)), np.int64
    )


def initial_column_selection(index: MateIndex, cardinality: list[int], value_ids: np.ndarray, rule: str) -> int:
    """init_column_selection() (Algorithm 1 line 2, §6.1): the position of q' among the key columns.

    The paper's aim is the column "that leads to the smaller number of PL items"; it uses the
    lowest cardinality (``"cardinality"``) because PL sizes "cannot be known upfront" in its
    disk-resident index. Here they are known, so ``"pl_items"`` (the default) picks the column
    whose distinct values have the fewest PL items in total: §7.5.4's "Best" (ground truth).
    Ties go to the lower cardinality, then to the earlier column.
    """
    if rule == "cardinality":
        return int(np.argmin(cardinality))
    pl_items = [
        int(index.pl_lengths(v[v >= 0]).sum()) for v in (np.unique(value_ids[:, p]) for p in range(len(cardinality)))
    ]
    return min(range(len(pl_items)), key=lambda p: (pl_items[p], cardinality[p]))


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


class Candidates(NamedTuple):
    """Lines 4-6: the PL items of q''s values grouped by table, tables by ``L_t`` descending (a
    named tuple of arrays, so the compiled scan takes it as one argument).

    Table r (rank order) owns items ``table_start[r]:table_start[r+1]``; item i meets the query
    rows ``query_rows[slot_start[s] : slot_start[s] + slot_count[s]]``, s = ``item_slots[i]``,
    whose keys are ``bucket_keys`` in the same order (line 6's dictionary). ``item_keys[i]``
    is item i's super key (the PL items come with them, paper §6.1); SCR fetches none. Both
    hold only the words that can reject a pair, in the order the filter tests them
    (``filter_word_order``). A bucket's rows are ordered by their ``probe`` value, then their
    ``probe2`` value: the row filter tests only those whose probe values are in the item's row
    (``kernels._item_pairs``).
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
    probe2: np.ndarray  # the same in the second column it checks, ascending within one probe value; empty: none
    item_keys: np.ndarray


def fetch_candidates(
    index: MateIndex, query: PreparedQuery, exclude_datasets: Iterable[str] = (), with_superkeys: bool = True
) -> Candidates:
    """Lines 4-6: every PL item of q''s values (one bulk fetch) with its row's super key unless
    ``with_superkeys`` is False (SCR), grouped and ordered by table."""
    excluded = np.isin(index.dataset_ids, list(exclude_datasets))
    v0 = query.value_ids[:, query.initial]
    probing = with_superkeys and len(query.checks) > 0
    probe = query.value_ids[:, query.checks[0]] if probing else np.zeros(0, np.int64)
    probe2 = query.value_ids[:, query.checks[1]] if probing and len(query.checks) > 1 else np.zeros(0, np.int64)
    if probing:
        query_rows = np.lexsort((probe2, probe, v0) if len(probe2) else (probe, v0))
    else:
        query_rows = np.argsort(v0, kind="stable")
    query_rows = query_rows[v0[query_rows] >= 0]
    slots, slot_start, slot_count = np.unique(v0[query_rows], return_index=True, return_counts=True)
    # Line 5: group by table, tables by L_t descending (then dataset id).
    tables, table_start, item_rows, item_columns, item_slots = items_by_table(
        slots, index.pl_offsets, index.pl_row, index.pl_column, index.dataset_rows, excluded
    )
    slot_start, slot_count = slot_start.astype(np.int64), slot_count.astype(np.int64)
    bucket_keys = query.keys[query_rows]
    words = (
        filter_word_order(index.superkeys, item_rows, item_slots, slot_start, slot_count, bucket_keys)
        if with_superkeys
        else np.arange(bucket_keys.shape[1])
    )
    return Candidates(
        tables=tables,
        table_start=table_start,
        item_rows=item_rows,
        item_columns=item_columns,
        item_slots=item_slots,
        query_rows=query_rows.astype(np.int64),
        slot_start=slot_start,
        slot_count=slot_count,
        bucket_keys=np.ascontiguousarray(bucket_keys[:, words]),
        probe=np.ascontiguousarray(probe[query_rows]) if probing else probe,
        probe2=np.ascontiguousarray(probe2[query_rows]) if len(probe2) else probe2,
        item_keys=row_words(index.superkeys, item_rows, words) if with_superkeys else index.superkeys[:0],
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
