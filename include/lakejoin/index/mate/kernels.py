"""Algorithm 1's table loop (§6.2-§6.3 and calculateJ) as one compiled pass (numba).

``scan_tables`` walks the candidate tables in rank order and, per table, applies rule 1, the
row filter, rule 2, calculateJ and the top-k update without returning to Python, so the cost
of a search is its per-pair work plus a fixed cost per query, not a Python round trip per
table. SCR runs the same pass with the row filter switched off: it verifies every
(PL item, query row) pair straight from the posting lists (paper §7.1).

Layout (see ``index.MateIndex``): row g's cells are ``row_offsets[g]:row_offsets[g+1]`` of
``cell_values`` (value ids, ascending) and ``cell_columns`` (column id; ascending within a value).
Item i of the candidate list (row ``item_rows[i]``, column ``item_columns[i]``) meets the query
rows of its initial value, ``query_rows[slot_start[s] : slot_start[s] + slot_count[s]]`` with
``s = item_slots[i]`` (the dictionary of line 20); ``bucket_keys[j]`` is the key of
``query_rows[j]``. The functions take these arrays bundled in named tuples (numba passes them
as one argument each): the candidates (``query.Candidates``), the query's value ids
(``query.QueryValues``), the rows' cells (``index.Cells``) and a pair's working arrays (``Scratch``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from lakejoin.index.mate.index import Cells
from lakejoin.index.mate.query import Candidates, QueryValues

CODE_LIMIT = 1 << 62  # packed (mapping, query row) codes stay below this (int64)
DENSE_MIN = 1 << 12  # presence tables up to this size (or 4 entries per supported row) are cheap
# calculateJ's supported (mapping, query row) rows of one table, at most: a key whose values
# sit in many cells of a row (yes/no flags, small codes) supports every combination of those
# cells, e.g. ~15k mappings per pair for 4 binary columns in a 50-flag table, and the list
# would grow past any memory. 16 M rows (~0.7 GiB at 4 key columns) is far above what a
# real join gives (about one mapping per matching pair), so past it the search stops with a
# clear error instead of taking the machine's memory.
SUPPORTED_LIMIT = 1 << 24
REFUSED = -1  # the count of supported rows the verification functions return for a refusal: compiled code
# must not raise it, as numba does not release the arrays alive in its frames when it raises (numba
# issue #1549): ~110 MiB a refusal in a long-running query process or a whole-lake graph
# Past this many supported rows of one table, the rest of the pairs being verified are counted
# first (``_pair_mappings``, no row written): a table that will pass SUPPORTED_LIMIT is refused
# then, with the same error, instead of after writing 16 M rows (1-1.6 s a refusal).
COUNT_FROM = 1 << 20
COUNT_PAST = SUPPORTED_LIMIT // 2  # ... when the rate so far foretells more rows than this
REFUSAL = (
    "MATE: the key's values match over 16 M (column mapping, query row) pairs in one table; "
    "choose key columns with more distinct values (flags and small codes sit in many columns at once)"
)
# The row filter's output held at once, in (PL item, query row) pairs (two int64 arrays, 64 MiB):
# a table with more pairs is filtered and verified in slices of its items. A query whose initial
# column has few values meets a large table in billions of pairs (weather's key against flights),
# and a weak super-key filter (wide rows of small numbers) passes a large share of them.
PAIR_BUFFER = 1 << 22
# calculateJ counts a table's mappings in a presence table of (mapping, query row) flags, no row
# written per supported mapping, when the table has at most TALLY_FLAGS of them and at most
# TALLY_PER_PAIR per pair that passed the row filter (the rows would take 8 bytes per key column
# and one more each, and a pair supports a mapping or more): a key of small numbers meets a
# row in many mappings (16 M rows from 1.1 M pairs, 2 s to write and sort, in a table of counts).
TALLY_FLAGS = 1 << 26
TALLY_PER_PAIR = 16
STATS = ("tables_verified", "pruned_rule1", "pruned_rule2", "pairs_checked", "pairs_passed", "pairs_joinable")


class Scratch(NamedTuple):
    """``_verify_pair``'s working arrays, one entry per key column (``scratch_of``): the first cell
    and the number of cells holding each value, the odometer's choice among them, the mapping."""

    first: np.ndarray
    span: np.ndarray
    pick: np.ndarray
    combo: np.ndarray


