"""The most query tuples each table of an index can join, from the posting lists alone (numba).

Under one column mapping a row holds exactly one key tuple, and a joined tuple has each of its
values in a cell of that row (Eq. 1), so a table's joinability is at most its row count and at
most the number of query tuples whose every value it holds somewhere. Both are read without
fetching a single PL item's row: a posting list is ordered by row and a table's rows are one
range (``MateIndex.dataset_rows``), so the tables holding a value are found by jumping from one
table's first item to the next table's (a binary search per table, not a step per item).

A search that already knows the score a table must reach (the k-th found in other shards) leaves
out the tables whose bound is below it before fetching their items (``lakejoin.graph.build``):
MATE's own rules bound a table by its PL items of the initial column only, which small numbers
fill in every table of integers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lakejoin.index.mate.kernels import _first_cell


@njit(cache=True, nogil=True)
def _tables_of_values(
    value_ids: np.ndarray, pl_offsets: np.ndarray, pl_row: np.ndarray, dataset_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The tables holding each value (CSR: value u's are ``tables[starts[u]:starts[u+1]]``,
    ascending); a value the index lacks (id < 0) holds none."""
    n = len(value_ids)
    starts = np.zeros(n + 1, np.int64)
    for step in range(2):  # count, then fill
        tables = np.empty(starts[n] if step else 0, np.int64)
        for u in range(n):
            v = value_ids[u]
            found = 0
            if v >= 0:
                i, end = pl_offsets[v], pl_offsets[v + 1]
                while i < end:
                    d = _first_cell(dataset_rows, 0, len(dataset_rows), pl_row[i] + 1) - 1
                    if step:
                        tables[starts[u] + found] = d
                    found += 1
                    i = _first_cell(pl_row, i, end, dataset_rows[d + 1])
            if not step:
                starts[u + 1] = starts[u] + found
    return starts, tables


@njit(cache=True, nogil=True)
def _holds(tables: np.ndarray, lo: int, hi: int, d: int) -> bool:
    at = _first_cell(tables, lo, hi, d)
    return at < hi and tables[at] == d


@njit(cache=True, nogil=True)
def table_bounds(
    value_ids: np.ndarray, codes: np.ndarray, pl_offsets: np.ndarray, pl_row: np.ndarray, dataset_rows: np.ndarray
) -> np.ndarray:
    """Per table (dataset index), the most distinct query tuples it can join: its rows, and the
    tuples (``codes``: each tuple's values as positions in ``value_ids``, their ids here) whose
    every value it holds. A tuple is counted in the tables of its value held by the fewest."""
    starts, tables = _tables_of_values(value_ids, pl_offsets, pl_row, dataset_rows)
    n_tables = len(dataset_rows) - 1
    counts = np.zeros(n_tables, np.int64)
    m = codes.shape[1]
    for x in range(codes.shape[0]):
        rarest = codes[x, 0]
        for p in range(1, m):
            u = codes[x, p]
            if starts[u + 1] - starts[u] < starts[rarest + 1] - starts[rarest]:
                rarest = u
        for t in range(starts[rarest], starts[rarest + 1]):
            d = tables[t]
            held = True
            for p in range(m):
                u = codes[x, p]
                if u != rarest and not _holds(tables, starts[u], starts[u + 1], d):
                    held = False
                    break
            if held:
                counts[d] += 1
    for d in range(n_tables):
        counts[d] = min(counts[d], dataset_rows[d + 1] - dataset_rows[d])
    return counts
