"""Auto-Join (Zhu, He & Chaudhuri, PVLDB 2017; Zhu thesis 2019, Chapter 4; notes Part C).

1. Joinable row pairs from rare q-grams (§4.4.1, Alg. 3): per source value v and suffix u of v,
   binary-search (over a suffix array of the target) the longest prefix g = u[:q*] that still
   occurs in the target, q* >= 3; score(v, g) = 1 / (|rows of source with g| * |rows of target
   with g|); v keeps its best g and pairs with every target row containing it.
2. Program learning (§4.4.2, Alg. 4 TryLearnTransform): greedy divide and conquer over the
   logical operators Constant, Substr, SplitSubstr, SplitSplitSubstr (Concat is implicit):
   pick the operator with most progress (output characters consistent with every example),
   recurse on the left and right remainders, backtrack to the next operator on failure.
   Examples are random subsets of b top-scored pairs (Alg. 5), seeded; the learned programs are
   ranked by the number of target rows they equi-join, and the best one is used.
3. Constrained fuzzy join (§4.6, Alg. 6) with the erratum fixed: binary-search the LARGEST
   distance threshold s at which every derived value matches at most one target value and
   every target value at most one distinct derived value; keep the best tokenisation.

Sampling (§4.5, Eq. 4.8 with the erratum fixed): with C = T / (1 - δ), the sample sizes that
minimise N_s p_s + N_t p_t subject to N_t p_t p_s r >= C are p_s = sqrt(C / (r N_s)) and
p_t = sqrt(C N_s / (r N_t^2)) (the thesis swaps the two labels).

Casing operators are left out: values are lower-cased by the shared normalization first.
SplitSplitSubstr is restricted to the whole inner piece or its first character, which keeps
the per-step parameter space linear in the value length.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lakejoin.transform.units import (
    Literal,
    Program,
    SplitSplitSubstring,
    SplitSubstring,
    Substring,
    Unit,
    apply_program,
    simplicity_key,
)

MIN_Q = 3


@dataclass(frozen=True)
class AutoJoinConfig:
    """The Auto-Join search's knobs, named after the paper's symbols."""

    top_pairs: int = 64  # k: top-scored row pairs kept as the example pool
    subsets: int = 32  # r: random example subsets
    subset_size: int = 3  # b: examples per learning attempt (the thesis uses 3-4)
    max_ops: int = 10  # τ: logical operators per program
    beam: int = 6  # operators tried per step before backtracking further up
    max_tries: int = 60  # operators tried per subset in total ("stop after enough tries")
    fuzzy: bool = True
    fuzzy_tolerance: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.top_pairs, self.subsets, self.subset_size, self.max_ops, self.beam, self.max_tries) < 1:
            raise ValueError("Auto-Join sizes (top_pairs, subsets, subset_size, ...) must be >= 1")


def sampling_rates(
    n_source: int, n_target: int, participation: float = 0.1, needed: int = 4, slack: float = 0.8
) -> tuple[float, float]:
    """(p_s, p_t) of §4.5 with the erratum fixed; 1.0 means "use the whole column"."""
    c = needed / (1.0 - slack)
    p_s = math.sqrt(c / (participation * n_source))
    p_t = math.sqrt(c * n_source / (participation * n_target**2))
    return min(1.0, p_s), min(1.0, p_t)


# -- step 1: unique q-gram row pairs ------------------------------------------------------------


class SuffixArray:
    """The sorted suffixes of a column's distinct values; a q-gram probe is a binary search."""

    def __init__(self, values: Sequence[str]) -> None:
        entries = sorted((value[i:], row) for row, value in enumerate(values) for i in range(len(value)))
        self.suffixes = [suffix for suffix, _ in entries]
        self.rows_of = [row for _, row in entries]

    def _range(self, gram: str) -> tuple[int, int]:
        lo = bisect_left(self.suffixes, gram)
        hi = bisect_left(self.suffixes, gram + "\U0010ffff", lo)
        return lo, hi

    def contains(self, gram: str) -> bool:
        """Whether ``gram`` occurs in any of the values (some suffix starts with it)."""
        lo = bisect_left(self.suffixes, gram)
        return lo < len(self.suffixes) and self.suffixes[lo].startswith(gram)

    def rows(self, gram: str) -> list[int]:
        """The rows (positions of the values) whose value contains ``gram``, ascending, each once."""
        lo, hi = self._range(gram)
        return sorted(set(self.rows_of[lo:hi]))


def _longest_matching_prefix(suffix: str, index: SuffixArray) -> int:
    """BinarySearchQ of Alg. 3: the largest q with suffix[:q] in the index (prefix monotone)."""
    low, high = MIN_Q, len(suffix) + 1
    while low < high:
        mid = (low + high) // 2
        if index.contains(suffix[:mid]):
            low = mid + 1
        else:
            high = mid
    return low - 1


