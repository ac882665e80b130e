"""lakejoin.query.shard_arrays: a shard's searcher arrays cached per snapshot and memory-mapped.

Small JOSIE, LSH Ensemble and MATE indexes (synthetic sets and tables, built in process in four
shards) are written as Delta tables and published as snapshots, without Spark. Shard loads
through the cache answer exactly as searchers loaded from the shard's own tables, a later load
reads no Delta file, a cache written for other files or another array format is never used, a
later snapshot adopts the folders of the shards a run did not rewrite, a damaged cache is
rebuilt, two writers leave one complete folder, and vacuum deletes the expired snapshots'
folders.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakejoin.config import LakeConfig
from lakejoin.index import josie, lshensemble, mate, qgram, registry
from lakejoin.index.josie import build_in_memory, load
from lakejoin.index.shards import MANIFEST, in_shards, shard_of
from lakejoin.lake import delta, snapshots
from lakejoin.lake.manifest import COMPLETE, Manifest, rows_per_shard, write_manifest
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.query import shard_arrays
from lakejoin.query import snapshot as snapshot_module
from lakejoin.query.family import ask, family_query, merge
from lakejoin.query.memory import MEMORY_LIMIT_VARIABLE
from lakejoin.query.sharded import ShardedFamily
from lakejoin.query.snapshot import LoadedSnapshot, load_snapshot
from lakejoin.testing import set_lake

N_SHARDS = 4
K = 10
GLOBAL = {
    "josie": josie.GLOBAL_TABLES,
    "lshensemble": lshensemble.tables.GLOBAL_TABLES,
    "qgram": qgram.GLOBAL_TABLES,
    "mate": mate.build.GLOBAL_TABLES,
}


def lake_sets(seed: int) -> dict[int, list[str]]:
    """240 synthetic open-data sets (column ids 0..239), in 24 datasets of 10 columns."""
    return dict(enumerate(set_lake("opendata", 240, seed=seed)))


def dataset_ids(sets: dict[int, list[str]]) -> dict[int, str]:
    return {c: f"d{c // 10:02d}" for c in sets}


def lake_tables(seed: int, family: str = "josie") -> dict[str, pa.Table]:
    """The family's tables over :func:`lake_sets`, built in process in ``N_SHARDS`` shards."""
    sets = lake_sets(seed)
    build = build_in_memory if family == "josie" else lshensemble.build_in_memory
    return build(sets, dataset_ids=dataset_ids(sets), n_shards=N_SHARDS)


def publish(config: LakeConfig, tables: dict[str, pa.Table], family: str = "josie") -> LoadedSnapshot:
    """``tables`` as ``index/<family>/*`` (the sharded ones partitioned by shard) and the shard
    manifest (its rows per shard from the Delta logs), published."""
    rows: dict[int, dict[str, int]] = {shard: {} for shard in range(N_SHARDS)}
    for name, table in tables.items():
        path = config.table_path(f"index/{family}/{name}")
        delta.write_arrow(path, table, partition_by=None if name in GLOBAL[family] else ["shard"])
        for shard, count in ({} if name in GLOBAL[family] else rows_per_shard(path)).items():
            rows[shard][name] = count
    write_manifest(config.home, family, Manifest(N_SHARDS, None, COMPLETE, "test", 0.0, rows), "test")
    names = [f"index/{family}/{name}" for name in [*tables, MANIFEST]]
    return load_snapshot(config, snapshots.publish(config, snapshots.table_versions(config, names), {}))


def queries(seed: int) -> list[list[str]]:
    """Some of the lake's own sets, a mix of two, and values never seen."""
    sets = lake_sets(seed)
    return [sets[3], sets[57], sets[130], sets[10][:20] + sets[200][:20], ["never seen", *sets[99][:3]]]


def answers(
    searchers: list, asked: list[list[str]], family: str = "josie", params: dict | None = None
) -> list[list[list[dict]]]:
    return [[ask(s, family_query(family, ["c"], [q], K, params or {})) for q in asked] for s in searchers]


