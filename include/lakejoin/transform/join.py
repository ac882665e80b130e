"""Learn transformations between two columns and join with them (CST §4.2 / §6.5; Auto-Join).

Both columns go through the shared :func:`lakejoin.normalize.normalize_value` (NFKC, collapsed
whitespace, lower case, canonical numbers) and are reduced to distinct values; the joined pairs
are reported with the caller's raw values. With ``direction="auto"`` both directions are learned
and the one joining more pairs wins (ties: forward); "longer" is the paper's rule (the column with
the longer mean value is the source, §4.2.1), "forward"/"backward" fix it.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.normalize import normalize_value
from lakejoin.transform import autojoin, cst, reformat
from lakejoin.transform.formats import Date, Number
from lakejoin.transform.matching import match_rows
from lakejoin.transform.units import Program, apply_program, is_constant, normalized_output, parse_program, program_text

MAX_VALUE_LENGTH = 1_000
METHODS: dict[str, cst.CSTConfig | autojoin.AutoJoinConfig] = {
    "cst": cst.FAITHFUL,
    "cst+": cst.IMPROVED,
    "cst++": cst.IMPROVED_FORMATS,
    "autojoin": autojoin.AutoJoinConfig(),
}
# The method everything uses when none is named (CLI, join --transform, REST, UI, operators), chosen
# by bench_transform.py: the best F1 on every dataset and category measured (README).
DEFAULT_METHOD = "cst++"
LEARN = "learn"  # the name a join passes to learn with DEFAULT_METHOD
DIRECTIONS = ("auto", "forward", "backward", "longer")
WIDER_BOUNDS_BELOW = 0.9  # on short values, CST retries with cst.SHORT_BOUNDS when its cover explains less
REFORMAT_SUFFICES = 0.5  # share of the sampled source rows the value-paired units must explain to skip CST


def prepare_column(values: Sequence[object], name: str) -> dict[str, list[str]]:
    """Distinct normalized value -> the raw values it came from (first-seen order).

    Raises ValueError for a non-sequence, non-text cells, over-long values or no usable value.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} values must be a sequence of strings, got {type(values).__name__}")
    column: dict[str, list[str]] = {}
    for position, raw in enumerate(values):
        if raw is None:
            continue
        if not isinstance(raw, str):
            raise ValueError(f"{name} value #{position} is {type(raw).__name__}, not text: {raw!r:.60}")
        if len(raw) > MAX_VALUE_LENGTH:
            raise ValueError(f"{name} value #{position} has {len(raw)} characters (limit {MAX_VALUE_LENGTH})")
        value = normalize_value(raw)
        if value is not None:
            raws = column.setdefault(value, [])
            if raw not in raws:
                raws.append(raw)
    if not column:
        raise ValueError(f"{name} column has no non-empty values")
    return column


def apply_transformation(program: str | Sequence | Mapping, values: Sequence[object]) -> list[str | None]:
    """Apply a learned program (its text, its units, or a ``transformations`` entry) to raw
    values; None where the program does not apply or the value is null-like."""
    if isinstance(program, Mapping):
        program = program["program"]
    units = parse_program(program) if isinstance(program, str) else tuple(program)
    outputs = []
    for raw in values:
        value = normalize_value(raw)
        outputs.append(None if value is None else normalized_output(units, value))
    return outputs


def _learning_sample(n_source: int, n_target: int, seed: int) -> tuple[list[int], list[int]]:
    """Row samples for learning on big columns (Auto-Join §4.5, Eq. 4.8 with the erratum fixed)."""
    p_s, p_t = autojoin.sampling_rates(n_source, n_target)
    rng = random.Random(seed)

    def sample(n: int, rate: float) -> list[int]:
        return list(range(n)) if rate >= 1.0 else sorted(rng.sample(range(n), max(1, round(rate * n))))

    return sample(n_source, p_s), sample(n_target, p_t)


def _equi_join(program: Program, source: Sequence[str], target_row: Mapping[str, int]) -> list[tuple[int, int]]:
    return [
        (row, target_row[out])
        for row, value in enumerate(source)
        if (out := normalized_output(program, value)) is not None and out in target_row
    ]


