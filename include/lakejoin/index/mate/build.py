"""MATE's index tables, built in memory (the Spark build in ``lakejoin.spark.mate`` makes the same).

Sharded by dataset (an ``int32`` ``shard`` column, ``lakejoin.index.shards.shard_of``): a table
lives in one shard, and MATE is table-local (paper §5.4: inserting, changing or deleting a table
touches only its PL items and row super keys), so a shard is self-contained. Per-row storage
(paper §5.3, about 6× smaller than a key per cell):

- ``postings``: ``value, dataset_id, column_id, row_id, shard`` — the single-value inverted
  index ``v ↦ PL(v) = {(T, C, R)}`` (DataXFormer style); one row per non-null normalized cell.
- ``superkeys``: ``dataset_id, row_id, superkey, bits, shard`` — the OR of XASH over every cell
  of the row, as ``bits/8`` big-endian bytes (so its hex reads like the note's test vectors).

Global (:data:`GLOBAL_TABLES`), one hash size for the whole index:

- ``params``: one row, ``bits`` (the XASH size every key has) and ``chosen`` (whether it came
  from :func:`choose_bits` rather than the caller).
- ``widths``: the histogram of non-null cells per row over the lake, ``width`` ascending and
  ``rows``; an incremental build adds the changed datasets' new rows and subtracts their old
  ones (counted in their ``previous`` postings), so the 90th percentile that chose ``bits`` can be
  recomputed from global data alone (:func:`staleness`).

XASH runs once per distinct value, then keys are ORed per row.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from lakejoin.index.mate.xash import xash_array
from lakejoin.index.shards import SHARD, histogram_update, shard_column
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_value

GLOBAL_TABLES = frozenset({"params", "widths"})
# :func:`staleness` is 0 or 1: rebuild once the width rule picks another hash size (rationale: ``lakejoin.spark.mate``)
STALENESS_LIMIT = 0.5
POSTINGS_SCHEMA = pa.schema(
    [
        ("value", pa.string()),
        ("dataset_id", pa.string()),
        ("column_id", pa.int64()),
        ("row_id", pa.int64()),
        (SHARD, pa.int32()),
    ]
)
SUPERKEYS_SCHEMA = pa.schema(
    [
        ("dataset_id", pa.string()),
        ("row_id", pa.int64()),
        ("superkey", pa.binary()),
        ("bits", pa.int32()),
        (SHARD, pa.int32()),
    ]
)
PARAMS_SCHEMA = pa.schema([("bits", pa.int32()), ("chosen", pa.bool_())])
WIDTHS_SCHEMA = pa.schema([("width", pa.int64()), ("rows", pa.int64())])

# Hash size by row width. The note (§5.8) measured the share of 1-bits in a row's super key:
# 128 bits reach 0.29 at 10 cells and 0.41 at 16, 256 bits 0.33 at 26 cells, 512 bits 0.18.
# A key more than about a quarter full lets most false positives through, so the width is
# picked for the 90th percentile of non-null cells per row: the smallest size that keeps
# such a row near or below that fill.
WIDTH_RULE = ((8, 128), (16, 256))
WIDEST = 512
ROW_WIDTH_QUANTILE = 0.9


def choose_bits(cells_per_row_p90: float) -> int:
    """XASH size for a lake whose 90th-percentile row has ``cells_per_row_p90`` non-null cells."""
    for max_cells, bits in WIDTH_RULE:
        if cells_per_row_p90 <= max_cells:
            return bits
    return WIDEST


def cells_from_frames(tables: Mapping[str, pd.DataFrame]) -> pa.Table:
    """The lake's long form (``CELLS_SCHEMA``) for in-memory data frames, keyed by dataset id.

    Column ids are assigned in (dataset id, column ordinal) order, starting at 0; row ids are
    row positions. Values are normalized once per distinct raw value of a column.
    """
    parts = []
    column_id = 0
    for dataset_id in sorted(tables):
        frame = tables[dataset_id]
        for name in frame.columns:
            codes, uniques = pd.factorize(frame[name], use_na_sentinel=True)
            normalized = np.array([normalize_value(u) for u in uniques] + [None], dtype=object)
            raw = np.array([str(u) for u in uniques] + [None], dtype=object)
            values, raws = normalized[codes], raw[codes]  # code -1 picks the trailing None
            keep = np.flatnonzero(pd.notna(values))
            raws = np.where(raws[keep] == values[keep], None, raws[keep])
            parts.append(
                pa.table(
                    {
                        "dataset_id": pa.array([dataset_id] * len(keep), pa.string()),
                        "column_id": pa.array(np.full(len(keep), column_id, np.int64)),
                        "row_id": pa.array(keep.astype(np.int64)),
                        "value": pa.array(values[keep], pa.string()),
                        "raw": pa.array(raws, pa.string()),
                    },
                    schema=CELLS_SCHEMA,
                )
            )
            column_id += 1
    return pa.concat_tables(parts) if parts else CELLS_SCHEMA.empty_table()


def row_widths(cells: pa.Table) -> np.ndarray:
    """Non-null cells of each (dataset, row) of ``cells``."""
    return cells.group_by(["dataset_id", "row_id"]).aggregate([([], "count_all")])["count_all"].to_numpy()


def widths_table(widths: np.ndarray, rows: np.ndarray | None = None) -> pa.Table:
    """The ``widths`` histogram: each distinct width ascending with its summed row count (one
    row each when ``rows`` is None; negative counts retract rows), widths left empty dropped."""
    distinct, totals = histogram_update(widths, rows, "row-width histogram")
    return pa.table({"width": distinct, "rows": totals}, schema=WIDTHS_SCHEMA)


def width_quantile(widths: pa.Table, q: float = ROW_WIDTH_QUANTILE) -> float:
    """``np.quantile`` (linear) of the row widths the histogram stands for; 0 for no rows."""
    values, counts = widths["width"].to_numpy(), widths["rows"].to_numpy()
    if counts.sum() == 0:
        return 0.0
    position = q * (counts.sum() - 1)
    ends = np.cumsum(counts)  # rows 0..ends[i]-1 have width values[<= i]
    below, above = (
        values[np.searchsorted(ends, int(i), side="right")] for i in (np.floor(position), np.ceil(position))
    )
    return float(below + (position - np.floor(position)) * (above - below))


def params_table(bits: int, chosen: bool) -> pa.Table:
    """The ``params`` row: the XASH size in bits, and whether :func:`choose_bits` chose it."""
    return pa.table({"bits": [bits], "chosen": [chosen]}, schema=PARAMS_SCHEMA)


def check_bits(params: pa.Table, bits: int | None) -> None:
    """An incremental build keeps the index's hash size: another ``bits`` would need every key."""
    if params.num_rows != 1:
        raise ValueError(f"params must hold one row, got {params.num_rows}")
    if bits and bits != params["bits"][0].as_py():
        raise ValueError(f"the index hashes with {params['bits'][0].as_py()} bits, not {bits}: rebuild it in full")


