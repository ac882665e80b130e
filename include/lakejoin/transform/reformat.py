"""Learning ``Number``, ``Date`` and ``Chars`` programs (:mod:`.formats`, :mod:`.units`) from two columns.

Rows are paired by the *value* they denote, not by shared n-grams (a date shares no 4-gram
with its reformatting): formats are inferred from sample values and ranked by how many values
they read (source side) or print back exactly (target side); every (reader, map, printer)
candidate is screened on a small sample and then counted on all given source values; a
program is kept only when it sends at least ``min_rows`` of them onto target values (the
support threshold of the other units). A linear map ``a*x + b`` other than the identity is
proposed from ratio votes (``b = 0``) and from the two columns' quantiles, fitted exactly
from the row pairs it explains, and offered at 1 to 8 significant digits (the snapped values
are then checked exactly like any program). Every ranking is by count, then by the order the
candidates were made in (values in column order, simpler styles first): nothing depends on
hash or set order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from lakejoin.transform.formats import (
    Date,
    Number,
    date_formats,
    number_tokens,
    parse_date,
    print_date,
    print_number,
    read_number,
)
from lakejoin.transform.units import Chars, Literal, Program, normalized_output

# character-class extractions, tried whole: their output is rarely a substring of the source
CHAR_PROGRAMS = [(Chars(cls, index),) for cls in ("digit", "alpha", "alnum") for index in (None, 0, -1)]
MAX_FORMATS = 6  # formats kept per column side
SCREEN_ROWS = 50  # source values every candidate is first tried on
SIGNIFICANT = range(1, 9)  # significant digits a fitted map is offered at
VOTERS = 40  # source numbers voting for a linear map (each with up to 10x as many target numbers)
MIN_VOTES = 4  # votes a map needs to be tried


def learn(sources: Sequence[str], targets: Sequence[str], min_rows: int) -> list[tuple[Program, int]]:
    """Number, date and character-class programs sending at least ``min_rows`` of ``sources``
    onto ``targets`` (normalized values), most rows first: (program, source values joined).

    Linear maps other than the identity are tried only when no program joins half the
    sources. A program is kept only when it hits a target for at least half as large a share
    of the values it applies to as the best program does: a wrong scale applies to every
    number and joins a few by chance."""
    target_set = frozenset(targets)
    screen = _sample(sources, SCREEN_ROWS)
    screen_rows = max(1, min_rows * len(screen) // max(1, len(sources)))
    found: dict[Program, tuple[int, int]] = {}
    for linear in (False, True):
        if linear and any(hits * 2 >= len(sources) for hits, _ in found.values()):
            break
        for program in [*CHAR_PROGRAMS, *_date_candidates(sources, targets)] if not linear else []:
            found.setdefault(program, _scored(program, sources, screen, screen_rows, target_set))
        for program in _number_candidates(sources, targets, linear):
            found.setdefault(program, _scored(program, sources, screen, screen_rows, target_set))
    rated = [(program, hits, hits / produced) for program, (hits, produced) in found.items() if hits >= min_rows]
    best_rate = max((rate for _, _, rate in rated), default=0.0)
    kept = [(program, hits) for program, hits, rate in rated if rate * 2 >= best_rate]
    return sorted(kept, key=lambda item: -item[1])  # ties: candidate order, simplest styles first


def _scored(
    program: Program, sources: Sequence[str], screen: Sequence[str], screen_rows: int, target_set: frozenset[str]
) -> tuple[int, int]:
    """(values joined, values with an output) over ``sources``; (0, 0) when the screening
    sample shows fewer than ``screen_rows`` joins."""
    if _joined(program, screen, target_set)[0] < screen_rows:
        return 0, 0
    return _joined(program, sources, target_set)


def _joined(program: Program, values: Sequence[str], target_set: frozenset[str]) -> tuple[int, int]:
    outputs = [normalized_output(program, value) for value in values]
    return sum(out in target_set for out in outputs), sum(out is not None for out in outputs)


def _sample(values: Sequence[str], size: int) -> list[str]:
    """Evenly spaced values (deterministic, order kept)."""
    step = max(1, len(values) // size)
    return list(values[::step][:size])


def _ranked(counts: Counter, limit: int, minimum: int = 2) -> list:
    """The most counted items, ties in first-seen order (the simpler styles are tried first)."""
    return [item for item, count in sorted(counts.items(), key=lambda kv: -kv[1]) if count >= minimum][:limit]


# -- dates ------------------------------------------------------------------------------------------


def _date_candidates(sources: Sequence[str], targets: Sequence[str]) -> list[Program]:
    source_sample, target_sample = _sample(sources, 40), _sample(targets, 40)
    readers = _ranked(Counter(fmt for value in source_sample for fmt in date_formats(value)), 3 * MAX_FORMATS)
    printers = _ranked(Counter(fmt for value in target_sample for fmt in date_formats(value)), 3 * MAX_FORMATS)
    if not readers or not printers:
        return []
    reads = Counter({fmt: sum(parse_date(fmt, value) is not None for value in source_sample) for fmt in readers})
    prints = Counter({fmt: sum(_prints_back(fmt, value) for value in target_sample) for fmt in printers})
    return [
        (Date(reader, printer),) for reader in _ranked(reads, MAX_FORMATS) for printer in _ranked(prints, MAX_FORMATS)
    ]


def _prints_back(fmt: str, value: str) -> bool:
    fields = parse_date(fmt, value)
    return fields is not None and print_date(fmt, fields) == value


# -- numbers ----------------------------------------------------------------------------------------

# (thousands separator, decimal mark) styles a printed number is tried with
_STYLES = [(thousands, point) for point in (".", ",") for thousands in ("", ",", ".", " ", "'") if thousands != point]


def _number_candidates(sources: Sequence[str], targets: Sequence[str], linear: bool) -> list[Program]:
    """Reader x printer programs: with the identity map, or (``linear``) with the fitted maps."""
    source_sample, target_sample = _sample(sources, 200), _sample(targets, 200)
    readers = _ranked(Counter(reader for value in source_sample for reader in _readers(value)), 2)
    printers = _ranked(Counter(printer for value in target_sample for printer in _printers(value)), MAX_FORMATS)
    programs, maps = [], {}
    for index, point in readers:
        xs = [x for value in source_sample if (x := _read_at(value, index, point)) is not None]
        for prefix, suffix, decimals, significant, thousands, out_point, width in printers:
            key = (index, point, prefix, suffix, out_point)  # the maps depend on the numbers read only
            if key not in maps:
                ys = [
                    y for value in target_sample if (y := _printed_number(value, prefix, suffix, out_point)) is not None
                ]
                maps[key] = _linear_maps(xs, ys)[1:] if linear else [("1", "0")]
            for scale, offset in maps[key]:
                number = Number(index, point, scale, offset, decimals, significant, thousands, out_point, width)
                programs.append(
                    tuple(
                        unit
                        for unit in (Literal(prefix), number, Literal(suffix))
                        if not isinstance(unit, Literal) or unit.text
                    )
                )
    return programs


def _read_at(value: str, index: int, point: str) -> Decimal | None:
    tokens = number_tokens(value)
    return read_number(tokens[index].group(), point) if -len(tokens) <= index < len(tokens) else None


def _readers(value: str) -> list[tuple[int, str]]:
    """(index, decimal mark) that read a number of ``value``: its first and its last number."""
    tokens = number_tokens(value)
    indices = [0] if len(tokens) == 1 else [0, -1] if tokens else []
    return [
        (index, point)
        for index in indices
        for point in (".", ",")
        if read_number(tokens[index].group(), point) is not None
    ]


def _printers(value: str) -> list[tuple]:
    """Styles printing ``value`` back exactly from the one number in it: (prefix, suffix,
    decimals, significant digits, thousands separator, decimal mark, zero-padded width)."""
    tokens = number_tokens(value)
    if len(tokens) != 1:
        return []
    token = tokens[0].group()
    prefix, suffix = value[: tokens[0].start()], value[tokens[0].end() :]
    digits = token.lstrip("+-")
    width = len(digits) if len(digits) > 1 and digits[0] == "0" and digits.isdigit() else 0
    styles = []
    for thousands, point in _STYLES:
        number = read_number(token, point)
        if number is None:
            continue
        fraction = token.rpartition(point)[2] if point in token else ""
        for decimals, significant in ((None, None), (len(fraction), None), (None, _trailing_zero_digits(number))):
            if (decimals, significant) != (None, 0) and print_number(
                number, decimals, significant, thousands, point, width
            ) == token:
                styles.append((prefix, suffix, decimals, significant, thousands, point, width))
    return list(dict.fromkeys(styles))


def _trailing_zero_digits(number: Decimal) -> int:
    """Significant digits of an integer with trailing zeros (123000: 3), else 0: a rounded
    printing such as the plain form of 1.23e5."""
    normal = number.normalize()
    exponent = normal.as_tuple().exponent
    return len(normal.as_tuple().digits) if isinstance(exponent, int) and exponent > 0 else 0


def _printed_number(value: str, prefix: str, suffix: str, point: str) -> Decimal | None:
    if len(value) < len(prefix) + len(suffix) or not (value.startswith(prefix) and value.endswith(suffix)):
        return None
    tokens = number_tokens(value[len(prefix) : len(value) - len(suffix)])
    return read_number(tokens[0].group(), point) if len(tokens) == 1 else None


def _linear_maps(xs: Sequence[Decimal], ys: Sequence[Decimal]) -> list[tuple[str, str]]:
    """The identity, then the maps voted by the row pairs (a Hough transform: every source
    number with every target number votes for the ratios, or the lines, through them; the true
    map collects one vote per joining row, chance ones spread out) and refitted exactly."""
    maps = [("1", "0")]
    x, y = np.unique(np.array(xs, dtype=float)), np.unique(np.array(ys, dtype=float))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 5 or len(y) < 5 or x[-1] == x[0] or y[-1] == y[0]:
        return maps
    x, y = _spread(x, VOTERS), _spread(y, 10 * VOTERS)
    for estimate, with_offset in ((_voted_ratio(x, y), False), (_voted_line(x, y), True)):
        fitted = None if estimate is None else _refit(x, y, *estimate, with_offset)
        if fitted is not None:
            maps.extend(_short_forms(*fitted))
    return list(dict.fromkeys(maps))


def _spread(values: np.ndarray, size: int) -> np.ndarray:
    return values[np.linspace(0, len(values) - 1, size).astype(int)] if len(values) > size else values


def _top_bucket(keys: np.ndarray) -> tuple[float, int]:
    """The most frequent bucket key (the smallest on ties) and its votes."""
    found, counts = np.unique(keys, return_counts=True)
    best = int(np.argmax(counts))
    return float(found[best]), int(counts[best])


def _voted_ratio(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """The most voted y/x (log buckets 0.2 % wide), the identity left out."""
    x = x[x != 0]
    ratios = (y[None, :] / x[:, None]).ravel()
    logs = np.log(ratios[ratios > 0])
    logs = logs[np.abs(logs) > 1e-3]
    if not len(logs):
        return None
    key, votes = _top_bucket(np.round(logs / 2e-3))
    return (float(np.exp(key * 2e-3)), 0.0) if votes >= MIN_VOTES else None


def _voted_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """The most voted line: slopes in 0.05 % steps within 5 % of the Theil-Sen slope of the
    two columns' quantiles (an order-preserving map sends quantiles to quantiles); per slope
    the intercepts y - a*x are bucketed (0.1 % of the target range)."""
    levels = np.linspace(0.05, 0.95, 19)
    qx, qy = np.quantile(x, levels), np.quantile(y, levels)
    dx, dy = qx[None, :] - qx[:, None], qy[None, :] - qy[:, None]
    slopes = dy[dx > 0] / dx[dx > 0]
    span_y = float(y[-1] - y[0])
    if not len(slopes) or not np.median(slopes):
        return None
    best = (0, 0.0, 0.0)
    for slope in float(np.median(slopes)) * np.exp(np.arange(-100, 101) * 0.0005):
        key, votes = _top_bucket(np.round((y[None, :] - slope * x[:, None]).ravel() / (0.001 * span_y)))
        if votes > best[0]:
            best = (votes, float(slope), key * 0.001 * span_y)
    return (best[1], best[2]) if best[0] >= MIN_VOTES else None


def _refit(x: np.ndarray, y: np.ndarray, a: float, b: float, with_offset: bool) -> tuple[float, float] | None:
    """Least squares over the row pairs the map explains (x and the target number nearest to
    a*x + b), re-paired with a tolerance shrinking to 0.01 % of the target range."""
    span = float(y[-1] - y[0])
    for tolerance in (0.01, 0.003, 0.001, 0.0003, 0.0001):
        guess = a * x + b
        at = np.clip(np.searchsorted(y, guess), 1, len(y) - 1)
        near = np.where(np.abs(y[at - 1] - guess) <= np.abs(y[at] - guess), y[at - 1], y[at])
        close = np.abs(near - guess) <= tolerance * span
        if close.sum() < 2:
            return None
        a, b = _least_squares(list(zip(x[close].tolist(), near[close].tolist())), with_offset)
    return a, b


def _least_squares(pairs: list[tuple[float, float]], with_offset: bool) -> tuple[float, float]:
    n = len(pairs)
    mean_x = sum(x for x, _ in pairs) / n if with_offset else 0.0
    mean_y = sum(y for _, y in pairs) / n if with_offset else 0.0
    sxx = sum((x - mean_x) ** 2 for x, _ in pairs)
    if not sxx:
        return 1.0, 0.0
    a = sum((x - mean_x) * (y - mean_y) for x, y in pairs) / sxx
    return a, mean_y - a * mean_x


def _short_forms(scale: float, offset: float) -> list[tuple[str, str]]:
    """``scale`` and ``offset`` rounded to 1..8 significant digits (the fit is never exact:
    the target values are rounded)."""
    return [(_round_significant(scale, digits), _round_significant(offset, digits)) for digits in SIGNIFICANT]


def _round_significant(number: float, digits: int) -> str:
    if not number or not math.isfinite(number):
        return "0"
    text = f"{Decimal(repr(number)).__round__(digits - 1 - math.floor(math.log10(abs(number)))).normalize():f}"
    return "0" if text == "-0" else text
