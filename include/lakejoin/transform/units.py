"""Transformation units and programs (CST paper §2 Def. 1-3; Auto-Join, Zhu thesis §4.4.2).

A *program* (the paper's "transformation", Def. 3) is a tuple of units; every unit is applied
to the whole source string and the outputs are concatenated. A unit returns ``None`` when it
cannot be applied (index out of range), and then the program fails on that value.

One index convention everywhere: 0-based, half-open ``[s, e)``. Negative indices count from
the end (Python style); the faithful CST configuration never generates them (the paper has
no "last token" unit), the improved one and Auto-Join do.

Units are ``NamedTuple`` s so that hashing and equality (the paper's duplicate removal,
§4.1.5) run at C speed. Within one language two units of different kinds never compare equal
because their field counts or field types differ (``Split(str, int)`` vs ``Substr(int, int)``);
the two languages (CST's ``Substr(s, e)`` and Auto-Join's ``Substring(start, length)``) are
never mixed in one candidate set. Auto-Join's ``Constant`` is ``Literal``.

``COST`` is the number of parameters (the paper's z, §5) and ``RANK`` orders unit kinds from
simplest to most specific; together they are the documented simplicity order that breaks
every tie (never hash or set order).
"""

from __future__ import annotations

import ast
import functools
import re
import typing
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from lakejoin.normalize import normalize_value
from lakejoin.transform.formats import Date, Number


def _piece(value: str, sep: str, index: int) -> str | None:
    pieces = value.split(sep)
    if -len(pieces) <= index < len(pieces):
        return pieces[index]
    return None


def _clipped(piece: str | None, start: int, end: int) -> str | None:
    """``piece[start:min(end, len)]``, end clipped as in the released CST code; None if empty."""
    if piece is None or start >= len(piece):
        return None
    return piece[start:end]


def _substring(piece: str | None, start: int, length: int | None) -> str | None:
    """Auto-Join ``Substring``: ``start`` may count from the end; ``length=None`` = to the end."""
    if piece is None:
        return None
    begin = start if start >= 0 else len(piece) + start
    if begin < 0 or begin >= len(piece):
        return None
    if length is None:
        return piece[begin:]
    if begin + length > len(piece):
        return None
    return piece[begin : begin + length]


class _LiteralFields(NamedTuple):
    text: str


class Literal(_LiteralFields):
    """Literal(str): emits a constant (CST §2; Auto-Join's ``Constant``)."""

    __slots__ = ()
    COST = 1
    RANK = 0

    def apply(self, value: str) -> str | None:
        """``text``, whatever ``value`` is."""
        return self.text


class _SubstrFields(NamedTuple):
    start: int
    end: int


class Substr(_SubstrFields):
    """Substr(s, e) = value[s:e], strict: fails when e > len(value) (CST code semantics).

    Negative ``start`` means both ends count from the end (``end == 0`` is the end itself).
    """

    __slots__ = ()
    COST = 2
    RANK = 2

    def apply(self, value: str) -> str | None:
        """``value[start:end]`` (both counted from the end when ``start`` < 0); None when that range is empty
        or runs past the value."""
        n = len(value)
        begin, stop = (self.start, self.end) if self.start >= 0 else (n + self.start, n + self.end)
        if begin < 0 or stop > n or begin >= stop:
            return None
        return value[begin:stop]


class _SplitFields(NamedTuple):
    sep: str
    index: int  # type: ignore[assignment]  # a field named like tuple.index: the name is part of the unit's repr


class Split(_SplitFields):
    """Split(c, i): the i-th piece of value.split(c); a negative i counts from the end."""

    __slots__ = ()
    COST = 2
    RANK = 1

    def apply(self, value: str) -> str | None:
        """Piece ``index`` of ``value.split(sep)``; None when there is no such piece."""
        return _piece(value, self.sep, self.index)


class _SplitSubstrFields(NamedTuple):
    sep: str
    index: int  # type: ignore[assignment]  # a field named like tuple.index: the name is part of the unit's repr
    start: int
    end: int


class SplitSubstr(_SplitSubstrFields):
    """SplitSubstr(c, i, s, e) = Split(c, i)[s:min(e, len)] (end clipped, as in the CST code)."""

    __slots__ = ()
    COST = 4
    RANK = 3

    def apply(self, value: str) -> str | None:
        """Piece ``index`` of ``value.split(sep)``, cut to ``[start:end]`` with the end clipped; None when
        there is no such piece or it is no longer than ``start``."""
        return _clipped(_piece(value, self.sep, self.index), self.start, self.end)


