"""Number and date reformatting: the ``Number`` and ``Date`` units (learned by :mod:`.reformat`).

Both units read the whole (normalized, lower-case) source value and print one value; they
compose with ``Literal`` units for constant text around a number ("$" + Number + " kg").

- ``Number(index, point, scale, offset, decimals, significant, thousands, out_point, width)``: the
  ``index``-th number of the value, read with ``point`` as its decimal mark (the other marks
  are thousands separators, grouped by three), mapped by ``scale * x + offset`` (exact decimal
  arithmetic; ``scale`` and ``offset`` are decimal texts), rounded half-up to ``decimals``
  places or ``significant`` digits (None: exact), printed with ``thousands`` every three
  digits, ``out_point`` as decimal mark and the whole part zero-padded to ``width`` digits
  ("42" -> "00042"; reading "00042" strips the zeros). Scientific input ("1.5e3") is read; plain numbers
  are what the shared normalization makes of scientific targets anyway.
- ``Date(parse, print)``: a strptime-like input format and a strftime-like output format over
  the directives of :data:`DIRECTIVES` (English month and weekday names, ``%-d`` unpadded,
  ``%y`` two-digit years pivoting at 69 like POSIX).
"""

from __future__ import annotations

import functools
import re
from datetime import date
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import NamedTuple

MAX_VALUE = 200  # values longer than this are never parsed as a number or a date
MAX_EXPONENT = 30  # "1e999999" would print a million digits


# -- numbers --------------------------------------------------------------------------------------

_NUMBER_TOKEN = re.compile(r"(?:(?<![\w.,'])[-+])?(?:\d+(?:[,.']\d+)*|[.,]\d+)(?:e[-+]?\d+)?")


def number_tokens(value: str) -> list[re.Match]:
    """The number tokens of a value (none for values too long to be one)."""
    return list(_NUMBER_TOKEN.finditer(value)) if len(value) <= MAX_VALUE else []


def read_number(token: str, point: str) -> Decimal | None:
    """The value of one number token with ``point`` as decimal mark; None if its grouping is
    not thousands separators every three digits."""
    mantissa, _, exponent = token.partition("e")
    if exponent and abs(int(exponent)) > MAX_EXPONENT:
        return None
    sign = "-" if mantissa.startswith("-") else ""
    whole, _, fraction = (
        mantissa.lstrip("+-").rpartition(point) if point in mantissa else (mantissa.lstrip("+-"), "", "")
    )
    groups = re.split(r"[,.']", whole)
    if point in whole or not re.fullmatch(r"\d*", fraction):
        return None
    if len(groups) > 1 and (
        len(set(re.findall(r"[,.']", whole))) > 1 or len(groups[0]) > 3 or any(len(group) != 3 for group in groups[1:])
    ):
        return None
    return Decimal(f"{sign}{''.join(groups) or '0'}.{fraction or '0'}e{exponent or '0'}")


def print_number(
    number: Decimal, decimals: int | None, significant: int | None, thousands: str, point: str, width: int = 0
) -> str:
    """A number printed with the given decimals or significant digits, separators and width."""
    if significant is not None and number:
        decimals = significant - 1 - number.adjusted()
    if decimals is not None:
        number = (
            number.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
            if decimals >= 0
            else number.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP).quantize(Decimal(1))
        )
    text = f"{number:f}" if decimals is not None else _shortest(number)
    sign = "-" if text.startswith("-") else ""
    whole, _, fraction = text.lstrip("-").partition(".")
    if thousands:
        whole = f"{int(whole):,}".replace(",", thousands)
    return sign + whole.zfill(width) + (point + fraction if fraction else "")


def _shortest(number: Decimal) -> str:
    text = f"{number.normalize():f}"
    return "0" if text in ("-0", "0") else text


class _NumberFields(NamedTuple):
    index: int  # type: ignore[assignment]  # a field named like tuple.index: the name is part of the unit's repr
    point: str
    scale: str
    offset: str
    decimals: int | None
    significant: int | None
    thousands: str
    out_point: str
    width: int


class Number(_NumberFields):
    """A number of the value, mapped linearly and reprinted (module docstring)."""

    __slots__ = ()
    COST = 3
    RANK = 6

    def apply(self, value: str) -> str | None:
        """The ``index``-th number of ``value`` times ``scale`` plus ``offset``, printed in the output format;
        None when ``value`` has no such number or :func:`read_number` cannot read it."""
        tokens = number_tokens(value)
        if not -len(tokens) <= self.index < len(tokens):
            return None
        number = read_number(tokens[self.index].group(), self.point)
        if number is None:
            return None
        with localcontext() as context:
            context.prec = 2 * MAX_VALUE  # exact: values have at most MAX_VALUE digits, scale and offset few
            mapped = number * Decimal(self.scale) + Decimal(self.offset)
            return print_number(mapped, self.decimals, self.significant, self.thousands, self.out_point, self.width)


