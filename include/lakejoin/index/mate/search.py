"""MATE discovery, the paper's Algorithm 1 (§6): top-k tables joinable on a composite key.

Joinability (Eq. 1/2, set semantics): for a candidate table S,
``ȷ(d, S) = max over one-to-one mappings Y' of |π_Q(d) ∩ π_Y'(S)|``, the number of distinct
query key tuples found aligned in one row of S, each query column on its own column of S.
(The reference code counts candidate rows, i.e. bag semantics, and does not enforce
one-to-one; both are deliberate departures: a table's score is the tuples it joins, each once.)

The four phases, as in Algorithm 1 (the first in ``query.py``, on the arrays of ``index.py``;
phases 2-4 here and in ``kernels.py``):

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
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from lakejoin.index.mate import kernels
from lakejoin.index.mate.bounds import table_bounds
from lakejoin.index.mate.index import MateIndex, index_arrays, index_from_arrays, load_index
from lakejoin.index.mate.kernels import STATS, scan_tables
from lakejoin.index.mate.query import Candidates, KeyQuery, PreparedQuery, fetch_candidates, prepare_query

SAMPLE_SIZE = 5


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
        """The counters and :attr:`precision` as one JSON-ready dict."""
        return {**asdict(self), "precision": self.precision}


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
        c,
        use_superkeys,
        query.arrays,
        index.cells,
        k,
        SAMPLE_SIZE,
        kernels.PAIR_BUFFER,
        kernels.TALLY_FLAGS,
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
        """The width of the index's XASH super keys in bits; a query's keys are hashed to the same width."""
        return self.index.bits

    def bounds(self, query: KeyQuery) -> tuple[np.ndarray, int]:
        """(per dataset of this index, in ``index.dataset_ids``' order, the most distinct query
        tuples it can join: its rows, and the tuples whose every value it holds,
        ``bounds.table_bounds``; the PL items of the query's values here)."""
        ids = self.index.values.get_indexer(query.strings)
        index = self.index
        per_table = table_bounds(ids, query.codes, index.pl_offsets, index.pl_row, index.dataset_rows)
        return per_table, int(index.pl_lengths(ids[ids >= 0]).sum())

    def held(self, query: KeyQuery, exclude_datasets: Iterable[str] = ()) -> tuple[int, int]:
        """(the most distinct query tuples a table here other than ``exclude_datasets`` can join;
        the PL items of the query's values here), from ``bounds``. A shard whose ``held`` is
        below the k-th joinability found elsewhere can be left unsearched; the second says where
        the query's values are common, the likelier place of its best tables."""
        per_table, items = self.bounds(query)
        per_table[np.isin(self.index.dataset_ids, list(exclude_datasets))] = 0
        return int(per_table.max(initial=0)), items

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
        ``share`` (``joinability`` over the query's distinct non-null key tuples), ``mapping``
        {query column: candidate column_id}, ``matched_sample`` (up to 5 matched key tuples,
        normalized) and ``rows_verified`` (pairs of candidate row and query row that passed the
        super-key filter), ranked by joinability, then dataset id.
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


def to_arrays(searcher: MateSearcher) -> dict[str, np.ndarray]:
    """The searcher's index as arrays for the shard cache: :func:`from_arrays` gives it back."""
    return index_arrays(searcher.index)


def from_arrays(arrays: Mapping[str, np.ndarray], shared: object = None) -> MateSearcher:
    """The searcher :func:`to_arrays` was given (family shape, ``lakejoin.index``; MATE has no
    shared part): its arrays are views of ``arrays``, only the dataset ids become Python strings.
    Raises ``ValueError`` when they are not one index's."""
    return MateSearcher(index_from_arrays(arrays))


def load(tables: dict[str, pa.Table], **params: object) -> MateSearcher:
    """``MateSearcher`` from the index tables read at a snapshot (family shape, DESIGN)."""
    if params:
        raise ValueError(f"unknown MATE load parameters: {sorted(params)}")
    return MateSearcher(load_index(tables))
