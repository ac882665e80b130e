"""The semantic-join evaluation (tests/benchmarks/eval_semantic_join.py) measures what it says.

On a small slice of its real labelled lake (3 country-name sources, both airport-name sources,
a few distractors, 8 queries; the ``char-ngram`` model, so no large model loads): JOSIE's
containment equals the brute-force set overlap, PEXESO at τ = 0 is exactly the equi-join,
PEXESO at τ > 0 equals a brute-force distance join, and the scores count what they claim on a
hand-made lake.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

MODEL = "char-ngram"
TAU = 0.15


def _load_eval():
    path = Path(__file__).parents[1] / "benchmarks" / "eval_semantic_join.py"
    spec = importlib.util.spec_from_file_location("eval_semantic_join", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


ev = _load_eval()


@pytest.fixture(scope="module")
def lake():
    lake = ev.build_lake(3, 60)
    lake.queries = [q for q in lake.queries if lake.names[q].endswith((":Europe", ":Asia", ":America/Denver"))]
    return lake


@pytest.fixture(scope="module")
def cache(lake):
    return ev.embeddings(lake, MODEL)


@pytest.fixture(scope="module")
def searcher(lake, cache):
    return ev.pexeso_index(lake, cache, MODEL)


@pytest.fixture(scope="module")
def equi(lake):
    return ev.equi_join(lake)


def _matched_sets(matches) -> dict:
    return {pair: set(m) for pair, m in matches.matched.items()}


def test_labels_come_from_the_sources_codes(lake):
    assert [lake.domains[q] for q in lake.queries].count("countries") == 6  # 3 sources x 2 regions
    assert [lake.domains[q] for q in lake.queries].count("airports") == 2  # 2 sources x 1 region
    assert "distractor" in lake.domains, "the lake must hold non-country columns"
    regions = {"countries": ev.iso_regions(), "airports": ev.airport_sources()[1]}
    for c, codes in enumerate(lake.codes):
        if lake.domains[c] == "distractor":
            assert not codes
        else:  # every value has a code, all codes from the column's region
            assert set(codes) == set(lake.columns[c])
            region = lake.names[c].split(":")[1]
            assert {regions[lake.domains[c]][code] for code in codes.values()} == {region}


def test_josie_finds_exactly_the_brute_force_overlaps(lake, equi):
    expected = {
        (q, c): set(lake.columns[q]) & set(lake.columns[c])
        for q in lake.queries
        for c in range(len(lake.columns))
        if c != q and lake.overlap(q, c) > 0
    }
    assert _matched_sets(equi) == expected


def test_pexeso_at_tau_zero_is_the_equi_join(lake, cache, searcher, equi):
    vectors = np.stack(list(cache.values()))
    assert len(np.unique(vectors, axis=0)) == len(vectors), "precondition: distinct values, distinct vectors"
    exact = ev.semantic_join(lake, searcher, cache, MODEL, 0.0)
    assert _matched_sets(exact) == _matched_sets(equi)
    for T in (0.5, 0.8, 0.9):
        assert exact.found(lake, T) == equi.found(lake, T)


def test_pexeso_equals_a_brute_force_distance_join(lake, cache, searcher, equi):
    radius = 2 * TAU  # l2-unit: τ is a fraction of the maximum distance 2
    expected = {}
    for q in lake.queries:
        query = ev.vectors_of(lake.columns[q], cache).astype(np.float64)
        for c in range(len(lake.columns)):
            if c == q:
                continue
            target = ev.vectors_of(lake.columns[c], cache).astype(np.float64)
            nearest = np.sqrt(((query[:, None, :] - target[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
            assert not np.any(np.abs(nearest - radius) < 1e-6), "precondition: no distance on the border"
            if np.any(nearest <= radius):
                expected[q, c] = {v for v, d in zip(lake.columns[q], nearest) if d <= radius}
    semantic = ev.semantic_join(lake, searcher, cache, MODEL, TAU)
    assert _matched_sets(semantic) == expected
    for q, c in semantic.matched:  # each reported pair really is within τ
        for a, b in semantic.matched[q, c].items():
            assert np.linalg.norm(cache[a].astype(np.float64) - cache[b]) <= radius + 1e-6
    for T in (0.5, 0.8, 0.9):  # exact matches are within every τ: PEXESO finds all equi-join finds
        assert semantic.found(lake, T) >= equi.found(lake, T)


def test_scores_count_what_they_claim():
    lake = ev.LabelledLake()
    q = lake.add("a:Asia", ["viet nam", "korea, rep.", "japan"], {"viet nam": "VN", "korea, rep.": "KR", "japan": "JP"})
    s = lake.add("b:Asia", ["vietnam", "south korea", "japan"], {"vietnam": "VN", "south korea": "KR", "japan": "JP"})
    d = lake.add("states", ["georgia", "vermont"])
    lake.queries = [q]
    matches = ev.Matches(
        "X", "m", 0.1, {(q, s): {"viet nam": "vietnam", "japan": "japan"}, (q, d): {"korea, rep.": "georgia"}}, 0.0
    )
    record = ev.value_scores(lake, matches)
    assert (record["found"], record["tp"]) == (3, 2)
    assert record["precision"] == pytest.approx(2 / 3) and record["recall"] == pytest.approx(2 / 3)
    assert record["sem_recall"] == pytest.approx(1 / 2)  # "viet nam" found, "korea, rep." not
    assert ev.gold_pairs(lake, 0.9) == {(q, s)}
    assert matches.found(lake, 0.6) == {(q, s)} and matches.found(lake, 0.3) == {(q, s), (q, d)}
    column = ev.column_scores(matches.found(lake, 0.3), ev.gold_pairs(lake, 0.9), {(q, s)})
    assert (column["precision"], column["recall"], column["sem_recall"]) == (0.5, 1.0, 1.0)
    assert ev.non_identical_pairs(lake, matches) == [("viet nam", "vietnam", True), ("korea, rep.", "georgia", False)]