class Tally(NamedTuple):
    """calculateJ's count kept as verification builds it, instead of a row per supported mapping:
    a mapping's code is its columns' ranks among the table's ``width`` columns (``rank``, by
    column number) as digits, the first most significant (so codes sort like column tuples);
    ``seen[code * n_query + x]`` flags query row x as joined under it and ``counts[code]`` counts
    the flags. An empty ``seen``: rows are written (``_verify_pair``)."""

    rank: np.ndarray
    width: int
    n_query: int
    seen: np.ndarray
    counts: np.ndarray


@njit(cache=True, nogil=True)
def _contains(item_keys: np.ndarray, i: int, bucket_keys: np.ndarray, j: int) -> bool:
    """Line 22: query row j's key is in item i's super key S (``key & ~S == 0``), tested word by
    word in the order the candidates hold them (``query.filter_word_order``: the words that
    reject most pairs first)."""
    for w in range(item_keys.shape[1]):
        if bucket_keys[j, w] & ~item_keys[i, w]:
            return False
    return True


@njit(cache=True, nogil=True)
def _item_pairs(
    i: int, first_only: bool, c: Candidates, cells: Cells, out_item: np.ndarray, out_j: np.ndarray, n: int
) -> int:
    """Lines 21-25 for PL item i: appends to ``out_item``/``out_j`` from ``n`` the bucket positions
    j (ascending) whose key is in the item's super key S, only the first when ``first_only``;
    returns the new count.

    A query row can join the item's row only if its value at the probe column (``probe[j]``, the
    bucket ascending by it, ``query.fetch_candidates``) sits in some cell of the row, so when the
    bucket holds more rows than the row has cells, only the bucket rows with one of the row's
    values are tested: a merge of the row's cells (ascending values) with the bucket. A key of
    low-cardinality columns (weather's origin has 3 values) meets each row of a large table with
    thousands of query rows, of which only those sharing a second value with the row can join;
    within those, the same merge on the second probe column (``probe2``, ascending within one
    probe value) keeps those sharing a third (weather's day, then its hour)."""
    s = c.item_slots[i]
    a, b = c.slot_start[s], c.slot_start[s] + c.slot_count[s]
    g = c.item_rows[i]
    lo, hi = cells.row_offsets[g], cells.row_offsets[g + 1]
    if len(c.probe) == 0 or b - a <= hi - lo:
        return _tested(i, a, b, first_only, c, out_item, out_j, n)
    return _probed(i, a, b, first_only, c, cells.cell_values[lo:hi], out_item, out_j, n)


@njit(cache=True, nogil=True)
def _tested(
    i: int, a: int, b: int, first_only: bool, c: Candidates, out_item: np.ndarray, out_j: np.ndarray, n: int
) -> int:
    """The super-key test of item i with bucket positions ``a:b`` (``_item_pairs``)."""
    for j in range(a, b):
        if _contains(c.item_keys, i, c.bucket_keys, j):
            out_item[n] = i
            out_j[n] = j
            n += 1
            if first_only:
                return n
    return n


@njit(cache=True, nogil=True)
def _probed(
    i: int,
    a: int,
    b: int,
    first_only: bool,
    c: Candidates,
    row: np.ndarray,
    out_item: np.ndarray,
    out_j: np.ndarray,
    n: int,
) -> int:
    """``_tested`` for the bucket positions ``a:b`` whose ``probe`` value is among the ``row``'s
    cell values (ascending): a merge. A run of one probe value longer than the row is merged
    again on ``probe2`` (ascending within the run)."""
    probe, probe2, width = c.probe, c.probe2, len(row)
    cell = 0
    while cell < width and a < b:
        v = row[cell]
        a = _first_cell(probe, a, b, v)
        end = _run_end(probe, a, b, v)
        if len(probe2) and end - a > width:
            inner, other = a, 0
            while other < width and inner < end:
                w = row[other]
                inner = _first_cell(probe2, inner, end, w)
                inner_end = _run_end(probe2, inner, end, w)
                n = _tested(i, inner, inner_end, first_only, c, out_item, out_j, n)
                if first_only and n:
                    return n
                inner = inner_end
                other = _run_end(row, other, width, w)
        else:
            n = _tested(i, a, end, first_only, c, out_item, out_j, n)
            if first_only and n:
                return n
        a = end
        cell = _run_end(row, cell, width, v)
    return n


