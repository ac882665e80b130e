"""The search arrays' two orders of the postings, built by counting sorts (numba).

``MateIndex`` keeps every posting twice: as posting lists (by value, then row, then column) and
as cells by row (by row, then value, then column). A general sort (``np.lexsort``) of 17.9 M
postings allocates an int64 permutation and its merge buffer per order, more than the
int32 arrays it produces. The row and value ids are dense, so both orders are counting sorts
that write straight into the outputs: scatter by row, sort each row's few cells by (value,
column), then scatter the cells by value, which keeps the (row, column) order within a value.
A search's candidates are a third counting sort: its PL items by table (``items_by_table``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


def postings_layout(value_ids: np.ndarray, rows: np.ndarray, columns: np.ndarray, n_values: int, n_rows: int) -> dict:
    """``MateIndex``'s posting-list and cell arrays from one value id, row g and column per posting
    (int arrays of one length; ``value_ids < n_values``, ``rows < n_rows``)."""
    row_offsets = offsets(np.bincount(rows, minlength=n_rows))
    pl_offsets = offsets(np.bincount(value_ids, minlength=n_values))
    cell_values, cell_columns = np.empty_like(value_ids), np.empty_like(columns)
    pl_row, pl_column = np.empty_like(rows), np.empty_like(columns)
    if len(rows):
        _scatter_by_row(value_ids, rows, columns, row_offsets, cell_values, cell_columns)
        _sort_rows(row_offsets, cell_values, cell_columns)
        _scatter_by_value(row_offsets, cell_values, cell_columns, pl_offsets, pl_row, pl_column)
    return {
        "pl_offsets": pl_offsets,
        "pl_column": pl_column,
        "pl_row": pl_row,
        "row_offsets": row_offsets,
        "cell_values": cell_values,
        "cell_columns": cell_columns,
    }


def int_dtype(upper: int) -> type:
    """int32 when ids or positions up to ``upper`` fit in it (half the memory of int64), else int64."""
    return np.int32 if upper <= np.iinfo(np.int32).max else np.int64


def offsets(counts: np.ndarray) -> np.ndarray:
    """Start of each group and the end of the last, for groups of ``counts`` items in order."""
    return np.r_[0, np.cumsum(counts)].astype(int_dtype(int(counts.sum())))


@njit(cache=True, nogil=True)
def _scatter_by_row(
    value_ids: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
    row_offsets: np.ndarray,
    cell_values: np.ndarray,
    cell_columns: np.ndarray,
) -> None:
    """Cells grouped by row (input order within a row)."""
    fill = row_offsets[:-1].copy()
    for i in range(len(rows)):
        p = fill[rows[i]]
        fill[rows[i]] += 1
        cell_values[p] = value_ids[i]
        cell_columns[p] = columns[i]


@njit(cache=True, nogil=True)
def _sort_rows(row_offsets: np.ndarray, cell_values: np.ndarray, cell_columns: np.ndarray) -> None:
    """Each row's cells by (value, column), stably: by column, then stably by value (two stable
    sorts rather than one packed key, which could overflow for wide ids)."""
    for g in range(len(row_offsets) - 1):
        lo, hi = row_offsets[g], row_offsets[g + 1]
        if hi - lo < 2:
            continue
        order = np.argsort(cell_columns[lo:hi], kind="mergesort")
        order = order[np.argsort(cell_values[lo:hi][order], kind="mergesort")]
        cell_values[lo:hi] = cell_values[lo:hi][order]
        cell_columns[lo:hi] = cell_columns[lo:hi][order]


@njit(cache=True, nogil=True)
def _scatter_by_value(
    row_offsets: np.ndarray,
    cell_values: np.ndarray,
    cell_columns: np.ndarray,
    pl_offsets: np.ndarray,
    pl_row: np.ndarray,
    pl_column: np.ndarray,
) -> None:
    """Posting lists from the cells in (row, value, column) order: a stable scatter by value
    leaves each list in (row, column) order."""
    fill = pl_offsets[:-1].copy()
    for g in range(len(row_offsets) - 1):
        for p in range(row_offsets[g], row_offsets[g + 1]):
            q = fill[cell_values[p]]
            fill[cell_values[p]] += 1
            pl_row[q] = g
            pl_column[q] = cell_columns[p]


@njit(cache=True, nogil=True)
def column_datasets(
    dataset_rows: np.ndarray, row_offsets: np.ndarray, cell_columns: np.ndarray, n_columns: int
) -> np.ndarray:
    """The dataset of each column number (-1: a column without cells): a dataset's rows, and so
    their cells, are one range."""
    owner = np.full(n_columns, -1, np.int64)
    for d in range(len(dataset_rows) - 1):
        for p in range(row_offsets[dataset_rows[d]], row_offsets[dataset_rows[d + 1]]):
            owner[cell_columns[p]] = d
    return owner


@njit(cache=True, nogil=True)
def items_by_table(
    slots: np.ndarray,
    pl_offsets: np.ndarray,
    pl_row: np.ndarray,
    pl_column: np.ndarray,
    dataset_rows: np.ndarray,
    excluded: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The PL items of the values ``slots`` (in slot order, each list in its order) grouped by
    table with a counting sort, the tables by their number of items descending, then dataset
    index; the datasets flagged in ``excluded`` left out. Returns (tables, table_start,
    item_rows, item_columns, item_slots), table r's items at ``table_start[r]:table_start[r+1]``."""
    n_datasets = len(dataset_rows) - 1
    n = 0
    for s in range(len(slots)):
        n += pl_offsets[slots[s] + 1] - pl_offsets[slots[s]]
    dataset = np.empty(n, np.int64)
    sizes = np.zeros(n_datasets, np.int64)
    i = 0
    for s in range(len(slots)):
        for p in range(pl_offsets[slots[s]], pl_offsets[slots[s] + 1]):
            d = np.searchsorted(dataset_rows, pl_row[p], side="right") - 1
            dataset[i] = -1 if excluded[d] else d
            sizes[d] += not excluded[d]
            i += 1
    present = np.flatnonzero(sizes)
    tables = present[np.argsort((n - sizes[present]) * n_datasets + present)]
    fill = np.zeros(n_datasets, np.int64)
    table_start = np.zeros(len(tables) + 1, np.int64)
    for r in range(len(tables)):
        fill[tables[r]] = table_start[r]
        table_start[r + 1] = table_start[r] + sizes[tables[r]]
    item_rows = np.empty(table_start[-1], pl_row.dtype)
    item_columns = np.empty(table_start[-1], np.int64)
    item_slots = np.empty(table_start[-1], np.int64)
    i = 0
    for s in range(len(slots)):
        for p in range(pl_offsets[slots[s]], pl_offsets[slots[s] + 1]):
            d = dataset[i]
            i += 1
            if d >= 0:
                item_rows[fill[d]], item_columns[fill[d]], item_slots[fill[d]] = pl_row[p], pl_column[p], s
                fill[d] += 1
    return tables, table_start, item_rows, item_columns, item_slots


@njit(cache=True, nogil=True)
def row_words(keys: np.ndarray, rows: np.ndarray, words: np.ndarray) -> np.ndarray:
    """``keys[rows][:, words]`` in one gather: the selected words of each row's key, without first
    copying every word of every row (a PL item's super key, ``query.fetch_candidates``)."""
    out = np.empty((len(rows), len(words)), keys.dtype)
    for i in range(len(rows)):
        for w in range(len(words)):
            out[i, w] = keys[rows[i], words[w]]
    return out
