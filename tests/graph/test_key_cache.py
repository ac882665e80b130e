"""lakejoin.graph.key_cache: a composite key's MATE query (its distinct normalized tuples) kept
between graphs, keyed by its columns' names and content-derived ids."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lakejoin.config import LakeConfig
from lakejoin.graph.key_cache import cached_key, prune
from lakejoin.index.mate import KeyQuery, key_query
from lakejoin.query import shard_arrays

FRAME = pd.DataFrame({"origin": ["EWR", "JFK", "EWR", None, "LGA"], "hour": ["5", "6", "5", "7", "Ünïcode 8"]})


def same(a: KeyQuery, b: KeyQuery) -> bool:
    return a.columns == b.columns and a.distinct.tolist() == b.distinct.tolist() and np.array_equal(a.codes, b.codes)


def reader(calls: list[str], columns: list[str]):
    def read() -> KeyQuery:
        calls.append("read")
        return key_query(FRAME, columns)

    return read


def test_a_key_is_read_once_then_served_from_its_folder(tmp_path: Path) -> None:
    config = LakeConfig(home=tmp_path, quiet=True)
    calls: list[str] = []
    key = {"origin": 11, "hour": 12}
    first = cached_key(config, key, reader(calls, list(key)))
    shard_arrays._mapped.clear()
    again = cached_key(config, key, reader(calls, list(key)))
    assert calls == ["read"] and same(first, again) and same(again, key_query(FRAME, ["origin", "hour"]))
    assert again.tuples.tolist() == [["ewr", "5"], ["jfk", "6"], ["lga", "ünïcode 8"]]
    other = {"hour": 12, "origin": 11}  # the same columns in another order: another key
    assert same(
        cached_key(config, other, reader(calls, list(other))), key_query(FRAME, ["hour", "origin"])
    ) and calls == ["read", "read"]
    assert len(list(config.key_cache_dir.iterdir())) == 2
    assert prune(config, [key]) == 1 and len(list(config.key_cache_dir.iterdir())) == 1
    cached_key(config, key, reader(calls, list(key)))
    assert calls == ["read", "read"]


@pytest.mark.parametrize("damage", ["flipped bytes", "codes out of range"])
def test_a_damaged_folder_is_read_again(tmp_path: Path, damage: str) -> None:
    config = LakeConfig(home=tmp_path, quiet=True)
    calls: list[str] = []
    key = {"origin": 11, "hour": 12}
    cached_key(config, key, reader(calls, list(key)))
    (folder,) = config.key_cache_dir.iterdir()
    data = folder / shard_arrays.DATA
    written = bytearray(data.read_bytes())
    if damage == "flipped bytes":  # the CRC tells
        written[0] ^= 0xFF
        data.write_bytes(bytes(written))
    else:  # a consistent record whose codes point past the values
        record = json.loads((folder / shard_arrays.RECORD).read_text())["key"]
        arrays = shard_arrays.read_arrays(folder, record)
        assert arrays is not None
        shard_arrays.write_arrays(folder, record, {**arrays, "codes": arrays["codes"] + 100})
    shard_arrays._mapped.clear()
    assert same(cached_key(config, key, reader(calls, list(key))), key_query(FRAME, list(key))) and calls == [
        "read",
        "read",
    ]


def test_an_unwritable_cache_still_answers(tmp_path: Path) -> None:
    config = LakeConfig(home=tmp_path, quiet=True)
    config.key_cache_dir.parent.mkdir(parents=True)
    config.key_cache_dir.write_text("a file where the folder belongs")
    calls: list[str] = []
    key = {"origin": 11}
    for _ in range(2):
        assert same(cached_key(config, key, reader(calls, list(key))), key_query(FRAME, ["origin"]))
    assert calls == ["read", "read"] and prune(config, []) == 0
