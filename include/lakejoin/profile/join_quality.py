"""Join quality: how worth making a join is, as one score in [0, 1] with its parts and a reason.

Exact overlap says two columns share values; it does not say the join is one a person wants. A
column of small integer codes shares values with every numeric column of the lake, and a table's
real partner is found by a key, not by the size of the overlap. The score is built from what the
lake already knows about both sides (the catalog's profiles, the JOSIE index's posting lists), in
the spirit of the systems that rank by join quality: Aurum's and Auctus's key–foreign-key joins
(uniqueness plus containment), NextiaJD's containment and cardinality proportion, and the
inverse document frequency of information retrieval for the evidence a shared value gives.

For a join of a column ``F`` (the *foreign* side: the less unique one) into a column ``K`` (the
*key* side) sharing ``o`` distinct values, each part is in [0, 1]:

- ``keyness`` — how close ``K`` is to a key: its distinct values over its non-null rows,
  sharpened (``uniqueness ** KEYNESS_POWER``): a key–foreign-key (n:1) join is the join people
  want; a join of two columns with repeats multiplies rows (``growth``, the average number of
  ``K`` rows each ``F`` row meets, is shown);
- ``containment`` — ``o / |F|``: a foreign key's values are all keys of the other side;
- ``coverage`` — ``o / |K|``: a handful of values of a large key meet by accident;
- ``informativeness`` — the mean, over the shared values, of ``1 - ln f(v) / ln N`` where
  ``f(v)`` is the number of the lake's ``N`` columns holding ``v`` (its posting-list
  length): "shares 200 rare identifiers" beats "shares 300 small integers";
- ``shape`` — low-cardinality flags (a handful of shared values, unless they are rare in the
  lake), measures (decimals, and integer columns that are not key-like on either side) and keys
  that number their rows (consecutive integers: 1..n, or ids from any start), on either side
  (unless the names agree: ``ArtistId``),
  and count-like integer columns meeting an integer key (a time of day inside a numbering with
  gaps: no reference, unless the names agree) are demoted;
- ``name`` — how alike the column names are (or the foreign column's name and the key table's
  title plus its column name: ``ArtistId`` → ``Artist.Id``). Names only break ties: their weight
  grows as the shared values carry less information, and a score without content stays low.

``score = keyness · containment² · (0.25 + 0.75·informativeness) · (0.5 + 0.5·√coverage) · shape
· (1 − λ + λ·name)`` with ``λ = NAME_WEIGHT · (1 − informativeness)``.

Composite keys (MATE) and semantic (PEXESO) joins are scored on the same scale
(:func:`composite_quality`, :func:`semantic_quality`); :func:`recognisable` ranks a table's
composite keys so that keys of identifier and code columns come before a measure that completes a
unique combination by accident.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

KEYNESS_POWER = 8  # uniqueness 0.99 -> 0.92, 0.9 -> 0.43, 0.5 -> 0.004
KEY_UNIQUENESS = 0.99  # a side this unique is a key (real keys carry a few duplicates)
NAME_WEIGHT = 0.6
FLAG_VALUES = 3  # sharing this few distinct values is a flag's join (Y/N, 0/1, a handful of codes)
MEASURE_SHAPE = 0.5  # a non-key numeric join
DECIMAL_SHAPE = 0.25  # decimals are measurements: unique by accident, equal by coincidence
SEMANTIC_FACTOR = 0.8  # a semantic match is weaker evidence than an equal value
ROW_NUMBERS_SHAPE = 0.35  # a key numbering its rows (1..n, 1000..1199): any integer range holds it, by accident
COUNT_VALUES = 50  # an integer column with more distinct values than this that is not near-unique is a count
ACCIDENTAL_PAIR_SHAPE = 0.25  # a composite key's pair of differently named numbers: most small tuples are keys
COMMON_VALUES = 0.3  # shared values less informative than this are common across the lake
MIN_QUALITY = 0.2  # below this a join is listed as weak, after the joins worth making
NUMERIC = frozenset({"integer", "decimal"})


@dataclass(frozen=True)
class Side:
    """One side of a join as the catalog profiles it."""

    name: str
    type: str | None
    rows: int  # non-null cells
    distinct: int
    table: str = ""  # the dataset's title (for the name part)
    row_numbers: bool = False  # its values number its rows: consecutive integers, one a row (1..n, 1000..1199)

    @property
    def uniqueness(self) -> float:
        """Distinct values per non-null cell, at most 1 (0 for a side without rows)."""
        return min(1.0, self.distinct / self.rows) if self.rows else 0.0


@dataclass(frozen=True)
class Quality:
    """A join's score, its parts and a one-line reason."""

    score: float
    keyness: float
    containment: float
    coverage: float
    informativeness: float
    shape: float
    name: float
    cardinality: str  # "1:1", "n:1" (this side references theirs), "1:n" or "m:n"
    growth: float  # rows of the other side each row of the referencing side meets, on average
    reason: str

    def evidence(self) -> dict[str, object]:
        """The quality's parts as a JSON-ready dict, floats rounded to 4 places."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def keyness(uniqueness: np.ndarray | float) -> np.ndarray | float:
    """How close a column is to a key: its uniqueness clipped to [0, 1] and sharpened by ``KEYNESS_POWER``."""
    return np.clip(uniqueness, 0.0, 1.0) ** KEYNESS_POWER


def content_scores(
    overlap: np.ndarray,
    size_a: np.ndarray,
    size_b: np.ndarray,
    unique_a: np.ndarray,
    unique_b: np.ndarray,
    numeric_shape: np.ndarray,
    informativeness: np.ndarray,
) -> np.ndarray:
    """The score without its name part, for many pairs at once (arrays of one length): what the
    graph ranks a column's candidates by before names are looked at (a name multiplies by at
    most 1, so the top by content bounds the top by score from above)."""
    key_is_b = unique_b >= unique_a
    size_f, size_k = np.where(key_is_b, size_a, size_b), np.where(key_is_b, size_b, size_a)
    unique_k = np.where(key_is_b, unique_b, unique_a)
    containment = overlap / np.maximum(size_f, 1)
    coverage = overlap / np.maximum(size_k, 1)
    flags = flag_part(overlap, informativeness)
    return (
        keyness(unique_k)
        * containment**2
        * (0.25 + 0.75 * informativeness)
        * (0.5 + 0.5 * np.sqrt(coverage))
        * numeric_shape
        * flags
    )


def flag_part(overlap: np.ndarray, informativeness: np.ndarray) -> np.ndarray:
    """Sharing at most ``FLAG_VALUES`` values is a flag's join (Y/N, 0/1) unless the values are
    rare in the lake (three airport codes of a key table): the demotion fades as they are rarer."""
    demoted = (overlap / (FLAG_VALUES + 1)) ** 2
    return np.where(overlap <= FLAG_VALUES, 1.0 - (1.0 - demoted) * (1.0 - informativeness), 1.0)


def row_numbers(
    type_: str | None, count: int, distinct: int, nulls: int, low: float | None, high: float | None
) -> bool:
    """Whether a profiled column numbers its table's rows: one integer a row, consecutive, from any
    start (1..n, 0..n-1, or ids counted from 1000). A range of integers holds such a key whatever it
    is, so its containment is no evidence of a reference."""
    return (
        type_ == "integer"
        and nulls == 0
        and distinct == count > 0
        and low is not None
        and high is not None
        and high == low + count - 1
    )


def shape_of(type_a: str | None, type_b: str | None, unique_a: float, unique_b: float) -> float:
    """The type part: decimals and non-key numeric columns are measures, not join keys."""
    if "decimal" in (type_a, type_b):
        return DECIMAL_SHAPE
    if (type_a in NUMERIC or type_b in NUMERIC) and max(unique_a, unique_b) < KEY_UNIQUENESS:
        return MEASURE_SHAPE
    return 1.0


def quality(a: Side, b: Side, overlap: int, informativeness: float) -> Quality:
    """The quality of joining column ``a`` (this side) with column ``b`` on ``overlap`` shared
    distinct values whose mean informativeness is given."""
    unique_a, unique_b = a.uniqueness, b.uniqueness
    shape = shape_of(a.type, b.type, unique_a, unique_b)
    content = float(
        content_scores(
            np.array([overlap], np.float64),
            np.array([a.distinct], np.float64),
            np.array([b.distinct], np.float64),
            np.array([unique_a]),
            np.array([unique_b]),
            np.array([shape]),
            np.array([informativeness]),
        )[0]
    )
    name = name_similarity(a, b)
    weight = NAME_WEIGHT * (1.0 - informativeness)
    key, foreign = (b, a) if unique_b >= unique_a else (a, b)
    agree = names_agree(name)
    # names that agree make a numbering a real id (ArtistId); either side of a 1:1 join may be the numbering
    numbering = (a.row_numbers or b.row_numbers) and not agree
    # a count or measure (a time of day, a weight) falls inside any integer key's range: no reference
    counted = not numbering and not agree and is_count(foreign) and key.uniqueness >= KEY_UNIQUENESS
    accident = ROW_NUMBERS_SHAPE if numbering else MEASURE_SHAPE if counted else 1.0
    cardinality = _cardinality(unique_a, unique_b)
    growth = (key.rows / key.distinct) if key.distinct else 1.0
    containment = overlap / foreign.distinct if foreign.distinct else 0.0
    flags = float(flag_part(np.array([overlap]), np.array([informativeness]))[0])
    return Quality(
        score=content * (1.0 - weight + weight * name) * accident,
        keyness=float(keyness(key.uniqueness)),
        containment=containment,
        coverage=overlap / key.distinct if key.distinct else 0.0,
        informativeness=informativeness,
        shape=shape * flags * accident,
        name=name,
        cardinality=cardinality,
        growth=growth,
        reason=f"{'their' if b.row_numbers else 'your'} key is a row numbering: every table has one"
        if numbering
        else _count_reason(foreign.name, foreign is a)
        if counted and informativeness >= COMMON_VALUES  # else the reason is the values' commonness
        else _reason(cardinality, overlap, containment, informativeness, growth, a.type in NUMERIC),
    )


def composite_quality(
    share: float,
    coverage_of_theirs: float,
    key_columns: Sequence[Side],
    this_is_key: bool,
    mapped_columns: Sequence[Side],
) -> Quality:
    """A composite-key join found by MATE: one side's composite key (a key by construction) and
    the other side's columns mapped to it, pair by pair (``mapped_columns``). ``share``: the key's
    tuples found on the other side (its coverage); ``coverage_of_theirs``: an estimate of the other
    side's tuples that are keys (their containment). Composite tuples rarely meet by accident, so
    their informativeness is the key's :func:`recognisable` part, except where a pair maps numbers
    onto differently named numbers: a key of small numbers (series × episode) holds most small
    tuples, so a count that completes one (``total_episodes_appeared`` for ``episode``) meets it
    by accident. Each such pair is demoted (``ACCIDENTAL_PAIR_SHAPE``), and the names of the
    numeric pairs break ties as for one-column joins."""
    informativeness = recognisable(key_columns)
    containment = min(1.0, coverage_of_theirs)
    pairs = list(zip(key_columns, mapped_columns))
    numeric = [(k, m) for k, m in pairs if k.type in NUMERIC and m.type in NUMERIC]
    similarities = [name_similarity(k, m) for k, m in numeric]
    accidental = [(k, m) for (k, m), similar in zip(numeric, similarities) if not names_agree(similar)]
    name = float(np.mean(similarities)) if similarities else 1.0
    weight = NAME_WEIGHT * len(numeric) / len(pairs) if pairs else 0.0
    shape = ACCIDENTAL_PAIR_SHAPE ** len(accidental)
    score = (
        containment**2
        * (0.25 + 0.75 * informativeness)
        * (0.5 + 0.5 * math.sqrt(min(1.0, share)))
        * shape
        * (1.0 - weight + weight * name)
    )
    cardinality = "1:n" if this_is_key else "n:1"
    ours, theirs = (0, 1) if this_is_key else (1, 0)
    return Quality(
        score=score,
        keyness=1.0,
        containment=containment,
        coverage=share,
        informativeness=informativeness,
        shape=shape,
        name=name,
        cardinality=cardinality,
        growth=1.0,
        reason=_accidental_reason([(p[ours].name, p[theirs].name) for p in accidental])
        if accidental
        else _reason(cardinality, 0, containment, informativeness, 1.0, False, [c.name for c in key_columns]),
    )


def semantic_quality(a: Side, b: Side, joinability: float) -> Quality:
    """A PEXESO join: ``joinability`` of ``a``'s distinct values matched within τ in ``b``. The
    values are not equal, so no posting list tells their rarity: a semantic join is scored as an
    equal-value join of middling informativeness, times ``SEMANTIC_FACTOR``."""
    matched = round(joinability * a.distinct)
    base = quality(a, b, min(matched, b.distinct), 0.5)
    return Quality(**{**asdict(base), "score": base.score * SEMANTIC_FACTOR, "reason": "semantic: " + base.reason})


def recognisable(columns: Sequence[Side]) -> float:
    """How much a composite key looks like one a person declared, in [0, 1]: identifier, code,
    string and date columns count fully; integer columns that are near-keys or small codes count
    fully, other integers (counts) half, decimals (measures) not at all."""
    if not columns:
        return 0.0
    weights = []
    for c in columns:
        if c.type == "decimal":
            weights.append(0.0)
        elif is_count(c):
            weights.append(0.5)
        else:
            weights.append(1.0)
    return float(np.mean(weights))


def is_count(side: Side) -> bool:
    """An integer column of many values that repeat: a count or a measure (runs, minutes, grams),
    not an identifier or a small code."""
    return side.type == "integer" and side.distinct > COUNT_VALUES and side.uniqueness < 0.5


def names_agree(similarity: float) -> bool:
    """Names that share more than half their words name the same thing (``ArtistId`` and
    ``Artist.Id``; not ``episode_count`` and ``episode``)."""
    return similarity > 0.5


def key_order(columns: Sequence[Side], positions: Sequence[int]) -> tuple[int, float, float]:
    """A composite key's place among its table's keys: the smallest first, then the most
    recognisable, then the one of earlier columns (tables lead with their identifying columns)."""
    return (len(columns), -recognisable(columns), float(np.mean(positions)) if positions else 0.0)


_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@functools.lru_cache(maxsize=1 << 16)  # the graph asks for the same column names and titles over and over
def words(text: str) -> frozenset[str]:
    """The lower-case words of a name (camelCase, snake_case, digits apart), plurals made singular
    so that a table ``Artists`` names a column ``ArtistId``."""
    return frozenset(_singular(w.lower()) for w in _WORDS.findall(text or ""))


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def name_similarity(a: Side, b: Side) -> float:
    """Jaccard similarity of the two columns' words, or of one column's words with the other
    table's title words plus its column's (a foreign key named after the table it references)."""
    wa, wb = words(a.name), words(b.name)
    ta, tb = _table_words(a.table), _table_words(b.table)
    return max(_jaccard(wa, wb), _jaccard(wa, wb | tb), _jaccard(wa | ta, wb))


def _table_words(title: str) -> frozenset[str]:
    return words(re.split(r"[/\\]", title or "")[-1].rsplit(".", 1)[0])


def _jaccard(x: frozenset[str], y: frozenset[str]) -> float:
    return len(x & y) / len(x | y) if x and y else 0.0


def _accidental_reason(pairs: Sequence[tuple[str, str]]) -> str:
    shown = ", ".join(f"your {mine} with their {other}" for mine, other in pairs)
    return f"pairs {shown}: numbers named unlike, meeting by accident"


def _count_reason(name: str, yours: bool) -> str:
    mine, other = ("your", "their") if yours else ("their", "your")
    return f"{mine} {name} is a count, not a reference: it falls in {other} key's range"


def _cardinality(unique_a: float, unique_b: float) -> str:
    key_a, key_b = unique_a >= KEY_UNIQUENESS, unique_b >= KEY_UNIQUENESS
    return {(True, True): "1:1", (False, True): "n:1", (True, False): "1:n", (False, False): "m:n"}[(key_a, key_b)]


def _reason(
    cardinality: str,
    overlap: int,
    containment: float,
    informativeness: float,
    growth: float,
    numeric: bool,
    key: Sequence[str] | None = None,
) -> str:
    """The join in one line, from the part that decides it."""
    if key is None and overlap <= FLAG_VALUES:
        return f"shares only {overlap} value{'s' if overlap != 1 else ''}: a flag or a small code"
    if informativeness < COMMON_VALUES:
        return "shares only " + ("common small numbers" if numeric else "values common across the lake")
    if cardinality == "m:n":
        return f"many-to-many: each row meets about {growth:.1f} rows of the other table"
    what = f"({', '.join(key)}) tuples" if key is not None and len(key) > 1 else "values"
    share = f"{containment:.0%} of" if containment < 0.995 else "all"
    if cardinality == "n:1":
        return f"{share} your {what} are keys of theirs"
    if cardinality == "1:n":
        return f"{share} their {what} are keys of yours"
    return f"both are keys; {share} the {what} meet"
