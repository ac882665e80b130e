"""Synthetic lakes with planted ground truth, for every index family's tests and benchmarks.

Two generators:

- :func:`set_lake` draws a collection of token sets shaped like the data lakes of the JOSIE
  thesis (Zhu, Ch. 3, Table 3.1): ``"opendata"`` (few, large sets over a huge vocabulary, so
  posting lists are short) and ``"webtable"`` (many small sets over a small, heavily skewed
  vocabulary, so posting lists are long). Set sizes follow a power law (thesis Fig. 2.3) and
  token frequencies a Zipf law. :func:`plant_joinable` then plants query/target pairs with a
  known containment into such a collection.
- :func:`generate_lake` writes a directory of CSV tables (realistic column names; string keys,
  integers, decimals, dates) with planted joinable column pairs, composite keys, near-duplicate
  spellings and unique keys, and returns the :class:`GroundTruth` it also writes as
  ``ground_truth.json``. Truth is computed from the written values after
  :func:`lakejoin.normalize.normalize_value`, so it is exact for the files, not for the recipe.

Everything is drawn from one ``numpy.random.Generator`` seeded by ``seed``; no Python ``hash``
or set iteration order is used, so output is identical for a seed across processes and
``PYTHONHASHSEED`` values. The planted truth is what was planted, not an exhaustive list: other
column pairs of a lake may overlap by chance.
"""

from __future__ import annotations

import csv
import gc
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.normalize import normalize_value

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# ---------------------------------------------------------------------------------------------
# Shared sampling helpers


def _power_law(rng: np.random.Generator, low: int, high: int, exponent: float, n: int) -> np.ndarray:
    """``n`` integers in ``[low, high]`` with P(x) ∝ x^-exponent (a bounded Zipf law).

    Inverse-CDF sampling of the continuous bounded power law on ``[low, high + 1)``, floored:
    vectorized and exact enough for benchmarks, unlike rejection sampling of ``rng.zipf``.
    """
    u = rng.random(n)
    a = 1.0 - exponent
    if abs(a) < 1e-9:
        x = low * np.exp(u * np.log((high + 1) / low))
    else:
        x = (low**a + u * ((high + 1) ** a - low**a)) ** (1.0 / a)
    return np.clip(np.floor(x).astype(np.int64), low, high)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting: numpy 2.4's hash-based ``np.unique`` is ~100x slower on 10^7 ints."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


# ---------------------------------------------------------------------------------------------
# Set lakes (JOSIE / LSH Ensemble)


@dataclass(frozen=True)
class SetLakeShape:
    """Parameters of a set lake; every field can be overridden through ``set_lake(**overrides)``.

    Set sizes are drawn from a power law on ``[min_size, max_size]`` with ``size_exponent``;
    tokens from a Zipf law with ``token_exponent`` over a vocabulary of
    ``vocab_per_set * n_sets`` tokens (at least ``10 * max_size`` so the largest set can be filled).
    """

    min_size: int
    max_size: int
    size_exponent: float
    vocab_per_set: float
    token_exponent: float


SHAPES: dict[str, SetLakeShape] = {
    # Open Data (Table 3.1: avg set size 1,540, one distinct token per two set tokens): few large
    # sets, sizes up to tens of thousands, a vocabulary far larger than the number of sets.
    "opendata": SetLakeShape(min_size=10, max_size=20_000, size_exponent=1.8, vocab_per_set=50.0, token_exponent=1.0),
    # Web Tables (Table 3.1: avg set size 10, max 17,030 over 163 M sets; here the 5-100 body of
    # that distribution): many small sets over a small, heavy-tailed vocabulary.
    "webtable": SetLakeShape(min_size=5, max_size=100, size_exponent=2.0, vocab_per_set=0.5, token_exponent=1.2),
}


_Config = TypeVar("_Config", bound="DataclassInstance")