@njit(cache=True, nogil=True)
def _run_end(values: np.ndarray, a: int, b: int, value: int) -> int:
    """The end of the run of ``value`` that starts at ``a`` in ``values[:b]`` (``a``: none there)."""
    end = a
    while end < b and values[end] == value:
        end += 1
    return end


@njit(cache=True, nogil=True)
def row_filter(lo: int, hi: int, c: Candidates, cells: Cells, out_item: np.ndarray, out_j: np.ndarray) -> int:
    """Lines 20-25 for items ``lo:hi``: the pairs (item, bucket position j) whose key is in S
    (``_item_pairs``).

    ``item_keys[i]`` is the super key S that came with PL item i (line 4). The surviving pairs go
    to ``out_item`` (ascending) and ``out_j``, which must hold every pair of the items; returns
    how many survived.
    """
    n = 0
    for i in range(lo, hi):
        n = _item_pairs(i, False, c, cells, out_item, out_j, n)
    return n


@njit(cache=True, nogil=True)
def _passed_rows(lo: int, hi: int, c: Candidates, cells: Cells, seen: np.ndarray) -> int:
    """Rule 2's r_match without keeping the pairs: distinct candidate rows among items ``lo:hi``
    with some pair passing the row filter. ``seen`` (one flag per lake row, all False) is left as
    it was found."""
    distinct = 0
    one_item, one_j = np.empty(1, np.int64), np.empty(1, np.int64)
    for i in range(lo, hi):
        if not seen[c.item_rows[i]] and _item_pairs(i, True, c, cells, one_item, one_j, 0):
            seen[c.item_rows[i]] = True
            distinct += 1
    for i in range(lo, hi):
        seen[c.item_rows[i]] = False
    return distinct


@njit(cache=True, nogil=True)
def _distinct_rows(item_rows: np.ndarray, items: np.ndarray, seen: np.ndarray) -> int:
    """r_match of rule 2: distinct candidate rows among ``items``; ``seen`` (one flag per lake
    row, all False) is left as it was found."""
    distinct = 0
    for i in items:
        if not seen[item_rows[i]]:
            seen[item_rows[i]] = True
            distinct += 1
    for i in items:
        seen[item_rows[i]] = False
    return distinct


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
def _verify_pair(
    g: int,
    c0: int,
    x: int,
    query: QueryValues,
    cells: Cells,
    scratch: Scratch,
    out: np.ndarray,
    n: int,
    tally: Tally,
) -> tuple[np.ndarray, int, bool]:
    """calculateJ's comparison for pair (row g, initial column c0, query row x).

    Every other key value ``value_ids[x, p]`` must sit in some cell of row g, looked up for
    the positions ``checks`` in that order (the likeliest to be missing first, so most failing
    pairs stop at the first lookup), and the chosen columns must all differ. A value held by
    several cells gives several mappings, all appended to ``out`` (columns..., x) from row ``n``
    (an odometer over the choices, in key column order), or counted in ``tally`` when it has
    flags. Returns (out, possibly grown; new n, the supported mappings so far, or ``REFUSED``
    past ``SUPPORTED_LIMIT`` of them; whether the pair supports some mapping).
    """
    value_ids, initial = query.value_ids, query.initial
    first, count, pick, combo = scratch.first, scratch.span, scratch.pick, scratch.combo
    m = value_ids.shape[1]
    lo, hi = cells.row_offsets[g], cells.row_offsets[g + 1]
    cell_values, cell_columns = cells.cell_values, cells.cell_columns
    for p in query.checks:
        v = value_ids[x, p]
        a = _first_cell(cell_values, lo, hi, v) if v >= 0 else hi
        b = a
        while b < hi and cell_values[b] == v:
            b += 1
        if a == b:
            return out, n, False
        first[p] = a
        count[p] = b - a
    combo[initial] = c0
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
            if len(tally.seen):
                if n >= SUPPORTED_LIMIT:
                    return out, REFUSED, supported
                _count(tally, combo, x)
            else:
                if n == out.shape[0]:
                    if n >= SUPPORTED_LIMIT:
                        return out, REFUSED, supported
                    out = np.concatenate((out, np.empty_like(out)))
                out[n, :m] = combo
                out[n, m] = x
            n += 1
            supported = True
        p = m - 1  # next choice, last key column fastest
        while p >= 0 and (p == initial or pick[p] + 1 == count[p]):
            if p != initial:
                pick[p] = 0
            p -= 1
        if p < 0:
            return out, n, supported
        pick[p] += 1


