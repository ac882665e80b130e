"""MATE's index tables, built in memory (the Spark build in ``lakejoin.spark.mate`` makes the same).

Two tables (paper §5.3, "per row" storage, which is about 6× smaller than a key per cell):

- ``postings``: ``value, dataset_id, column_id, row_id`` — the single-value inverted index
  ``v ↦ PL(v) = {(T, C, R)}`` (DataXFormer style); one row per non-null normalized cell.
- ``superkeys``: ``dataset_id, row_id, superkey, bits`` — the OR of XASH over every cell of the
  row, as ``bits/8`` big-endian bytes (so its hex reads like the note's test vectors).

XASH runs once per distinct value, then keys are ORed per row. The hash size is chosen from
the row width (see ``choose_bits``) unless given.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.mate.xash import xash_words
from lakejoin.lake.schemas import CELLS_SCHEMA
from lakejoin.normalize import normalize_value

POSTINGS_SCHEMA = pa.schema(
    [("value", pa.string()), ("dataset_id", pa.string()), ("column_id", pa.int64()), ("row_id", pa.int64())]
)
SUPERKEYS_SCHEMA = pa.schema(
    [("dataset_id", pa.string()), ("row_id", pa.int64()), ("superkey", pa.binary()), ("bits", pa.int32())]
)

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


def row_width_p90(cells: pa.Table) -> float:
    """90th percentile of non-null cells per (dataset, row)."""
    widths = cells.group_by(["dataset_id", "row_id"]).aggregate([([], "count_all")])["count_all"]
    return float(np.quantile(widths.to_numpy(), ROW_WIDTH_QUANTILE)) if len(widths) else 0.0


def build_from_cells(cells: pa.Table, bits: int | None = None) -> dict[str, pa.Table]:
    """``postings`` and ``superkeys`` from cells (``CELLS_SCHEMA``)."""
    bits = bits or choose_bits(row_width_p90(cells))
    postings = cells.select(["value", "dataset_id", "column_id", "row_id"]).cast(POSTINGS_SCHEMA)
    if cells.num_rows == 0:
        return {"postings": postings, "superkeys": SUPERKEYS_SCHEMA.empty_table()}
    # XASH once per distinct value, then OR the words of each row's cells together.
    encoded = pc.dictionary_encode(cells["value"]).combine_chunks()
    value_words = xash_words(encoded.dictionary.to_pylist(), bits)
    rows = pd.DataFrame({"dataset_id": cells["dataset_id"].to_numpy(), "row_id": cells["row_id"].to_numpy()})
    row_codes, row_keys = pd.MultiIndex.from_frame(rows).factorize()
    order = np.argsort(row_codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(row_codes[order]) != 0])
    words = np.bitwise_or.reduceat(value_words[encoded.indices.to_numpy()[order]], starts, axis=0)
    blob = words.astype(">u8").tobytes()
    width = bits // 8
    superkeys = pa.table(
        {
            "dataset_id": pa.array(row_keys.get_level_values(0)[row_codes[order][starts]], pa.string()),
            "row_id": pa.array(row_keys.get_level_values(1)[row_codes[order][starts]].astype(np.int64)),
            "superkey": pa.array([blob[i * width : (i + 1) * width] for i in range(len(starts))], pa.binary()),
            "bits": pa.array(np.full(len(starts), bits, np.int32)),
        },
        schema=SUPERKEYS_SCHEMA,
    )
    return {"postings": postings, "superkeys": superkeys}


def build_in_memory(tables: Mapping[str, pd.DataFrame], bits: int | None = None) -> dict[str, pa.Table]:
    """MATE's index tables for data frames keyed by dataset id, without Spark."""
    return build_from_cells(cells_from_frames(tables), bits)
