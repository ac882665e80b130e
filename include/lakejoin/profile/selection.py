"""Which index families index a column (the ``indexed_by`` field of ``catalog/columns``).

A rule set maps each family to the column types it takes; a column with fewer than
``min_distinct`` distinct values goes to no family, and neither does a ``row_names`` column
(R's or pandas' row numbers, ``lakejoin.sources.headers``): 1..n overlaps every other row
numbering and joins nothing. Defaults (``DEFAULT_RULES``):

- ``josie``, ``lshensemble``: every type except ``integer`` and ``decimal``. Purely numeric
  columns are left out, as the JOSIE/LSH Ensemble evaluation on open data does: small
  integers and measurements overlap between unrelated columns by accident and flood
  set-overlap search with meaningless candidates.
- ``mate``: every type. MATE joins on composite keys of whole rows, where years, hours and
  numeric ids are exactly what must match (flights→weather on origin, year, month, day, hour).
- ``pexeso``: label-like ``string`` columns: mean original length at most
  ``label_max_mean_length`` (64, the label bound of key candidates, ``lakejoin.profile.keys``).
  The paper joins on key columns of entity names (its §I: string join-key columns, picked
  from key metadata or by semantic type); free text (titles, tweets,
  remarks) is no join key, and ``identifier`` codes ("N14228", "UA", licence numbers) name
  entities by their exact spelling, so a code within τ of another is another entity: exact
  overlap (JOSIE, LSH Ensemble, MATE) and transformations (``qgram``) serve codes. On the
  whole bundled lake the two kinds held about 70 % of the embedding model's input tokens, and
  embedding was most of the first run's time (README, "Ingest").
  ``SelectionRules(pexeso=frozenset({"string", "identifier"}), label_max_mean_length=None)``
  is the old choice, every textual column.
- ``qgram``: ``string``, ``identifier``, ``date`` and ``datetime``: the columns whose values a
  transformation reformats (names, codes, dates; numbers written with separators or units are
  profiled as strings). Purely numeric columns stay out for JOSIE's reason, and booleans join
  nothing. ``SelectionRules(qgram=frozenset())`` builds the family empty.

The main job profiles with ``DEFAULT_RULES``; library callers (``profile_values``, ``finish_profile``)
take another ``SelectionRules``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakejoin.index import FAMILIES
from lakejoin.lake.schemas import ROW_NAMES
from lakejoin.profile.keys import MAX_MEAN_LENGTH
from lakejoin.profile.types import NUMERIC_TYPES, TYPES

_ALL = frozenset(TYPES)


@dataclass(frozen=True)
class SelectionRules:
    """Column types each family indexes, and the distinct-value floor for any family."""

    josie: frozenset[str] = _ALL - NUMERIC_TYPES
    lshensemble: frozenset[str] = _ALL - NUMERIC_TYPES
    mate: frozenset[str] = _ALL
    pexeso: frozenset[str] = frozenset({"string"})
    qgram: frozenset[str] = frozenset({"string", "identifier", "date", "datetime"})
    min_distinct: int = 1
    # families that index only label-like values (embedding a paragraph says little), and how long those may be
    label_families: frozenset[str] = frozenset({"pexeso"})
    label_max_mean_length: float | None = MAX_MEAN_LENGTH  # None: any length

    def __post_init__(self) -> None:
        for family in FAMILIES:
            unknown = set(getattr(self, family)) - _ALL
            if unknown:
                raise ValueError(
                    f"selection rule for {family} names unknown types {sorted(unknown)}; types are {TYPES}"
                )


DEFAULT_RULES = SelectionRules()


def indexed_by(profile: Mapping, rules: SelectionRules = DEFAULT_RULES) -> list[str]:
    """The families (in ``lakejoin.index.FAMILIES`` order) that index the profiled column."""
    missing = {"type", "distinct"} - set(profile)
    if missing:
        raise ValueError(f"profile lacks {sorted(missing)} needed to select index families")
    if profile["distinct"] < rules.min_distinct or profile.get("name_source") == ROW_NAMES:
        return []
    return [
        family
        for family in FAMILIES
        if profile["type"] in getattr(rules, family)
        and (family not in rules.label_families or _label_like(profile, rules.label_max_mean_length))
    ]


def _label_like(profile: Mapping, max_mean_length: float | None) -> bool:
    """Whether the column's values are short enough to be labels (a profile without
    ``length_mean`` counts as label-like: nothing says otherwise)."""
    return max_mean_length is None or (profile.get("length_mean") or 0.0) <= max_mean_length