def qgram_pairs(source: Sequence[str], target: Sequence[str]) -> list[tuple[float, int, int]]:
    """(score, source row, target row), best first."""
    source_index, target_index = SuffixArray(source), SuffixArray(target)
    scored: list[tuple[float, int, int]] = []
    for row, value in enumerate(source):
        best: tuple[float, list[int]] | None = None
        for i in range(len(value) - MIN_Q + 1):
            q = _longest_matching_prefix(value[i:], target_index)
            if q < MIN_Q:
                continue
            gram = value[i : i + q]
            target_rows = target_index.rows(gram)
            score = 1.0 / (len(source_index.rows(gram)) * len(target_rows))
            if best is None or score > best[0]:
                best = (score, target_rows)
        if best is not None:
            scored.extend((best[0], row, target_row) for target_row in best[1])
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    return scored


# -- step 2: TryLearnTransform ------------------------------------------------------------------


def _separators(value: str) -> list[str]:
    return list(dict.fromkeys(char for char in value if not char.isalnum()))


def _copied_spans(text: str, output: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every substring of ``text`` that occurs in ``output``."""
    for start in range(len(text)):
        for end in range(start + 1, len(text) + 1):
            if text[start:end] not in output:
                break
            yield start, end


def _substring_params(piece: str, output: str) -> Iterator[tuple[int, int | None]]:
    for start, end in _copied_spans(piece, output):
        if start == 0 and end == len(piece):
            yield 0, None
            continue
        yield start, end - start
        yield start - len(piece), end - start


def _candidate_ops(value: str, output: str, others: Sequence[str]) -> list[Unit]:
    """Operators enumerated on the first example (the others only filter them)."""
    ops: list[Unit] = [Literal(text) for text in _longest_common_substrings([output, *others])]
    ops.extend(Substring(start, length) for start, length in _substring_params(value, output) if length is not None)
    for sep in _separators(value):
        pieces = value.split(sep)
        if len(pieces) < 2:
            continue
        for m, piece in enumerate(pieces):
            for index in (m, m - len(pieces)):
                ops.extend(
                    SplitSubstring(sep, index, start, length) for start, length in _substring_params(piece, output)
                )
                for sep2 in _separators(piece):
                    if sep2 == sep:
                        continue
                    inner = piece.split(sep2)
                    for m2, part in enumerate(inner):
                        for index2 in (m2, m2 - len(inner)):
                            if part and part in output:
                                ops.append(SplitSplitSubstring(sep, index, sep2, index2, 0, None))
                            if part and part[0] in output:
                                ops.append(SplitSplitSubstring(sep, index, sep2, index2, 0, 1))
    return ops


def _longest_common_substrings(texts: Sequence[str]) -> list[str]:
    first = texts[0]
    for length in range(len(first), 0, -1):
        found = [first[i : i + length] for i in range(len(first) - length + 1)]
        common = [text for text in dict.fromkeys(found) if all(text in other for other in texts[1:])]
        if common:
            return common
    return []


def _ranked_ops(inputs: Sequence[str], outputs: Sequence[str]) -> list[tuple[Unit, list[str]]]:
    """Operators consistent with every example, by progress (sum of output lengths), ties by
    simplicity (Constant first, as the thesis's footnote says); one per distinct output."""
    scored: dict[tuple[str, ...], tuple[tuple[Any, ...], Unit, list[str]]] = {}
    for op in _candidate_ops(inputs[0], outputs[0], outputs[1:]):
        applied = [op.apply(value) for value in inputs]
        if any(not out or out not in goal for out, goal in zip(applied, outputs)):
            continue
        produced = cast(list[str], applied)  # no None left after the check
        key = (-sum(map(len, produced)), simplicity_key((op,)))
        signature = tuple(produced)
        if signature not in scored or key < scored[signature][0]:
            scored[signature] = (key, op, produced)
    return [(op, produced) for _, op, produced in sorted(scored.values(), key=lambda item: item[0])]


def try_learn_transform(inputs: Sequence[str], outputs: Sequence[str], config: AutoJoinConfig) -> Program | None:
    """Alg. 4: a program p with p(inputs[i]) == outputs[i] for every example, or None."""
    tries = [config.max_tries]

    def learn(goals: list[str], ops_left: int) -> Program | None:
        if all(goal == "" for goal in goals):
            return ()
        if ops_left <= 0 or any(goal == "" for goal in goals):
            return None
        for op, produced in _ranked_ops(inputs, goals)[: config.beam]:
            if tries[0] <= 0:
                return None
            tries[0] -= 1
            cuts = [goal.find(out) for goal, out in zip(goals, produced)]
            left = learn([goal[:cut] for goal, cut in zip(goals, cuts)], ops_left - 1)
            if left is None:
                continue
            right_goals = [goal[cut + len(out) :] for goal, cut, out in zip(goals, cuts, produced)]
            right = learn(right_goals, ops_left - 1 - len(left))
            if right is not None:
                return (*left, op, *right)
        return None

    return learn(list(outputs), config.max_ops)


# -- step 3: constrained fuzzy join -------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _qgrams(q: int) -> Callable[[str], frozenset[str]]:
    return lambda text: frozenset(text[i : i + q] for i in range(max(1, len(text) - q + 1)))


TOKENIZERS: dict[str, Callable[[str], frozenset[str]]] = {"word": _words, "2gram": _qgrams(2), "3gram": _qgrams(3)}


def _distances(
    derived: Sequence[str], targets: Sequence[str], tokenize: Callable[[str], frozenset[str]]
) -> list[tuple[float, int, int]]:
    """Jaccard distances of the (derived, target) pairs sharing a token (token blocking)."""
    target_tokens = [tokenize(text) for text in targets]
    index: dict[str, list[int]] = {}
    for k, tokens in enumerate(target_tokens):
        for token in sorted(tokens):
            index.setdefault(token, []).append(k)
    found = []
    for c, text in enumerate(derived):
        tokens = tokenize(text)
        candidates = sorted({k for token in tokens for k in index.get(token, ())})
        for k in candidates:
            shared = len(tokens & target_tokens[k])
            found.append((1.0 - shared / len(tokens | target_tokens[k]), c, k))
    return found


def _matches(distances: list[tuple[float, int, int]], threshold: float) -> list[tuple[int, int]] | None:
    """The pairs within ``threshold``, or None when Eq. 4.10's constraints are violated."""
    chosen = [(c, k) for distance, c, k in distances if distance <= threshold]
    per_c: dict[int, int] = {}
    per_k: dict[int, int] = {}
    for c, k in chosen:
        if per_c.setdefault(c, k) != k or per_k.setdefault(k, c) != c:
            return None
    return chosen


def constrained_fuzzy_join(
    derived: Sequence[str], targets: Sequence[str], tolerance: float = 0.01
) -> list[tuple[int, int]]:
    """(derived index, target index) pairs of the tokenisation/threshold matching most targets."""
    best: list[tuple[int, int]] = []
    for name in TOKENIZERS:
        distances = _distances(derived, targets, TOKENIZERS[name])
        feasible = _matches(distances, 0.0)
        if feasible is None:
            continue
        low, high = 0.0, 1.0  # Alg. 6 fixed: feasible -> raise the lower end
        while high - low > tolerance:
            middle = (low + high) / 2
            found = _matches(distances, middle)
            if found is None:
                high = middle
            else:
                low, feasible = middle, found
        if len(feasible) > len(best):
            best = feasible
    return best


# -- the whole method -------------------------------------------------------------------------


@dataclass
class AutoJoinResult:
    """The programs Auto-Join learned, ranked by the rows they join, and the best program's joined pairs."""

    ranked: list[tuple[Program, int]]  # distinct programs with the target rows they join
    example_pairs: list[tuple[int, int]]
    pairs: list[tuple[int, int]]  # joined (source row, target row) with the best program


def learn(
    source: Sequence[str],
    target: Sequence[str],
    config: AutoJoinConfig = AutoJoinConfig(),
    learn_source: Sequence[int] | None = None,
    learn_target: Sequence[int] | None = None,
) -> AutoJoinResult:
    """Auto-Join of two columns of distinct values; learning may run on row samples."""
    src_rows = list(range(len(source))) if learn_source is None else list(learn_source)
    tgt_rows = list(range(len(target))) if learn_target is None else list(learn_target)
    scored = qgram_pairs([source[i] for i in src_rows], [target[j] for j in tgt_rows])
    examples = [(src_rows[s], tgt_rows[t]) for _, s, t in scored[: config.top_pairs]]
    rng = random.Random(config.seed)
    subsets = (
        [examples]
        if len(examples) <= config.subset_size
        else [rng.sample(examples, config.subset_size) for _ in range(config.subsets)]
    )
    programs: dict[Program, None] = {}
    for subset in dict.fromkeys(tuple(sorted(s)) for s in subsets):
        program = try_learn_transform([source[s] for s, _ in subset], [target[t] for _, t in subset], config)
        if program:
            programs.setdefault(program, None)
    target_row = {value: row for row, value in enumerate(target)}
    ranked: list[tuple[Program, list[tuple[int, int]]]] = []
    best_pairs: list[tuple[int, int]] = []
    for program in programs:
        joined = [
            (row, target_row[out])
            for row, value in enumerate(source)
            if (out := apply_program(program, value)) is not None and out in target_row
        ]
        ranked.append((program, joined))
    ranked.sort(key=lambda item: (-len({t for _, t in item[1]}), simplicity_key(item[0])))
    if ranked:
        best_program, best_pairs = ranked[0]
        if config.fuzzy:  # the fuzzy step may only add matches, never lose the equi-join's
            fuzzy_pairs = _fuzzy_extend(best_program, source, target, config.fuzzy_tolerance)
            if len(fuzzy_pairs) >= len(best_pairs):
                best_pairs = fuzzy_pairs
    return AutoJoinResult([(p, len({t for _, t in j})) for p, j in ranked], examples, best_pairs)


def _fuzzy_extend(
    program: Program, source: Sequence[str], target: Sequence[str], tolerance: float
) -> list[tuple[int, int]]:
    derived_of = {row: out for row, value in enumerate(source) if (out := apply_program(program, value))}
    derived = list(dict.fromkeys(derived_of.values()))
    position = {text: i for i, text in enumerate(derived)}
    matched = dict(constrained_fuzzy_join(derived, target, tolerance))
    return [(row, matched[position[out]]) for row, out in derived_of.items() if position[out] in matched]
