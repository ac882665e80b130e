"""MATE's index build in Spark: the same ``postings`` and ``superkeys`` tables as
``lakejoin.index.mate.build`` (paper §5.3), computed in executors.

- XASH runs once per distinct value: a distinct-values pass, hashed by ``mapInArrow`` into
  ``bits/64`` int64 words, then joined back to the cells.
- A row's super key is ``bit_or`` of its cells' words per word, packed into ``bits/8``
  big-endian bytes (the hex of each word, left-padded, concatenated, unhexed).
- Incremental (paper §5.4: maintenance is local to a table): with ``previous`` and ``changed``,
  rows of unchanged datasets are kept as they were and only changed datasets are recomputed;
  a removed dataset is in ``changed`` and absent from ``cells``, so it simply disappears.

Hash size: ``bits`` if given, else the previous build's size (all keys of an index must share
one size), else ``lakejoin.index.mate.build.choose_bits`` on the 90th percentile of non-null
cells per row. Passing a ``bits`` that differs from the previous build rebuilds everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakejoin.index.mate.build import ROW_WIDTH_QUANTILE, choose_bits
from lakejoin.index.mate.xash import words_per_key, xash_words

POSTING_COLUMNS = ["value", "dataset_id", "column_id", "row_id"]
SUPERKEY_COLUMNS = ["dataset_id", "row_id", "superkey", "bits"]


def build_tables(
    spark: SparkSession,
    cells: DataFrame,
    *,
    previous: dict[str, DataFrame] | None = None,
    changed: set[str] | None = None,
    bits: int | None = None,
) -> dict[str, DataFrame]:
    """``postings`` and ``superkeys`` for the current lake's ``cells`` (``CELLS_SCHEMA``)."""
    cells = cells.where(F.col("value").isNotNull())
    previous_bits = _previous_bits(previous) if previous is not None and changed is not None else None
    bits = bits or previous_bits or choose_bits(_row_width_quantile(cells))
    incremental = previous_bits == bits
    todo = cells.where(F.col("dataset_id").isin(sorted(changed))) if incremental else cells

    postings = todo.select(*POSTING_COLUMNS)
    superkeys = _superkeys(todo, bits)
    if incremental:
        unchanged = ~F.col("dataset_id").isin(sorted(changed))
        postings = previous["postings"].where(unchanged).select(*POSTING_COLUMNS).unionByName(postings)
        superkeys = previous["superkeys"].where(unchanged).select(*SUPERKEY_COLUMNS).unionByName(superkeys)
    return {"postings": postings, "superkeys": superkeys}


def _previous_bits(previous: dict[str, DataFrame]) -> int | None:
    """Hash size of the previous build (one row read), None if it holds no keys."""
    first = previous["superkeys"].select("bits").limit(1).collect()
    return int(first[0]["bits"]) if first else None


def _row_width_quantile(cells: DataFrame) -> float:
    """The 90th percentile of non-null cells per row (one number comes back to the driver)."""
    widths = cells.groupBy("dataset_id", "row_id").count()
    value = widths.agg(F.percentile_approx("count", ROW_WIDTH_QUANTILE, 10_000)).first()[0]
    return float(value or 0)


def _xash_batches(bits: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: distinct values -> (value, w0..wn) with the XASH words as int64."""
    names = [f"w{i}" for i in range(words_per_key(bits))]

    def hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            values = batch.column("value")
            words = xash_words(values.to_pylist(), bits).view(np.int64)
            yield pa.RecordBatch.from_arrays([values, *(pa.array(words[:, i]) for i in range(len(names)))], ["value", *names])

    return hash_batches


def _superkeys(cells: DataFrame, bits: int) -> DataFrame:
    """OR of XASH over every cell of each (dataset, row), as big-endian key bytes."""
    names = [f"w{i}" for i in range(words_per_key(bits))]
    schema = "value string, " + ", ".join(f"{n} bigint" for n in names)
    hashed = cells.select("value").distinct().mapInArrow(_xash_batches(bits), schema)
    per_row = (
        cells.select("dataset_id", "row_id", "value")
        .join(hashed, "value")
        .groupBy("dataset_id", "row_id")
        .agg(*(F.bit_or(n).alias(n) for n in names))
    )
    # hex() of a bigint is its two's complement, i.e. the unsigned word, without leading zeros.
    key = F.unhex(F.concat(*(F.lpad(F.hex(n), 16, "0") for n in names)))
    return per_row.select("dataset_id", "row_id", key.alias("superkey"), F.lit(bits).cast("int").alias("bits"))
