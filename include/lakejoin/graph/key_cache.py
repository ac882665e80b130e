"""Composite keys' MATE queries, kept between graphs.

A key's query is its table's distinct normalized key tuples (``edges.mate_key``): the key's
columns read from the staged copy and normalized, about 4 ms a key on the bundled lake. An
incremental graph reverse-searches every unchanged key against the changed tables, so reading
them all again cost more than that search. A column id follows its file's content
(``lakejoin.ids.column_id``), so a key's column names and ids fix its tuples: each key's query
is kept in ``<home>/cache/keys/<digest>/`` in the shard cache's folder format
(``lakejoin.query.shard_arrays``: written whole under a temporary name or not at all, checked
against its record and CRCs when read), and a graph drops the folders of keys it no longer has.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

from lakejoin.config import LakeConfig
from lakejoin.index.mate import KeyQuery
from lakejoin.index.values import string_buffers, strings_of_buffers
from lakejoin.query import shard_arrays

KEYS_FORMAT = 1  # bump when a key's tuples would come out otherwise (normalization, de-duplication)


def cached_key(config: LakeConfig, key: Mapping[str, int], read: Callable[[], KeyQuery]) -> KeyQuery:
    """The query of ``key`` (column name -> column id): from its folder when one was written for
    it, else ``read()``'s, then written (a cache that cannot be written only costs time)."""
    folder, record = _folder(config, key), _record(key)
    arrays = shard_arrays.read_arrays(folder, record)
    shard_arrays.forget(folder)  # small: copied out below, not kept mapped
    if arrays is not None:
        try:
            return _restored(list(key), arrays)
        except (KeyError, ValueError, pa.ArrowException):
            pass
    query = read()
    data, offsets = string_buffers(pa.array(query.distinct, pa.string()))
    shard_arrays.write_arrays(folder, record, {"data": data, "offsets": offsets, "codes": query.codes})
    return query


def prune(config: LakeConfig, kept: Iterable[Mapping[str, int]]) -> int:
    """Delete the folders of keys not in ``kept``; how many were deleted."""
    names = {_folder(config, key).name for key in kept}
    try:
        stale = [p for p in config.key_cache_dir.iterdir() if p.name not in names]
    except OSError:
        return 0
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def _record(key: Mapping[str, int]) -> dict[str, object]:
    return {"format": KEYS_FORMAT, "columns": [[name, int(column_id)] for name, column_id in key.items()]}


def _folder(config: LakeConfig, key: Mapping[str, int]) -> Path:
    return config.key_cache_dir / hashlib.blake2b(json.dumps(_record(key)).encode(), digest_size=16).hexdigest()


def _restored(columns: list[str], arrays: Mapping[str, np.ndarray]) -> KeyQuery:
    codes = arrays["codes"].copy()
    distinct = strings_of_buffers(arrays["data"].copy(), arrays["offsets"].copy())
    if (
        codes.ndim != 2
        or codes.shape[1] != len(columns)
        or (codes.size and (codes.min() < 0 or codes.max() >= len(distinct)))
    ):
        raise ValueError("the cached codes do not fit the key")
    return KeyQuery(columns, np.array(distinct.to_pylist(), dtype=object), codes)