def alone(tables: dict[str, pa.Table], read_cost: josie.ReadCost | None = None, family: str = "josie") -> list:
    """Each shard's searcher loaded from its own tables (the oracle of a shard's answer)."""
    if family == "lshensemble":
        return [lshensemble.load(in_shards(tables, [shard], GLOBAL[family])) for shard in range(N_SHARDS)]
    return [load(in_shards(tables, [shard], GLOBAL[family]), read_cost=read_cost) for shard in range(N_SHARDS)]


def no_delta_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, shards, columns=None):
        if self.sharded:
            raise AssertionError(f"{self.path} read from Delta although its arrays are cached")
        return unpatched(self, shards, columns)

    unpatched = snapshot_module._IndexTable.read
    monkeypatch.setattr(snapshot_module._IndexTable, "read", refuse)


@pytest.fixture
def lake(tmp_path: Path) -> tuple[LakeConfig, dict[str, pa.Table], LoadedSnapshot]:
    config = LakeConfig(home=tmp_path / "home", quiet=True)
    tables = lake_tables(seed=3)
    return config, tables, publish(config, tables)


def test_cached_shards_answer_like_their_tables_and_read_no_delta_file(lake, monkeypatch: pytest.MonkeyPatch) -> None:
    config, tables, loaded = lake
    asked = queries(3)
    first = [loaded.load_shards("josie", [shard]) for shard in range(N_SHARDS)]  # from Delta; writes the cache
    expected = answers(alone(tables, first[0].read_cost), asked)
    assert answers(first, asked) == expected and any(any(a) for a in expected)
    assert sorted(p.name for p in (config.shard_cache_dir / str(loaded.snapshot_id) / "josie").iterdir()) == [
        str(s) for s in range(N_SHARDS)
    ]
    no_delta_reads(monkeypatch)
    shard_arrays._mapped.clear()  # as in a new process: the checksums are checked again
    for _ in range(2):
        cached = [loaded.load_shards("josie", [shard]) for shard in range(N_SHARDS)]
        assert answers(cached, asked) == expected
        assert all(not s.arrays()["post_set"].flags.owndata for s in cached)  # views of the mapped file
    for name, array in first[1].arrays().items():
        assert np.array_equal(cached[1].arrays()[name], array) and cached[1].arrays()[name].dtype == array.dtype, name


def test_over_the_budget_mapped_shards_stay_cached_and_a_floor_skips_shards(
    lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the memory budget the snapshot answers shard by shard (``lakejoin.query.sharded``),
    here with a budget of one shard's estimated load. The first queries build the shards from
    Delta and cache their arrays; a searcher over mapped arrays is charged only its scratch, so
    every shard stays cached and later queries read nothing. Shards are asked highest bound first
    with the k-th overlap merged so far as their floor, and one whose bound is below it is not
    asked: the answers are still the whole index's."""
    _, tables, loaded = lake
    whole = load(tables)
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(max(ShardedFamily(loaded, "josie").load_bytes.values()) + 1))
    asked = [family_query("josie", ["c"], [q], K, {}) for q in queries(3)] + [
        family_query("josie", ["c"], [lake_sets(3)[c]], 3, {}) for c in range(0, 240, 7)
    ]

    def served() -> list[tuple[list[dict], dict[str, int] | None]]:
        return [loaded.answer("josie", q) for q in asked]

    first = served()
    assert all(stats is not None and stats["searched"] + stats["skipped"] == N_SHARDS for _, stats in first)
    assert sum(stats["read"] for _, stats in first if stats) >= N_SHARDS
    for (found, _), q in zip(first, asked):
        expected = merge(q, [ask(whole, q)])
        assert [r["overlap"] for r in found] == [
            r["overlap"] for r in expected
        ]  # ties at the k-th may pick other columns
        above = expected[-1]["overlap"] if expected else 0
        assert [r for r in found if r["overlap"] > above] == [r for r in expected if r["overlap"] > above]
    sharded = loaded._sharded["josie"]
    assert all(
        sharded._charged[shard] == searcher.scratch_bytes() < sharded.load_bytes[shard] - sharded.global_bytes
        for shard, searcher in sharded._cache.items()
    )
    no_delta_reads(monkeypatch)
    served()  # maps the shards a larger shard's first load evicted
    again = served()
    assert [found for found, _ in again] == [found for found, _ in first]
    assert all(stats and stats["read"] == 0 and stats["cached"] == N_SHARDS for _, stats in again)
    assert sum(stats["skipped"] for _, stats in again if stats) > 0


