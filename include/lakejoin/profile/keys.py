"""Single-column key candidates.

A column is a key candidate when its normalized values identify its rows: no nulls, every
value distinct (``distinct == count == rows``), at least ``MIN_ROWS`` rows, a type that can
serve as a join key (not ``decimal`` — measurements are often unique by accident — nor
``boolean``), and values short enough to be labels rather than free text
(mean original length <= ``MAX_MEAN_LENGTH``). Uniqueness is exact over the normalized
values, i.e. the equality joins use ("UA" and "ua" are one value).
"""

from __future__ import annotations

from collections.abc import Mapping

MIN_ROWS = 2
MAX_MEAN_LENGTH = 64.0
KEY_TYPES = frozenset({"integer", "identifier", "string", "date", "datetime"})


def is_key_candidate(profile: Mapping) -> bool:
    """Whether ``profile`` (type, count, distinct, nulls, length_mean) describes a key candidate."""
    return (
        profile["type"] in KEY_TYPES
        and profile["nulls"] == 0
        and profile["count"] >= MIN_ROWS
        and profile["distinct"] == profile["count"]
        and (profile.get("length_mean") or 0.0) <= MAX_MEAN_LENGTH
    )
