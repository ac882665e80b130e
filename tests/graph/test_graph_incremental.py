"""The incremental graph's rules on their own, without a lake (``tests/test_graph.py`` runs them
through the pipeline): the merge of a previous list with the changed datasets' neighbours, and
the MATE refusals a later graph keeps without searching again, and how MATE foresees a refusal
before building its mapping rows."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lakejoin.graph.build import Lists, _merge, _Queries, search_by_shards
from lakejoin.graph.edges import JOSIE, MATE, Edge, Query, best, mate_edges, mate_key
from lakejoin.index.mate import build_in_memory, kernels, key_query, load
from lakejoin.index.mate.build import GLOBAL_TABLES
from lakejoin.index.mate.index import Cells
from lakejoin.index.mate.query import QueryValues
from lakejoin.index.mate.search import MateRefused
from lakejoin.index.shards import in_shards

K = 3


def lists_of(scores: dict[Query, dict[str, int]], dataset_of: dict[Query, str]) -> Lists:
    """Each query's best ``K`` by the graph's total order (a neighbour is a dataset's column 0)."""
    return {
        q: best([Edge(JOSIE, dataset_of[q], q[1], d, (0,), s, 1.0) for d, s in row.items() if s > 0], K)
        for q, row in scores.items()
    }


def test_merge_equals_a_full_computation_when_changed_neighbours_fall_rise_or_go() -> None:
    """Random scores between 16 queries and 8 datasets; two datasets change per trial (scores
    redrawn, so an edge to one may fall below the previous k-th, rise or vanish) or go. The
    merge of the previous lists and the changed datasets' neighbours must equal the full lists,
    and a query that lost an edge is searched in full only when its list cannot be completed."""
    rng = np.random.default_rng(18)
    outcomes = [one_change(rng) for _ in range(300)]
    assert sum(r for r, _ in outcomes) and sum(c for _, c in outcomes)  # both paths ran


def one_change(rng: np.random.Generator) -> tuple[int, int]:
    """One trial: (queries that lost an edge and were searched again, those completed without)."""
    universe = [f"d{i}" for i in range(8)]
    dataset_of: dict[Query, str] = {(JOSIE, (i,)): universe[i % 8] for i in range(16)}
    before = {q: {d: int(rng.integers(0, 5)) for d in universe if d != dataset_of[q]} for q in dataset_of}
    changed = set(rng.choice(universe, 2, replace=False).tolist())
    present = [d for d in universe if d not in changed or rng.random() >= 0.3]
    now_of = {q: d for q, d in dataset_of.items() if d in present}
    now = {
        q: {
            d: (int(rng.integers(0, 5)) if d in changed or now_of[q] in changed else before[q][d])
            for d in present
            if d != now_of[q]
        }
        for q in now_of
    }
    full, previous = lists_of(now, now_of), lists_of(before, dataset_of)
    searched: list[Query] = []

    def forward(wanted: list[Query]) -> Lists:
        searched.extend(wanted)
        return {q: full[q] for q in wanted}

    def reverse(start: Lists) -> Lists:
        found = lists_of({q: {d: s for d, s in now[q].items() if d in changed} for q in start}, now_of)
        return {q: best([*edges, *found[q]], K) for q, edges in start.items()}

    lists, count = _merge(_Queries(JOSIE, now_of), changed, previous, K, forward, reverse)
    assert lists == full and count == len(searched)
    lost = [q for q in now_of if now_of[q] not in changed and any(e.dataset_id in changed for e in previous[q])]
    return sum(q in searched for q in lost), sum(q not in searched for q in lost)


def key_lake(seed: int) -> dict[str, pd.DataFrame]:
    """16 tables of three columns whose values table d draws from ranges starting at d (numbers,
    words, codes), so composite keys join a varying number of tuples in nearby tables and none
    in tables far apart."""
    rng = np.random.default_rng(seed)
    return {
        f"t{d:02d}": pd.DataFrame(
            {
                "a": rng.integers(4 * d, 4 * d + 40, 80).astype(str),
                "b": [f"w{i}" for i in rng.integers(d, d + 6, 80)],
                "c": [f"c{i}" for i in rng.integers(d, d + 4, 80)],
            }
        )
        for d in range(16)
    }


def test_keys_searched_over_shards_by_their_bound_get_the_whole_index_lists() -> None:
    """``search_by_shards`` over the four shards of a MATE index (shards asked highest
    ``MateSearcher.held`` first, one whose bound is below the k-th so far not asked) gives each
    key the list the whole index gives, one key at a time or several side by side, and ``held``
    bounds every joinability in its shard."""
    frames = key_lake(4)
    tables = build_in_memory(frames, n_shards=4)
    shards = {shard: load(in_shards(tables, [shard], GLOBAL_TABLES)) for shard in range(4)}
    whole = load(tables)
    keys = {
        (MATE, (d, *columns)): (f"t{d:02d}", {c: i for i, c in enumerate(columns)})
        for d in range(0, 16, 3)
        for columns in (("a", "b"), ("b", "c"), ("a", "b", "c"))
    }
    prepared = {
        q: mate_key(pa.Table.from_pandas(frames[dataset], preserve_index=False), key)
        for q, (dataset, key) in keys.items()
    }
    asked: list[int] = []

    def search(searcher, wanted, so_far):
        asked.append(id(searcher))
        q = wanted[0]
        before = so_far[q] or []
        return {
            q: mate_edges(
                searcher, prepared[q], keys[q][0], keys[q][1], K, before[K - 1].overlap if len(before) >= K else 0
            )
        }

    found = search_by_shards(shards, list(keys), search, lambda searcher, q: searcher.held(prepared[q]), K)
    searches = len(asked)
    side_by_side = search_by_shards(shards, list(keys), search, lambda searcher, q: searcher.held(prepared[q]), K, 3)
    assert side_by_side == found  # keys searched three at a time get the lists they get one by one
    for q, (dataset, key) in keys.items():
        assert found[q] == mate_edges(whole, prepared[q], dataset, key, K), q
        for searcher in shards.values():
            assert all(
                e.overlap <= searcher.held(prepared[q])[0]
                for e in mate_edges(searcher, prepared[q], dataset, key, 2 * K)
            )
    assert any(found.values()) and searches < len(keys) * len(shards)  # some shards were not asked


def test_a_refusal_names_its_table_and_holds_whatever_the_floor() -> None:
    """A key of "1"s against a table of 40 flag columns builds ~40^4 mappings per row: MATE
    refuses it, names the table, and counts its joining rows up to one more than the key's
    tuples (then no floor can prune that table: the refusal holds in every index holding it)."""
    flags = pd.DataFrame({f"f{i}": ["1"] * 2_000 for i in range(40)})
    people = pd.DataFrame({"name": ["ada", "bob"], "city": ["oslo", "rome"]})
    key = key_query(pd.DataFrame({c: ["1"] for c in "abcd"}), list("abcd"))
    for frames in ({"flags": flags}, {"flags": flags, "people": people}):
        searcher = load(build_in_memory(frames))
        for floor in (0, 1):
            with pytest.raises(MateRefused) as refused:
                searcher.search(key, list("abcd"), min_score=floor)
            assert (refused.value.dataset_id, refused.value.joining_rows) == ("flags", 2)


def test_mappings_are_counted_as_verification_builds_them() -> None:
    """``_pair_mappings`` (how a table's refusal is foreseen before its rows are built) equals the
    number of rows ``_verify_pair`` appends, and the number it counts in a ``Tally``, on random
    rows of few values (each value in several columns) and key tuples that repeat values, miss
    some, and meet the initial column's value."""
    rng = np.random.default_rng(24)
    checked = 0
    for _ in range(400):
        width, m = int(rng.integers(2, 9)), int(rng.integers(2, 5))
        row = rng.integers(0, 3, width)  # the value of each column
        order = np.lexsort((np.arange(width), row))
        cell_values, cell_columns, offsets = (
            row[order].astype(np.int64),
            order.astype(np.int64),
            np.array([0, width], np.int64),
        )
        value_ids = rng.integers(-1, 4, (1, m)).astype(np.int64)
        initial = int(rng.integers(m))
        checks = rng.permutation([p for p in range(m) if p != initial]).astype(np.int64)
        query = QueryValues(value_ids, initial, checks)
        cells = Cells(offsets, cell_values, cell_columns, np.zeros(2, np.int64), np.zeros(0, np.int64))
        for c0 in np.flatnonzero(row == value_ids[0, initial]).tolist():
            tallies = (
                kernels.Tally(np.zeros(0, np.int64), 0, 1, np.zeros(0, np.bool_), np.zeros(0, np.int64)),  # rows
                kernels._tally_of(np.zeros(width, np.int64), np.arange(width), m, 1, 1, kernels.TALLY_FLAGS),
            )
            built, tallied = (
                kernels._verify_pair(
                    0, c0, 0, query, cells, kernels.scratch_of(m), np.empty((1, m + 1), np.int64), 0, tally
                )[1]
                for tally in tallies
            )
            assert kernels._pair_mappings(0, 0, query, cells) == built, (row, value_ids, initial, c0)
            assert tallied == built and tallies[1].counts.sum() == built  # each mapping flags the one query row
            checked += built > 1
    assert checked  # some pairs support several mappings


def test_a_table_past_the_count_threshold_is_verified_unless_it_passes_the_limit() -> None:
    """A key of four "1"s meets a row of 40 flags in 40·39·38·37 = 2,193,360 mappings: two rows
    (4.4 M, past ``COUNT_FROM``: the rest counted first) are verified and join the key's one
    tuple; eight (17.5 M) pass ``SUPPORTED_LIMIT`` and are refused, before their rows are built."""
    assert kernels.COUNT_FROM < 2 * 2_193_360 < kernels.SUPPORTED_LIMIT < 8 * 2_193_360
    key = key_query(pd.DataFrame({c: ["1"] for c in "abcd"}), list("abcd"))
    two = load(build_in_memory({"flags": pd.DataFrame({f"f{i}": ["1"] * 2 for i in range(40)})}))
    assert [(r["dataset_id"], r["joinability"]) for r in two.search(key, list("abcd"))] == [("flags", 1)]
    eight = load(build_in_memory({"flags": pd.DataFrame({f"f{i}": ["1"] * 8 for i in range(40)})}))
    with pytest.raises(MateRefused) as refused:
        eight.search(key, list("abcd"))
    assert refused.value.dataset_id == "flags"


def test_a_refusal_releases_the_kernels_memory() -> None:
    """A refusal comes back from the compiled scan as a status, not an exception: numba does not
    release the arrays alive in compiled frames when they raise (its issue #1549), and each
    refusal left 32 of them (~110 MiB) in the process. Counted by numba's own allocation stats,
    over refusals both before (a row past the limit) and after the count threshold."""
    from numba.core.runtime import _nrt_python, rtsys

    key = key_query(pd.DataFrame({c: ["1"] for c in "abcd"}), list("abcd"))
    early = load(
        build_in_memory({"flags": pd.DataFrame({f"f{i}": ["1"] * 8 for i in range(40)})})
    )  # counted past COUNT_FROM
    late = load(
        build_in_memory({"flags": pd.DataFrame({f"f{i}": ["1"] for i in range(90)})})
    )  # one row: 90·89·88·87 mappings, built until the limit

    def live() -> int:
        gc.collect()  # a caught refusal's traceback holds the scan's returned arrays until collected
        stats = rtsys.get_allocation_stats()
        return stats.alloc - stats.free

    enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        for searcher in (early, late):
            with pytest.raises(MateRefused):
                searcher.search(key, list("abcd"))  # compiled and warm
            before = live()
            for _ in range(3):
                with pytest.raises(MateRefused) as refused:
                    searcher.search(key, list("abcd"))
                assert refused.value.dataset_id == "flags"
                del refused
            assert live() == before
    finally:
        if not enabled:
            _nrt_python.memsys_disable_stats()