def test_cached_qgram_shards_answer_like_their_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The q-gram family's shards (JOSIE's arrays over value-part tokens) through the cache."""
    config = LakeConfig(home=tmp_path / "home", quiet=True)
    sets = lake_sets(3)
    columns = [c for c, values in sets.items() for _ in values]
    cells = pa.table(
        {
            "dataset_id": [dataset_ids(sets)[c] for c in columns],
            "column_id": pa.array(columns, pa.int64()),
            "row_id": pa.array([r for values in sets.values() for r in range(len(values))], pa.int64()),
            "value": [v for values in sets.values() for v in values],
            "raw": pa.nulls(len(columns), pa.string()),
        },
        schema=CELLS_SCHEMA,
    )
    tables = qgram.build_in_memory(cells, n_shards=N_SHARDS)
    loaded = publish(config, tables, "qgram")
    asked = queries(3)
    first = [loaded.load_shards("qgram", [shard]) for shard in range(N_SHARDS)]
    no_delta_reads(monkeypatch)
    cached = [loaded.load_shards("qgram", [shard]) for shard in range(N_SHARDS)]
    assert all(not s.josie.arrays()["post_set"].flags.owndata for s in cached)
    expected = [
        [
            qgram.load(in_shards(tables, [shard], GLOBAL["qgram"]), read_cost=first[0].josie.read_cost).search(q, k=K)
            for q in asked
        ]
        for shard in range(N_SHARDS)
    ]
    assert answers(first, asked, "qgram") == expected and any(any(a) for a in expected)
    assert answers(cached, asked, "qgram") == expected


def test_cached_lshensemble_shards_answer_like_their_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LSH Ensemble's shards (signatures by size, the prefix forest, the verifier's encoded sets)
    through the cache: the same steps, estimated and verified."""
    config = LakeConfig(home=tmp_path / "home", quiet=True)
    tables = lake_tables(3, "lshensemble")
    loaded = publish(config, tables, "lshensemble")
    asked = queries(3)
    first = [loaded.load_shards("lshensemble", [shard]) for shard in range(N_SHARDS)]
    no_delta_reads(monkeypatch)
    cached = [loaded.load_shards("lshensemble", [shard]) for shard in range(N_SHARDS)]
    assert all(not s.signatures.flags.owndata for s in cached)
    for params in ({}, {"verify": True}, {"threshold": 0.2, "verify": True}):
        expected = answers(alone(tables, family="lshensemble"), asked, "lshensemble", params)
        assert answers(first, asked, "lshensemble", params) == expected and any(any(a) for a in expected)
        assert answers(cached, asked, "lshensemble", params) == expected


