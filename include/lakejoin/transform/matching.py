"""Finding joinable row pairs by inverse row frequency (CST paper §4.2.1, Eq. 1-2, Alg. 1).

IRF(t, c) = 1 / #rows of column c containing the n-gram t, and
Rscore(t) = IRF(t, SC) * IRF(t, TC) for n-grams occurring in both columns.

Each source row keeps ONE representative n-gram, the best over all sizes n0 <= n < nmax, and is
paired with every target row containing it. That is the released code's variant, the one that
reproduces the paper's Table 1 (112.5 pairs per web table, P 0.80 / R 0.93); Algorithm 1 as
printed keeps one per size and yields many more pairs (notes/cst.md §3.2). Ties on Rscore go
to the shorter n-gram, then to the earlier position in the row, so the result never depends on
hash order. Rows are the distinct values of each column.

Improvement (not in the paper, off by default): with ``n_fallback`` a source row that shares
no n-gram of size >= n0 with the target column retries with the sizes n_fallback <= n < n0.
A value shorter than n0 (a 3-digit area code, a 2-letter state) has no n0-gram, so otherwise
it can never be matched; rows that do match at n0 are unaffected.
"""

from __future__ import annotations

from collections.abc import Sequence

N_MIN = 4
N_MAX = 20


def _row_ngrams(value: str, n_min: int, n_max: int) -> dict[str, None]:
    """The distinct n-grams of one value, in (size, position) order."""
    grams: dict[str, None] = {}
    for n in range(n_min, min(n_max, len(value) + 1)):
        for start in range(len(value) - n + 1):
            grams[value[start : start + n]] = None
    return grams


def ngram_rows(values: Sequence[str], n_min: int = N_MIN, n_max: int = N_MAX) -> dict[str, list[int]]:
    """Inverted index n-gram -> ids of the rows containing it (each row listed once)."""
    index: dict[str, list[int]] = {}
    for row, value in enumerate(values):
        for gram in _row_ngrams(value, n_min, n_max):
            index.setdefault(gram, []).append(row)
    return index


def _representative(
    value: str, source_index: dict[str, list[int]], target_index: dict[str, list[int]], n_min: int, n_max: int
) -> str | None:
    """The n-gram of ``value`` with the highest Rscore (Eq. 2); None if it shares none."""
    best_gram, best_score = None, 0.0
    for gram in _row_ngrams(value, n_min, n_max):
        target_rows = target_index.get(gram)
        if target_rows is None:
            continue
        score = 1.0 / (len(source_index[gram]) * len(target_rows))
        if score > best_score:
            best_gram, best_score = gram, score
    return best_gram


def match_rows(
    source: Sequence[str],
    target: Sequence[str],
    n_min: int = N_MIN,
    n_max: int = N_MAX,
    n_fallback: int | None = None,
) -> list[tuple[int, int]]:
    """Candidate joinable pairs (source row, target row), ordered by source row then target row.

    ``n_fallback`` (< n_min): n-gram size the unmatched rows retry down to (module docstring).
    """
    if n_fallback is not None and not 1 <= n_fallback < n_min:
        raise ValueError(f"n_fallback must lie in [1, {n_min}), got {n_fallback}")
    indexes = {(n_min, n_max): (ngram_rows(source, n_min, n_max), ngram_rows(target, n_min, n_max))}
    sizes = [(n_min, n_max)] + ([(n_fallback, n_min)] if n_fallback is not None else [])
    pairs: list[tuple[int, int]] = []
    for row, value in enumerate(source):
        for size in sizes:
            if size not in indexes:  # built only when some row needs it
                indexes[size] = (ngram_rows(source, *size), ngram_rows(target, *size))
            source_index, target_index = indexes[size]
            gram = _representative(value, source_index, target_index, *size)
            if gram is not None:
                pairs.extend((row, target_row) for target_row in target_index[gram])
                break
    return pairs
