"""Compiled inner loops of Algorithm 1 (numba): the row filter (§6.3) and calculateJ's comparison.

Both loops run once per candidate table over its (PL item, query row) pairs, so they are the
whole per-pair cost of MATE and of SCR. SCR runs the same two kernels with the super-key test
switched off, so the baseline differs from MATE only by the filter (paper §7.1).

Layout (see ``search.MateIndex``): row g's cells are ``row_offsets[g]:row_offsets[g+1]`` of
``cell_values`` (value ids, ascending) and ``cell_columns`` (column id; ascending within a value).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def row_filter(
    item_rows: np.ndarray,
    item_slots: np.ndarray,
    slot_start: np.ndarray,
    slot_count: np.ndarray,
    query_rows: np.ndarray,
    bucket_keys: np.ndarray,
    superkeys: np.ndarray,
    use_superkeys: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 lines 15-26 for a run of PL items: the pairs whose query key is in the row's super key.

    Item i (candidate row ``item_rows[i]``) meets the query rows of its initial value, found
    through the dictionary ``query_rows[slot_start[s] : slot_start[s] + slot_count[s]]`` with
    ``s = item_slots[i]`` (line 20); ``bucket_keys[j]`` is the key of ``query_rows[j]``, so a
    bucket's keys are read in sequence. A pair survives iff ``key(x) & ~S(g) == 0`` (line 22),
    tested from word 0, which holds the length bits: most rows fail there (§5.2).
    Returns (item positions, ascending; query rows) of the surviving pairs.
    """
    checked = 0
    for i in range(len(item_rows)):
        checked += slot_count[item_slots[i]]
    out_item = np.empty(checked, np.int32)
    out_x = np.empty(checked, np.int32)
    words = superkeys.shape[1]
    n = 0
    for i in range(len(item_rows)):
        g = item_rows[i]
        s = item_slots[i]
        missing_high = ~superkeys[g, 0]
        for j in range(slot_start[s], slot_start[s] + slot_count[s]):
            if use_superkeys:
                if bucket_keys[j, 0] & missing_high:
                    continue
                missing = np.uint64(0)
                for w in range(1, words):
                    missing |= bucket_keys[j, w] & ~superkeys[g, w]
                if missing:
                    continue
            out_item[n] = i
            out_x[n] = query_rows[j]
            n += 1
    if n == checked:
        return out_item, out_x
    return out_item[:n].copy(), out_x[:n].copy()


@njit(cache=True, nogil=True)
def _first_cell(cell_values: np.ndarray, lo: int, hi: int, value: int) -> int:
    """Lower bound of ``value`` in the sorted ``cell_values[lo:hi]``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if cell_values[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def supported_mappings(
    pair_rows: np.ndarray,
    pair_initial_columns: np.ndarray,
    pair_query_rows: np.ndarray,
    value_ids: np.ndarray,
    initial: int,
    row_offsets: np.ndarray,
    cell_values: np.ndarray,
    cell_columns: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """calculateJ's comparison (line 27): every one-to-one mapping each pair's row supports.

    For pair (g, c0, x) the initial column is c0 (the PL item's column); every other key value
    ``value_ids[x, p]`` must sit in some cell of row g, and the chosen columns must all differ.
    A value held by several cells gives several mappings, all enumerated (an odometer over the
    choices). Returns (mapping columns (N, m), their query rows (N,), joinable pair count).
    """
    m = value_ids.shape[1]
    capacity = len(pair_rows) + 16
    out_cols = np.empty((capacity, m), np.int64)
    out_x = np.empty(capacity, np.int64)
    first = np.zeros(m, np.int64)
    count = np.ones(m, np.int64)
    pick = np.zeros(m, np.int64)
    combo = np.empty(m, np.int64)
    n = 0
    joinable = 0
    for k in range(len(pair_rows)):
        g = pair_rows[k]
        x = pair_query_rows[k]
        lo, hi = row_offsets[g], row_offsets[g + 1]
        found = True
        for p in range(m):
            if p == initial:
                continue
            v = value_ids[x, p]
            a = _first_cell(cell_values, lo, hi, v) if v >= 0 else hi
            b = a
            while b < hi and cell_values[b] == v:
                b += 1
            if a == b:
                found = False
                break
            first[p] = a
            count[p] = b - a
        if not found:
            continue
        combo[initial] = pair_initial_columns[k]
        pick[:] = 0
        supported = False
        while True:
            for p in range(m):
                if p != initial:
                    combo[p] = cell_columns[first[p] + pick[p]]
            injective = True
            for p in range(m):
                for q in range(p + 1, m):
                    if combo[p] == combo[q]:
                        injective = False
            if injective:
                if n == len(out_x):  # grow the output
                    out_cols = np.concatenate((out_cols, np.empty_like(out_cols)))
                    out_x = np.concatenate((out_x, np.empty_like(out_x)))
                out_cols[n] = combo
                out_x[n] = x
                n += 1
                supported = True
            p = m - 1  # next choice, last key column fastest
            while p >= 0 and (p == initial or pick[p] + 1 == count[p]):
                if p != initial:
                    pick[p] = 0
                p -= 1
            if p < 0:
                break
            pick[p] += 1
        if supported:
            joinable += 1
    return out_cols[:n], out_x[:n], joinable
