"""Column type inference from per-value pattern counts.

A column's type is decided from how many of its non-null values match each pattern below,
so the same decision serves the Spark job (which counts matches with ``rlike`` over distinct
values) and the pure-Python oracle (``lakejoin.profile.profile_values``). Patterns are tested
on the normalized value (``lakejoin.normalize.normalize_value``: lower case, canonical
numbers, leading zeros kept) except ``upper_code``, which needs the original's case. They use
only syntax that Java and Python regexes read alike, and are anchored (``rlike`` searches).

Types, first match wins, each requiring every non-null value to match (``min_share``):

- ``boolean``: true/false, t/f, yes/no, y/n.
- ``integer``: canonical integers; a leading zero ("007", FIPS "01001") makes a value text.
- ``decimal``: canonical numbers with a fraction or exponent (integers may be mixed in).
- ``date``: ISO ``yyyy-mm-dd`` or US ``m/d/yyyy``.
- ``datetime``: ISO date and time (dates may be mixed in).
- ``identifier``: single tokens (letters and digits joined by ``-_./:#``) that either all
  contain a digit (tail numbers "N14228", zero-padded codes) or are all upper-case in the
  original ("UA", "JFK"): codes rather than words.
- ``string``: anything else, and columns with no non-null value.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPES = ("integer", "decimal", "boolean", "date", "datetime", "string", "identifier")
NUMERIC_TYPES = frozenset({"integer", "decimal"})

# Tested on the normalized value.
VALUE_PATTERNS: dict[str, str] = {
    "boolean": r"^(true|false|t|f|yes|no|y|n)$",
    "integer": r"^-?(0|[1-9][0-9]*)$",
    "decimal": r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?(e[+-]?[0-9]+)?$",
    "date": r"^([0-9]{4}-[0-9]{1,2}-[0-9]{1,2}|[0-9]{1,2}/[0-9]{1,2}/[0-9]{4})$",
    "datetime": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(z|[+-][0-9]{2}:?[0-9]{2})?$",
    "token": r"^[a-z0-9]+([-_./:#][a-z0-9]+)*$",
    "has_digit": r"[0-9]",
}
# Tested on the original text (``coalesce(raw, value)``).
ORIGINAL_PATTERNS: dict[str, str] = {
    "upper_code": r"^[A-Z0-9]+([-_./:#][A-Z0-9]+)*$",
}


def infer_type(matches: Mapping[str, int], count: int, min_share: float = 1.0) -> str:
    """The column type given ``matches[pattern]`` (values matching it) among ``count`` non-null values."""
    if count <= 0:
        return "string"
    needed = count * min_share

    def all_match(*patterns: str) -> bool:
        return sum(matches.get(p, 0) for p in patterns) >= needed

    for simple in ("boolean", "integer", "decimal", "date"):
        if all_match(simple):
            return simple
    if matches.get("datetime", 0) > 0 and all_match("date", "datetime"):
        return "datetime"
    if all_match("token") and (all_match("has_digit") or all_match("upper_code")):
        return "identifier"
    return "string"
