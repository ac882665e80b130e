"""Transformation-aware discovery (issue 19; the thesis's Ch. 4 proposal): the lake columns a query
column joins with only after a transformation, each with the program that makes it join.

1. *Candidates* come from the q-gram family (``lakejoin.index.qgram``): the columns sharing the
   most sub-value tokens with the query, exact top-N by JOSIE over token sets (the caller asks
   every shard and merges, ``lakejoin.query.engine``).
2. *Learning*, per candidate in candidate order: the candidate's values (at most
   :data:`EVIDENCE_VALUES`, bottom-k by hash) are indexed by token; the query's distinct values
   (its first :data:`EVIDENCE_VALUES` in hash order) that share a token with one of them are the
   query sample (at most ``sample``),
   and for each the :data:`PARTNERS` candidate values sharing the most (by inverse frequency)
   are the target sample. The learner (``lakejoin.transform.learn_and_join``, the default
   method unless ``learner`` names another) learns on these two samples alone, both
   directions; its own row pairing pairs them. Values over :data:`LEARN_CHARS` characters are
   left out of the samples, and CST does not retry with its wider bounds (``_learning_bounds``).
3. *Verification* on the full columns: the used programs are applied to every query value
   (forward) or every candidate value (backward), and the query rows whose normalized value
   then equals a candidate value are counted (at most :data:`VERIFY_VALUES` distinct values a
   side, the first by hash, beyond which the counts are on those). A candidate joining fewer
   than :data:`MIN_JOINED` one-to-one pairs (below) is dropped.
4. *Ranking* by ``pairs``, the joined (query value, candidate value) pairs that are one to one
   (neither value joined to another), then the query rows joined, then ``column_id``. A
   degenerate program that maps many values of one side onto a few of the other (a constant
   date prefix, the last two letters of product codes) joins many rows but few such pairs.

Time is bounded: a candidate's learning by its sample sizes (at most ``sample`` query values and
``PARTNERS`` times as many candidate values, each at most 200 characters), and the whole search
by ``budget`` seconds, after which no further candidate is started (the answer says how many
were left). No candidate, or none with a program joining enough rows, is the answer "no
transformation found", not an error.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakejoin.index.qgram.tokens import bottom_k, value_tokens
from lakejoin.normalize import normalize_value
from lakejoin.transform.cst import CSTConfig
from lakejoin.transform.join import DEFAULT_METHOD, MAX_VALUE_LENGTH, METHODS, learn_and_join
from lakejoin.transform.units import Program, normalized_output, parse_program

DEFAULT_CANDIDATES = 20  # candidate columns learned per query (top-N by token overlap)
DEFAULT_SAMPLE = 40  # query values a candidate's program is learned from
DEFAULT_BUDGET = 30.0  # seconds for the whole search; no candidate starts after it
EVIDENCE_VALUES = 5_000  # candidate values indexed by token to find the target sample
PARTNERS = 2  # candidate values sampled per query value
LEARN_CHARS = 64  # longer values are not learned from: join keys are short, and CST's work grows with length
VERIFY_VALUES = 100_000  # distinct values a side the verification applies programs to
MIN_JOINED = 2  # one-to-one pairs a kept candidate must join
SAMPLE_PAIRS = 5
NO_TRANSFORMATION = "no transformation found"


@dataclass(frozen=True)
class DiscoveryParams:
    """Transformation discovery's bounds: candidate columns, sample size, time budget and learner."""

    candidates: int = DEFAULT_CANDIDATES
    sample: int = DEFAULT_SAMPLE
    budget: float = DEFAULT_BUDGET
    learner: str = DEFAULT_METHOD

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= 200:
            raise ValueError(f"candidates must be in [1, 200], got {self.candidates}")
        if not 2 <= self.sample <= 1_000:
            raise ValueError(f"sample must be in [2, 1000], got {self.sample}")
        if not (0 < self.budget <= 600 and math.isfinite(self.budget)):
            raise ValueError(f"budget must be in (0, 600] seconds, got {self.budget}")
        if self.learner not in METHODS:
            raise ValueError(f"unknown learner {self.learner!r}; choose from {sorted(METHODS)}")


