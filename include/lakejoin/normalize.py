"""The one value normalization every index shares (DESIGN "Values and ids").

Unicode NFKC, trim, collapse inner whitespace, lowercase; numbers in one canonical
text form ("2019", never "2019.0"); empty and null-like values become ``None`` and are
dropped from sets. A method may add its own cleaning on top, never instead.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULL_LIKE = frozenset({"", "na", "n/a", "nan", "null", "none", "nil", "-", "--", "?", "#n/a"})
_WHITESPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def canonical_number(text: str) -> str | None:
    """Return the canonical text of a decimal number, or None if ``text`` is not one.

    Integral values lose their fraction ("2019.0" -> "2019"), others use the shortest
    repr that round-trips ("0.50" -> "0.5"). Leading zeros are kept as text ("007" stays
    "007") because they usually mark identifiers (ZIP codes, FIPS), not quantities.
    """
    if not _NUMBER.match(text):
        return None
    digits = text.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return None
    value = float(text)
    if not math.isfinite(value):
        return None
    if value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(value)


def normalize_text(raw: object) -> str:
    """The text part of the normalization (NFKC, trim, collapse whitespace, lowercase), with no
    null-like or number rules: for names such as column headers, where "NA" is a name."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", str(raw))).strip().lower()


def normalize_value(raw: object) -> str | None:
    """Normalize one cell; None means null-like (left out of every set)."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, float)):
        if isinstance(raw, float) and not math.isfinite(raw):
            return None
        raw = repr(raw) if isinstance(raw, float) else str(raw)
    text = normalize_text(raw)
    if text in NULL_LIKE:
        return None
    number = canonical_number(text)
    return number if number is not None else text


def normalize_set(values: Iterable[object]) -> set[str]:
    """The distinct normalized non-null values of a column: the 'set' of JOSIE/LSH Ensemble."""
    return {v for v in map(normalize_value, values) if v is not None}


# Texts that are already their own normalization, the most frequent distinct texts of real
# columns: lowercase words, and numbers in canonical form that a double holds exactly (at most
# 15 digits, so ``repr`` gives them back) and ``repr`` writes without an exponent (0.0001 at
# the least); not "-0" (that is "0"), no trailing fraction zeros. Checked with RE2 in Arrow.
_PLAIN = r"^(?:0|-?[1-9][0-9]*(?:\.[0-9]*[1-9])?|-?0\.0{0,3}[1-9](?:[0-9]*[1-9])?|[a-z][a-z0-9_]*)$"
_MAX_EXACT_DIGITS = 15


def _as_text(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return column if pa.types.is_string(column.type) else column.cast(pa.string())


def already_normalized(texts: pa.Array) -> np.ndarray:
    """Which texts are sure to satisfy ``normalize_value(text) == text`` (a sufficient test,
    vectorized: the rest go through ``normalize_value``)."""
    # Digits are counted only in texts long enough to hold too many (counting is the slow part).
    long = pc.fill_null(pc.greater(pc.binary_length(texts), _MAX_EXACT_DIGITS), False)
    few_digits = pc.replace_with_mask(
        pa.array(np.ones(len(texts), bool)),
        long,
        pc.less_equal(pc.count_substring_regex(texts.filter(long), "[0-9]"), _MAX_EXACT_DIGITS),
    )
    plain = pc.and_(pc.match_substring_regex(texts, _PLAIN), few_digits)
    null_like = pc.is_in(texts, pa.array(sorted(NULL_LIKE), pa.string()))
    return pc.fill_null(pc.and_not(plain, null_like), False).to_numpy(zero_copy_only=False)


@dataclass(frozen=True)
class NormalizedColumn:
    """A column of cell texts, dictionary-encoded: ``normalize_value`` runs once per distinct
    text (real columns repeat), and every consumer (profile, drift checks, cells) shares it."""

    originals: pa.Array  # the distinct texts
    normalized: pa.Array  # normalize_value of each (None: null-like)
    indices: pa.Array  # per row, its text's position in ``originals`` (null: a missing cell)

    @classmethod
    def of(cls, column: pa.Array | pa.ChunkedArray) -> NormalizedColumn:
        """One column normalized (:meth:`of_columns` of it alone)."""
        return cls.of_columns([column])[0]

    @classmethod
    def of_columns(cls, columns: Sequence[pa.Array | pa.ChunkedArray]) -> list[NormalizedColumn]:
        """Every column of a table, normalized in one pass over all their distinct texts."""
        encoded = [pc.dictionary_encode(_as_text(column)) for column in columns]
        dictionaries = pa.concat_arrays([e.dictionary for e in encoded]) if encoded else pa.array([], pa.string())
        rest = np.flatnonzero(~already_normalized(dictionaries))
        renormalized = pa.array([normalize_value(text) for text in dictionaries.take(rest).to_pylist()], pa.string())
        mask = np.zeros(len(dictionaries), bool)
        mask[rest] = True
        normalized = pc.replace_with_mask(dictionaries, pa.array(mask), renormalized)
        bounds = np.cumsum([0, *(len(e.dictionary) for e in encoded)])
        return [cls(e.dictionary, normalized[bounds[i] : bounds[i + 1]], e.indices) for i, e in enumerate(encoded)]

    def values(self) -> pa.Array:
        """The normalized value of every row (null for missing and null-like cells)."""
        return pc.take(self.normalized, self.indices)