@njit(cache=True, nogil=True)
def scratch_of(m: int) -> Scratch:
    """A ``Scratch`` for keys of ``m`` columns."""
    return Scratch(np.zeros(m, np.int64), np.ones(m, np.int64), np.zeros(m, np.int64), np.empty(m, np.int64))


@njit(cache=True, nogil=True)
def _count(tally: Tally, combo: np.ndarray, x: int) -> None:
    """Flag query row x under the mapping ``combo`` (column numbers) in ``tally``."""
    code = 0
    for p in range(len(combo)):
        code = code * tally.width + tally.rank[combo[p]]
    flag = code * tally.n_query + x
    if not tally.seen[flag]:
        tally.seen[flag] = True
        tally.counts[code] += 1


@njit(cache=True, nogil=True)
def _tally_of(rank: np.ndarray, columns: np.ndarray, m: int, n_query: int, pairs: int, most_flags: int) -> Tally:
    """A ``Tally`` of the table with ``columns`` (its column numbers, ascending; ``rank`` gets
    their ranks) for mappings of ``m`` columns, when its flags fit both ``most_flags`` and
    ``TALLY_PER_PAIR`` per pair of ``pairs``; else one without flags (rows are written)."""
    width = len(columns)
    room = min(most_flags, DENSE_MIN + TALLY_PER_PAIR * pairs) // n_query
    span = 1
    for _ in range(m):
        if span > room // max(width, 1):
            return Tally(rank, width, n_query, np.zeros(0, np.bool_), np.zeros(0, np.int64))
        span *= width
    for j in range(width):
        rank[columns[j]] = j
    return Tally(rank, width, n_query, np.zeros(span * n_query, np.bool_), np.zeros(span, np.int64))


@njit(cache=True, nogil=True)
def _tallied(tally: Tally, columns: np.ndarray, m: int) -> tuple[int, np.ndarray, np.ndarray]:
    """``best_mapping`` of the rows ``tally`` counted: (ȷ_t, best mapping's columns, its matched
    query rows ascending); ties go to the smallest code, the smallest column tuple."""
    best_code = np.argmax(tally.counts)
    mapping = np.empty(m, np.int64)
    code = best_code
    for p in range(m - 1, -1, -1):
        mapping[p] = columns[code % tally.width]
        code //= tally.width
    flags = tally.seen[best_code * tally.n_query : (best_code + 1) * tally.n_query]
    return tally.counts[best_code], mapping, np.flatnonzero(flags)


@njit(cache=True, nogil=True)
def _pair_mappings(g: int, x: int, query: QueryValues, cells: Cells) -> int:
    """How many rows ``_verify_pair`` appends for (row g, query row x), without enumerating them.

    A row has one cell per column, so cells of different values are different columns: the
    positions with one value v (``r`` of them among ``checks``) take distinct cells among the
    ``c`` cells of the row holding v, less the initial column's cell when v is the initial value
    (it holds it): ``c·(c−1)···(c−r+1)`` ways, and the pair's count is their product."""
    value_ids, initial, checks = query.value_ids, query.initial, query.checks
    lo, hi = cells.row_offsets[g], cells.row_offsets[g + 1]
    total = 1
    for i in range(len(checks)):
        v = value_ids[x, checks[i]]
        if v < 0:
            return 0
        taken = 1 if v == value_ids[x, initial] else 0  # cells of v already given to earlier positions
        for j in range(i):
            if value_ids[x, checks[j]] == v:
                taken += 1
        a = _first_cell(cells.cell_values, lo, hi, v)
        b = a
        while b < hi and cells.cell_values[b] == v:
            b += 1
        if b - a <= taken:
            return 0
        total *= b - a - taken
    return total