class QueryColumn:
    """The query column once: its distinct normalized values (first raw spelling, rows each) and
    each value's tokens."""

    def __init__(self, values: Sequence[object]) -> None:
        self.rows: Counter[str] = Counter()
        self.raw: dict[str, str] = {}
        for raw in values:
            if raw is None:
                continue
            if not isinstance(raw, str):
                raise ValueError(f"query values must be text, got {type(raw).__name__}: {raw!r:.60}")
            value = normalize_value(raw)
            if value is not None:
                self.rows[value] += 1
                self.raw.setdefault(value, raw)
        if not self.rows:
            raise ValueError("the query column has no non-empty values")
        self.order = bottom_k(self.rows, len(self.rows))  # hash order: the sample's order
        self._tokens: dict[str, set[str]] = {}

    def tokens(self, value: str) -> set[str]:
        """``value``'s tokens, computed once for every candidate."""
        found = self._tokens.get(value)
        if found is None:
            found = self._tokens[value] = value_tokens(value)
        return found

    @property
    def total_rows(self) -> int:
        """The query column's non-empty values, repeats counted."""
        return sum(self.rows.values())


def discover(
    query_values: Sequence[object],
    candidates: Sequence[Mapping[str, Any]],
    values_of: Callable[[Mapping[str, Any]], Sequence[object]],
    *,
    k: int,
    params: DiscoveryParams = DiscoveryParams(),
) -> dict[str, Any]:
    """Learn and verify a transformation for each candidate (``column_id`` and the q-gram
    ``overlap``; ``values_of(candidate)`` gives its column's raw values); the ``k`` best as
    ``{"results", "candidates", "learned", "left_for_budget", "seconds"}`` (``message`` when
    there is no result). Each result: ``column_id``, ``overlap``, ``matched`` (query rows
    joined), ``joinability`` (their share of the query's non-empty rows), ``pairs`` (the rank
    key), ``joined_values`` and ``joined_targets`` (distinct values of each side joined),
    ``program`` (the first used), ``programs``, ``direction``, ``sample_pairs`` and
    ``learning`` (sample sizes and seconds)."""
    started = time.perf_counter()
    query = QueryColumn(query_values)
    found, learned = [], 0
    left = 0
    for index, candidate in enumerate(candidates[: params.candidates]):
        if time.perf_counter() - started > params.budget:
            left = len(candidates[: params.candidates]) - index
            break
        learned += 1
        result = _learn_and_verify(query, candidate, values_of(candidate), params)
        if result is not None:
            found.append(result)
    found.sort(key=lambda r: (-r["pairs"], -r["matched"], r["column_id"]))
    answer: dict[str, Any] = {
        "results": found[:k],
        "candidates": len(candidates[: params.candidates]),
        "learned": learned,
        "left_for_budget": left,
        "seconds": round(time.perf_counter() - started, 4),
    }
    if not found:
        answer["message"] = NO_TRANSFORMATION
    return answer


def _learn_and_verify(
    query: QueryColumn, candidate: Mapping[str, Any], raw_values: Sequence[object], params: DiscoveryParams
) -> dict[str, Any] | None:
    started = time.perf_counter()
    target = _target_column(raw_values)
    if not target:
        return None
    query_sample, target_sample = _samples(query, target, params.sample)
    if len(query_sample) < MIN_JOINED:
        return None
    learned = learn_and_join(
        [query.raw[v] for v in query_sample],
        [target[v] for v in target_sample],
        method=params.learner,
        **_learning_bounds(params.learner),
    )
    programs = [t["program"] for t in learned["transformations"] if t["used"]]
    if not programs:
        return None
    pairs = _verify(query, target, [parse_program(p) for p in programs], learned["direction"])
    one_to_one = _one_to_one(pairs)
    if one_to_one < MIN_JOINED:
        return None
    joined = dict(pairs)  # query value -> a candidate value it joins
    rows = sum(query.rows[v] for v in joined)
    return {
        "column_id": candidate["column_id"],
        **({"dataset_id": candidate["dataset_id"]} if "dataset_id" in candidate else {}),
        "overlap": candidate.get("overlap"),
        "matched": rows,
        "joinability": round(rows / query.total_rows, 6),
        "joinability_exact": True,
        "pairs": one_to_one,
        "joined_values": len(joined),
        "joined_targets": len({t for _, t in pairs}),
        "program": programs[0],
        "programs": programs,
        "direction": learned["direction"],
        "sample_pairs": [[query.raw[q], target[c]] for q, c in list(joined.items())[:SAMPLE_PAIRS]],
        "learning": {
            "query_sample": len(query_sample),
            "target_sample": len(target_sample),
            "seconds": round(time.perf_counter() - started, 4),
        },
    }