def staleness(params: pa.Table, widths: pa.Table) -> float:
    """1.0 when the index's chosen hash size is not what :func:`choose_bits` picks for the
    current row widths (the next build should rehash every row), else 0.0; a size the caller
    fixed is never stale."""
    if params.num_rows == 0 or not params["chosen"][0].as_py():
        return 0.0
    return float(choose_bits(width_quantile(widths)) != params["bits"][0].as_py())


def build_from_cells(
    cells: pa.Table,
    bits: int | None = None,
    *,
    n_shards: int = 1,
    previous: Mapping[str, pa.Table] | None = None,
    changed: Collection[str] = (),
) -> dict[str, pa.Table]:
    """``postings`` and ``superkeys`` (sharded), ``params`` and ``widths`` (global) from cells
    (``CELLS_SCHEMA``).

    Full build: the hash size is ``bits`` if given, else :func:`choose_bits` on the 90th
    percentile of the row widths. Incremental (``previous``: the last build's sharded tables cut
    to the rewritten shards, its global tables whole; ``changed``: the datasets added, changed or
    removed): the index's hash size is kept, only the ``changed`` datasets' cells are indexed,
    their previous rows dropped and the rewritten shards' other rows carried over.
    """
    if previous is None:
        widths = widths_table(row_widths(cells))
        params = params_table(bits or choose_bits(width_quantile(widths)), bits is None)
    else:
        params = previous["params"]
        check_bits(params, bits)
        cells = cells.filter(pc.is_in(cells["dataset_id"], value_set=pa.array(sorted(changed), pa.string())))
        old = previous["postings"].filter(_of(previous["postings"], changed))
        new_widths, old_widths = row_widths(cells), row_widths(old)
        widths = widths_table(
            np.concatenate([previous["widths"]["width"].to_numpy(), new_widths, old_widths]),
            np.concatenate(
                [previous["widths"]["rows"].to_numpy(), np.ones_like(new_widths), -np.ones_like(old_widths)]
            ),
        )
    bits = params["bits"][0].as_py()
    postings = (
        cells.select(["value", "dataset_id", "column_id", "row_id"])
        .append_column(SHARD, shard_column(cells["dataset_id"], n_shards))
        .cast(POSTINGS_SCHEMA)
    )
    superkeys = row_superkeys(cells, bits, n_shards)
    if previous is not None:
        postings = _carry_over(previous["postings"], postings, changed)
        superkeys = _carry_over(previous["superkeys"], superkeys, changed)
    return {"postings": postings, "superkeys": superkeys, "params": params, "widths": widths}