# -- dates ----------------------------------------------------------------------------------------

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMERIC = {  # directive -> (field, digits regex, lowest, highest)
    "%Y": ("Y", r"\d{4}", 1000, 2999),
    "%y": ("y", r"\d{2}", 0, 99),
    "%m": ("m", r"\d{2}", 1, 12),
    "%-m": ("m", r"\d{1,2}", 1, 12),
    "%d": ("d", r"\d{2}", 1, 31),
    "%-d": ("d", r"\d{1,2}", 1, 31),
    "%H": ("H", r"\d{2}", 0, 23),
    "%-H": ("H", r"\d{1,2}", 0, 23),
    "%I": ("I", r"\d{2}", 1, 12),
    "%-I": ("I", r"\d{1,2}", 1, 12),
    "%M": ("M", r"\d{2}", 0, 59),
    "%S": ("S", r"\d{2}", 0, 59),
}
_NAMED = {  # directive -> (field, names); a name's position is its value
    "%B": ("m", MONTHS),
    "%b": ("m", tuple(name[:3] for name in MONTHS)),
    "%A": ("w", WEEKDAYS),
    "%a": ("w", tuple(name[:3] for name in WEEKDAYS)),
    "%p": ("p", ("am", "pm")),
}
DIRECTIVES = (*_NUMERIC, *_NAMED)
_DIRECTIVE = re.compile(r"%-?[YymdHIMSBbAap]|%%")


def _format_parts(fmt: str) -> list[str]:
    """A format as directives and literal texts, in order."""
    parts, pos = [], 0
    for match in _DIRECTIVE.finditer(fmt):
        if match.start() > pos:
            parts.append(fmt[pos : match.start()])
        parts.append(match.group())
        pos = match.end()
    if pos < len(fmt):
        parts.append(fmt[pos:])
    return parts


@functools.lru_cache(maxsize=256)
def _parser(fmt: str) -> tuple[re.Pattern, tuple[str, ...]]:
    pattern, directives = [], []
    for part in _format_parts(fmt):
        if part in _NUMERIC:
            pattern.append(f"({_NUMERIC[part][1]})")
        elif part in _NAMED:
            pattern.append(f"({'|'.join(_NAMED[part][1])})")
        else:
            pattern.append(re.escape("%" if part == "%%" else part))
            continue
        directives.append(part)
    return re.compile("".join(pattern)), tuple(directives)


def parse_date(fmt: str, value: str) -> dict[str, int] | None:
    """The fields (Y m d H M S, and w for a weekday) ``value`` gives under ``fmt``; None when it
    does not match or names no real date or time."""
    if len(value) > MAX_VALUE:
        return None
    pattern, directives = _parser(fmt)
    match = pattern.fullmatch(value)
    if match is None:
        return None
    fields: dict[str, int] = {}
    for directive, text in zip(directives, match.groups()):
        if directive in _NUMERIC:
            field, _, low, high = _NUMERIC[directive]
            number = int(text)
            if not low <= number <= high:
                return None
        else:
            field, names = _NAMED[directive]
            number = names.index(text) + (field == "m")
        if fields.setdefault(field, number) != number:
            return None
    return _resolved(fields)


def _resolved(fields: dict[str, int]) -> dict[str, int] | None:
    if "y" in fields:
        two_digits = fields.pop("y")
        if fields.setdefault("Y", two_digits + (1900 if two_digits >= 69 else 2000)) % 100 != two_digits:
            return None
    if "I" in fields and "p" in fields:
        fields["H"] = fields.pop("I") % 12 + 12 * fields.pop("p")
    if {"Y", "m", "d"} <= fields.keys():
        try:
            weekday = date(fields["Y"], fields["m"], fields["d"]).weekday()
        except ValueError:
            return None
        if fields.setdefault("w", weekday) != weekday:
            return None
    elif (
        "m" in fields
        and "d" in fields
        and fields["d"] > (29 if fields["m"] == 2 else 30 + (fields["m"] in (1, 3, 5, 7, 8, 10, 12)))
    ):
        return None
    return fields


# the parsed field each printed directive needs (%y is printed from the year, %I and %p from the hour)
_PRINTED_FROM = {
    "Y": "Y",
    "y": "Y",
    "m": "m",
    "B": "m",
    "b": "m",
    "d": "d",
    "H": "H",
    "I": "H",
    "p": "H",
    "M": "M",
    "S": "S",
    "A": "w",
    "a": "w",
}