def _learning_bounds(learner: str) -> dict[str, Any]:
    """CST's settings for learning on a candidate: no retry with the wider bounds on short values
    (most candidates are not partners, and on those the retry is where CST's time goes: a 73-value
    query took 5 s on a country-name column) and no pair over :data:`LEARN_CHARS`."""
    config = METHODS[learner]
    return {"short_values": None, "max_learn_chars": LEARN_CHARS} if isinstance(config, CSTConfig) else {}


def _target_column(raw_values: Sequence[object]) -> dict[str, str]:
    """A candidate's distinct normalized values -> a raw spelling (non-text cells as text)."""
    target: dict[str, str] = {}
    for raw in raw_values:
        if raw is None:
            continue
        value = normalize_value(raw)
        if value is not None and value not in target:
            target[value] = str(raw)
    return target


def _samples(query: QueryColumn, target: Mapping[str, str], size: int) -> tuple[list[str], list[str]]:
    """The query values with token evidence in the candidate (hash order, at most ``size``) and,
    for each, the candidate values sharing the most of its tokens, weighted by inverse frequency."""
    postings: dict[str, list[str]] = defaultdict(list)
    for value in bottom_k((v for v in target if len(v) <= LEARN_CHARS), EVIDENCE_VALUES):
        for token in value_tokens(value):
            postings[token].append(value)
    query_sample: list[str] = []
    target_sample: dict[str, None] = {}
    for value in query.order[:EVIDENCE_VALUES]:
        if len(query_sample) >= size:
            break
        if len(value) > LEARN_CHARS:
            continue
        scores: dict[str, float] = defaultdict(float)
        for token in query.tokens(value):
            partners = postings.get(token)
            if partners:
                for partner in partners:
                    scores[partner] += 1.0 / len(partners)
        if scores:
            query_sample.append(value)
            for partner, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:PARTNERS]:
                target_sample[partner] = None
    return query_sample, list(target_sample)


def _verify(
    query: QueryColumn, target: Mapping[str, str], programs: list[Program], direction: str
) -> list[tuple[str, str]]:
    """The (query value, candidate value) pairs the programs join, normalized, in query order:
    forward, each query value with the first output of a program that is a candidate value;
    backward, each candidate value with every program output that is a query value."""
    queried = [v for v in query.order[:VERIFY_VALUES] if len(v) <= MAX_VALUE_LENGTH]
    targets = (
        bottom_k((v for v in target if len(v) <= MAX_VALUE_LENGTH), VERIFY_VALUES)
        if len(target) > VERIFY_VALUES
        else [v for v in target if len(v) <= MAX_VALUE_LENGTH]
    )
    if direction == "forward":
        in_target = set(targets)
        pairs = []
        for value in queried:
            out = next(
                (o for program in programs if (o := normalized_output(program, value)) is not None and o in in_target),
                None,
            )
            if out is not None:
                pairs.append((value, out))
        return pairs
    in_query = set(queried)
    reached: dict[str, list[str]] = defaultdict(list)
    for value in targets:
        for out in {
            o for program in programs if (o := normalized_output(program, value)) is not None and o in in_query
        }:
            reached[out].append(value)
    return [(value, found) for value in queried for found in reached.get(value, ())]


def _one_to_one(pairs: list[tuple[str, str]]) -> int:
    """The pairs whose query value and candidate value appear in no other pair."""
    queries, targets = Counter(q for q, _ in pairs), Counter(t for _, t in pairs)
    return sum(1 for q, t in pairs if queries[q] == 1 and targets[t] == 1)