class _TwoCharSplitSubstrFields(NamedTuple):
    left: str
    right: str
    index: int  # type: ignore[assignment]  # a field named like tuple.index: the name is part of the unit's repr
    start: int
    end: int


class TwoCharSplitSubstr(_TwoCharSplitSubstrFields):
    """TwoCharSplitSubstr(c1, c2, i, s, e): the i-th text between c1 and the next c2, then [s:e].

    The pieces are the non-overlapping, non-greedy matches of ``c1(.*?)c2`` (CST code).
    """

    __slots__ = ()
    COST = 5
    RANK = 4

    def apply(self, value: str) -> str | None:
        """The ``index``-th text between ``left`` and ``right``, cut to ``[start:end]`` with the end clipped;
        None when there is no such text or it is no longer than ``start``."""
        return _clipped(_piece_between(value, self.left, self.right, self.index), self.start, self.end)


def pieces_between(value: str, left: str, right: str) -> list[str]:
    """All non-overlapping texts between a ``left`` char and the next ``right`` char."""
    found: list[str] = []
    pos = 0
    while True:
        open_at = value.find(left, pos)
        if open_at < 0:
            return found
        close_at = value.find(right, open_at + 1)
        if close_at < 0:
            return found
        found.append(value[open_at + 1 : close_at])
        pos = close_at + 1


def _piece_between(value: str, left: str, right: str, index: int) -> str | None:
    pieces = pieces_between(value, left, right)
    return pieces[index] if -len(pieces) <= index < len(pieces) else None


class _SubstringFields(NamedTuple):
    start: int
    length: int


class Substring(_SubstringFields):
    """Auto-Join logical ``Substr(array, m, start, len)`` on the one-cell row: value[start:+len]."""

    __slots__ = ()
    COST = 2
    RANK = 2

    def apply(self, value: str) -> str | None:
        """``length`` characters of ``value`` from ``start`` (None: to the end; ``start`` < 0 counts from the
        end); None when they do not all lie in the value."""
        return _substring(value, self.start, self.length)


class _SplitSubstringFields(NamedTuple):
    sep: str
    m: int
    start: int
    length: int | None


class SplitSubstring(_SplitSubstringFields):
    """Auto-Join ``SplitSubstr``: Substring(SelectK(Split(value, sep), m), start, len)."""

    __slots__ = ()
    COST = 4
    RANK = 3

    def apply(self, value: str) -> str | None:
        """``length`` characters from ``start`` (as :class:`Substring`) of piece ``m`` of
        ``value.split(sep)``; None when either does not exist."""
        return _substring(_piece(value, self.sep, self.m), self.start, self.length)


class _SplitSplitSubstringFields(NamedTuple):
    sep1: str
    m1: int
    sep2: str
    m2: int
    start: int
    length: int | None


class SplitSplitSubstring(_SplitSplitSubstringFields):
    """Auto-Join ``SplitSplitSubstr``: two Split/SelectK levels, then Substring."""

    __slots__ = ()
    COST = 6
    RANK = 5

    def apply(self, value: str) -> str | None:
        """Piece ``m2`` (split by ``sep2``) of piece ``m1`` (split by ``sep1``), then ``length`` characters
        from ``start`` (as :class:`Substring`); None when any step finds nothing."""
        outer = _piece(value, self.sep1, self.m1)
        inner = None if outer is None else _piece(outer, self.sep2, self.m2)
        return _substring(inner, self.start, self.length)


_CHAR_CLASSES = {"digit": re.compile(r"\d+"), "alpha": re.compile(r"[^\W\d_]+"), "alnum": re.compile(r"[^\W_]+")}


class _CharsFields(NamedTuple):
    cls: str
    index: int | None  # type: ignore[assignment]  # a field named like tuple.index: the name is part of the unit's repr


class Chars(_CharsFields):
    """Chars(cls, i): the characters of one class ("digit", "alpha", "alnum"), all of them in
    order (i = None: "(780) 492-5411" -> "7804925411") or the i-th run of them."""

    __slots__ = ()
    COST = 2
    RANK = 5

    def apply(self, value: str) -> str | None:
        """The characters of class ``cls`` in ``value``: every one (``index`` None) or the ``index``-th run of
        them; None when there is none or no such run."""
        runs = _CHAR_CLASSES[self.cls].findall(value)
        if self.index is None:
            return "".join(runs) or None
        return runs[self.index] if -len(runs) <= self.index < len(runs) else None


