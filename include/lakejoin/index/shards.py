"""Shards: how every family's index tables are split so that a change costs what it touches.

A **shard** is a slice of the lake: every dataset belongs to exactly one, by a stable rule
(:func:`shard_of`, a hash of its ``dataset_id``), so a column (MATE: a table) lives in exactly one
shard of every family. The shard count is chosen from the lake's size at a family's first
build (:func:`choose_shard_count`) and kept by every later build (it is recorded in the family's
``shards`` table); a dataset therefore never moves between shards.

Each family's index tables are of two kinds:

- **sharded** tables carry an ``int32`` :data:`SHARD` column and are Delta-partitioned by it.
  A shard's rows are self-contained where the method allows (its postings, sets, signatures,
  super keys, mapped vectors, grid cells), so an incremental build replaces the partitions of the
  shards that hold a changed dataset, one commit per table, and a searcher can load any subset
  of shards;
- **global** tables are small and shared by every shard (JOSIE's token dictionary and order, LSH
  Ensemble's size histogram and partitions, PEXESO's pivots and grid bounds, MATE's XASH width).

The rule is computed the same way in Python (here) and in Spark (``lakejoin.spark.shards``):
the first 60 bits of SHA-256 over the UTF-8 dataset id, modulo the shard count.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SHARD = "shard"  # the partition column of every sharded index table
MANIFEST = "shards"  # index/<family>/shards: one row per shard (see lakejoin.spark.shards)

# A shard should be cheap to rewrite, and a lake should not be cut into needless small files:
# about a quarter of a million cells per shard, rounded to a power of two.
CELLS_PER_SHARD = 250_000
MAX_SHARDS = 1024


def shard_of(dataset_id: str, n_shards: int) -> int:
    """The shard that holds ``dataset_id`` among ``n_shards`` (stable across runs and machines)."""
    if n_shards < 1:
        raise ValueError(f"n_shards must be at least 1, got {n_shards}")
    digest = hashlib.sha256(dataset_id.encode("utf-8")).hexdigest()
    return int(digest[:15], 16) % n_shards


def choose_shard_count(n_cells: int) -> int:
    """The shard count for a lake of ``n_cells`` cells at its first build: a power of two near
    ``n_cells / CELLS_PER_SHARD``, between 1 and :data:`MAX_SHARDS`."""
    if n_cells <= CELLS_PER_SHARD:
        return 1
    return min(MAX_SHARDS, 2 ** round(math.log2(n_cells / CELLS_PER_SHARD)))


def shards_of(dataset_ids: set[str] | list[str], n_shards: int) -> list[int]:
    """The sorted shards that hold any of ``dataset_ids``."""
    return sorted({shard_of(d, n_shards) for d in dataset_ids})


def shard_column(dataset_ids: pa.Array | pa.ChunkedArray | list[str | None], n_shards: int) -> pa.Array:
    """``shard_of(dataset_id, n_shards)`` of each row, computed once per distinct dataset; with one
    shard every row is in shard 0 and needs no dataset id."""
    ids = dataset_ids if isinstance(dataset_ids, (pa.Array, pa.ChunkedArray)) else pa.array(dataset_ids, pa.string())
    if n_shards == 1:
        return pa.array(np.zeros(len(ids), dtype=np.int32))
    if ids.null_count:
        raise ValueError(f"n_shards={n_shards} needs the dataset_id of every row")
    encoded = pc.dictionary_encode(ids)
    encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
    shards = pa.array([shard_of(d, n_shards) for d in encoded.dictionary.to_pylist()], pa.int32())
    return shards.take(encoded.indices)


def column_sets(cells: pa.Table) -> tuple[dict[int, list[str]], dict[int, str]]:
    """The sets in ``cells`` (``lake/cells`` rows): each column's distinct non-null values, sorted,
    and each column's dataset — what JOSIE and LSH Ensemble index."""
    present = cells.filter(pc.is_valid(cells["value"]))
    grouped = present.group_by(["column_id", "dataset_id"]).aggregate([("value", "distinct")]).sort_by("column_id")
    column_ids = grouped["column_id"].to_pylist()
    sets = dict(zip(column_ids, (sorted(v) for v in grouped["value_distinct"].to_pylist())))
    return sets, dict(zip(column_ids, grouped["dataset_id"].to_pylist()))


def histogram_update(
    values: np.ndarray, counts: np.ndarray | None = None, what: str = "histogram"
) -> tuple[np.ndarray, np.ndarray]:
    """A global histogram kept across incremental builds: each distinct value ascending with its
    summed count (one each when ``counts`` is None; negative counts retract what a rewritten shard
    held before), values left with no count dropped. LSH Ensemble's set sizes and MATE's row
    widths are kept this way, so their global tuning needs no read of the sharded tables."""
    values = np.asarray(values, dtype=np.int64)
    counts = np.ones(len(values), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    totals = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(totals, inverse, counts)
    if np.any(totals < 0):
        raise ValueError(f"the {what} went negative: the previous global table and the shards disagree")
    keep = totals > 0
    return distinct[keep], totals[keep]


def in_shards(
    tables: Mapping[str, pa.Table], shards: Iterable[int], global_tables: Iterable[str]
) -> dict[str, pa.Table]:
    """``tables`` with every sharded table cut to ``shards`` (global tables whole): what an
    incremental build gets as ``previous``, and what a searcher over those shards loads."""
    keep = pa.array(sorted(set(shards)), pa.int32())
    glob = set(global_tables)
    return {name: t if name in glob else t.filter(pc.is_in(t[SHARD], value_set=keep)) for name, t in tables.items()}


def apply_update(
    previous: Mapping[str, pa.Table],
    update: Mapping[str, pa.Table],
    rewritten: Iterable[int],
    global_tables: Iterable[str],
    append_tables: Iterable[str] = (),
) -> dict[str, pa.Table]:
    """The tables after an incremental build's output is written, in memory: each sharded table's
    ``rewritten`` shards replaced by ``update``'s rows, global tables replaced (or appended to, for
    ``append_tables``). The pipeline does the same with Delta partition swaps; tests use this to
    compare an incremental index with a full build without a lake on disk."""
    dropped = set(rewritten)
    glob, append = set(global_tables), set(append_tables)
    merged = {}
    for name, new in update.items():
        old = previous.get(name)
        if name in append:
            parts = [old, new] if old is not None else [new]
        elif name in glob or old is None:
            parts = [new]
        else:
            kept = old.filter(pc.invert(pc.is_in(old[SHARD], value_set=pa.array(sorted(dropped), pa.int32()))))
            parts = [kept, new]
        schema = parts[0].schema
        merged[name] = pa.concat_tables([p.select(schema.names).cast(schema) for p in parts])
    return merged