def _run_cst(source: list[str], target: list[str], config: cst.CSTConfig) -> tuple[list[dict], set, bool]:
    """CST on n-gram-matched rows; with ``config.formats`` the value-paired units first, and CST
    only for the source rows they leave (skipped, and the direction settled, when they explain
    REFORMAT_SUFFICES of the sample)."""
    learn_source, learn_target = _learning_sample(len(source), len(target), config.seed)
    target_row = {value: row for row, value in enumerate(target)}
    joined: set[tuple[int, int]] = set()
    transformations, claimed = (
        _reformat(source, learn_source, target_row, config, joined) if config.formats else ([], set())
    )
    if config.formats and len(claimed.intersection(learn_source)) >= REFORMAT_SUFFICES * len(learn_source):
        return transformations, joined, True
    if not config.sample_targets:
        learn_target = list(range(len(target)))
    matched = match_rows(
        [source[i] for i in learn_source], [target[j] for j in learn_target], n_fallback=config.gram_fallback
    )
    pairs = [(source[learn_source[s]], target[learn_target[t]]) for s, t in matched]
    if config.max_learn_chars is not None:
        pairs = [(s, t) for s, t in pairs if max(len(s), len(t)) <= config.max_learn_chars]
    result = cst.learn(pairs, config)
    if (
        config.short_values is not None
        and max(_mean_length(source), _mean_length(target)) <= config.short_values
        and _explained(result) < WIDER_BOUNDS_BELOW
    ):  # short values afford the wider bounds: retry
        wider = cst.learn(pairs, dataclasses.replace(config, **cst.SHORT_BOUNDS, max_generated=cst.SHORT_BOUNDS_WORK))
        result = wider if _explained(wider) > _explained(result) else result
    for learned in result.cover:
        coverage = len(learned.rows) / result.pairs
        used = coverage >= config.join_support and not is_constant(learned.program)
        rows = (
            [pair for pair in _equi_join(learned.program, source, target_row) if pair[0] not in claimed] if used else []
        )
        joined.update(rows)
        transformations.append(
            {
                "program": program_text(learned.program),
                "coverage": round(coverage, 6),
                "covered_pairs": len(learned.rows),
                "gain": learned.gain,
                "used": used,
                "joined": len(rows),
            }
        )
    if config.join_with == "supported":
        for program, _ in result.supported:
            if not is_constant(program):
                joined.update(_equi_join(program, source, target_row))
    if config.formats:  # the two learners' coverages are not comparable: rank by the rows joined
        transformations.sort(key=lambda entry: (not entry["used"], -entry["joined"]))
    return transformations, joined, False


def _mean_length(values: Sequence[str]) -> float:
    return sum(map(len, values)) / len(values)


def _explained(result: cst.CSTResult) -> float:
    """Share of the learning pairs the cover's programs cover."""
    return len({row for learned in result.cover for row in learned.rows}) / max(1, result.pairs)


def _reformat(
    source: list[str], learn_source: list[int], target_row: Mapping[str, int], config: cst.CSTConfig, joined: set
) -> tuple[list[dict], set[int]]:
    """Number, date and character-class programs (:mod:`.reformat`) learned on the sampled
    source rows, each kept when it joins at least the support threshold of rows no program
    before it joined (those rows' pairs are added to ``joined``). Returns the entries and the
    rows the number and date programs claimed: CST joins only the others. Character classes
    claim none, being string units that CST's programs refine."""
    min_rows = max(2, math.ceil(config.join_support * len(learn_source)))
    entries: list[dict] = []
    claimed: set[int] = set()
    for program, count in reformat.learn([source[i] for i in learn_source], list(target_row), min_rows):
        rows = [pair for pair in _equi_join(program, source, target_row) if pair[0] not in claimed]
        gain = len({row for row, _ in rows} - {row for row, _ in joined})
        if gain >= min_rows:
            joined.update(rows)
            if any(isinstance(unit, (Number, Date)) for unit in program):
                claimed.update(row for row, _ in rows)
            entries.append(
                {
                    "program": program_text(program),
                    "coverage": round(count / len(learn_source), 6),
                    "covered_pairs": count,
                    "gain": gain,
                    "used": True,
                    "joined": len(rows),
                }
            )
    return entries, claimed


