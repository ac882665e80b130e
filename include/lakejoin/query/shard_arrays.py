"""Shard searchers' arrays, written once per shard content and memory-mapped by every later load.

Building a shard's searcher from its Delta files (JOSIE: read the postings, sort them into lists,
find the duplicate lists) costs tens of times one query on it, and a family served shard by shard
under a memory budget re-loads the shards that did not stay cached for every query. So the first
load of a (snapshot, family, shard) whose content no other snapshot's folder holds writes the
searcher's arrays (the family's ``to_arrays``) into one file in
``<home>/cache/shards/<snapshot_id>/<family>/<shard>/`` (``LakeConfig.shard_cache_dir``;
dtypes, shapes and offsets in a JSON record beside it) and every later load, in any process, maps
that file (copy-on-write, so the arrays have the writable type the family's compiled kernels
already have) and builds the searcher around views of it (``from_arrays``): a load costs an open
and a map, and the OS page cache keeps the shards in use. (With one ``.npy`` file per array, a
load spent most of its time parsing their headers.)

- **Never stale.** The folder's ``arrays.json`` records what the arrays were built from: the
  family's ``ARRAYS_FORMAT`` and the data files the shard's load reads (its own, and those of
  the global tables its arrays depend on: ``LoadedSnapshot._shard_key``). Delta data files are
  never rewritten in place, so equal files mean equal arrays; a load whose record differs (a
  lake re-created with the same snapshot ids, a family whose array layout changed) rebuilds the
  folder.
- **Across snapshots.** A run that rewrites a few shards leaves the others' files as they were:
  a snapshot's first load of such a shard *adopts* the folder another snapshot wrote for the
  same key (its data file hard-linked into this snapshot's folder, the record copied; the
  ``ADOPT_FROM`` latest other snapshots are looked at), so only the rewritten shards are built.
- **Two writers.** A folder is written under a temporary name beside it and renamed into place in
  one step (``os.replace``): a reader sees a complete folder or none, and a writer that loses the
  race drops its copy.
- **Damage.** A record that does not parse, a data file whose size is not the record's, an array
  that does not fit in it or whose CRC-32 is not the record's (checked when a process maps the
  folder: the whole file is read once; the process that wrote a folder maps it back without reading it again), and
  arrays the family's ``from_arrays`` rejects make
  the load read the Delta files and replace the folder.

A process keeps its mappings (``MAPPED_KEPT`` folders, least recently used dropped), so a
shard's later loads only wrap the mapped arrays in a new searcher; a folder replaced on disk
(its record another file) is mapped again.
- **Vacuum.** ``lakejoin vacuum`` deletes the folders of the snapshots it expires
  (``lakejoin.lake.snapshots.vacuum``).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import shutil
import threading
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lakejoin.config import LakeConfig

RECORD = "arrays.json"  # the key, and each array's dtype, shape, offset and CRC-32
DATA = "arrays.bin"  # the arrays one after another, each at a multiple of ALIGNMENT bytes
ALIGNMENT = 64

MAPPED_KEPT = 4096  # folders whose mapping a process keeps (least recently used dropped first)
ADOPT_FROM = 8  # other snapshots whose folder of the same shard may be adopted, latest first

# folder -> (its record's inode and mtime, the key it was written for, its arrays): mapped and
# CRC-checked once per process
_mapped: OrderedDict[str, tuple[tuple[int, int], dict[str, Any], dict[str, np.ndarray]]] = OrderedDict()
_mapped_lock = threading.Lock()


def shard_folder(config: LakeConfig, snapshot_id: int, family: str, shard: int) -> Path:
    """The folder caching one shard's arrays of one snapshot and family."""
    return config.shard_cache_dir / str(snapshot_id) / family / str(shard)


def cached_searcher(
    folder: Path,
    key: Mapping[str, Any],
    build: Callable[[], Any],
    to_arrays: Callable[[Any], dict[str, np.ndarray]],
    restore: Callable[[dict[str, np.ndarray]], Any],
) -> Any:
    """The searcher ``restore`` makes of the arrays in ``folder`` when they were written for
    ``key``; else ``build()``'s, whose arrays then replace the folder's (and are mapped back, so
    the first load's searcher holds the same mapped pages as every later one)."""
    searcher = mapped_searcher(folder, key, restore)
    if searcher is not None:
        return searcher
    searcher = build()
    if write_arrays(folder, key, to_arrays(searcher)):
        mapped = mapped_searcher(folder, key, restore, verify=False)  # just written: not read back for its CRCs
        if mapped is not None:
            return mapped
    return searcher


def mapped_searcher(
    folder: Path, key: Mapping[str, Any], restore: Callable[[dict[str, np.ndarray]], Any], *, verify: bool = True
) -> Any | None:
    """The searcher ``restore`` makes of the arrays in ``folder`` written (or adopted: see
    :func:`adopt`) for ``key``; None when there are none (or the family rejects them).
    ``verify`` as for :func:`read_arrays`."""
    arrays = read_arrays(folder, key, verify=verify)
    if arrays is None and adopt(folder, key):
        arrays = read_arrays(folder, key)
    if arrays is None:
        return None
    try:
        return restore(arrays)
    except ValueError:
        forget(folder)  # arrays the family rejects: the caller builds them again
        return None