Unit = (
    Literal
    | Substr
    | Split
    | SplitSubstr
    | TwoCharSplitSubstr
    | Substring
    | SplitSubstring
    | SplitSplitSubstring
    | Chars
    | Number
    | Date
)
Program = tuple  # tuple[Unit, ...]
UNIT_TYPES = {cls.__name__: cls for cls in typing.get_args(Unit)}


def apply_program(program: Sequence[Unit], value: str) -> str | None:
    """t(s) = t1(s) . t2(s) . ... (Def. 3); None if any unit fails."""
    parts = []
    for unit in program:
        out = unit.apply(value)
        if out is None:
            return None
        parts.append(out)
    return "".join(parts)


def normalized_output(program: Sequence[Unit], value: str) -> str | None:
    """The program's output as the join compares it: normalized like the target column
    (a printed "1500.00" joins the target "1500", whose normalization it is)."""
    out = apply_program(program, value)
    return None if out is None else normalize_value(out)


def merge_literals(units: Iterable[Unit]) -> Program:
    """Adjacent literals are merged (CST §2.2), so equal programs have one spelling."""
    merged: list[Unit] = []
    for unit in units:
        if merged and type(unit) is Literal and type(merged[-1]) is Literal:
            merged[-1] = Literal(merged[-1].text + unit.text)
        else:
            merged.append(unit)
    return tuple(merged)


def is_constant(program: Sequence[Unit]) -> bool:
    """A pure-literal program joins nothing useful (it is skipped at join time, CST §6.5)."""
    return all(type(unit) is Literal for unit in program)


def shape_key(program: Sequence[Unit]) -> tuple:
    """The cheap prefix of :func:`simplicity_key`: fewer parameters, fewer units, simpler kinds.
    Rankings over many programs sort on it and compare texts only within its ties."""
    return (sum(unit.COST for unit in program), len(program), tuple(unit.RANK for unit in program))


def simplicity_key(program: Sequence[Unit]) -> tuple:
    """The documented tie-break order: fewer parameters, fewer units, simpler unit kinds, text."""
    return (*shape_key(program), program_text(program))


@functools.lru_cache(maxsize=1 << 16)
def _unit_text(kind: type, fields: tuple) -> str:  # keyed on the kind: Substr(0, 3) == Substring(0, 3)
    return f"{kind.__name__}({', '.join(repr(field) for field in fields)})"


def unit_text(unit: Unit) -> str:
    """A unit as program text, e.g. ``Split(' ', 1)``."""
    kind: type = type(unit)
    return _unit_text(kind, tuple(unit))


def program_text(program: Sequence[Unit]) -> str:
    """Human-readable and parseable: ``Split(' ', 1) + Literal('@x.org')``."""
    return " + ".join(unit_text(unit) for unit in program)


def parse_program(text: str) -> Program:
    """Inverse of :func:`program_text` (literal arguments only; nothing is evaluated)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("program text must be a non-empty string")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"cannot parse program {text!r}: {exc.msg}") from None
    calls: list[ast.expr] = []
    while isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Add):
        calls.append(tree.right)
        tree = tree.left
    calls.append(tree)
    return tuple(_parse_unit(call, text) for call in reversed(calls))


def _parse_unit(node: ast.expr, text: str) -> Unit:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
        raise ValueError(f"program {text!r} is not a '+'-joined list of unit calls")
    cls = UNIT_TYPES.get(node.func.id)
    if cls is None:
        raise ValueError(f"unknown unit {node.func.id!r} in program {text!r}")
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        for name, arg in zip(cls._fields, args):
            expected = typing.get_args(hints := typing.get_type_hints(cls)[name]) or (hints,)
            if not isinstance(arg, tuple(type(None) if kind is None else kind for kind in expected)):
                raise TypeError(f"{name} must be {hints}, got {arg!r}")
        unit = cls(*args)
        for probe in _PROBES:  # arguments only a unit's use can check (a class name, a decimal text)
            unit.apply(probe)
        return unit
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
        raise ValueError(f"bad arguments for {node.func.id} in program {text!r}: {exc!r}") from None


_PROBES = ("0", "a-1.5 b 2024-01-05")