def test_a_cache_of_another_snapshot_or_format_is_rebuilt_not_read(lake, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _, loaded = lake
    for shard in range(N_SHARDS):
        loaded.load_shards("josie", [shard])
    changed = lake_tables(seed=4)
    second = publish(config, changed)
    old, new = (config.shard_cache_dir / str(s.snapshot_id) for s in (loaded, second))
    shutil.copytree(old, new)  # snapshot 1's arrays where snapshot 2's belong
    asked = queries(4)
    fresh = [second.load_shards("josie", [shard]) for shard in range(N_SHARDS)]
    assert answers(fresh, asked) == answers(alone(changed, fresh[0].read_cost), asked)
    record = json.loads((new / "josie" / "0" / shard_arrays.RECORD).read_text())
    assert record["key"]["tables"]["postings"] == sorted(second._index_table("josie", "postings").files_of(0))
    # a new array format makes every folder stale
    monkeypatch.setattr(registry.family("josie"), "arrays_format", josie.ARRAYS_FORMAT + 1)
    rebuilt: list[int] = []
    monkeypatch.setattr(shard_arrays, "write_arrays", lambda folder, key, arrays: rebuilt.append(key["shard"]) or True)
    assert answers([second.load_shards("josie", [2])], asked) == answers(fresh[2:3], asked)
    assert rebuilt == [2]


def key_tables(seed: int) -> dict[str, pd.DataFrame]:
    """12 small tables whose columns share values (numbers, words, digits), so composite keys join."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(20)]
    return {
        f"d{d:02d}": pd.DataFrame(
            {
                "a": rng.integers(0, 30, 60).astype(str),
                "b": rng.choice(words, 60),
                "c": rng.integers(0, 10, 60).astype(str),
            }
        )
        for d in range(12)
    }


def mate_answers(searchers: list, frames: dict[str, pd.DataFrame]) -> list[list[list[dict]]]:
    asked = [(frames["d03"], ["a", "b"]), (frames["d07"], ["a", "b", "c"]), (frames["d10"], ["c", "b"])]
    return [[s.search(frame, columns, k=K, exclude_datasets=["d03"]) for frame, columns in asked] for s in searchers]


def test_cached_mate_shards_answer_like_their_tables_and_a_later_snapshot_adopts_unchanged_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MATE's shards (postings, cells and super keys as arrays, the value dictionary's buffers and
    sorted keys) through the cache. Then one table changes and only its shard is rewritten (a
    partition swap, new global tables, as an incremental run writes them): the next snapshot's
    loads read that shard from Delta and adopt the other shards' folders (the same data file,
    hard-linked), and every shard answers as its own tables do."""
    config = LakeConfig(home=tmp_path / "home", quiet=True)
    frames = key_tables(5)
    tables = mate.build_in_memory(frames, n_shards=N_SHARDS)
    loaded = publish(config, tables, "mate")
    first = [loaded.load_shards("mate", [shard]) for shard in range(N_SHARDS)]
    expected = mate_answers(
        [mate.load(in_shards(tables, [shard], GLOBAL["mate"])) for shard in range(N_SHARDS)], frames
    )
    assert mate_answers(first, frames) == expected and any(any(a) for a in expected)
    with monkeypatch.context() as patched:
        no_delta_reads(patched)
        shard_arrays._mapped.clear()
        cached = [loaded.load_shards("mate", [shard]) for shard in range(N_SHARDS)]
        assert all(shard_arrays.is_mapped(s.index.pl_row) for s in cached)
        assert mate_answers(cached, frames) == expected

    changed = {
        **frames,
        "d05": frames["d05"].assign(a=frames["d03"]["a"], b=frames["d03"]["b"]),
    }  # now joins d03 on (a, b)
    rewritten = mate.build_in_memory(changed, bits=tables["params"]["bits"][0].as_py(), n_shards=N_SHARDS)
    shard = shard_of("d05", N_SHARDS)
    for name, table in rewritten.items():
        path = config.table_path(f"index/mate/{name}")
        if name in GLOBAL["mate"]:
            delta.write_arrow(path, table)
        else:
            delta.write_rows(
                path,
                table.filter(pc.equal(table["shard"], shard)),
                table.schema,
                partition_by=["shard"],
                replace="partitions",
                replace_values=[str(shard)],
            )
    write_manifest(
        config.home,
        "mate",
        Manifest(
            N_SHARDS,
            None,
            COMPLETE,
            "test",
            0.0,
            {
                s: {
                    n: rewritten[n].filter(pc.equal(rewritten[n]["shard"], s)).num_rows
                    for n in rewritten
                    if n not in GLOBAL["mate"]
                }
                for s in range(N_SHARDS)
            },
        ),
        "test",
    )
    names = [f"index/mate/{name}" for name in [*rewritten, MANIFEST]]
    second = load_snapshot(config, snapshots.publish(config, snapshots.table_versions(config, names), {}))
    read: list[str] = []
    unpatched = snapshot_module._IndexTable.read
    monkeypatch.setattr(
        snapshot_module._IndexTable,
        "read",
        lambda self, shards, *a, **kw: read.append(f"{self.path.name}/{shards}") or unpatched(self, shards, *a, **kw),
    )
    again = [second.load_shards("mate", [s]) for s in range(N_SHARDS)]
    assert sorted(r for r in read if not r.endswith("/None")) == [
        f"postings/[{shard}]",
        f"superkeys/[{shard}]",
    ]  # global tables are read whole by a build
    assert mate_answers(again, changed) == mate_answers(
        [mate.load(in_shards(rewritten, [s], GLOBAL["mate"])) for s in range(N_SHARDS)], changed
    )
    inode = {
        s: [
            (shard_arrays.shard_folder(config, snap.snapshot_id, "mate", s) / shard_arrays.DATA).stat().st_ino
            for snap in (loaded, second)
        ]
        for s in range(N_SHARDS)
    }
    assert [s for s in range(N_SHARDS) if inode[s][0] != inode[s][1]] == [shard]


@pytest.mark.parametrize(
    "damage", ["truncated data", "flipped bytes", "garbage record", "missing data", "record of another shape"]
)
def test_a_damaged_cache_is_rebuilt(lake, damage: str) -> None:
    config, _, loaded = lake
    asked = queries(3)
    expected = answers([loaded.load_shards("josie", [1])], asked)
    folder = shard_arrays.shard_folder(config, loaded.snapshot_id, "josie", 1)
    data, record = folder / shard_arrays.DATA, folder / shard_arrays.RECORD
    written = data.read_bytes()
    if damage == "truncated data":
        data.write_bytes(written[: len(written) // 2])
    elif damage == "flipped bytes":  # same size: only the checksum tells
        middle = len(written) // 2
        data.write_bytes(
            written[:middle] + bytes(b ^ 0xFF for b in written[middle : middle + 64]) + written[middle + 64 :]
        )
    elif damage == "garbage record":
        record.write_text("{not json")
    elif damage == "missing data":
        data.unlink()
    else:  # a consistent-looking record whose arrays do not make a searcher: from_arrays refuses
        kept = json.loads(record.read_text())
        group = kept["arrays"]["group"]
        group["shape"], group["crc32"] = (
            [1],
            shard_arrays._checksum(np.frombuffer(written, np.dtype(group["dtype"]), 1, group["offset"])),
        )
        record.write_text(json.dumps(kept))
    shard_arrays._mapped.clear()  # as in a new process
    assert answers([loaded.load_shards("josie", [1])], asked) == expected
    assert data.read_bytes() == written  # rewritten whole
    shard_arrays._mapped.clear()
    assert shard_arrays.read_arrays(folder, json.loads(record.read_text())["key"]) is not None


def test_two_writers_leave_one_complete_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "7" / "josie" / "0"
    arrays = {
        "a": np.arange(100_000, dtype=np.int64),
        "b": np.arange(7, dtype=np.int32),
        "empty": np.empty(0, np.int32),
    }
    key = {"format": 1, "snapshot_id": 7}
    barrier = threading.Barrier(4)

    def write() -> None:
        barrier.wait()
        shard_arrays.write_arrays(folder, key, arrays)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    read = shard_arrays.read_arrays(folder, key)
    assert read is not None and all(
        np.array_equal(read[name], arrays[name]) and read[name].dtype == arrays[name].dtype for name in arrays
    )
    assert sorted(p.name for p in folder.parent.iterdir()) == ["0"]  # no temporary or discarded folder left
    assert shard_arrays.read_arrays(folder, {**key, "snapshot_id": 8}) is None


def test_an_unwritable_cache_still_serves(lake) -> None:
    config, tables, loaded = lake
    config.shard_cache_dir.parent.mkdir(parents=True)
    config.shard_cache_dir.write_text("a file where the cache folder belongs")
    asked = queries(3)
    searchers = [loaded.load_shards("josie", [shard]) for shard in range(N_SHARDS)]
    assert answers(searchers, asked) == answers(alone(tables, searchers[0].read_cost), asked)


def test_vacuum_deletes_the_expired_snapshots_caches(lake) -> None:
    config, _, loaded = lake
    second = publish(config, lake_tables(seed=4))
    for snapshot in (loaded, second):
        snapshot.load_shards("josie", [0])
    report = snapshots.vacuum(config, retain=1)
    assert report["expired"] == [loaded.snapshot_id] and report["shard_caches_deleted"] == 1
    assert sorted(p.name for p in config.shard_cache_dir.iterdir()) == [str(second.snapshot_id)]
