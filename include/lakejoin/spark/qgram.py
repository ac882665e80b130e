"""Spark build of the q-gram family (``lakejoin.index.qgram``): JOSIE's tables over token sets.

The cells of the family's columns become token rows (``lakejoin.index.qgram.tokens``): each
column's distinct values, the :data:`~lakejoin.index.qgram.tokens.MAX_VALUES` with the smallest
60-bit SHA-256 kept, tokenized on the executors (``mapInArrow``), then the
:data:`~lakejoin.index.qgram.tokens.MAX_TOKENS` distinct tokens with the smallest hash kept — the
same bottom-k rule as ``column_tokens`` in process. The token rows are cells-shaped
(``dataset_id, column_id, value``), so JOSIE's Spark build (``lakejoin.spark.josie``) turns them
into the family's tables, full or incremental, with JOSIE's global tables, append rule and
staleness limit.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakejoin.index.qgram.tokens import MAX_TOKENS, MAX_VALUES, TOKEN_SCHEMA, tokenize_batches
from lakejoin.spark import josie
from lakejoin.spark.josie import APPEND_TABLES, GLOBAL_TABLES, STALENESS_LIMIT, staleness

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "column_tokens", "staleness"]


def build_tables(
    spark: SparkSession,
    cells: DataFrame,
    *,
    n_shards: int,
    previous: dict[str, DataFrame] | None = None,
    changed: set[str] | None = None,
) -> dict[str, DataFrame]:
    """The family's tables from ``cells`` (``CELLS_SCHEMA``), as ``lakejoin.spark.josie.build_tables``
    builds them from the columns' token rows (full, or incremental with ``previous`` and ``changed``)."""
    return josie.build_tables(spark, column_tokens(cells), n_shards=n_shards, previous=previous, changed=changed)


def column_tokens(cells: DataFrame) -> DataFrame:
    """Each column's kept tokens as cells-shaped rows (``dataset_id, column_id, value``)."""
    values = cells.where(F.col("value").isNotNull()).select("dataset_id", "column_id", "value").distinct()
    sampled = _bottom_k(values, "value", MAX_VALUES)
    tokens = sampled.mapInArrow(tokenize_batches, "dataset_id string, column_id long, value string").distinct()
    return _bottom_k(tokens, "value", MAX_TOKENS).select(*TOKEN_SCHEMA.names)


def _bottom_k(rows: DataFrame, text: str, k: int) -> DataFrame:
    """Per column, the ``k`` rows whose ``text`` has the smallest ``hash60`` (then text)."""
    order = Window.partitionBy("column_id").orderBy(_hash60(F.col(text)), F.col(text))
    return rows.withColumn("_rank", F.row_number().over(order)).where(F.col("_rank") <= k).drop("_rank")


def _hash60(text: Column) -> Column:
    """``lakejoin.index.qgram.tokens.hash60`` as a Spark column."""
    return F.conv(F.substring(F.sha2(text, 256), 1, 15), 16, 10).cast("long")
