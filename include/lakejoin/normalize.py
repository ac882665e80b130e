"""The one value normalization every index shares (DESIGN "Values and ids").

Unicode NFKC, trim, collapse inner whitespace, lowercase; numbers in one canonical
text form ("2019", never "2019.0"); empty and null-like values become ``None`` and are
dropped from sets. A method may add its own cleaning on top, never instead.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable

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
