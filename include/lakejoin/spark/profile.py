"""Column profiles over ``lake/cells`` with Spark (the Spark side of ``lakejoin.profile``).

The job computes each column's aggregates (``lakejoin.profile.ColumnAggregates``) with Spark
built-ins and turns them into profile rows with ``lakejoin.profile.finish_profile`` inside the
executors (``mapInArrow``), so Spark and the Python oracle share every decision and nothing
funnels through the driver. Patterns run once per distinct (column, value), not per cell:

1. cells -> one row per (column, value, original) with its cell count ``n``;
2. -> one row per (column, value): ``n``, original-case pattern counts, original lengths;
3. -> one row per column: counts, exact distinct, pattern/value-set match counts, numeric
   min/max/mean, lengths; plus the squared deviations from the mean (second pass over 2)
   and the ``TOP_K`` most frequent values (window over 2).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.profile import MATCH_KEYS, ORIGINAL_PATTERNS, PROFILE_SCHEMA, TOP_K, VALUE_PATTERNS, VALUE_SETS, finish_profile, types
from lakejoin.profile.selection import DEFAULT_RULES, SelectionRules

COLUMN_FIELDS = ("column_id", "dataset_id", "ordinal", "name", "rows")
HEADER_FIELDS = ("header", "name_source")
MATCH_PREFIX = "m_"


def _require(frame: DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = sorted(set(needed) - set(frame.columns))
    if missing:
        raise ValueError(f"{what} DataFrame lacks columns {missing}")


def _weighted_count(condition: Column, weight: str = "n") -> Column:
    return F.sum(F.when(condition, F.col(weight)).otherwise(0))


def _per_value(cells: DataFrame) -> DataFrame:
    original = F.coalesce(F.col("raw"), F.col("value"))
    per_original = cells.groupBy("column_id", "value", original.alias("original")).agg(F.count(F.lit(1)).alias("n"))
    length = F.length("original")
    per_value = per_original.groupBy("column_id", "value").agg(
        F.sum("n").alias("n"),
        *[_weighted_count(F.col("original").rlike(p)).alias(MATCH_PREFIX + k) for k, p in ORIGINAL_PATTERNS.items()],
        F.min(length).alias("length_min"),
        F.max(length).alias("length_max"),
        F.sum(length * F.col("n")).alias("length_sum"),
    )
    number = F.when(F.col("value").rlike(types.VALUE_PATTERNS["decimal"]), F.col("value").cast("double"))
    return per_value.withColumn("x", number)


def _per_column(per_value: DataFrame) -> DataFrame:
    value = F.col("value")
    matches = [_weighted_count(value.rlike(p)).alias(MATCH_PREFIX + k) for k, p in VALUE_PATTERNS.items()]
    matches += [_weighted_count(value.isin(sorted(members))).alias(MATCH_PREFIX + k) for k, members in VALUE_SETS.items()]
    matches += [F.sum(MATCH_PREFIX + k).alias(MATCH_PREFIX + k) for k in ORIGINAL_PATTERNS]
    numeric_count = _weighted_count(F.col("x").isNotNull())
    stats = per_value.groupBy("column_id").agg(
        F.sum("n").alias("count"),
        F.count(F.lit(1)).alias("distinct"),
        *matches,
        numeric_count.alias("numeric_count"),
        F.min("x").alias("numeric_min"),
        F.max("x").alias("numeric_max"),
        (F.sum(F.col("x") * F.col("n")) / numeric_count).alias("numeric_mean"),
        F.min("length_min").alias("length_min"),
        F.max("length_max").alias("length_max"),
        F.sum("length_sum").alias("length_sum"),
    )
    deviation = F.col("x") - F.col("numeric_mean")
    spread = (
        per_value.where(F.col("x").isNotNull())
        .join(F.broadcast(stats.select("column_id", "numeric_mean")), "column_id")
        .groupBy("column_id")
        .agg(F.sum(deviation * deviation * F.col("n")).alias("numeric_sumsq"))
    )
    rank = F.row_number().over(Window.partitionBy("column_id").orderBy(F.desc("n"), F.asc("value")))
    top = (
        per_value.withColumn("rank", rank)
        .where(F.col("rank") <= TOP_K)
        .groupBy("column_id")
        .agg(F.collect_list(F.struct("value", "n")).alias("top"))
    )
    return stats.join(spread, "column_id", "left").join(top, "column_id", "left")


def _finish(rules: SelectionRules):
    def finish(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = []
            for agg in batch.to_pylist():
                agg["matches"] = {k: agg.pop(MATCH_PREFIX + k) for k in MATCH_KEYS}
                agg["top"] = [(t["value"], t["n"]) for t in agg["top"] or []]
                rows.append(finish_profile(agg, rules))
            yield pa.RecordBatch.from_pylist(rows, schema=PROFILE_SCHEMA)

    return finish


def profile_columns(spark: SparkSession, cells: DataFrame, columns: DataFrame, rules: SelectionRules = DEFAULT_RULES) -> DataFrame:
    """One profile row per row of ``columns`` (schema ``lakejoin.profile.PROFILE_SCHEMA``).

    ``cells`` has ``lakejoin.lake.schemas.CELLS_SCHEMA``; ``columns`` has at least
    column_id, dataset_id, ordinal, name and ``rows`` (the dataset's row count), so that
    ``nulls = rows - count``, and optionally ``HEADER_FIELDS`` (carried to the profile).
    Columns without any cell get count 0 and type ``string``.
    """
    _require(cells, ("column_id", "value", "raw"), "cells")
    _require(columns, COLUMN_FIELDS, "columns")
    described = columns.select(
        F.col("column_id").cast("long"),
        F.col("dataset_id").cast("string"),
        F.col("ordinal").cast("int"),
        F.col("name").cast("string"),
        F.col("rows").cast("long"),
        *[(F.col(f) if f in columns.columns else F.lit(None)).cast("string").alias(f) for f in HEADER_FIELDS],
    )
    aggregates = described.join(_per_column(_per_value(cells)), "column_id", "left")
    return aggregates.mapInArrow(_finish(rules), from_arrow_schema(PROFILE_SCHEMA))
