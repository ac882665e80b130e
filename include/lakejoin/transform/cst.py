"""Discovering covering transformations (Dargahi Nobari & Rafiei, "Efficiently Transforming
Tables for Joinability", ICDE 2022; notes/cst.md). The paper names no method; we call it CST.

Given row pairs I = {(s, g)} (given, or found by :mod:`lakejoin.transform.matching`):

1. placeholders and skeletons (§4.1.1-4.1.3): the target is cut into blocks; a placeholder is a
   target substring that also occurs in the source (maximal length, every source occurrence),
   anything else is a literal. Each placeholder may also be kept as a literal (the 2^p variants),
   and placeholders are broken at common separators (Lemma 4, case 1);
2. transformations (§4.1.4): each placeholder is replaced by its candidate units (Substr, Split,
   SplitSubstr, TwoCharSplitSubstr) and a skeleton yields the Cartesian product;
3. duplicate removal in a hash set (§4.1.5);
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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from typing import NamedTuple

from lakejoin.transform.units import (
    Literal,
    Program,
    Split,
    SplitSubstr,
    Substr,
    TwoCharSplitSubstr,
    Unit,
    merge_literals,
    pieces_between,
    simplicity_key,
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


FAITHFUL = CSTConfig()
# Improvements the paper lacks (GXJoin-style): indices counted from the end ("last token"), and
# placeholders broken at space and punctuation as the paper's text says (the code used space
# only). More skeleton blocks were tried and rejected: with 5 blocks one name->email row already
# yields 2e5 programs, because the literal domain splits into one-letter placeholders.
IMPROVED = replace(FAITHFUL, from_end=True, separators=" " + string.punctuation)


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
    match = SequenceMatcher(None, source, segment, autojunk=False).find_longest_match(
        0, len(source), 0, len(segment)
    )
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
        skeleton = _merge_blocks((*left, option, *right))
        if _within(skeleton, config):  # block counts only grow when parts are concatenated
            found[skeleton] = None
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
        for i in range(len(skeleton)) if len(pieces[i]) > 1
    ]
    variants.append(_merge_blocks([b for part in pieces for b in part]))
    return variants


def skeletons(source: str, target: str, config: CSTConfig) -> list[tuple[Block, ...]]:
    """All skeletons of a row pair: the whole-literal one, the maximal-placeholder ones and
    their separator-split versions (the paper's "Victor Robbie Kasumba" example, §4.1.3)."""
    found: dict[tuple[Block, ...], None] = {(Block(target, None),): None}
    maximal = _segment_skeletons(source, target, config, {})
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
        for sep in dict.fromkeys(neighbours):
            if sep in text:
                continue
            pieces = source.split(sep)
            index = source.count(sep, 0, start)
            if pieces[index] == text:
                units.extend(Split(sep, i) for i in _index_variants(index, len(pieces), config.from_end))
    if "SplitSubstr" in config.units:
        for sep in dict.fromkeys(source):
            if sep in text:
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


def generate_programs(source: str, target: str, config: CSTConfig, programs: dict, stats: dict) -> None:
    """Add the transformations of every skeleton of one row to ``programs`` (a hash set
    realised as an insertion-ordered dict, so iteration order is deterministic)."""
    unit_cache: dict[tuple[str, int], list[Unit]] = {}
    for skeleton in skeletons(source, target, config):
        choices = []
        for block in skeleton:
            if block.start is None:
                choices.append([Literal(block.text)])
                continue
            key = (block.text, block.start)
            if key not in unit_cache:
                unit_cache[key] = sorted(
                    candidate_units(source, block.text, block.start, config), key=_unit_order
                )
            if not unit_cache[key]:
                break
            choices.append(unit_cache[key])
        else:
            for combo in _bounded_product(choices, config.max_programs_per_skeleton):
                stats["generated"] += 1
                programs.setdefault(merge_literals(combo), None)


def _unit_order(unit: Unit) -> tuple:
    return (unit.COST, unit.RANK, tuple(abs(v) if isinstance(v, int) else 0 for v in unit), repr(unit))


# -- coverage with the per-row cache of failing units (§4.1.5) ----------------------------------

_MISSING = object()


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
    by simplicity. Programs covering fewer than ``min_rows`` rows never enter."""
    heap = [
        (-mask.bit_count(), simplicity_key(programs[pid]), pid)
        for pid, mask in enumerate(coverage)
        if mask.bit_count() >= min_rows
    ]
    heapq.heapify(heap)
    covered, cover = 0, []
    while heap:
        _, key, pid = heapq.heappop(heap)
        gain = (coverage[pid] & ~covered).bit_count()
        if gain < min_rows:
            continue
        if heap and (-gain, key) > heap[0][:2]:
            heapq.heappush(heap, (-gain, key, pid))  # stale gain: re-queue with the true one
            continue
        covered |= coverage[pid]
        rows = [row for row in range(coverage[pid].bit_length()) if coverage[pid] >> row & 1]
        cover.append(Learned(programs[pid], rows, gain))
    return cover


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
    for source, target in pairs:
        generate_programs(source, target, config, candidates, stats)
    programs = list(candidates)
    stats["distinct"] = len(programs)
    trie = _build_trie(programs)
    coverage = [0] * len(programs)
    for row, (source, target) in enumerate(pairs):
        for pid in _covered_by_row(trie, source, target, stats):
            coverage[pid] |= 1 << row
    min_rows = max(2, math.ceil(config.min_support * len(pairs)))
    join_rows = max(min_rows, math.ceil(config.join_support * len(pairs)))
    supported = sorted(
        ((programs[pid], mask.bit_count()) for pid, mask in enumerate(coverage) if mask.bit_count() >= join_rows),
        key=lambda item: (-item[1], simplicity_key(item[0])),
    )
    return CSTResult(greedy_cover(programs, coverage, min_rows), supported, len(pairs), stats)
