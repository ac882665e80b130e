"""The LSH Ensemble index tables (``index/lshensemble/<name>``) and their in-memory build.

- ``signatures``: one row per indexed column: ``column_id``, ``dataset_id``, ``size`` (distinct
  normalized values), ``seed`` and ``minhash`` (``num_perm`` uint32 slots, little-endian bytes;
  Delta has no unsigned integers). This is the per-dataset, incrementally replaced part.
- ``partitions``: the size partitioning (§2.4.6) recomputed from all signatures at every
  snapshot build: ``partition``, ``lower``, ``upper`` (inclusive), ``num_sets``, ``method``.
- ``sets``: ``column_id``, ``dataset_id``, ``values`` (sorted distinct normalized values), read
  only to verify candidates (exact containment).

:func:`build_in_memory` produces exactly what ``lakejoin.spark.lshensemble.build_tables``
produces, without Spark (benchmarks, small lakes, tests).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.lshensemble.minhash import minhash_signatures
from lakejoin.index.lshensemble.partition import partition

SIGNATURES_SCHEMA = pa.schema(
    [
        ("column_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("size", pa.int64()),
        ("seed", pa.int64()),
        ("minhash", pa.binary()),
    ]
)
PARTITIONS_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("lower", pa.int64()),
        ("upper", pa.int64()),
        ("num_sets", pa.int64()),
        ("method", pa.string()),
    ]
)
SETS_SCHEMA = pa.schema([("column_id", pa.int64()), ("dataset_id", pa.string()), ("values", pa.list_(pa.string()))])


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
    column_ids: np.ndarray, dataset_ids: list[str | None], sizes: np.ndarray, signatures: np.ndarray, seed: int
) -> pa.Table:
    """Rows of the ``signatures`` table."""
    return pa.table(
        {
            "column_id": pa.array(column_ids, pa.int64()),
            "dataset_id": pa.array(dataset_ids, pa.string()),
            "size": pa.array(sizes, pa.int64()),
            "seed": pa.array(np.full(len(sizes), seed), pa.int64()),
            "minhash": minhash_column(signatures),
        },
        schema=SIGNATURES_SCHEMA,
    )


def partitions_table(set_sizes: np.ndarray, num_part: int, method: str = "optimal") -> pa.Table:
    """The ``partitions`` table for a collection with these set sizes (empty collection: no rows)."""
    sizes, counts = np.unique(np.asarray(set_sizes, dtype=np.int64), return_counts=True)
    return partitions_from_histogram(sizes, counts, num_part, method)


def partitions_from_histogram(sizes: np.ndarray, counts: np.ndarray, num_part: int, method: str = "optimal") -> pa.Table:
    """The ``partitions`` table from the size distribution (distinct sizes ascending, counts)."""
    bounds = partition(sizes, counts, num_part, method) if len(sizes) else []
    uppers = np.array([u for _, u in bounds], dtype=np.int64)
    num_sets = np.bincount(np.searchsorted(uppers, sizes), weights=counts, minlength=len(bounds)) if len(bounds) else []
    return pa.table(
        {
            "partition": pa.array(range(len(bounds)), pa.int32()),
            "lower": pa.array([lo for lo, _ in bounds], pa.int64()),
            "upper": pa.array(uppers, pa.int64()),
            "num_sets": pa.array(np.asarray(num_sets, dtype=np.int64), pa.int64()),
            "method": pa.array([method] * len(bounds), pa.string()),
        },
        schema=PARTITIONS_SCHEMA,
    )


def build_in_memory(
    sets: Mapping[int, Iterable[str]],
    num_perm: int = 256,
    num_part: int = 32,
    *,
    seed: int = 1,
    partitioning: str = "optimal",
    dataset_ids: Mapping[int, str] | None = None,
    previous: Mapping[str, pa.Table] | None = None,
    removed: Collection[int] = (),
) -> dict[str, pa.Table]:
    """The index tables of ``sets`` (column_id -> already normalized values, as in ``lake/cells``).

    Empty sets are not indexed. With ``previous`` tables, only ``sets`` are hashed (the
    incremental insert): previous rows of the same column_ids and of ``removed`` are replaced
    or dropped, the rest kept as they are (new rows are appended, so the rows equal a full
    build's up to order), and the partitioning is recomputed over all sizes.
    """
    distinct = {int(cid): sorted(set(values)) for cid, values in sets.items()}
    distinct = {cid: values for cid, values in distinct.items() if values}
    column_ids = np.array(sorted(distinct), dtype=np.int64)
    values = [distinct[cid] for cid in column_ids]
    datasets = [dataset_ids.get(int(cid)) if dataset_ids else None for cid in column_ids]
    sizes = np.array([len(v) for v in values], dtype=np.int64)
    signatures = signatures_table(column_ids, datasets, sizes, minhash_signatures(values, num_perm, seed), seed)
    sets_rows = pa.table(
        {"column_id": pa.array(column_ids, pa.int64()), "dataset_id": pa.array(datasets, pa.string()), "values": values},
        schema=SETS_SCHEMA,
    )
    if previous is not None:
        replaced = pa.array(np.union1d(np.array(sorted(sets), dtype=np.int64), np.array(list(removed), dtype=np.int64)))
        signatures = _merge(previous["signatures"], signatures, replaced, num_perm, seed)
        sets_rows = _merge(previous["sets"], sets_rows, replaced)
    return {
        "signatures": signatures,
        "partitions": partitions_table(signatures["size"].to_numpy(), num_part, partitioning),
        "sets": sets_rows,
    }


def _merge(
    old: pa.Table, new: pa.Table, replaced: pa.Array, num_perm: int | None = None, seed: int | None = None
) -> pa.Table:
    """``old`` without the ``replaced`` column_ids, then ``new``.

    Row order carries no meaning (readers key rows by column_id), so nothing is sorted and,
    when no old row is replaced (a pure insert), the old rows are shared, not copied: the cost
    of an insert follows the new columns, not the collection.
    """
    if num_perm is not None and old.num_rows:
        if signature_matrix(old["minhash"].slice(0, 1)).shape[1] != num_perm or old["seed"][0].as_py() != seed:
            raise ValueError("previous signatures were built with another num_perm or seed; rebuild them all")
    stale = pc.is_in(old["column_id"], value_set=replaced)
    if pc.any(stale).as_py():
        old = old.filter(pc.invert(stale))
    return pa.concat_tables([old.cast(new.schema), new])