def print_date(fmt: str, fields: dict[str, int]) -> str | None:
    """A date printed in ``fmt`` (strftime-style), or None if a field it needs is missing."""
    out = []
    for part in _format_parts(fmt):
        if part not in _NUMERIC and part not in _NAMED:
            out.append("%" if part == "%%" else part)
            continue
        field = part.lstrip("%-")
        number = fields.get(_PRINTED_FROM[field])
        if number is None:
            return None
        if field in "Bb":
            out.append(_NAMED[part][1][number - 1])
        elif field in "Aa":
            out.append(_NAMED[part][1][number])
        elif field == "p":
            out.append("pm" if number >= 12 else "am")
        else:
            number = number % 100 if field == "y" else (number % 12 or 12) if field == "I" else number
            out.append(str(number) if part.startswith("%-") else f"{number:02d}")
    return "".join(out)


class _DateFields(NamedTuple):
    parse: str
    print: str


class Date(_DateFields):
    """Parse the whole value with ``parse``, print it with ``print`` (module docstring)."""

    __slots__ = ()
    COST = 2
    RANK = 7

    def apply(self, value: str) -> str | None:
        """``value`` parsed by ``parse`` and printed by ``print``; None when it does not parse."""
        fields = parse_date(self.parse, value)
        return None if fields is None else print_date(self.print, fields)


_DATE_TOKEN = re.compile(r"\d+|[a-z]+|[^\da-z]+")
MAX_DATE_NUMBERS = 6  # a value with more numbers is no date (and would make the search exponential)


def date_formats(value: str, limit: int = 24) -> list[str]:
    """The formats that read ``value`` as a date or time: every token a directive or a literal,
    each field once; an hour before ':' (12-hour when the value has am/pm), minutes and seconds
    after it, day, month and year away from it. A two-digit number with a leading zero gets the
    padded directive, other numbers the unpadded one (which prints numbers >= 10 alike)."""
    tokens = _DATE_TOKEN.findall(value) if len(value) <= MAX_VALUE else []
    if not 0 < sum(token.isdigit() for token in tokens) <= MAX_DATE_NUMBERS:
        return []
    twelve_hour = any(token in ("am", "pm") for token in tokens)
    found: list[str] = []

    def options(i: int, previous: str) -> list[str]:
        token = tokens[i]
        if token.isalpha():
            named = [d for d, (_, names) in _NAMED.items() if token in names and (d != "%p" or twelve_hour)]
            return [*named, token]
        if not token.isdigit():
            return [token.replace("%", "%%")]
        if len(token) in (4, 8):
            return ["%Y" if len(token) == 4 else "%Y%m%d"]
        if len(token) > 2:
            return []
        before, after = tokens[i - 1] if i else "", tokens[i + 1] if i + 1 < len(tokens) else ""
        if before == ":":
            chosen = ["%M"] if previous == "H" else ["%S"] if previous == "M" else []
        elif after == ":" or (twelve_hour and after.strip() in ("am", "pm", "")):
            chosen = ["%-I" if twelve_hour else "%-H"]
        else:
            chosen = ["%-d", "%-m", "%y"]
        padded = len(token) == 2 and token[0] == "0"
        return [directive.replace("%-", "%") if padded else directive for directive in chosen]

    def walk(i: int, parts: list[str], used: frozenset[str], previous: str) -> None:
        if len(found) >= limit:
            return
        if i == len(tokens):
            fmt = "".join(parts)
            if _is_datelike(used, fmt) and parse_date(fmt, value) is not None:
                found.append(fmt)
            return
        for option in options(i, previous):
            fields = [_field_of(directive) for directive in _parser(option)[1]]
            if not used.intersection(fields):
                walk(i + 1, [*parts, option], used.union(fields), fields[-1] if fields else previous)

    walk(0, [], frozenset(), "")
    return found


def _field_of(directive: str) -> str:
    field = directive.lstrip("%-")
    return {"B": "m", "b": "m", "A": "w", "a": "w", "I": "H", "y": "Y"}.get(field, field)


def _is_datelike(used: frozenset[str], fmt: str) -> bool:
    """A day, month and year; a month with a four-digit year or a name; or an hour with minutes
    or am/pm: "12.5" is a number, not May 2012."""
    named = "%B" in fmt or "%b" in fmt
    return (
        {"Y", "m", "d"} <= used
        or ({"Y", "m"} <= used and ("%Y" in fmt or named))
        or ({"m", "d"} <= used and named)
        or {"H", "M"} <= used
        or {"H", "p"} <= used
    )
