"""Discovering covering transformations (Dargahi Nobari & Rafiei, "Efficiently Transforming
Tables for Joinability", ICDE 2022; notes/cst.md). The paper names no method; we call it CST.

Given row pairs I = {(s, g)} (given, or found by :mod:`lakejoin.transform.matching`):

1. placeholders and skeletons (§4.1.1-4.1.3): the target is cut into blocks; a placeholder is a
   target substring that also occurs in the source (maximal length, every source occurrence),
   anything else is a literal. Each placeholder may also be kept as a literal (the 2^p variants),
   and placeholders are broken at common separators (Lemma 4, case 1);
2. transformations (§4.1.4): each placeholder is replaced by its candidate units (Substr, Split,
   SplitSubstr, TwoCharSplitSubstr) and a skeleton yields the Cartesian product;
3. duplicate removal in a hash set (§4.1.5); a skeleton whose literal occurs in one target only
   is skipped before its product is built (its programs cover one row at most, exact pruning);
4. coverage with the per-row cache of failing units (§4.1.5): a unit whose output is not a
   substring of the row's target can be in no program covering that row. Programs are stored
   in a trie of units, so a unit shared by many programs is applied once per row and a prefix
   that does not match the target prunes every program below it;
5. maximum coverage and the greedy minimal cover (§4.1.6, approximation ratio H(n)), with a
   minimum support; rows only a single-row literal could cover are left uncovered, because a
   literal fallback joins nothing (the paper's "coverage 1.00" counts them, notes §3.7).

Ties are broken by :func:`~lakejoin.transform.units.simplicity_key`, never by hash order.
Sampling (§5.3): with s sampled pairs, a transformation of coverage q is found with probability
1 - (1-q)^s - s q (1-q)^(s-1) (it needs two supporting rows).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from typing import Any, NamedTuple

from lakejoin.transform.units import (
    Literal,
    Program,
    Split,
    SplitSubstr,
    Substr,
    TwoCharSplitSubstr,
    Unit,
    pieces_between,
    program_text,
    shape_key,
)

CST_UNITS = ("Substr", "Split", "SplitSubstr", "TwoCharSplitSubstr")


@dataclass(frozen=True)
class CSTConfig:
    """Parameters of the approach. The defaults are the paper's experimental setting (§6.2) as
    reproduced with the released code (notes/cst.md §4.7): p = 3, at most 3 skeleton blocks,
    placeholders broken at spaces, units {Literal, Substr, Split, SplitSubstr}."""

    max_placeholders: int = 3
    max_blocks: int = 3
    separators: str = " "
    units: tuple[str, ...] = ("Substr", "Split", "SplitSubstr")
    from_end: bool = False  # also emit indices counted from the end (not in the paper)
    literal_variants: bool = True  # each placeholder may also be a literal (the 2^p factor)
    min_support: float = 0.0  # discovery threshold θ_cov, a fraction of the pairs
    join_support: float = 0.05  # θ for joining (§6.5)
    join_with: str = "cover"  # "cover": the greedy cover's programs; "supported": every program >= θ
    sample_confidence: float = 0.999  # §5.3: sample enough pairs to find a θ-coverage program
    max_programs_per_skeleton: int = 20_000  # engineering bound on one Cartesian product
    seed: int = 0
    # improvements beyond the paper (None / False = the paper's behaviour)
    gram_fallback: int | None = None  # unmatched rows retry n-grams down to this size (matching.py)
    constant_share: float | None = None  # text in this share of targets is one block (constant_spans)
    separator_runs: bool = False  # Split also on the run of punctuation/space around a placeholder
    symbol_splits: bool = False  # SplitSubstr splits at space/punctuation only, never at a letter
    sample_targets: bool = True  # False: row matching sees the whole target column (join.py)
    formats: bool = False  # also learn Number, Date and Chars programs (reformat.py), rows paired by value
    short_values: int | None = None  # columns of values this short (mean chars) retry with SHORT_BOUNDS (join.py)
    max_generated: int | None = None  # stop generating programs after this many (rows in sample order)
    max_learn_chars: int | None = None  # pairs with a longer value are left out of learning (join.py)

    def __post_init__(self) -> None:
        unknown = set(self.units) - set(CST_UNITS)
        if unknown:
            raise ValueError(f"unknown CST units {sorted(unknown)}; choose from {CST_UNITS}")
        if self.join_with not in ("cover", "supported"):
            raise ValueError(f"join_with must be 'cover' or 'supported', got {self.join_with!r}")
        if self.max_placeholders < 1 or self.max_blocks < 1:
            raise ValueError("max_placeholders and max_blocks must be at least 1")
        if not 0.0 <= self.min_support <= 1.0 or not 0.0 <= self.join_support <= 1.0:
            raise ValueError("min_support and join_support must lie in [0, 1]")
        if self.constant_share is not None and not 0.0 < self.constant_share <= 1.0:
            raise ValueError(f"constant_share must lie in (0, 1], got {self.constant_share}")


FAITHFUL = CSTConfig()
# The paper's spreadsheet setting: p = 4 placeholders on the short FlashFill values (§6.2). The
# block bound stays the released code's 3, the only value known; 2p + 1 = 9 blocks was tried and
# costs 11 s to over 60 s per table without the improved preset's pruning of candidates.
FAITHFUL_SPREADSHEET = replace(FAITHFUL, max_placeholders=4)
# Improvements the paper lacks: indices counted from the end ("last token", GXJoin-style),
# placeholders broken at space and punctuation as the paper's text says (the code used space
# only), Split on separator runs (" - "), the n-gram fallback for values shorter than n0, and
# constant target text kept as one block, which is what makes P L P L shapes affordable: without
# it one name->email row yields 2e5 programs, the literal domain splitting into one-letter
# placeholders. SplitSubstr splits at symbols only: a letter or digit separator fits the learning
# rows by accident and fails on new ones (notes/cst.md §3.7: SplitSubstr('n', 0, 0, 1) for Substr(0, 1)).
# Only the source column is sampled for row matching: sampling both keeps a true pair with
# probability p_s p_t (0.29 on a 690-row table), and the pairs are sampled again by §5.3 anyway.
IMPROVED = replace(
    FAITHFUL,
    from_end=True,
    separators=" " + string.punctuation,
    separator_runs=True,
    symbol_splits=True,
    gram_fallback=1,
    constant_share=0.5,
    max_programs_per_skeleton=300,
    sample_targets=False,
)
# On the short spreadsheet values the improved preset affords p = 4 and P L P L L P shapes (7 blocks);
# on web values (31 chars on average) p = 3 with 5 blocks took 4.5 s CPU on one table (beatles
# songs) and p = 4 with 7 blocks over 100 s, so the web preset keeps the paper's bounds.
IMPROVED_SPREADSHEET = replace(IMPROVED, max_placeholders=4, max_blocks=7)
# The improved preset with the number, date and character-class units, whose rows are paired by
# value (reformat.py), and the spreadsheet bounds chosen by the data instead of by the caller: on
# columns of short values (the web and spreadsheet benchmarks' average 11-58 and 8-43 characters;
# the bounds' cost grows with the length, see IMPROVED_SPREADSHEET) when the web bounds' cover
# explains under half of the pairs.
# Pairs with values over 200 characters are not learned from (their skeletons and units grow with
# the length: 60 pairs of 1,000-character values ran for minutes); programs still apply to them.
IMPROVED_FORMATS = replace(IMPROVED, formats=True, short_values=20, max_learn_chars=200)
SHORT_BOUNDS: dict[str, Any] = {"max_placeholders": 4, "max_blocks": 7}  # CSTConfig fields (dataclasses.replace)
SHORT_BOUNDS_WORK = 200_000  # programs generated at most in the retry with SHORT_BOUNDS


class Block(NamedTuple):
    """A skeleton block: a placeholder copied from source[start:start+len(text)], or a literal."""

    text: str
    start: int | None  # None = literal


@dataclass
class Learned:
    """One transformation of the cover: its program and the rows of I it covers."""

    program: Program
    rows: list[int]
    gain: int  # rows it added to the cover when the greedy picked it


@dataclass
class CSTResult:
    """The programs CST learned: a cover of the example pairs and every program with enough support."""

    cover: list[Learned]
    supported: list[tuple[Program, int]]  # every program reaching join_support, by coverage
    pairs: int
    stats: dict = field(default_factory=dict)


def required_sample_size(coverage: float, confidence: float) -> int:
    """Smallest s with 1 - (1-q)^s - s q (1-q)^(s-1) >= confidence (§5.3)."""
    if coverage <= 0.0:
        return 0
    if coverage >= 1.0:
        return 2
    q = coverage
    for s in itertools.count(2):
        if 1.0 - (1 - q) ** s - s * q * (1 - q) ** (s - 1) >= confidence:
            return s
    raise AssertionError("unreachable")


# -- skeletons (§4.1.3) ------------------------------------------------------------------------


def _merge_blocks(blocks: Sequence[Block]) -> tuple[Block, ...]:
    merged: list[Block] = []
    for block in blocks:
        if merged and block.start is None and merged[-1].start is None:
            merged[-1] = Block(merged[-1].text + block.text, None)
        else:
            merged.append(block)
    return tuple(merged)


def _within(skeleton: Sequence[Block], config: CSTConfig) -> bool:
    placeholders = sum(block.start is not None for block in skeleton)
    return placeholders <= config.max_placeholders and len(skeleton) <= config.max_blocks


def _joined_size(left: Sequence[Block], option: Block, right: Sequence[Block]) -> tuple[int, int]:
    """(placeholders, blocks) of the merged ``left + option + right``, counted without merging:
    a literal option fuses with a literal end of either neighbour."""
    literal = option.start is None
    placeholders = sum(block.start is not None for block in (*left, *right)) + (not literal)
    fused = literal * ((bool(left) and left[-1].start is None) + (bool(right) and right[0].start is None))
    return placeholders, len(left) + 1 + len(right) - fused


def _occurrences(text: str, part: str) -> list[int]:
    found, pos = [], text.find(part)
    while pos >= 0:
        found.append(pos)
        pos = text.find(part, pos + 1)
    return found


def _segment_skeletons(source: str, segment: str, config: CSTConfig, memo: dict) -> list[tuple[Block, ...]]:
    """Skeletons of one target segment: its longest common substring with the source becomes
    a placeholder (at every source occurrence, and as a literal), the remainders recurse."""
    if not segment:
        return [()]
    if segment in memo:
        return memo[segment]
    match = SequenceMatcher(None, source, segment, autojunk=False).find_longest_match(0, len(source), 0, len(segment))
    if match.size == 0:
        memo[segment] = [(Block(segment, None),)]
        return memo[segment]
    text = segment[match.b : match.b + match.size]
    options = [Block(text, start) for start in _occurrences(source, text)]
    if config.literal_variants:
        options.append(Block(text, None))
    lefts = _segment_skeletons(source, segment[: match.b], config, memo)
    rights = _segment_skeletons(source, segment[match.b + match.size :], config, memo)
    found: dict[tuple[Block, ...], None] = {}
    for left, option, right in itertools.product(lefts, options, rights):
        placeholders, blocks = _joined_size(left, option, right)
        if placeholders <= config.max_placeholders and blocks <= config.max_blocks:
            found[_merge_blocks((*left, option, *right))] = None
    memo[segment] = list(found)
    return memo[segment]


def _split_block(block: Block, separators: str) -> list[Block]:
    """Lemma 4 case 1: separators inside a placeholder become literals between placeholders."""
    if block.start is None:
        return [block]
    text, run_start, blocks = block.text, 0, []
    for offset in range(len(text) + 1):
        if offset < len(text) and text[offset] not in separators:
            continue
        if offset > run_start:
            blocks.append(Block(text[run_start:offset], block.start + run_start))
        if offset < len(text):
            blocks.append(Block(text[offset], None))
        run_start = offset + 1
    return blocks


def _split_variants(skeleton: Sequence[Block], separators: str) -> list[tuple[Block, ...]]:
    """Each placeholder broken alone, and all of them at once ("consider both the placeholders
    before and after the split", §4.1.3)."""
    pieces = [_split_block(block, separators) for block in skeleton]
    variants = [
        _merge_blocks([b for j, part in enumerate(pieces) for b in (part if j == i else [skeleton[j]])])
        for i in range(len(skeleton))
        if len(pieces[i]) > 1
    ]
    variants.append(_merge_blocks([b for part in pieces for b in part]))
    return variants


CONSTANT_GRAM = 3  # n-gram size that marks constant target text (constant_spans)


def frequent_grams(targets: Sequence[str], share: float) -> frozenset[str]:
    """The CONSTANT_GRAM-grams found in at least ``share`` of the targets (and in two)."""
    rows: dict[str, int] = {}
    for target in targets:
        for gram in {target[i : i + CONSTANT_GRAM] for i in range(len(target) - CONSTANT_GRAM + 1)}:
            rows[gram] = rows.get(gram, 0) + 1
    needed = max(2, math.ceil(share * len(targets)))
    return frozenset(gram for gram, count in rows.items() if count >= needed)


def constant_spans(target: str, frequent: frozenset[str]) -> list[tuple[int, int]]:
    """Maximal target spans covered by frequent grams: text shared by many targets (an e-mail
    domain, a URL prefix) is a constant of the transformation. Lemma 4 case 2 cuts
    maximal placeholders into shorter ones; inside such text the cut only produces one-letter
    placeholders that copy the constant's letters from anywhere in the source (an improvement,
    not in the paper: the span stays one block, a literal or a whole placeholder)."""
    marked = [False] * len(target)
    for i in range(len(target) - CONSTANT_GRAM + 1):
        if target[i : i + CONSTANT_GRAM] in frequent:
            marked[i : i + CONSTANT_GRAM] = [True] * CONSTANT_GRAM
    spans, start = [], None
    for i, flag in enumerate([*marked, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _extend(
    partials: list[tuple[Block, ...]], options: list[tuple[Block, ...]], config: CSTConfig
) -> list[tuple[Block, ...]]:
    """Skeletons of consecutive target parts, concatenated, within the bounds."""
    joined: dict[tuple[Block, ...], None] = {}
    for left, right in itertools.product(partials, options):
        skeleton = _merge_blocks((*left, *right))
        if _within(skeleton, config):
            joined[skeleton] = None
    return list(joined)


def _maximal_skeletons(
    source: str, target: str, config: CSTConfig, spans: Sequence[tuple[int, int]]
) -> list[tuple[Block, ...]]:
    """Maximal-placeholder skeletons; each constant span is one block, the rest recurses."""
    memo: dict = {}
    partials: list[tuple[Block, ...]] = [()]
    cut = 0
    for start, end in [*spans, (len(target), len(target))]:
        partials = _extend(partials, _segment_skeletons(source, target[cut:start], config, memo), config)
        if start < end:
            text = target[start:end]
            options: list[tuple[Block, ...]] = [(Block(text, at),) for at in _occurrences(source, text)]
            options.append((Block(text, None),))
            partials = _extend(partials, options, config)
        cut = end
    return partials


def skeletons(
    source: str, target: str, config: CSTConfig, spans: Sequence[tuple[int, int]] = ()
) -> list[tuple[Block, ...]]:
    """All skeletons of a row pair: the whole-literal one, the maximal-placeholder ones and
    their separator-split versions (the paper's "Victor Robbie Kasumba" example, §4.1.3).
    ``spans``: constant target text kept as one block (:func:`constant_spans`)."""
    found: dict[tuple[Block, ...], None] = {(Block(target, None),): None}
    maximal = (
        _maximal_skeletons(source, target, config, spans) if spans else _segment_skeletons(source, target, config, {})
    )
    for skeleton in maximal:
        found[skeleton] = None
    for skeleton in maximal:
        for split in _split_variants(skeleton, config.separators):
            if _within(split, config):
                found[split] = None
    return list(found)


# -- candidate units (§4.1.4) ------------------------------------------------------------------


def _index_variants(index: int, count: int, from_end: bool) -> list[int]:
    return [index, index - count] if from_end else [index]


def _separator_runs(source: str, start: int, end: int) -> list[str]:
    """The runs of two or more non-alphanumeric characters just before and just after
    ``source[start:end]`` (" - ", ", "): Split on such a run keeps the piece free of the
    spaces that a one-character Split leaves around it (an improvement, not in the paper)."""
    before = len(source[:start]) - len(source[:start].rstrip(_NON_WORD))
    after = len(source[end:]) - len(source[end:].lstrip(_NON_WORD))
    runs = [source[start - before : start], source[end : end + after]]
    return [run for run in runs if len(run) >= 2]


_NON_WORD = string.punctuation + " "


def candidate_units(source: str, text: str, start: int, config: CSTConfig) -> list[Unit]:
    """Units that produce ``text`` from ``source`` for a placeholder matched at ``start``."""
    end = start + len(text)
    units: list[Unit] = []
    if "Substr" in config.units:
        units.append(Substr(start, end))
        if config.from_end:
            units.append(Substr(start - len(source), end - len(source)))
    if "Split" in config.units:
        neighbours = [source[pos] for pos in (start - 1, end) if 0 <= pos < len(source)]
        if config.separator_runs:
            neighbours += _separator_runs(source, start, end)
        for sep in dict.fromkeys(neighbours):
            if sep in text:
                continue
            pieces = source.split(sep)
            index = source.count(sep, 0, start)
            if pieces[index] == text:
                units.extend(Split(sep, i) for i in _index_variants(index, len(pieces), config.from_end))
    if "SplitSubstr" in config.units:
        for sep in dict.fromkeys(source):
            if sep in text or (config.symbol_splits and sep not in _NON_WORD):
                continue
            pieces = source.split(sep)
            for index, piece in enumerate(pieces):
                if len(piece) <= len(text):
                    continue
                for offset in _occurrences(piece, text):
                    for i in _index_variants(index, len(pieces), config.from_end):
                        units.append(SplitSubstr(sep, i, offset, offset + len(text)))
    if "TwoCharSplitSubstr" in config.units:
        for left in dict.fromkeys(source[:start]):
            for right in dict.fromkeys(source[end:]):
                if left == right or left in text or right in text:
                    continue
                pieces = pieces_between(source, left, right)
                for index, piece in enumerate(pieces):
                    for offset in _occurrences(piece, text):
                        units.append(TwoCharSplitSubstr(left, right, index, offset, offset + len(text)))
    return units


def _bounded_product(choices: list[list[Unit]], limit: int) -> itertools.product:
    """Cartesian product, trimming the longest candidate list (its least simple units go
    first) until the product fits ``limit``."""
    choices = [list(options) for options in choices]
    while math.prod(len(options) for options in choices) > limit:
        longest = max(range(len(choices)), key=lambda i: len(choices[i]))
        choices[longest] = choices[longest][: max(1, len(choices[longest]) // 2)]
    return itertools.product(*choices)


def generate_programs(
    source: str,
    target: str,
    config: CSTConfig,
    programs: dict,
    stats: dict,
    shared: Callable[[str], bool] | None = None,
    frequent: frozenset[str] = frozenset(),
) -> None:
    """Add the transformations of every skeleton of one row to ``programs`` (a hash set
    realised as an insertion-ordered dict, so iteration order is deterministic).

    ``shared(text)`` tells whether a literal occurs in at least two targets of I. A program
    covers a row only if each of its literals is a substring of that row's target, so a
    skeleton with an unshared literal yields programs covering one row at most, which neither
    the cover nor the join keeps (support >= 2 rows): it is skipped before its Cartesian
    product is built. The pruning is exact, like the failing-unit cache (§4.1.5).
    ``frequent``: the grams marking constant target text (:func:`frequent_grams`)."""
    unit_cache: dict[tuple[str, int], list[Unit]] = {}
    for skeleton in skeletons(source, target, config, constant_spans(target, frequent) if frequent else ()):
        if shared is not None and not all(block.start is not None or shared(block.text) for block in skeleton):
            stats["pruned_skeletons"] = stats.get("pruned_skeletons", 0) + 1
            continue
        choices: list[list[Unit]] = []
        for block in skeleton:
            if block.start is None:
                choices.append([Literal(block.text)])
                continue
            key = (block.text, block.start)
            if key not in unit_cache:
                unit_cache[key] = sorted(candidate_units(source, block.text, block.start, config), key=_unit_order)
            if not unit_cache[key]:
                break
            choices.append(unit_cache[key])
        else:
            # placeholder units are never literals and skeleton literals are merged, so each
            # combination is already in the one-spelling form of merge_literals
            for combo in _bounded_product(choices, config.max_programs_per_skeleton):
                stats["generated"] += 1
                programs.setdefault(combo, None)


def _unit_order(unit: Unit) -> tuple:
    return (unit.COST, unit.RANK, tuple(abs(v) if isinstance(v, int) else 0 for v in unit), repr(unit))


# -- coverage with the per-row cache of failing units (§4.1.5) ----------------------------------

_MISSING: Any = object()  # Any: a cache lookup's result is then the cached str | None to the type checker


def _build_trie(programs: Sequence[Program]) -> tuple[dict, list]:
    root: tuple[dict, list] = ({}, [])
    for pid, program in enumerate(programs):
        node = root
        for unit in program:
            node = node[0].setdefault(unit, ({}, []))
        node[1].append(pid)
    return root


def _covered_by_row(trie: tuple[dict, list], source: str, target: str, stats: dict) -> list[int]:
    """Ids of the programs p with p(source) == target."""
    failing: dict[Unit, str | None] = {}  # the row's cache: unit -> output, None = cannot cover
    covered: list[int] = []
    stack = [(trie, 0)]
    while stack:
        (children, ends), pos = stack.pop()
        if pos == len(target):
            covered.extend(ends)
        for unit, child in children.items():
            out = failing.get(unit, _MISSING)
            if out is _MISSING:
                stats["applied"] += 1
                out = unit.apply(source)
                if out is not None and out not in target:
                    out = None
                failing[unit] = out
            elif out is None:
                stats["cache_hits"] += 1
            if out is not None and target.startswith(out, pos):
                stack.append((child, pos + len(out)))
    return covered


# -- selection (§4.1.6) -------------------------------------------------------------------------


def greedy_cover(programs: Sequence[Program], coverage: Sequence[int], min_rows: int) -> list[Learned]:
    """Greedy set cover (lazy, with a heap): pick the program adding most uncovered rows, ties
    by simplicity. Programs covering fewer than ``min_rows`` rows never enter. The heap holds
    :func:`shape_key`; texts (the last tie-break) are built only for the programs tied at the top."""
    heap = [
        (-mask.bit_count(), shape_key(programs[pid]), pid)
        for pid, mask in enumerate(coverage)
        if mask.bit_count() >= min_rows
    ]
    heapq.heapify(heap)
    covered, cover = 0, []
    while heap:
        tied = _pop_best(heap, coverage, covered, min_rows)
        if not tied:
            break
        pid = min(tied, key=lambda pid: program_text(programs[pid]))
        for other in tied:
            if other != pid:
                heapq.heappush(heap, (-(coverage[other] & ~covered).bit_count(), shape_key(programs[other]), other))
        gain = (coverage[pid] & ~covered).bit_count()
        covered |= coverage[pid]
        rows = [row for row in range(coverage[pid].bit_length()) if coverage[pid] >> row & 1]
        cover.append(Learned(programs[pid], rows, gain))
    return cover


def _pop_best(heap: list, coverage: Sequence[int], covered: int, min_rows: int) -> list[int]:
    """Pop every program whose true (gain, shape) equals the best one; stale entries (their
    gain shrank since they were pushed) are re-queued with the true gain."""
    tied: list[int] = []
    best = None
    while heap and (best is None or heap[0][:2] == best):
        neg_gain, shape, pid = heapq.heappop(heap)
        gain = (coverage[pid] & ~covered).bit_count()
        if gain < min_rows:
            continue
        if -gain != neg_gain:
            heapq.heappush(heap, (-gain, shape, pid))
        elif best is None or (neg_gain, shape) == best:
            best = (neg_gain, shape)
            tied.append(pid)
    return tied


def _simplest_first(items: list[tuple[Program, int]]) -> list[tuple[Program, int]]:
    """Sort (program, coverage) by coverage then :func:`simplicity_key`, building the texts
    only inside runs tied on coverage and shape."""
    items = sorted(items, key=lambda item: (-item[1], shape_key(item[0])))
    ordered: list[tuple[Program, int]] = []
    for _, group in itertools.groupby(items, key=lambda item: (-item[1], shape_key(item[0]))):
        run = list(group)
        ordered.extend(sorted(run, key=lambda item: program_text(item[0])) if len(run) > 1 else run)
    return ordered


def _shared_literal_test(targets: Sequence[str]) -> Callable[[str], bool]:
    """``text -> True`` iff ``text`` is a substring of at least two of ``targets`` (memoised)."""
    memo: dict[str, bool] = {}

    def shared(text: str) -> bool:
        if text not in memo:
            memo[text] = sum(1 for target in targets if text in target) >= 2
        return memo[text]

    return shared


def learn(pairs: Sequence[tuple[str, str]], config: CSTConfig = FAITHFUL) -> CSTResult:
    """Transformations covering the (source, target) pairs, greedy-cover order (the first is
    the maximum-coverage transformation)."""
    stats = {"generated": 0, "applied": 0, "cache_hits": 0, "sampled": False}
    pairs = list(pairs)
    sample_size = max(required_sample_size(config.join_support, config.sample_confidence), 2)
    if config.join_support > 0 and len(pairs) > sample_size:
        chosen = random.Random(config.seed).sample(range(len(pairs)), sample_size)
        pairs = [pairs[i] for i in sorted(chosen)]
        stats["sampled"] = True
    candidates: dict[Program, None] = {}
    targets = [target for _, target in pairs]
    shared = _shared_literal_test(targets)
    frequent = frequent_grams(targets, config.constant_share) if config.constant_share else frozenset()
    for source, target in pairs:
        if config.max_generated is not None and stats["generated"] >= config.max_generated:
            stats["truncated"] = True  # a work bound, not a time bound: the result stays deterministic
            break
        generate_programs(source, target, config, candidates, stats, shared, frequent)
    programs = list(candidates)
    stats["distinct"] = len(programs)
    trie = _build_trie(programs)
    coverage = [0] * len(programs)
    for row, (source, target) in enumerate(pairs):
        for pid in _covered_by_row(trie, source, target, stats):
            coverage[pid] |= 1 << row
    min_rows = max(2, math.ceil(config.min_support * len(pairs)))
    join_rows = max(min_rows, math.ceil(config.join_support * len(pairs)))
    supported = _simplest_first(
        [(programs[pid], mask.bit_count()) for pid, mask in enumerate(coverage) if mask.bit_count() >= join_rows]
    )
    return CSTResult(greedy_cover(programs, coverage, min_rows), supported, len(pairs), stats)
