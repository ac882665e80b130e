"""Spark build and incremental maintenance of JOSIE's index tables (thesis §3.4.2).

``build_tables`` turns the lake's cells into the ``tokens``/``sets``/``postings`` tables of
``lakejoin.index.josie.tokens`` (same schemas, equal to ``build_in_memory`` on the same
values). Every step is a distributed DataFrame operation; the driver only collects one
count per sort partition (to turn a global sort into consecutive TokenIDs) and, for an
update, the largest TokenID and two counts for the rebuild decision.

Incremental maintenance (the thesis's ADD/DELETE cases, applied per dataset, which is how
the lake changes): the sets of every ``changed`` dataset are removed and re-added from
``cells`` (a changed dataset with no cells is thereby removed). Existing tokens keep their
TokenID, so positions in untouched sets never move (cases 1–2); tokens never seen before take
TokenIDs after the current maximum, ordered among themselves like a full build (cases 3–4),
and — a choice of ours, [D] — form duplicate groups among themselves, since their lists are
complete when they are added. Every existing token whose posting list gained or lost a set
leaves its duplicate group (``group_id = -token_id - 1``, a group of its own); ``group_size``
keeps the size of the group it had at the last full build.

Rebuild rule: the *lost-sharing share* is the fraction of tokens that were in a duplicate
group of two or more at the last full build and have since left it. Past
``REBUILD_THRESHOLD`` the update ends in a full rebuild (a fresh global order and fresh
groups), made from the updated index itself, so ``cells`` never needs the whole lake.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.index.josie.tokens import SCHEMAS

log = logging.getLogger(__name__)

# Measured with `bench_josie.py --quick --staleness` (2026-11-22, shared 2-core machine): on the
# open-data lake (57% of tokens in duplicate groups) the lists JOSIE reads grew by 1.6%, 4.8%,
# 6.1% and 11.8% with 10%, 20%, 30% and 50% of shared lists out of their group; latency changes
# stayed inside the machine's noise, and the web-table lake (1% shared) did not move. 20% keeps
# the extra list reads near 5% while sparing a full rebuild (a global re-sort) on most updates.
REBUILD_THRESHOLD = 0.2


def build_tables(
    spark: SparkSession,
    cells: DataFrame,
    *,
    previous: dict[str, DataFrame] | None = None,
    changed: set[str] | None = None,
    rebuild_threshold: float = REBUILD_THRESHOLD,
) -> dict[str, DataFrame]:
    """JOSIE's index tables from ``cells`` (``CELLS_SCHEMA``; a set is one ``column_id``).

    Without ``previous`` this is a full build. With ``previous`` (the tables of the last
    build) and ``changed`` (dataset ids whose cells were added, replaced or removed), the
    tables are updated in place of a rebuild, unless the lost-sharing share then exceeds
    ``rebuild_threshold``.
    """
    raw = _raw_tokens(cells)
    if previous is None:
        return _full_build(spark, raw)
    if changed is None:
        raise ValueError("build_tables: `changed` dataset ids are required with `previous` tables")
    missing = set(SCHEMAS) - set(previous)
    if missing:
        raise ValueError(f"build_tables: previous tables missing {sorted(missing)}")
    updated = _update(spark, raw, previous, sorted(changed))
    share = lost_sharing_share(updated["tokens"])
    if share > rebuild_threshold:
        log.info("JOSIE: %.1f%% of shared lists lost their group; full rebuild", 100 * share)
        return _full_build(spark, _raw_tokens_of_index(updated))
    return updated


def lost_sharing_share(tokens: DataFrame) -> float:
    """Share of tokens in a duplicate group at the last full build that have left it since."""
    row = tokens.agg(
        F.sum(F.when((F.col("group_id") < 0) & (F.col("group_size") > 1), 1).otherwise(0)).alias("lost"),
        F.sum(F.when(F.col("group_size") > 1, 1).otherwise(0)).alias("shared"),
    ).first()
    return (row["lost"] or 0) / row["shared"] if row["shared"] else 0.0


def _raw_tokens(cells: DataFrame) -> DataFrame:
    """Step 1, RawTokens: distinct (token, set_id, dataset_id)."""
    return (
        cells.where(F.col("value").isNotNull())
        .select(F.col("value").alias("token"), F.col("column_id").alias("set_id"), "dataset_id")
        .distinct()
    )


def _raw_tokens_of_index(tables: dict[str, DataFrame]) -> DataFrame:
    return tables["postings"].join(tables["tokens"].select("token_id", "token"), "token_id").select("token", "set_id", "dataset_id")


def _full_build(spark: SparkSession, raw: DataFrame) -> dict[str, DataFrame]:
    tokens = _ordered_tokens(spark, raw, first_id=0)
    sets, postings = _integer_sets(raw, tokens)
    return _tables(tokens, sets, postings)


def _ordered_tokens(spark: SparkSession, raw: DataFrame, first_id: int) -> DataFrame:
    """Steps 2–3: TokenIDs from ``first_id`` in the order (length, Murmur3 hash, list, token),
    and duplicate groups named by their first TokenID."""
    lists = (
        raw.groupBy("token")
        .agg(F.array_sort(F.collect_list("set_id")).alias("sets"))
        .withColumn("frequency", F.size("sets"))
        .withColumn("hash", F.hash("sets"))
    )
    ordered = _consecutive_ids(spark, lists.orderBy("frequency", "hash", "sets", "token"), first_id)
    same_list = Window.partitionBy("frequency", "hash", "sets")
    return ordered.select(
        "token",
        "token_id",
        F.min("token_id").over(same_list).alias("group_id"),
        F.count("*").over(same_list).alias("group_size"),
        "frequency",
    )


def _consecutive_ids(spark: SparkSession, ordered: DataFrame, first_id: int) -> DataFrame:
    """Number the rows of a globally sorted DataFrame ``first_id, first_id+1, …``.

    ``monotonically_increasing_id`` puts the partition id in the upper 31 bits and the row
    within the partition in the lower 33; adding each partition's row offset (one count
    per partition reaches the driver) makes the ids consecutive. The sorted rows are
    checkpointed so the numbering sees the same partitioning as the counts.
    """
    tagged = ordered.withColumn("_part", F.spark_partition_id()).withColumn("_row", F.monotonically_increasing_id()).localCheckpoint()
    counts = sorted((r["_part"], r["count"]) for r in tagged.groupBy("_part").count().collect())
    offsets, total = [], first_id
    for part, count in counts:
        offsets.append((part, total))
        total += count
    offset_df = spark.createDataFrame(offsets or [(0, first_id)], "_part int, _offset long")
    row_in_part = F.col("_row") - F.shiftleft(F.col("_part").cast("long"), 33)
    return tagged.join(F.broadcast(offset_df), "_part").withColumn("token_id", F.col("_offset") + row_in_part).drop("_part", "_row", "_offset")


def _integer_sets(raw: DataFrame, tokens: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Steps 4–5: integer sets (TokenIDs ascending) and posting entries with 0-based positions."""
    sets = (
        raw.join(tokens.select("token", "token_id"), "token")
        .groupBy("set_id", "dataset_id")
        .agg(F.array_sort(F.collect_list("token_id")).alias("tokens"))
        .withColumn("size", F.size("tokens"))
    )
    postings = sets.select(
        "set_id", "dataset_id", F.col("size").alias("set_size"), F.posexplode("tokens").alias("position", "token_id")
    )
    return sets, postings


