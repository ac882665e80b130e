"""Spark build and incremental maintenance of JOSIE's sharded index tables (thesis §3.4.2).

``build_tables`` turns the lake's cells into the tables of ``lakejoin.index.josie.tokens``
(same schemas, equal to ``build_in_memory`` / ``update_in_memory`` on the same values): the
global ``tokens`` dictionary and its one-row ``dictionary`` summary, and the ``sets`` and
``postings`` sharded by their dataset. Every step is a distributed DataFrame operation; the
driver only collects one count per sort partition (to turn a global sort into consecutive
TokenIDs) and the one row of ``dictionary``.

Incremental maintenance (the thesis's ADD/DELETE cases, applied per dataset, which is how
the lake changes): the sets of every ``changed`` dataset are dropped from their shard and
re-added from the cells (a changed dataset with no cells is thereby removed); the other sets
of the rewritten shards are carried over as they are. Existing tokens keep their TokenID, so
positions in untouched sets never move (cases 1–2); tokens never seen before take TokenIDs
after the current maximum, ordered among themselves like a full build (cases 3–4), and are
the only rows of ``tokens`` the build returns (``APPEND_TABLES``). Nothing global is rewritten
per token: duplicate groups, which the thesis invalidates list by list, are found on load
from the lists a searcher actually holds (``tokens.duplicate_groups``).

Staleness: appended tokens sit after every old token whatever their frequency, and old
tokens keep their rank as their frequency drifts, so the order drifts from rarest-first; a
rare appended token then falls out of a query's prefix (read first, §3.2.2) and a frequent
old list takes its place. ``staleness`` is the share of the dictionary appended since the
last full build, read from the one-row ``dictionary`` table (its cost does not depend on the
lake). ``bench_josie.py --quick --staleness`` measures the posting entries read and the CPU time after
incremental batches against a fresh build (figures in the benchmarks history, docs):
``STALENESS_LIMIT`` = 0.15 keeps the extra posting reads near a fifth and query time within
about 1.2x a fresh build, while a full rebuild (a global re-sort of the whole lake) comes only
every few heavy batches or many light ones.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from lakejoin.index.josie.tokens import APPEND_TABLES, GLOBAL_TABLES, SCHEMAS, STALENESS_LIMIT, staleness
from lakejoin.spark.shards import shard_column

__all__ = ["APPEND_TABLES", "GLOBAL_TABLES", "STALENESS_LIMIT", "build_tables", "staleness"]


def build_tables(
    spark: SparkSession,
    cells: DataFrame,
    *,
    n_shards: int,
    previous: dict[str, DataFrame] | None = None,
    changed: set[str] | None = None,
) -> dict[str, DataFrame]:
    """JOSIE's index tables from ``cells`` (``CELLS_SCHEMA``; a set is one ``column_id``).

    Without ``previous`` this is a full build of every table. With ``previous`` (the last
    build's global tables whole, its sharded tables cut to the rewritten shards) and
    ``changed`` (dataset ids whose cells were added, replaced or removed; ``cells`` holds only
    theirs) it returns the rewritten shards' ``sets``/``postings``, the ``tokens`` to append
    and the new ``dictionary`` row.
    """
    raw = _raw_tokens(cells)
    if previous is None:
        tokens, count = _ordered_tokens(spark, raw, first_id=0)
        return _tables(tokens, _dictionary(spark, count, 0), *_integer_sets(raw, tokens, n_shards))
    if changed is None:
        raise ValueError("build_tables: `changed` dataset ids are required with `previous` tables")
    missing = set(SCHEMAS) - set(previous)
    if missing:
        raise ValueError(f"build_tables: previous tables missing {sorted(missing)}")
    return _update(spark, raw, previous, sorted(changed), n_shards)


def _raw_tokens(cells: DataFrame) -> DataFrame:
    """Step 1, RawTokens: distinct (token, set_id, dataset_id)."""
    return (
        cells.where(F.col("value").isNotNull())
        .select(F.col("value").alias("token"), F.col("column_id").alias("set_id"), "dataset_id")
        .distinct()
    )


def _ordered_tokens(spark: SparkSession, raw: DataFrame, first_id: int) -> tuple[DataFrame, int]:
    """Step 2: TokenIDs from ``first_id`` in the order (length, Murmur3 hash, list, token), and
    how many tokens were numbered. ``raw`` must hold every entry of these tokens' lists."""
    lists = (
        raw.groupBy("token")
        .agg(F.array_sort(F.collect_list("set_id")).alias("sets"))
        .withColumn("frequency", F.size("sets"))
        .withColumn("hash", F.hash("sets"))
    )
    return _consecutive_ids(spark, lists.orderBy("frequency", "hash", "sets", "token"), first_id)


def _consecutive_ids(spark: SparkSession, ordered: DataFrame, first_id: int) -> tuple[DataFrame, int]:
    """Number the rows of a globally sorted DataFrame ``first_id, first_id+1, …``; also return
    the row count.

    ``monotonically_increasing_id`` puts the partition id in the upper 31 bits and the row
    within the partition in the lower 33; adding each partition's row offset (one count
    per partition reaches the driver) makes the ids consecutive. The sorted rows are
    checkpointed so the numbering sees the same partitioning as the counts.
    """
    tagged = (
        ordered.withColumn("_part", F.spark_partition_id())
        .withColumn("_row", F.monotonically_increasing_id())
        .localCheckpoint()
    )
    counts = sorted((r["_part"], r["count"]) for r in tagged.groupBy("_part").count().collect())
    offsets, total = [], first_id
    for part, count in counts:
        offsets.append((part, total))
        total += count
    offset_df = spark.createDataFrame(offsets or [(0, first_id)], "_part int, _offset long")
    row_in_part = F.col("_row") - F.shiftleft(F.col("_part").cast("long"), 33)
    numbered = tagged.join(F.broadcast(offset_df), "_part").withColumn("token_id", F.col("_offset") + row_in_part)
    return numbered.select("token", "token_id"), total - first_id


def _integer_sets(raw: DataFrame, tokens: DataFrame, n_shards: int) -> tuple[DataFrame, DataFrame]:
    """Steps 4–5: integer sets (TokenIDs ascending) and posting entries with 0-based positions,
    each in its dataset's shard."""
    sets = (
        raw.join(tokens, "token")
        .groupBy("set_id", "dataset_id")
        .agg(F.array_sort(F.collect_list("token_id")).alias("tokens"))
        .withColumn("size", F.size("tokens"))
        .withColumn("shard", shard_column(n_shards))
    )
    postings = sets.select(
        "set_id",
        "dataset_id",
        "shard",
        F.col("size").alias("set_size"),
        F.posexplode("tokens").alias("position", "token_id"),
    )
    return sets, postings


def _dictionary(spark: SparkSession, full_build_tokens: int, appended_tokens: int) -> DataFrame:
    return spark.createDataFrame([(full_build_tokens, appended_tokens)], "full_build_tokens long, appended_tokens long")


def _update(
    spark: SparkSession, raw: DataFrame, previous: dict[str, DataFrame], changed: list[str], n_shards: int
) -> dict[str, DataFrame]:
    """Replace the sets of the ``changed`` datasets in their shards, appending new tokens."""
    old = previous["dictionary"].first()
    if old is None:
        raise ValueError("previous JOSIE dictionary table is empty")
    first_new = old["full_build_tokens"] + old["appended_tokens"]  # TokenIDs are consecutive from 0
    known = previous["tokens"].select("token", "token_id")
    fresh, count = _ordered_tokens(spark, raw.join(known.select("token"), "token", "left_anti"), first_new)
    sets, postings = _integer_sets(raw, known.unionByName(fresh), n_shards)
    kept = ~F.col("dataset_id").isin(changed)
    return _tables(
        fresh,
        _dictionary(spark, old["full_build_tokens"], old["appended_tokens"] + count),
        _cast("sets", previous["sets"].where(kept)).unionByName(_cast("sets", sets)),
        _cast("postings", previous["postings"].where(kept)).unionByName(_cast("postings", postings)),
    )


def _cast(name: str, df: DataFrame) -> DataFrame:
    """``df``'s columns selected and cast to the schema of table ``name`` (``lakejoin.index.josie.tokens``)."""
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in from_arrow_schema(SCHEMAS[name]).fields])


def _tables(tokens: DataFrame, dictionary: DataFrame, sets: DataFrame, postings: DataFrame) -> dict[str, DataFrame]:
    tables = {"tokens": tokens, "dictionary": dictionary, "sets": sets, "postings": postings}
    return {name: _cast(name, df) for name, df in tables.items()}
