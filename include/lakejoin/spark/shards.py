"""The shard rule of ``lakejoin.index.shards`` as a Spark column expression."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakejoin.index.shards import SHARD


def shard_column(n_shards: int, dataset_id: str = "dataset_id") -> Column:
    """``shard_of(dataset_id, n_shards)`` computed by Spark, as an ``int`` named ``shard``."""
    if n_shards < 1:
        raise ValueError(f"n_shards must be at least 1, got {n_shards}")
    high_bits = F.conv(F.substring(F.sha2(F.col(dataset_id), 256), 1, 15), 16, 10).cast("long")
    return (high_bits % F.lit(n_shards)).cast("int").alias(SHARD)