def is_mapped(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a memory-mapped file (the shard cache's arrays)."""
    base: Any = array
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj  # np.frombuffer: a memoryview of the map
    return isinstance(base, mmap.mmap)


def read_arrays(folder: Path, key: Mapping[str, Any], *, verify: bool = True) -> dict[str, np.ndarray] | None:
    """The arrays written in ``folder`` for ``key`` (JSON values: dicts, lists, strings,
    numbers), memory-mapped; None when the folder is missing, was written for another key, or
    is damaged. A process maps a folder once (checking its CRCs unless ``verify`` is False: a
    folder this process has just written) and reuses the mapping while the folder's record is
    the same file."""
    try:
        stat = (folder / RECORD).stat()
    except OSError:
        return None
    seen = (stat.st_ino, stat.st_mtime_ns)
    with _mapped_lock:
        found = _mapped.get(str(folder))
        if found is not None and found[0] == seen:
            _mapped.move_to_end(str(folder))
    if found is None or found[0] != seen:
        mapped = _map(folder, verify)
        if mapped is None:
            return None
        found = (seen, *mapped)
        with _mapped_lock:
            _mapped[str(folder)] = found
            while len(_mapped) > MAPPED_KEPT:
                _mapped.popitem(last=False)
    return found[2] if found[1] == key else None


def adopt(folder: Path, key: Mapping[str, Any]) -> bool:
    """Make ``folder`` (``<snapshot>/<family>/<shard>``) the folder another snapshot wrote for
    the same ``key``, if one of the ``ADOPT_FROM`` latest others holds one: its data file
    hard-linked (copied where links fail), its record copied, the folder put in place in one
    step. The arrays are checked when mapped, as any folder's. False when there is none or it
    could not be written."""
    shard, family, snapshot = folder.name, folder.parent.name, folder.parent.parent
    try:
        others = sorted(
            (int(p.name) for p in snapshot.parent.iterdir() if p.name.isdigit() and p != snapshot), reverse=True
        )[:ADOPT_FROM]
    except OSError:
        return False
    wanted = json.loads(json.dumps(key))  # as a record reads back
    for other in others:
        source = snapshot.parent / str(other) / family / shard
        try:
            record = (source / RECORD).read_text()
            if json.loads(record).get("key") != wanted:
                continue
        except (OSError, ValueError, AttributeError):
            continue

        def link(temporary: Path, source: Path = source, record: str = record) -> None:
            try:
                os.link(source / DATA, temporary / DATA)
            except OSError:
                shutil.copyfile(source / DATA, temporary / DATA)
            (temporary / RECORD).write_text(record)

        return _put(folder, link)
    return False


def forget(folder: Path) -> None:
    """Drop this process's mapping of ``folder`` (its arrays were rejected)."""
    with _mapped_lock:
        _mapped.pop(str(folder), None)


def _map(folder: Path, verify: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """``folder``'s key and arrays, mapped, when its data file has the record's size and (with
    ``verify``) every array its CRC; else None."""
    try:
        record = json.loads((folder / RECORD).read_text())
        with open(folder / DATA, "rb") as data:
            if os.fstat(data.fileno()).st_size != record["size"]:
                return None  # cut short (or grown): not what was written
            mapped = mmap.mmap(data.fileno(), 0, access=mmap.ACCESS_COPY) if record["size"] else b""
        arrays = {
            name: np.frombuffer(mapped, np.dtype(info["dtype"]), math.prod(info["shape"]), info["offset"]).reshape(
                info["shape"]
            )
            for name, info in record["arrays"].items()
        }
        if verify and any(_checksum(arrays[name]) != info["crc32"] for name, info in record["arrays"].items()):
            return None
        return record["key"], arrays
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_arrays(folder: Path, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> bool:
    """Write ``arrays`` for ``key`` as ``folder`` (replacing what is there); False when it could
    not be written (a read-only or full disk: the cache only saves time) or another process
    wrote it first."""

    def write(temporary: Path) -> None:
        record: dict[str, Any] = {"key": key, "arrays": {}}
        with open(temporary / DATA, "wb") as data:
            for name, array in arrays.items():
                array = np.ascontiguousarray(array)
                data.write(b"\0" * (-data.tell() % ALIGNMENT))
                record["arrays"][name] = {
                    "dtype": array.dtype.str,
                    "shape": list(array.shape),
                    "offset": data.tell(),
                    "crc32": _checksum(array),
                }
                data.write(array.reshape(-1).view(np.uint8).data)
            record["size"] = data.tell()
        (temporary / RECORD).write_text(json.dumps(record))

    return _put(folder, write)


def _put(folder: Path, fill: Callable[[Path], Any]) -> bool:
    """``folder`` replaced by a temporary folder beside it that ``fill`` writes, in one rename;
    False when that fails (see :func:`write_arrays`)."""
    temporary = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex}"
    try:
        temporary.mkdir(parents=True)
        fill(temporary)
        if folder.exists():  # written for another key, or damaged: set aside, then deleted
            discarded = folder.parent / f".{folder.name}.discarded.{uuid.uuid4().hex}"
            os.replace(folder, discarded)
            shutil.rmtree(discarded, ignore_errors=True)
        os.replace(temporary, folder)
        return True
    except OSError:
        return False  # e.g. another process renamed its folder into place first
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _checksum(array: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data) if array.size else 0