def _update(spark: SparkSession, raw: DataFrame, previous: dict[str, DataFrame], changed: list[str]) -> dict[str, DataFrame]:
    """Replace the sets of the ``changed`` datasets, keeping the global order of old tokens."""
    old_tokens, old_sets, old_postings = previous["tokens"], previous["sets"], previous["postings"]
    in_changed = F.col("dataset_id").isin(changed)
    added = raw.where(in_changed)
    first_new = (old_tokens.agg(F.max("token_id")).first()[0] or -1) + 1
    fresh = _ordered_tokens(spark, added.join(old_tokens.select("token"), "token", "left_anti"), first_new)
    token_ids = old_tokens.select("token", "token_id").unionByName(fresh.select("token", "token_id"))
    new_sets, new_postings = _integer_sets(added, token_ids)

    # Posting-list changes: +1 for an added (token, set) entry, -1 for a removed one.
    entry_changes = (
        old_postings.where(in_changed).select("token_id", "set_id", F.lit(-1).alias("change"))
        .unionByName(new_postings.select("token_id", "set_id", F.lit(1).alias("change")))
        .groupBy("token_id", "set_id")
        .agg(F.sum("change").alias("change"))
        .where(F.col("change") != 0)
        .groupBy("token_id")
        .agg(F.sum("change").alias("change"))
    )
    kept_tokens = (
        old_tokens.join(entry_changes, "token_id", "left")
        .select(
            "token",
            "token_id",
            F.when(F.col("change").isNull(), F.col("group_id")).otherwise(-F.col("token_id") - 1).alias("group_id"),
            "group_size",
            (F.col("frequency") + F.coalesce(F.col("change"), F.lit(0))).alias("frequency"),
        )
        .where(F.col("frequency") > 0)
    )
    fresh_tables = _tables(fresh, new_sets, new_postings)
    return _tables(
        kept_tokens.unionByName(fresh_tables["tokens"]),
        old_sets.where(~in_changed).unionByName(fresh_tables["sets"]),
        old_postings.where(~in_changed).unionByName(fresh_tables["postings"]),
    )


def _tables(tokens: DataFrame, sets: DataFrame, postings: DataFrame) -> dict[str, DataFrame]:
    """The three tables, columns selected and cast to the schemas of ``lakejoin.index.josie.tokens``."""
    tables = {"tokens": tokens, "sets": sets, "postings": postings}
    return {
        name: df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in from_arrow_schema(SCHEMAS[name]).fields])
        for name, df in tables.items()
    }