@njit(cache=True, nogil=True)
def _refuse_early(
    n: int, items: np.ndarray, positions: np.ndarray, start: int, c: Candidates, query: QueryValues, cells: Cells
) -> bool:
    """Whether ``_verify_pair`` would refuse: the ``n`` rows so far and those of pairs ``start:``
    pass ``SUPPORTED_LIMIT`` (the count stops once they do)."""
    total = n
    for p in range(start, len(items)):
        total += _pair_mappings(c.item_rows[items[p]], c.query_rows[positions[p]], query, cells)
        if total > SUPPORTED_LIMIT:
            return True
    return False


@njit(cache=True, nogil=True)
def _dense_ranks(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes replaced by their rank among the distinct codes (order kept); and how many there are."""
    distinct = np.unique(codes)
    return np.searchsorted(distinct, codes).astype(np.int64), len(distinct)


@njit(cache=True, nogil=True)
def _column_ranks(columns: np.ndarray) -> tuple[np.ndarray, int]:
    """Each column id's rank among the distinct ids in ``columns``; and how many there are.

    A table's column ids are usually a short range, so a presence table over the range ranks
    them in one pass; a wide range falls back to sorting the distinct ids.
    """
    lo, hi = columns.min(), columns.max()
    if hi - lo > 4 * columns.size + DENSE_MIN:
        distinct = np.unique(columns.ravel())
        return np.searchsorted(distinct, columns.ravel()).reshape(columns.shape).astype(np.int64), len(distinct)
    rank = np.zeros(hi - lo + 1, np.int64)
    for c in columns.ravel():
        rank[c - lo] = 1
    rank = np.cumsum(rank) - 1
    ranks = np.empty(columns.shape, np.int64)
    for e in range(columns.shape[0]):
        for p in range(columns.shape[1]):
            ranks[e, p] = rank[columns[e, p] - lo]
    return ranks, rank[-1] + 1


@njit(cache=True, nogil=True)
def _mapping_codes(ranks: np.ndarray, width: int) -> tuple[np.ndarray, int]:
    """One int64 code per mapping that sorts like its column-id tuple (first column most
    significant); re-ranked densely whenever the next factor would overflow. Returns (codes, span)."""
    codes = ranks[:, 0].copy()
    span = width
    for p in range(1, ranks.shape[1]):
        if span > CODE_LIMIT // width:
            codes, span = _dense_ranks(codes)
        codes = codes * width + ranks[:, p]
        span *= width
    return codes, span


@njit(cache=True, nogil=True)
def _count_dense(
    codes: np.ndarray, xs: np.ndarray, span: int, n_query: int
) -> tuple[int, int | np.integer, np.ndarray]:
    """Distinct query rows per mapping code through a (code, x) presence table: (ȷ, code, rows)."""
    seen = np.zeros(span * n_query, np.bool_)
    counts = np.zeros(span, np.int64)
    for e in range(len(codes)):
        cell = codes[e] * n_query + xs[e]
        if not seen[cell]:
            seen[cell] = True
            counts[codes[e]] += 1
    best_code = np.argmax(counts)  # ties: the smallest code
    return counts[best_code], best_code, np.flatnonzero(seen[best_code * n_query : (best_code + 1) * n_query])


@njit(cache=True, nogil=True)
def _count_sorted(codes: np.ndarray, xs: np.ndarray, n_query: int) -> tuple[int, int | np.integer, np.ndarray]:
    """``_count_dense`` for code spaces too large for a table: sort (code, x) keys, then scan."""
    keys = np.sort(codes * n_query + xs)
    best, best_code, best_start = 0, -1, 0
    count, code, start = 0, -1, 0
    for p in range(len(keys) + 1):
        if p < len(keys) and p > 0 and keys[p] == keys[p - 1]:
            continue
        next_code = keys[p] // n_query if p < len(keys) else -2
        if next_code != code:
            if count > best:
                best, best_code, best_start = count, code, start
            code, count, start = next_code, 0, p
        count += 1
    matched = np.empty(best, np.int64)
    n = 0
    for p in range(best_start, len(keys)):
        if keys[p] // n_query != best_code:
            break
        if p == best_start or keys[p] != keys[p - 1]:
            matched[n] = keys[p] % n_query
            n += 1
    return best, best_code, matched


@njit(cache=True, nogil=True)
def _count_grouped(
    codes: np.ndarray, xs: np.ndarray, span: int, n_query: int
) -> tuple[int, int | np.integer, np.ndarray]:
    """``_count_dense`` when a (code, x) table is too large but a table per code and one per query
    row are not: the rows grouped by code (a counting sort), then each group's distinct x
    counted with a per-query-row stamp. Linear where ``_count_sorted`` sorts every row."""
    starts = np.zeros(span + 1, np.int64)
    for code in codes:
        starts[code + 1] += 1
    starts = np.cumsum(starts)
    fill = starts[:-1].copy()
    grouped = np.empty(len(xs), np.int64)
    for e in range(len(codes)):
        grouped[fill[codes[e]]] = xs[e]
        fill[codes[e]] += 1
    stamp = np.full(n_query, -1, np.int64)
    best, best_code = 0, -1
    for code in range(span):
        count = 0
        for e in range(starts[code], starts[code + 1]):
            if stamp[grouped[e]] != code:
                stamp[grouped[e]] = code
                count += 1
        if count > best:  # ties: the smallest code
            best, best_code = count, code
    return best, best_code, np.unique(grouped[starts[best_code] : starts[best_code + 1]])


@njit(cache=True, nogil=True)
def best_mapping(supported: np.ndarray, n_query: int) -> tuple[int, np.ndarray, np.ndarray]:
    """calculateJ's count: (ȷ_t, best mapping's columns, its matched query rows ascending).

    ``supported`` holds rows (columns..., x). Each mapping becomes one int64 code (local column
    ranks, ``_mapping_codes``); ȷ of a mapping is its number of distinct x, counted in a
    presence table over (code, x) when that is small, else in the rows grouped by code when a
    table per code and one per query row are, else by sorting packed (code, x) keys.
    Ties go to the smallest column-id tuple.
    """
    m = supported.shape[1] - 1
    ranks, width = _column_ranks(supported[:, :m])
    codes, span = _mapping_codes(ranks, width)
    xs = supported[:, m]
    room = 4 * len(codes) + DENSE_MIN  # table entries as cheap as the rows: a few per row
    if span <= room // n_query:
        best, best_code, matched = _count_dense(codes, xs, span, n_query)
    elif span <= room and n_query <= room:
        best, best_code, matched = _count_grouped(codes, xs, span, n_query)
    else:
        if span > CODE_LIMIT // n_query:
            codes, span = _dense_ranks(codes)
        best, best_code, matched = _count_sorted(codes, xs, n_query)
    mapping = supported[np.flatnonzero(codes == best_code)[0], :m].copy()
    return best, mapping, matched


@njit(cache=True, nogil=True)
def _verify_passed(
    items: np.ndarray,
    positions: np.ndarray,
    c: Candidates,
    query: QueryValues,
    cells: Cells,
    out: np.ndarray,
    n: int,
    tally: Tally,
) -> tuple[np.ndarray, int, int]:
    """calculateJ's comparison for the pairs that passed the row filter, appending to the ``n``
    supported mappings already in ``out`` (or ``tally``): (``out``, their count or ``REFUSED``,
    pairs supporting some mapping). Once ``COUNT_FROM`` mappings are there, the rest are counted
    before they are built (``_refuse_early``) when the pairs so far foretell more than
    ``COUNT_PAST`` in all: the same refusal, before most of them are. (The count is an extra pass
    over the pairs; without it a refusal still comes, at ``SUPPORTED_LIMIT`` rows.)"""
    scratch = scratch_of(query.value_ids.shape[1])
    joinable = 0
    counted = False
    for p in range(len(items)):
        if not counted and n >= COUNT_FROM:
            counted = True
            if n + n * (len(items) - p) // max(p, 1) > COUNT_PAST and _refuse_early(
                n, items, positions, p, c, query, cells
            ):
                return out, REFUSED, joinable
        i = items[p]
        out, n, ok = _verify_pair(
            c.item_rows[i], c.item_columns[i], c.query_rows[positions[p]], query, cells, scratch, out, n, tally
        )
        if n == REFUSED:
            return out, n, joinable
        joinable += ok
    return out, n, joinable


@njit(cache=True, nogil=True)
def _verify_slices(
    lo: int,
    hi: int,
    c: Candidates,
    query: QueryValues,
    cells: Cells,
    items: np.ndarray,
    positions: np.ndarray,
    out: np.ndarray,
    tally: Tally,
) -> tuple[np.ndarray, int, int, int]:
    """Row filter and calculateJ over items ``lo:hi`` in slices whose pairs fit ``items`` and
    ``positions`` (one item's pairs always fit): the same pairs in the same order as one pass.
    Returns (``out``, supported mappings or ``REFUSED``, pairs passed, pairs supporting some mapping)."""
    n = passed = joinable = 0
    a = lo
    while a < hi:
        b, pairs = a, 0
        while b < hi and (b == a or pairs + c.slot_count[c.item_slots[b]] <= len(items)):
            pairs += c.slot_count[c.item_slots[b]]
            b += 1
        got = row_filter(a, b, c, cells, items, positions)
        out, n, ok = _verify_passed(items[:got], positions[:got], c, query, cells, out, n, tally)
        passed += got
        if n == REFUSED:
            return out, n, passed, joinable
        joinable += ok
        a = b
    return out, n, passed, joinable


@njit(cache=True, nogil=True)
def _verify_items(
    lo: int, hi: int, c: Candidates, query: QueryValues, cells: Cells, out: np.ndarray, tally: Tally
) -> tuple[np.ndarray, int, int]:
    """``_verify_passed`` for SCR: every pair of items ``lo:hi``, read straight from the buckets."""
    scratch = scratch_of(query.value_ids.shape[1])
    n = joinable = 0
    for i in range(lo, hi):
        s = c.item_slots[i]
        for j in range(c.slot_start[s], c.slot_start[s] + c.slot_count[s]):
            out, n, ok = _verify_pair(
                c.item_rows[i], c.item_columns[i], c.query_rows[j], query, cells, scratch, out, n, tally
            )
            if n == REFUSED:
                return out, n, joinable
            joinable += ok
    return out, n, joinable


@njit(cache=True, nogil=True)
def _worst_slot(top_score: np.ndarray, top_rank: np.ndarray, filled: int) -> int:
    """The top-k entry to evict: lowest score, ties the latest-ranked table."""
    worst = 0
    for e in range(1, filled):
        if top_score[e] < top_score[worst] or (top_score[e] == top_score[worst] and top_rank[e] > top_rank[worst]):
            worst = e
    return worst


@njit(cache=True, nogil=True)
def scan_tables(
    c: Candidates,
    use_superkeys: bool,
    query: QueryValues,
    cells: Cells,
    k: int,
    sample_size: int,
    pair_buffer: int,
    tally_flags: int,
    floor: int,
    at: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 1 lines 7-30 over tables ``table_start[r]:table_start[r+1]`` in rank order r.

    Rule 1 (line 10) stops at the first table with ``L_t ≤ ȷ_k``. Rule 2 (line 17) is
    evaluated once a table's items are all filtered: its bound ``L_t − r_checked + r_match``
    never grows as items are checked (each item adds at most one passed row), so it ends at
    ``r_match`` and drops the table exactly when some point of the paper's item-by-item scan
    would have. Each table is verified right after its filter, so the top-k list is never
    stale and no batch is left unverified (the reference code loses its last batch).
    ``item_keys`` (the items' super keys) is read only when ``use_superkeys``; a table with more
    pairs than ``pair_buffer`` (``PAIR_BUFFER``) is filtered once for rule 2 and then filtered and
    verified in slices (``_verify_slices``), so the row filter's output stays bounded.
    calculateJ counts a table's mappings in a ``Tally`` when its flags fit ``tally_flags``
    (``TALLY_FLAGS``) and ``TALLY_PER_PAIR`` per pair, else in rows (``best_mapping``): the same count.
    Returns the top-k (score, rank, mapping, matched sample, pairs verified) unsorted, and the
    counters named in ``STATS``. Scores below ``floor`` are not wanted: the rules prune with
    ȷ_k at least ``floor - 1`` from the start (a caller merging several indexes' answers knows
    the score a table must reach). ``at[0]`` is set to the rank of the table being verified and
    ``at[1]`` to 1 when its verification was refused (``SUPPORTED_LIMIT``): the scan stops there,
    and the caller raises the refusal (compiled code returns rather than raise, see ``REFUSED``).

    ``c``: the ``query.Candidates``; ``query``: the ``query.QueryValues`` (value ids, q', the
    check order); ``cells``: the ``index.Cells`` of the index's rows. Named tuples of arrays, so
    the pass takes a few arguments, not one per array.
    """
    table_start, item_rows, item_slots, slot_count = c.table_start, c.item_rows, c.item_slots, c.slot_count
    row_offsets, value_ids = cells.row_offsets, query.value_ids
    m = value_ids.shape[1]
    n_query = max(value_ids.shape[0], 1)
    top_score = np.zeros(k, np.int64)
    top_rank = np.zeros(k, np.int64)
    top_mapping = np.zeros((k, m), np.int64)
    top_sample = np.full((k, sample_size), -1, np.int64)
    top_verified = np.zeros(k, np.int64)
    counters = np.zeros(len(STATS), np.int64)
    out = np.empty((1024, m + 1), np.int64)  # calculateJ's supported mappings, reused
    rank = np.zeros(len(cells.table_columns), np.int64)  # column number -> rank in its table (a tally's)
    filled = 0
    n_tables = len(table_start) - 1
    table_pairs = np.zeros(n_tables, np.int64)
    for r in range(n_tables):
        for i in range(table_start[r], table_start[r + 1]):
            table_pairs[r] += slot_count[item_slots[i]]
    most = min(table_pairs.max(), max(pair_buffer, slot_count.max())) if use_superkeys else 0
    items, positions = np.empty(most, np.int64), np.empty(most, np.int64)  # the row filter's output
    seen = np.zeros(0, np.bool_)  # rule 2's row flags, allocated once the top-k list is full
    for r in range(n_tables):
        lo, hi = table_start[r], table_start[r + 1]
        worst = max(top_score[_worst_slot(top_score, top_rank, filled)] if filled == k else -1, floor - 1)
        if hi - lo <= worst:  # rule 1: no later table can enter the top-k
            counters[1] = n_tables - r
            break
        if worst >= 0 and len(seen) == 0:
            seen = np.zeros(len(row_offsets) - 1, np.bool_)
        at[0] = r
        counters[3] += table_pairs[r]
        columns = cells.table_columns[cells.table_start[c.tables[r]] : cells.table_start[c.tables[r] + 1]]
        if use_superkeys and table_pairs[r] <= most:
            passed = row_filter(lo, hi, c, cells, items, positions)
            if passed == 0:
                continue  # no row passed the filter: ȷ_t = 0
            if worst >= 0 and _distinct_rows(item_rows, items[:passed], seen) <= worst:  # rule 2
                counters[2] += 1
                continue
            tally = _tally_of(rank, columns, m, n_query, passed, tally_flags)
            out, n, joinable = _verify_passed(items[:passed], positions[:passed], c, query, cells, out, 0, tally)
        elif use_superkeys:  # more pairs than the buffer holds
            if worst >= 0:
                matching = _passed_rows(lo, hi, c, cells, seen)
                if matching == 0:
                    continue
                if matching <= worst:  # rule 2
                    counters[2] += 1
                    continue
            tally = _tally_of(rank, columns, m, n_query, table_pairs[r], tally_flags)
            out, n, passed, joinable = _verify_slices(lo, hi, c, query, cells, items, positions, out, tally)
            if passed == 0:
                continue
        else:
            if worst >= 0 and _distinct_rows(item_rows, np.arange(lo, hi), seen) <= worst:  # rule 2
                counters[2] += 1
                continue
            passed = table_pairs[r]
            tally = _tally_of(rank, columns, m, n_query, passed, tally_flags)
            out, n, joinable = _verify_items(lo, hi, c, query, cells, out, tally)
        if n == REFUSED:
            at[1] = 1
            break
        counters[0] += 1
        counters[4] += passed
        counters[5] += joinable
        if n == 0:
            continue
        score, mapping, matched = _tallied(tally, columns, m) if len(tally.seen) else best_mapping(out[:n], n_query)
        if score <= worst:
            continue
        e = filled if filled < k else _worst_slot(top_score, top_rank, filled)
        filled = min(filled + 1, k)
        top_score[e], top_rank[e], top_verified[e] = score, r, passed
        top_mapping[e] = mapping
        top_sample[e] = -1
        shown = min(sample_size, len(matched))
        top_sample[e, :shown] = matched[:shown]
    return (
        top_score[:filled],
        top_rank[:filled],
        top_mapping[:filled],
        top_sample[:filled],
        top_verified[:filled],
        counters,
    )