def _run_autojoin(
    source: list[str], target: list[str], config: autojoin.AutoJoinConfig
) -> tuple[list[dict], set, bool]:
    learn_source, learn_target = _learning_sample(len(source), len(target), config.seed)
    result = autojoin.learn(source, target, config, learn_source, learn_target)
    examples = [(source[s], target[t]) for s, t in result.example_pairs]
    transformations = []
    for rank, (program, joined_targets) in enumerate(result.ranked):
        covered = sum(apply_program(program, s) == t for s, t in examples)
        transformations.append(
            {
                "program": program_text(program),
                "coverage": round(covered / max(1, len(examples)), 6),
                "covered_pairs": covered,
                "used": rank == 0,
                "joined": joined_targets,
            }
        )
    return transformations, set(result.pairs), False


def learn_and_join(
    source_values: Sequence[str],
    target_values: Sequence[str],
    method: str = DEFAULT_METHOD,
    direction: str = "auto",
    **params: Any,
) -> dict:
    """Learn transformations from ``source_values`` to ``target_values`` and equi-join with them.

    ``method``: "cst" (the paper's web configuration; ``max_placeholders=4`` gives its spreadsheet
    one), "cst+" (:data:`cst.IMPROVED`: indices from the end, punctuation separators, separator
    runs, constant target text, the n-gram fallback), "cst++" (the default, :data:`DEFAULT_METHOD`:
    cst+ with the number, date and character-class units and bounds chosen by value length) or
    "autojoin"; ``params`` override fields
    of :class:`cst.CSTConfig` or
    :class:`autojoin.AutoJoinConfig`. Returns ``{"method", "direction", "transformations",
    "pairs", "seconds"}``; ``pairs`` are ``{"source", "target"}`` raw values of the two inputs.
    """
    started = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose from {DIRECTIONS}")
    fields = {f.name for f in dataclasses.fields(METHODS[method])}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise ValueError(f"unknown parameters {unknown} for method {method!r}; known: {sorted(fields)}")
    config = dataclasses.replace(METHODS[method], **params)
    columns = {"forward": prepare_column(source_values, "source"), "backward": prepare_column(target_values, "target")}
    best: tuple[str, list[dict], set, list[str], list[str]] | None = None
    for name in _directions(direction, columns):
        learn_from, join_to = columns[name], columns["backward" if name == "forward" else "forward"]
        if isinstance(config, autojoin.AutoJoinConfig):  # method == "autojoin"
            transformations, joined, settled = _run_autojoin(list(learn_from), list(join_to), config)
        else:
            transformations, joined, settled = _run_cst(list(learn_from), list(join_to), config)
        if best is None or len(joined) > len(best[2]):
            best = (name, transformations, joined, list(learn_from), list(join_to))
        if settled:  # number, date or class programs explain this direction: the other is not tried
            break
    assert best is not None  # _directions gives at least one direction
    name, transformations, joined, left, right = best
    pairs = []
    for row, target_row in sorted(joined):
        for raw_left in columns[name][left[row]]:
            for raw_right in columns["backward" if name == "forward" else "forward"][right[target_row]]:
                pair = (raw_left, raw_right) if name == "forward" else (raw_right, raw_left)
                pairs.append({"source": pair[0], "target": pair[1]})
    return {
        "method": method,
        "direction": name,
        "transformations": transformations,
        "pairs": pairs,
        "seconds": round(time.perf_counter() - started, 4),
    }


def _directions(direction: str, columns: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    if direction == "auto":
        return ["forward", "backward"]
    if direction == "longer":
        mean = {name: sum(map(len, column)) / len(column) for name, column in columns.items()}
        return ["backward" if mean["backward"] > mean["forward"] else "forward"]
    return [direction]