def _overridden(defaults: _Config, overrides: Mapping[str, object], caller: str) -> _Config:
    """``defaults`` (a dataclass) with ``overrides`` replaced; a clear error names unknown fields."""
    known = {f.name for f in fields(defaults)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown {caller} override(s) {unknown}; expected some of {sorted(known)}")
    return replace(defaults, **overrides)


def _shape(shape: str, overrides: Mapping[str, object]) -> SetLakeShape:
    if shape not in SHAPES:
        raise ValueError(f"unknown set lake shape {shape!r}; expected one of {sorted(SHAPES)}")
    params = _overridden(SHAPES[shape], overrides, "set_lake")
    if not 1 <= params.min_size <= params.max_size:
        raise ValueError(f"need 1 <= min_size <= max_size, got {params.min_size}, {params.max_size}")
    return params


def _draw_distinct_tokens(
    rng: np.random.Generator, sizes: np.ndarray, vocab: int, exponent: float, max_rounds: int = 30
) -> np.ndarray:
    """Sorted keys ``set_index * vocab + token_rank``, each set holding ``sizes[i]`` distinct ranks.

    Zipf draws repeat frequent tokens inside a set, so sets are topped up with fresh draws for
    their deficit until full (or ``max_rounds`` pass, which only the tiniest vocabularies hit).
    """

    def draw(counts: np.ndarray) -> np.ndarray:
        set_index = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        return _sorted_unique(set_index * vocab + _power_law(rng, 1, vocab, exponent, len(set_index)) - 1)

    def contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
        if not len(sorted_keys):
            return np.zeros(len(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
        return sorted_keys[pos] == keys

    base = draw(sizes)
    counts = np.bincount(base // vocab, minlength=len(sizes))
    added = np.empty(0, dtype=np.int64)  # top-ups, sorted; small next to ``base``
    for _ in range(max_rounds):
        deficit = sizes - counts
        if not deficit.any():
            break
        extra = draw(deficit)
        extra = extra[~contains(base, extra) & ~contains(added, extra)]
        counts += np.bincount(extra // vocab, minlength=len(sizes))
        added = np.sort(np.concatenate([added, extra]))
    return np.sort(np.concatenate([base, added]))


def _set_lake_ranks(
    shape: str, n_sets: int, seed: int, overrides: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`set_lake`'s sets as token ranks: set ``i`` holds ``ranks[offsets[i]:offsets[i + 1]]``, ascending."""
    if n_sets < 0:
        raise ValueError(f"n_sets must be >= 0, got {n_sets}")
    params = _shape(shape, overrides)
    rng = np.random.default_rng(seed)
    sizes = _power_law(rng, params.min_size, params.max_size, params.size_exponent, n_sets)
    vocab = max(int(params.vocab_per_set * n_sets), 10 * params.max_size)
    keys = _draw_distinct_tokens(rng, sizes, vocab, params.token_exponent)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(keys // vocab, minlength=n_sets))])
    keys %= vocab  # in place: at a million sets the keys are ~1 GB
    return offsets, keys


def set_lake(shape: str, n_sets: int, seed: int = 0, **overrides: float) -> list[list[str]]:
    """A lake of ``n_sets`` token sets shaped like the thesis's Open Data or Web Tables lake.

    Each set is a list of distinct, already normalized tokens (``"t<rank>"``, where rank 0 is the
    most frequent token of the Zipf law). ``overrides`` replace fields of :class:`SetLakeShape`,
    e.g. ``set_lake("webtable", 10_000, max_size=500)``. Deterministic by ``seed``.
    """
    offsets, ranks = _set_lake_ranks(shape, n_sets, seed, overrides)
    # Build one string per distinct token, shared by every set that holds it.
    used = np.zeros(int(ranks.max(initial=-1)) + 1, dtype=bool)
    used[ranks] = True
    used_ranks = np.flatnonzero(used)
    texts = np.array([f"t{r}" for r in used_ranks.tolist()], dtype=object)
    compact = np.cumsum(used) - 1
    bounds = offsets.tolist()
    with _gc_paused():  # millions of new lists would trigger full collections over ``flat``
        flat = texts[compact[ranks]].tolist()
        return [flat[bounds[i] : bounds[i + 1]] for i in range(n_sets)]


def set_lake_chunks(
    shape: str, n_sets: int, chunk_sets: int, seed: int = 0, **overrides: float
) -> Iterator[pa.ListArray]:
    """:func:`set_lake`'s sets, the same for the same arguments, as Arrow ``list<string>`` arrays
    of ``chunk_sets`` consecutive sets at most: a lake too large for Python strings (a million
    Open Data sets are ~111 M tokens) costs its token ranks (8 bytes a token) and one chunk's text."""
    if chunk_sets < 1:
        raise ValueError(f"chunk_sets must be >= 1, got {chunk_sets}")
    offsets, ranks = _set_lake_ranks(shape, n_sets, seed, overrides)
    return (_token_lists(offsets[first : first + chunk_sets + 1], ranks) for first in range(0, n_sets, chunk_sets))


def _token_lists(bounds: np.ndarray, ranks: np.ndarray) -> pa.ListArray:
    """The sets between ``bounds`` as lists of their tokens' text (``"t<rank>"``, as :func:`set_lake`)."""
    digits = pc.cast(pa.array(ranks[bounds[0] : bounds[-1]]), pa.string())
    return pa.ListArray.from_arrays(
        pa.array(bounds - bounds[0], pa.int32()), pc.binary_join_element_wise("t", digits, "")
    )


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class PlantedPair:
    """A query set planted so that ``|Q ∩ X| / |Q| == containment`` for target set X."""

    query_index: int
    target_index: int
    containment: float
    overlap: int


def plant_joinable(
    sets: list[list[str]],
    n_pairs: int,
    containments: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
    seed: int = 0,
    min_query_size: int = 10,
) -> list[PlantedPair]:
    """Plant ``n_pairs`` query/target pairs of known containment, rewriting the queries in place.

    Pair i aims at ``containments[i % len(containments)]``: the query (the smaller set of a
    random pair, at least ``min_query_size`` tokens) keeps its size ``q`` and is rebuilt from
    ``round(c * q)`` tokens sampled from the target plus its own tokens absent from the target
    (topped up with fresh ``"p<i>_<j>"`` tokens). The recorded containment is the exact
    ``overlap / q``. Every set is used by at most one pair; targets are left unchanged.
    """
    if n_pairs < 0:
        raise ValueError(f"n_pairs must be >= 0, got {n_pairs}")
    if not containments or any(not 0.0 < c <= 1.0 for c in containments):
        raise ValueError(f"containments must be a non-empty sequence in (0, 1], got {containments}")
    eligible = np.flatnonzero(np.array([len(s) for s in sets], dtype=np.int64) >= min_query_size)
    if len(eligible) < 2 * n_pairs:
        raise ValueError(
            f"only {len(eligible)} sets have >= {min_query_size} tokens; {n_pairs} pairs need {2 * n_pairs}"
        )
    rng = np.random.default_rng(seed)
    chosen = rng.choice(eligible, size=2 * n_pairs, replace=False).tolist()
    planted = []
    for i in range(n_pairs):
        a, b = chosen[2 * i], chosen[2 * i + 1]
        query_index, target_index = (a, b) if len(sets[a]) <= len(sets[b]) else (b, a)
        target = sets[target_index]
        q = len(sets[query_index])
        overlap = max(1, round(containments[i % len(containments)] * q))
        target_tokens = set(target)
        shared = [target[j] for j in sorted(rng.choice(len(target), size=overlap, replace=False).tolist())]
        own = [t for t in sets[query_index] if t not in target_tokens][: q - overlap]
        taken = target_tokens.union(own)
        fresh = (f"p{i}_{j}" for j in range(len(taken) + q))
        own += [t for t in fresh if t not in taken][: q - overlap - len(own)]
        sets[query_index] = shared + own
        planted.append(PlantedPair(query_index, target_index, overlap / q, overlap))
    return planted


# ---------------------------------------------------------------------------------------------
# Table lakes: vocabularies


_FIRST = (
    "James Mary John Patricia Robert Jennifer Michael Linda William Elizabeth David Barbara "
    "Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy Matthew Lisa Anthony "
    "Betty Mark Sandra Donald Ashley Steven Emily Paul Donna Andrew Michelle Joshua Carol Kenneth "
    "Amanda Kevin Melissa Brian Deborah George Stephanie Timothy Rebecca Ronald Laura"
).split()
_LAST = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill "
    "Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts"
).split()
_PLACE_HEAD = (
    "Ash Bel Cedar Clear Deer Eagle Elm Fair Glen Green Hazel High Iron Lake Maple Mill North Oak Pine Red River "
    "Rock Silver Spring Stone Sun West White Wild Wolf"
).split()
_PLACE_TAIL = "field ford ton ville wood burg dale port view brook haven mont ridge water worth".split()
_PLACE_EXTRA = ("", "", "", " Springs", " Falls", " Heights", " Junction", " Valley")
_COMPANY_HEAD = (
    "Acme Apex Blue Bright Crown Delta Evergreen First Global Golden Harbor Liberty Metro Northern Pacific Pioneer "
    "Prime Summit United Vertex"
).split()
_COMPANY_TRADE = (
    "Analytics Builders Foods Logistics Media Motors Networks Pharma Power Systems Textiles Energy Health Capital Farms"
).split()
# Legal forms and street types with the abbreviations near-duplicates use.
_COMPANY_FORM = {
    "Corporation": "Corp",
    "Incorporated": "Inc",
    "Limited": "Ltd",
    "Company": "Co",
    "International": "Intl",
    "Associates": "Assoc",
    "Holdings": "Hldgs",
    "Group": "Grp",
}
_STREET_TYPE = {
    "Street": "St",
    "Avenue": "Ave",
    "Road": "Rd",
    "Boulevard": "Blvd",
    "Drive": "Dr",
    "Lane": "Ln",
    "Court": "Ct",
    "Place": "Pl",
}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


_T = TypeVar("_T")


def _pick(rng: np.random.Generator, options: Sequence[_T]) -> _T:
    return options[int(rng.integers(len(options)))]


def _person(rng: np.random.Generator) -> str:
    return f"{_pick(rng, _FIRST)} {_pick(rng, _LAST)}"


def _city(rng: np.random.Generator) -> str:
    return f"{_pick(rng, _PLACE_HEAD)}{_pick(rng, _PLACE_TAIL)}{_pick(rng, _PLACE_EXTRA)}"


def _company(rng: np.random.Generator) -> str:
    return f"{_pick(rng, _COMPANY_HEAD)} {_pick(rng, _COMPANY_TRADE)} {_pick(rng, list(_COMPANY_FORM))}"


def _address(rng: np.random.Generator) -> str:
    street = _pick(rng, _LAST + _PLACE_HEAD)
    return f"{int(rng.integers(1, 9999))} {street} {_pick(rng, list(_STREET_TYPE))}"


def _product_code(rng: np.random.Generator) -> str:
    return f"{_pick(rng, _LETTERS)}{_pick(rng, _LETTERS)}-{int(rng.integers(1000, 10000))}"


def _zip_code(rng: np.random.Generator) -> str:
    return str(int(rng.integers(10000, 100000)))  # no leading zeros: text and int readings agree


def _date(rng: np.random.Generator) -> str:
    day = np.datetime64("2000-01-01") + int(rng.integers(0, 25 * 365))
    return str(day)


@dataclass(frozen=True)
class _Domain:
    """A kind of value a column can hold: how to draw one, and column names it goes by."""

    draw: Callable[[np.random.Generator], str]
    names: tuple[str, ...]
    capacity: int  # distinct values it can produce (bounds the sizes planted from it)


_DOMAINS: dict[str, _Domain] = {
    "person": _Domain(_person, ("name", "full_name", "contact_name", "owner", "inspector"), 2_500),
    "city": _Domain(_city, ("city", "city_name", "municipality", "town"), 2_250),
    "company": _Domain(_company, ("company", "vendor", "supplier_name", "employer", "contractor"), 2_400),
    "address": _Domain(_address, ("address", "street_address", "site_address", "location"), 100_000),
    "product_code": _Domain(_product_code, ("product_code", "sku", "item_code", "part_number"), 100_000),
    "zip_code": _Domain(_zip_code, ("zip", "zip_code", "postal_code"), 90_000),
    "date": _Domain(_date, ("date", "report_date", "event_date", "issued_on"), 9_000),
}
_JOIN_DOMAINS = ("person", "city", "company", "address", "product_code", "zip_code", "date")
_NEAR_DUPLICATE_DOMAINS = ("person", "city", "company", "address")


def _distinct(rng: np.random.Generator, domain: _Domain, n: int) -> list[str]:
    """``n`` raw values of ``domain`` that are distinct after normalization."""
    seen: dict[str | None, str] = {}
    for _ in range(50 * n + 100):
        if len(seen) == n:
            break
        raw = domain.draw(rng)
        key = normalize_value(raw)
        if key not in seen:
            seen[key] = raw
    if len(seen) < n:
        raise ValueError(f"domain cannot produce {n} distinct values; lower the table sizes")
    return list(seen.values())


# ---------------------------------------------------------------------------------------------
# Table lakes: tables and planting


class JoinablePair(TypedDict):
    """A planted joinable column pair with its overlap and containment."""

    left_table: str
    left_column: str
    right_table: str
    right_column: str
    containment: float  # |L ∩ R| / |L| over normalized distinct values
    overlap: int  # |L ∩ R|


class CompositeKey(TypedDict):
    """A planted composite-key join between two tables."""

    query_table: str
    query_columns: list[str]
    target_table: str
    target_columns: list[str]  # target_columns[i] matches query_columns[i]
    joinability: int  # distinct query key tuples that occur in the target
    query_tuples: int  # distinct query key tuples


class NearDuplicate(TypedDict):
    """A planted pair of columns whose values match only after normalization or semantically."""

    left_table: str
    left_column: str
    right_table: str
    right_column: str
    pairs: list[list[str]]  # [variant as written in left, original as written in right]


class UniqueKey(TypedDict):
    """A planted unique column."""

    table: str
    column: str


@dataclass
class GroundTruth:
    """What :func:`generate_lake` planted; JSON-serializable (``ground_truth.json``)."""

    joinable_pairs: list[JoinablePair] = field(default_factory=list)
    composite_keys: list[CompositeKey] = field(default_factory=list)
    near_duplicates: list[NearDuplicate] = field(default_factory=list)
    unique_keys: list[UniqueKey] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    seed: int = 0

    def to_json(self, path: str | Path | None = None) -> str:
        """The truth as JSON text; also written to ``path`` when one is given."""
        text = json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_json(cls, path: str | Path) -> GroundTruth:
        """Read a ``ground_truth.json`` written by :meth:`to_json`."""
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass(frozen=True)
class LakeParams:
    """Knobs of :func:`generate_lake`; every field can be overridden by keyword.

    Counts default to a share of ``n_tables`` (``None``): joinable pairs ``n_tables // 2``,
    composite keys and near-duplicates ``max(1, n_tables // 10)``.
    """

    min_rows: int = 20
    max_rows: int = 2_000
    rows_exponent: float = 1.5  # power law of table sizes
    value_exponent: float = 1.2  # Zipf law of value frequencies within a column
    key_fraction: float = 0.7  # share of tables with a unique id column
    n_joinable: int | None = None
    n_composite: int | None = None
    n_near_duplicate: int | None = None
    containments: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
    min_key_columns: int = 2
    max_key_columns: int = 5


_TOPICS = (
    "permits inspections contracts grants budget payroll schools parks transit housing licenses incidents "
    "restaurants elections weather libraries procurement fleet utility_bills vendors"
).split()


@dataclass
class _Table:
    name: str
    n_rows: int
    columns: dict[str, list[str]] = field(default_factory=dict)
    key_column: str | None = None
    # (columns, the order they must appear in) pairs, applied after the table's columns are
    # shuffled: a composite key's target side must differ in order from its query side.
    order_constraint: list[tuple[list[str], list[str]]] = field(default_factory=list)

    def add_column(self, names: Sequence[str], values: list[str], rng: np.random.Generator) -> str:
        """Add a column under the first free name among ``names`` (shuffled), else a suffixed one."""
        options = [names[i] for i in rng.permutation(len(names)).tolist()]
        name = next((n for n in options if n not in self.columns), None)
        suffix = 2
        while name is None:
            candidate = f"{options[0]}_{suffix}"
            name = candidate if candidate not in self.columns else None
            suffix += 1
        self.columns[name] = values
        return name


def _spread(rng: np.random.Generator, values: Sequence, n_rows: int, exponent: float) -> list:
    """``n_rows`` cells holding every value at least once, extra cells Zipf-distributed over them.

    Callers pass fewer values than rows, so at least one value repeats: the column is never
    accidentally a key.
    """
    if not 0 < len(values) < n_rows:
        raise AssertionError(f"need 0 < {len(values)} distinct values < {n_rows} rows")
    extra = _power_law(rng, 1, len(values), exponent, n_rows - len(values)) - 1
    cells = list(values) + [values[i] for i in extra.tolist()]
    return [cells[i] for i in rng.permutation(n_rows).tolist()]


def _distinct_size(rng: np.random.Generator, upper: int) -> int:
    """A distinct-value count for a column: uniform in ``[max(2, upper // 4), upper]``."""
    upper = max(2, upper)
    return int(rng.integers(max(2, upper // 4), upper + 1))


def _pair_of_tables(rng: np.random.Generator, tables: list[_Table]) -> tuple[_Table, _Table]:
    a, b = rng.choice(len(tables), size=2, replace=False).tolist()
    return tables[a], tables[b]


def _plant_joinable(rng: np.random.Generator, tables: list[_Table], params: LakeParams, i: int) -> JoinablePair:
    left, right = _pair_of_tables(rng, tables)
    domain = _DOMAINS[_pick(rng, _JOIN_DOMAINS)]
    target = params.containments[i % len(params.containments)]
    # Bounded so that the overlap the containment asks for fits in the right table.
    n_left = _distinct_size(rng, min(left.n_rows - 1, domain.capacity // 4, int((right.n_rows - 1) / target)))
    overlap = max(1, min(round(target * n_left), right.n_rows - 1))
    n_right = int(rng.integers(overlap, max(overlap, min(right.n_rows - 1, domain.capacity // 4)) + 1))
    pool = _distinct(rng, domain, n_left + n_right - overlap)
    left_values, right_values = pool[:n_left], pool[:overlap] + pool[n_left:]
    left_column = left.add_column(domain.names, _spread(rng, left_values, left.n_rows, params.value_exponent), rng)
    right_column = right.add_column(domain.names, _spread(rng, right_values, right.n_rows, params.value_exponent), rng)
    left_set = {normalize_value(v) for v in left.columns[left_column]}
    right_set = {normalize_value(v) for v in right.columns[right_column]}
    shared = len(left_set & right_set)
    return JoinablePair(
        left_table=left.name,
        left_column=left_column,
        right_table=right.name,
        right_column=right_column,
        containment=shared / len(left_set),
        overlap=shared,
    )


@dataclass(frozen=True)
class _KeyPart:
    """One column of a composite key: its value pool and its names in query and target tables."""

    query_name: str
    target_name: str
    pool: tuple[str, ...]


def _key_parts(rng: np.random.Generator) -> list[_KeyPart]:
    """Small pools, so single key columns collide across tables while tuples stay selective."""

    def codes(length: int, count: int) -> tuple[str, ...]:
        drawn = ("".join(_pick(rng, _LETTERS) for _ in range(length)) for _ in range(2 * count))
        # Letter codes like "NA" or "NIL" read as null: keep only codes that stay values.
        kept = [c for c in dict.fromkeys(drawn) if normalize_value(c) == c.lower()]
        return tuple(kept[:count])

    stations, states = codes(3, 40), codes(2, 50)
    return [
        _KeyPart("station", "origin", stations),
        _KeyPart("year", "yr", tuple(str(y) for y in range(2010, 2024))),
        _KeyPart("month", "month_num", tuple(str(m) for m in range(1, 13))),
        _KeyPart("day", "day_of_month", tuple(str(d) for d in range(1, 29))),
        _KeyPart("hour", "hr", tuple(str(h) for h in range(24))),
        _KeyPart("state", "state_code", states),
        _KeyPart("branch", "branch_no", tuple(str(b) for b in range(100, 160))),
    ]


def _distinct_tuples(
    rng: np.random.Generator, parts: list[_KeyPart], n: int, exclude: frozenset
) -> list[tuple[str, ...]]:
    seen: dict[tuple[str, ...], None] = {}
    for _ in range(50 * n + 100):
        if len(seen) == n:
            break
        t = tuple(p.pool[int(rng.integers(len(p.pool)))] for p in parts)
        if t not in exclude:
            seen[t] = None
    if len(seen) < n:
        raise ValueError(f"cannot draw {n} distinct key tuples; lower the table sizes")
    return list(seen)


def _plant_composite(rng: np.random.Generator, tables: list[_Table], params: LakeParams, i: int) -> CompositeKey:
    query, target = _pair_of_tables(rng, tables)
    k = int(rng.integers(params.min_key_columns, params.max_key_columns + 1))
    all_parts = _key_parts(rng)
    parts = [all_parts[j] for j in rng.choice(len(all_parts), size=k, replace=False).tolist()]
    capacity = int(np.prod([len(p.pool) for p in parts])) // 4
    share = params.containments[i % len(params.containments)]
    n_query = _distinct_size(rng, min(query.n_rows - 1, capacity, int((target.n_rows - 1) / share)))
    matching = max(1, min(round(share * n_query), target.n_rows - 1))
    n_target = int(rng.integers(matching, max(matching, min(target.n_rows - 1, capacity)) + 1))
    query_tuples = _distinct_tuples(rng, parts, n_query, frozenset())
    target_tuples = query_tuples[:matching] + _distinct_tuples(rng, parts, n_target - matching, frozenset(query_tuples))
    query_rows = _spread(rng, query_tuples, query.n_rows, params.value_exponent)
    target_rows = _spread(rng, target_tuples, target.n_rows, params.value_exponent)
    query_columns = [query.add_column([p.query_name], [r[j] for r in query_rows], rng) for j, p in enumerate(parts)]
    target_columns = [target.add_column([p.target_name], [r[j] for r in target_rows], rng) for j, p in enumerate(parts)]
    query.order_constraint.append((query_columns, query_columns))
    # Target order: a permutation of the query order that is never the identity.
    permuted = list(reversed(target_columns))
    target.order_constraint.append((target_columns, permuted))

    def normalized_tuples(table: _Table, columns: list[str]) -> set[tuple]:
        return {tuple(normalize_value(v) for v in row) for row in zip(*(table.columns[c] for c in columns))}

    query_set = normalized_tuples(query, query_columns)
    return CompositeKey(
        query_table=query.name,
        query_columns=query_columns,
        target_table=target.name,
        target_columns=target_columns,
        joinability=len(query_set & normalized_tuples(target, target_columns)),
        query_tuples=len(query_set),
    )


def _typo(rng: np.random.Generator, text: str) -> str:
    """One character edit (substitute, delete, insert or transpose) at a letter after the first."""
    letters = [i for i, ch in enumerate(text) if ch.isalpha() and i > 0]
    if not letters:
        return text
    i = letters[int(rng.integers(len(letters)))]
    edit = int(rng.integers(4))
    new = _pick(rng, "abcdefghijklmnopqrstuvwxyz")
    if edit == 0:
        return text[:i] + new + text[i + 1 :]
    if edit == 1:
        return text[:i] + text[i + 1 :]
    if edit == 2:
        return text[:i] + new + text[i:]
    return text[: i - 1] + text[i] + text[i - 1] + text[i + 1 :]


def _swap_words(rng: np.random.Generator, text: str) -> str:
    """ "John Smith" -> "Smith, John" (last word first)."""
    words = text.split(" ")
    return f"{words[-1]}, {' '.join(words[:-1])}"


def _abbreviate(rng: np.random.Generator, text: str) -> str:
    """Legal forms and street types to their abbreviations; else a first name to its initial."""
    words = text.split(" ")
    table = _COMPANY_FORM | _STREET_TYPE
    if words[-1] in table:
        return " ".join(words[:-1] + [table[words[-1]]])
    return f"{words[0][0]}. {' '.join(words[1:])}"


_VARIANTS: dict[str, tuple[Callable[[np.random.Generator, str], str], ...]] = {
    "person": (_typo, _swap_words, _abbreviate),
    "city": (_typo,),
    "company": (_typo, _abbreviate),
    "address": (_typo, _abbreviate),
}


def _variant(rng: np.random.Generator, domain: str, original: str) -> str:
    text = _pick(rng, _VARIANTS[domain])(rng, original)
    recase = int(rng.integers(3))  # re-casing alone vanishes under normalization: only on top
    return text.upper() if recase == 1 else text.lower() if recase == 2 else text


def _plant_near_duplicate(rng: np.random.Generator, tables: list[_Table], params: LakeParams) -> NearDuplicate:
    left, right = _pair_of_tables(rng, tables)
    domain_name = _pick(rng, _NEAR_DUPLICATE_DOMAINS)
    domain = _DOMAINS[domain_name]
    originals = _distinct(rng, domain, _distinct_size(rng, min(right.n_rows - 1, domain.capacity // 4)))
    taken = {normalize_value(o) for o in originals}
    pairs = []
    for original in originals[: _distinct_size(rng, min(left.n_rows - 1, len(originals)))]:
        for _ in range(10):
            variant = _variant(rng, domain_name, original)
            key = normalize_value(variant)
            if key not in taken:  # differs from every original and every earlier variant
                taken.add(key)
                pairs.append([variant, original])
                break
    if not pairs:
        raise AssertionError("no near-duplicate variant could be drawn")
    variants = [p[0] for p in pairs]
    right_column = right.add_column(domain.names, _spread(rng, originals, right.n_rows, params.value_exponent), rng)
    left_column = left.add_column(domain.names, _spread(rng, variants, left.n_rows, params.value_exponent), rng)
    return NearDuplicate(
        left_table=left.name,
        left_column=left_column,
        right_table=right.name,
        right_column=right_column,
        pairs=pairs,
    )


def _add_filler(rng: np.random.Generator, table: _Table, params: LakeParams) -> None:
    """Two to four non-key columns of mixed types (integers, decimals, dates, categories)."""
    n = table.n_rows
    makers: list[tuple[tuple[str, ...], Callable[[], list[str]]]] = [
        (
            ("count", "quantity", "num_units", "population"),
            lambda: [str(v) for v in _power_law(rng, 1, 10_000, 1.3, n - 1).tolist()],
        ),
        (
            ("amount", "price", "total_cost", "balance"),
            lambda: [f"{v:.2f}" for v in np.round(rng.lognormal(6.0, 1.5, n - 1), 2).tolist()],
        ),
        (
            ("updated_on", "created_date", "inspection_date"),
            lambda: [_date(rng) for _ in range(n - 1)],
        ),
        (
            ("status", "category", "type"),
            lambda: [_pick(rng, ("Active", "Closed", "Pending", "Approved", "Denied", "Open")) for _ in range(n - 1)],
        ),
    ]
    for j in rng.choice(len(makers), size=int(rng.integers(2, 5)), replace=False).tolist():
        names, make = makers[j]
        values = make()
        # One repeated cell keeps every filler column a non-key (only planted keys are unique).
        table.add_column(names, values + [values[0]], rng)


def _add_unique_key(rng: np.random.Generator, table: _Table) -> UniqueKey:
    topic = table.name.rsplit("_", 1)[0]
    entity = topic[:-1] if topic.endswith("s") else topic
    start = int(rng.integers(1, 50)) * 1000
    ids = (start + rng.permutation(table.n_rows)).tolist()
    values = [str(v) for v in ids] if rng.random() < 0.5 else [f"{entity[:3].upper()}-{v}" for v in ids]
    table.key_column = table.add_column([f"{entity}_id"], values, rng)
    return UniqueKey(table=table.name, column=table.key_column)


def _column_order(rng: np.random.Generator, table: _Table) -> list[str]:
    """Key first, the rest shuffled, then each order constraint's columns put in its given order."""
    rest = [c for c in table.columns if c != table.key_column]
    order = [rest[i] for i in rng.permutation(len(rest)).tolist()]
    for columns, wanted in table.order_constraint:
        slots = sorted(order.index(c) for c in columns)
        for slot, column in zip(slots, wanted):
            order[slot] = column
    return ([table.key_column] if table.key_column else []) + order


def _write_csv(path: Path, table: _Table, order: list[str]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(order)
        writer.writerows(zip(*(table.columns[c] for c in order)))


def generate_lake(out_dir: str | Path, n_tables: int = 100, seed: int = 0, **overrides: object) -> GroundTruth:
    """Write ``n_tables`` CSV tables and ``ground_truth.json`` into ``out_dir``; return the truth.

    Table sizes follow a power law on ``[min_rows, max_rows]``; values in a column follow a Zipf
    law. Planted: joinable column pairs (exact containment of left in right), composite keys of
    2-5 columns (the target holds them reversed, under other names, among other columns),
    near-duplicate spellings (typos, "Last, First", abbreviations, re-casing) and unique id
    columns; every other column has a repeated value, so ``unique_keys`` is exactly the set of
    key columns. ``overrides`` replace fields of :class:`LakeParams`.
    """
    if n_tables < 2:
        raise ValueError(f"n_tables must be >= 2, got {n_tables}")
    params = _overridden(LakeParams(), overrides, "generate_lake")
    if not 5 <= params.min_rows <= params.max_rows:
        raise ValueError(f"need 5 <= min_rows <= max_rows, got {params.min_rows}, {params.max_rows}")
    if not 2 <= params.min_key_columns <= params.max_key_columns <= 5:
        raise ValueError("need 2 <= min_key_columns <= max_key_columns <= 5")
    rng = np.random.default_rng(seed)
    sizes = _power_law(rng, params.min_rows, params.max_rows, params.rows_exponent, n_tables).tolist()
    tables = [_Table(f"{_pick(rng, _TOPICS)}_{i:03d}", n) for i, n in enumerate(sizes)]
    truth = GroundTruth(tables=[t.name for t in tables], seed=seed)
    for table in tables:
        if rng.random() < params.key_fraction:
            truth.unique_keys.append(_add_unique_key(rng, table))
        _add_filler(rng, table, params)
    n_joinable = n_tables // 2 if params.n_joinable is None else params.n_joinable
    n_composite = max(1, n_tables // 10) if params.n_composite is None else params.n_composite
    n_near = max(1, n_tables // 10) if params.n_near_duplicate is None else params.n_near_duplicate
    truth.joinable_pairs = [_plant_joinable(rng, tables, params, i) for i in range(n_joinable)]
    truth.composite_keys = [_plant_composite(rng, tables, params, i) for i in range(n_composite)]
    truth.near_duplicates = [_plant_near_duplicate(rng, tables, params) for _ in range(n_near)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for table in tables:
        _write_csv(out / f"{table.name}.csv", table, _column_order(rng, table))
    truth.to_json(out / "ground_truth.json")
    return truth


class KeyedTable(TypedDict):
    """A generated table with its planted minimal composite key."""

    name: str
    columns: dict[str, list[str]]  # column name -> cells, in column order
    key: list[str]  # the planted minimal composite key


def keyed_tables(n_tables: int = 12, seed: int = 0, min_rows: int = 60, max_rows: int = 600) -> list[KeyedTable]:
    """Tables with a planted *unique* composite key of 2 to 5 columns (the key parts of
    :func:`generate_lake`, one distinct tuple per row) among filler columns, the key's columns
    spread among them. Each planted key is minimal: for every key column, two rows differ in it
    alone, so leaving it out repeats a tuple."""
    rng = np.random.default_rng(seed)
    tables: list[KeyedTable] = []
    for i in range(n_tables):
        k = MIN_KEY_PARTS + i % (MAX_KEY_PARTS - MIN_KEY_PARTS + 1)
        all_parts = _key_parts(rng)
        parts = [all_parts[j] for j in sorted(rng.choice(len(all_parts), size=k, replace=False).tolist())]
        n_rows = int(rng.integers(min_rows, min(max_rows, int(np.prod([len(p.pool) for p in parts])) // 2) + 1))
        seen = dict.fromkeys(_distinct_tuples(rng, parts, n_rows - k, frozenset()))
        for j, part in enumerate(parts):  # a twin differing in column j alone, for each j
            twin = next(
                t[:j] + (v,) + t[j + 1 :] for t in seen for v in part.pool if t[:j] + (v,) + t[j + 1 :] not in seen
            )
            seen[twin] = None
        tuples = [list(seen)[r] for r in rng.permutation(n_rows).tolist()]
        table = _Table(f"keyed_{i:03d}", n_rows + 1)
        _add_filler(rng, table, LakeParams())
        columns = {name: cells[:n_rows] for name, cells in table.columns.items()}
        key = [p.query_name for p in parts]
        columns.update({name: [t[j] for t in tuples] for j, name in enumerate(key)})
        order = [list(columns)[c] for c in rng.permutation(len(columns)).tolist()]
        tables.append(
            KeyedTable(name=table.name, columns={c: columns[c] for c in order}, key=[c for c in order if c in key])
        )
    return tables


MIN_KEY_PARTS, MAX_KEY_PARTS = 2, 5
