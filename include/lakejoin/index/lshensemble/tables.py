"""The LSH Ensemble index tables (``index/lshensemble/<name>``) and their in-memory build.

Sharded (an ``int32`` ``shard`` column, ``lakejoin.index.shards.shard_of(dataset_id)``; a
searcher may load any subset of shards):

- ``signatures``: one row per indexed column: ``column_id``, ``dataset_id``, ``size`` (distinct
  normalized values), ``seed``, ``minhash`` (``num_perm`` uint32 slots, little-endian bytes;
  Delta has no unsigned integers) and ``shard``.
- ``sets``: ``column_id``, ``dataset_id``, ``values`` (sorted distinct normalized values),
  ``shard``; read only to verify candidates (exact containment).

Global (small, shared by every shard, :data:`GLOBAL_TABLES`):

- ``sizes``: the set-size histogram of the whole lake, ``size`` ascending and ``count`` (one row
  per distinct size). An incremental build updates it from the rewritten shards alone: plus the
  changed datasets' new sizes, minus their old ones (their ``previous`` signatures).
- ``partitions``: the size partitioning (thesis §2.4.6), recomputed from ``sizes`` at every
  build, so it equals a full build's exactly: ``partition``, ``lower``, ``upper`` (inclusive),
  ``num_sets``, ``method``.

:func:`build_in_memory` produces exactly what ``lakejoin.spark.lshensemble.build_tables``
produces, without Spark (benchmarks, small lakes, tests).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.lshensemble.minhash import minhash_signatures
from lakejoin.index.lshensemble.partition import partition
from lakejoin.index.shards import SHARD, column_sets, histogram_update, shard_column

GLOBAL_TABLES = frozenset({"sizes", "partitions"})
# Kept bounds may leave this share of the sets out of their partition before the next build is full (the
# rationale is in ``lakejoin.spark.lshensemble``; every build recomputes the partitioning, so it stays 0).
STALENESS_LIMIT = 0.02
SIGNATURES_SCHEMA = pa.schema(
    [
        ("column_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("size", pa.int64()),
        ("seed", pa.int64()),
        ("minhash", pa.binary()),
        (SHARD, pa.int32()),
    ]
)
SETS_SCHEMA = pa.schema(
    [("column_id", pa.int64()), ("dataset_id", pa.string()), ("values", pa.list_(pa.string())), (SHARD, pa.int32())]
)
SIZES_SCHEMA = pa.schema([("size", pa.int64()), ("count", pa.int64())])
PARTITIONS_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("lower", pa.int64()),
        ("upper", pa.int64()),
        ("num_sets", pa.int64()),
        ("method", pa.string()),
    ]
)


def signature_matrix(minhash: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Decode the ``minhash`` binary column into a ``(n, num_perm)`` uint32 matrix."""
    if isinstance(minhash, pa.ChunkedArray):
        minhash = minhash.combine_chunks() if minhash.num_chunks else pa.array([], pa.binary())
    if minhash.null_count:
        raise ValueError("signatures.minhash has null rows")
    offset_type = np.int64 if pa.types.is_large_binary(minhash.type) else np.int32
    offsets = np.frombuffer(minhash.buffers()[1], dtype=offset_type)[minhash.offset : minhash.offset + len(minhash) + 1]
    lengths = np.diff(offsets)
    if len(minhash) == 0:
        return np.empty((0, 0), dtype=np.uint32)
    if lengths.min() != lengths.max() or lengths[0] % 4 or lengths[0] == 0:
        raise ValueError("signatures.minhash rows must all hold the same positive number of uint32 slots")
    data = np.frombuffer(minhash.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    return data.view("<u4").astype(np.uint32).reshape(len(minhash), lengths[0] // 4)


def minhash_column(signatures: np.ndarray) -> pa.Array:
    """The ``minhash`` binary column of a ``(n, num_perm)`` uint32 matrix (zero-copy layout)."""
    n, num_perm = signatures.shape
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(4 * num_perm)
    data = np.ascontiguousarray(signatures, dtype="<u4").tobytes()
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def signatures_table(
    column_ids: np.ndarray,
    dataset_ids: list[str | None],
    sizes: np.ndarray,
    signatures: np.ndarray,
    seed: int,
    n_shards: int,
) -> pa.Table:
    """Rows of the ``signatures`` table."""
    return pa.table(
        {
            "column_id": pa.array(column_ids, pa.int64()),
            "dataset_id": pa.array(dataset_ids, pa.string()),
            "size": pa.array(sizes, pa.int64()),
            "seed": pa.array(np.full(len(sizes), seed), pa.int64()),
            "minhash": minhash_column(signatures),
            SHARD: shard_column(dataset_ids, n_shards),
        },
        schema=SIGNATURES_SCHEMA,
    )


def sizes_table(sizes: np.ndarray, counts: np.ndarray | None = None) -> pa.Table:
    """The ``sizes`` histogram: each distinct size ascending with its summed count (one per set
    when ``counts`` is None; negative counts retract sets), sizes left with no set dropped."""
    distinct, totals = histogram_update(sizes, counts, "size histogram")
    return pa.table({"size": distinct, "count": totals}, schema=SIZES_SCHEMA)


def partitions_table(sizes: pa.Table, num_part: int, method: str = "optimal") -> pa.Table:
    """The ``partitions`` table from the ``sizes`` histogram (no sets: no rows)."""
    distinct, counts = sizes["size"].to_numpy(), sizes["count"].to_numpy()
    bounds = partition(distinct, counts, num_part, method) if len(distinct) else []
    uppers = np.array([u for _, u in bounds], dtype=np.int64)
    return pa.table(
        {
            "partition": pa.array(range(len(bounds)), pa.int32()),
            "lower": pa.array([lo for lo, _ in bounds], pa.int64()),
            "upper": pa.array(uppers, pa.int64()),
            "num_sets": pa.array(_sets_per_partition(distinct, counts, uppers), pa.int64()),
            "method": pa.array([method] * len(bounds), pa.string()),
        },
        schema=PARTITIONS_SCHEMA,
    )


def _sets_per_partition(distinct: np.ndarray, counts: np.ndarray, uppers: np.ndarray) -> np.ndarray:
    """How many sets of the histogram the searcher puts in each partition: a size goes to the
    first upper bound at least as large, sizes above the last bound to the last partition."""
    if len(uppers) == 0:
        return np.zeros(0, dtype=np.int64)
    part = np.minimum(np.searchsorted(uppers, distinct), len(uppers) - 1)
    return np.bincount(part, weights=counts, minlength=len(uppers)).astype(np.int64)


def staleness(sizes: pa.Table, partitions: pa.Table) -> float:
    """The share of the indexed sets that the stored partitioning did not count where they are.

    ``sum_i |n_i - num_sets_i| / N``: ``n_i`` sets of the ``sizes`` histogram fall in partition
    ``i`` now, ``num_sets_i`` fell there when its bounds were chosen, ``N`` sets in all. Every
    build recomputes ``partitions`` from ``sizes`` (see ``lakejoin.spark.lshensemble``), so this
    is 0; it would grow with every set inserted, removed or resized under kept bounds.
    """
    counts = sizes["count"].to_numpy()
    if counts.sum() == 0:
        return 0.0
    stored = partitions.sort_by("upper")
    now = _sets_per_partition(sizes["size"].to_numpy(), counts, stored["upper"].to_numpy())
    if len(now) == 0:
        return 1.0
    return float(np.abs(now - stored["num_sets"].to_numpy()).sum() / counts.sum())


def build_in_memory(
    sets: Mapping[int, Iterable[str]],
    num_perm: int = 256,
    num_part: int = 32,
    *,
    seed: int = 1,
    partitioning: str = "optimal",
    dataset_ids: Mapping[int, str] | None = None,
    n_shards: int = 1,
    previous: Mapping[str, pa.Table] | None = None,
    changed: Collection[str] = (),
) -> dict[str, pa.Table]:
    """The index tables of ``sets`` (column_id -> already normalized values, as in ``lake/cells``).

    Empty sets are not indexed; with ``n_shards > 1`` every column needs its ``dataset_ids``.
    With ``previous`` (an incremental build: the sharded tables may be cut to the rewritten
    shards, the global ones whole), ``sets`` are the columns of the ``changed`` datasets (added,
    changed or removed; a pure insert of new columns may leave ``changed`` empty): their
    ``previous`` rows are dropped, the other rows kept as they are and the new rows appended
    (equal to a full build's up to order), and ``sizes`` is updated by the difference, so the
    ``partitions`` equal a full build's.
    """
    distinct = {int(cid): sorted(set(values)) for cid, values in sets.items()}
    distinct = {cid: values for cid, values in distinct.items() if values}
    column_ids = np.array(sorted(distinct), dtype=np.int64)
    values = [distinct[cid] for cid in column_ids]
    datasets = [dataset_ids.get(int(cid)) if dataset_ids else None for cid in column_ids]
    sizes = np.array([len(v) for v in values], dtype=np.int64)
    signatures = signatures_table(
        column_ids, datasets, sizes, minhash_signatures(values, num_perm, seed), seed, n_shards
    )
    sets_rows = pa.table(
        {
            "column_id": pa.array(column_ids, pa.int64()),
            "dataset_id": pa.array(datasets, pa.string()),
            "values": values,
            SHARD: shard_column(datasets, n_shards),
        },
        schema=SETS_SCHEMA,
    )
    histogram = sizes_table(sizes)
    if previous is not None:
        check_hash_family(previous["signatures"], num_perm, seed)
        stale = pc.is_in(previous["signatures"]["dataset_id"], value_set=pa.array(sorted(changed), pa.string()))
        old_sizes = previous["signatures"].filter(stale)["size"].to_numpy()
        histogram = sizes_table(
            np.concatenate([previous["sizes"]["size"].to_numpy(), sizes, old_sizes]),
            np.concatenate([previous["sizes"]["count"].to_numpy(), np.ones_like(sizes), -np.ones_like(old_sizes)]),
        )
        signatures = _carry_over(previous["signatures"], signatures, changed)
        sets_rows = _carry_over(previous["sets"], sets_rows, changed)
    return {
        "signatures": signatures,
        "sets": sets_rows,
        "sizes": histogram,
        "partitions": partitions_table(histogram, num_part, partitioning),
    }


def check_hash_family(signatures: pa.Table, num_perm: int, seed: int) -> None:
    """Refuse to mix signatures of another ``num_perm`` or ``seed`` with new ones."""
    if signatures.num_rows and (
        signature_matrix(signatures["minhash"].slice(0, 1)).shape[1] != num_perm
        or signatures["seed"][0].as_py() != seed
    ):
        raise ValueError("previous signatures were built with another num_perm or seed; rebuild them all")


def _carry_over(old: pa.Table, new: pa.Table, changed: Collection[str]) -> pa.Table:
    """``old`` without the rows of ``changed`` datasets, then ``new``.

    Row order carries no meaning (readers key rows by column_id), so nothing is sorted and,
    when no old row is replaced (a pure insert), the old rows are shared, not copied: the cost
    of an insert follows the new columns, not the collection.
    """
    stale = pc.is_in(old["dataset_id"], value_set=pa.array(sorted(changed), pa.string()))
    if pc.any(stale).as_py():
        old = old.filter(pc.invert(stale))
    return pa.concat_tables([old.select(new.schema.names).cast(new.schema), new])


def build_tables(cells: pa.Table, *, n_shards: int) -> dict[str, pa.Table]:
    """The full build of ``lakejoin.spark.lshensemble.build_tables`` in this process, for a lake
    small enough to build here (``lakejoin.spark.indexing``): ``cells`` are ``lake/cells`` rows
    of the columns the family indexes."""
    sets, dataset_ids = column_sets(cells)
    return build_in_memory(sets, dataset_ids=dataset_ids, n_shards=n_shards)


def update_tables(
    cells: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str], **params: Any
) -> dict[str, pa.Table]:
    """The incremental build of ``lakejoin.spark.lshensemble.build_tables`` in this process (for
    an update small enough to run here, ``lakejoin.spark.indexing``): ``cells`` are the changed
    datasets' ``lake/cells`` rows; ``params`` as :func:`build_in_memory` takes them."""
    sets, dataset_ids = column_sets(cells)
    return build_in_memory(
        sets, dataset_ids=dataset_ids, n_shards=n_shards, previous=previous, changed=changed, **params
    )