def row_superkeys(cells: pa.Table, bits: int, n_shards: int) -> pa.Table:
    """One row per (dataset, row) of ``cells`` (non-null ``value``, ``dataset_id``, ``row_id``):
    the OR of its cells' XASH words (``SUPERKEYS_SCHEMA``). The Spark build runs it per shard."""
    if cells.num_rows == 0:
        return SUPERKEYS_SCHEMA.empty_table()
    # XASH once per distinct value, then OR the words of each row's cells together.
    encoded = pc.dictionary_encode(cells["value"]).combine_chunks()
    value_words = xash_array(encoded.dictionary, bits)
    datasets = pc.dictionary_encode(cells["dataset_id"]).combine_chunks()
    row_ids = cells["row_id"].to_numpy()
    if row_ids.min() < 0 or row_ids.max() >= 1 << 32:
        raise ValueError("row ids must lie in [0, 2**32)")
    # (dataset, row) as one int64, numbered in order of first appearance.
    row_codes, row_keys = pd.factorize((datasets.indices.to_numpy().astype(np.int64) << 32) | row_ids)
    words = np.zeros((len(row_keys), value_words.shape[1]), np.uint64)
    _or_rows(row_codes, encoded.indices.to_numpy(), value_words, words)
    keys = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(bits // 8), len(row_keys), [None, pa.py_buffer(words.astype(">u8").tobytes())]
    )
    dataset_ids = datasets.dictionary.take(pa.array(row_keys >> 32)).cast(pa.string())
    return pa.table(
        {
            "dataset_id": dataset_ids,
            "row_id": pa.array(row_keys & 0xFFFFFFFF),
            "superkey": keys.cast(pa.binary()),
            "bits": pa.array(np.full(len(row_keys), bits, np.int32)),
            SHARD: shard_column(dataset_ids, n_shards),
        },
        schema=SUPERKEYS_SCHEMA,
    )


@njit(cache=True, nogil=True)
def _or_rows(row_codes: np.ndarray, value_codes: np.ndarray, value_words: np.ndarray, words: np.ndarray) -> None:
    """``words[row_codes[i]] |= value_words[value_codes[i]]`` for each cell i, in one pass (no
    sort, no per-cell copy of the value's words)."""
    for i in range(len(row_codes)):
        row, value = row_codes[i], value_codes[i]
        for w in range(words.shape[1]):
            words[row, w] |= value_words[value, w]


def _of(table: pa.Table, datasets: Collection[str]) -> pa.ChunkedArray:
    """Mask of ``table``'s rows that belong to ``datasets``."""
    return pc.is_in(table["dataset_id"], value_set=pa.array(sorted(datasets), pa.string()))


def _carry_over(old: pa.Table, new: pa.Table, changed: Collection[str]) -> pa.Table:
    """``old`` without the rows of ``changed`` datasets, then ``new`` (row order means nothing)."""
    return pa.concat_tables([old.filter(pc.invert(_of(old, changed))).select(new.schema.names).cast(new.schema), new])


def build_in_memory(
    tables: Mapping[str, pd.DataFrame], bits: int | None = None, n_shards: int = 1
) -> dict[str, pa.Table]:
    """MATE's index tables for data frames keyed by dataset id, without Spark."""
    return build_from_cells(cells_from_frames(tables), bits, n_shards=n_shards)


def build_tables(cells: pa.Table, *, n_shards: int) -> dict[str, pa.Table]:
    """The full build of ``lakejoin.spark.mate`` in this process, for a lake small enough to
    build here (``lakejoin.spark.indexing``): ``cells`` are ``lake/cells`` rows of the columns
    MATE indexes."""
    return build_from_cells(cells.filter(pc.is_valid(cells["value"])), n_shards=n_shards)


def update_tables(
    cells: pa.Table,
    *,
    n_shards: int,
    previous: Mapping[str, pa.Table],
    changed: Collection[str],
    bits: int | None = None,
) -> dict[str, pa.Table]:
    """The incremental build of ``lakejoin.spark.mate.build_tables`` in this process (for an
    update small enough to run here, ``lakejoin.spark.indexing``): ``cells`` are the changed
    datasets' ``lake/cells`` rows."""
    present = cells.filter(pc.is_valid(cells["value"]))
    return build_from_cells(present, bits, n_shards=n_shards, previous=previous, changed=changed)
