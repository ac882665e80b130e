"""The Spark PEXESO build produces the tables ``build_in_memory`` produces, and updates."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakejoin.index.pexeso import build_in_memory, load
from test_pexeso import check_threshold, planted_lake

pytestmark = pytest.mark.spark

VECTOR_SCHEMA = "dataset_id string, column_id long, vector_id long, value string, vector array<float>"


def dataset_of(column_id: int) -> str:
    return f"d{column_id % 7}"


def vectors_frame(spark, columns: dict[int, np.ndarray]):
    rows = [
        (dataset_of(c), c, i, f"v{c}-{i}", v.tolist())
        for c, vectors in columns.items()
        for i, v in enumerate(vectors)
    ]
    return spark.createDataFrame(rows, VECTOR_SCHEMA)


def in_memory(columns: dict[int, np.ndarray], **options) -> dict[str, pa.Table]:
    values = {c: [f"v{c}-{i}" for i in range(len(v))] for c, v in columns.items()}
    return build_in_memory(columns, values=values, dataset_ids={c: dataset_of(c) for c in columns}, **options)


def rows(table: pa.Table, keys: list[str]) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(r[k] for k in keys))


KEYS = {
    "params": ["partition"],
    "pivots": ["partition", "pivot"],
    "mapped": ["partition", "column_id", "vector_id"],
    "cells": ["partition", "cell", "column_id"],
}


@pytest.fixture(scope="module")
def lake():
    return planted_lake(seed=11, dim=16, n_columns=40)


@pytest.mark.parametrize(
    "options",
    [{"n_pivots": 3, "levels": 4, "model": "glove-50"}, {"n_partitions": 3, "n_pivots": 2, "levels": 5}, {"sample_size": 300}],
    ids=["given", "partitions", "cost-model"],
)
def test_spark_build_equals_in_memory(spark, lake, options):
    from lakejoin.spark.pexeso import build_tables

    columns, queries = lake
    frames = build_tables(spark, vectors_frame(spark, columns), **options)
    expected = in_memory(columns, **options)
    assert set(frames) == set(expected)
    spark_tables = {name: frame.toArrow() for name, frame in frames.items()}
    for name, keys in KEYS.items():
        assert rows(spark_tables[name], keys) == rows(expected[name], keys), name
    searcher = load(spark_tables)
    for query in queries:
        check_threshold(searcher, columns, query, 0.06, 0.4)


def test_spark_incremental_update_equals_oracle(spark, lake):
    from lakejoin.spark.pexeso import build_tables

    columns, queries = lake
    before = {c: v for c, v in columns.items() if dataset_of(c) != "d3"}
    previous = build_tables(spark, vectors_frame(spark, before), n_pivots=3, levels=4, n_partitions=2)
    previous = {name: spark.createDataFrame(frame.toArrow().to_pandas(), frame.schema) for name, frame in previous.items()}
    # d3 arrives and d5 changes (its first column disappears)
    changed = {c: v for c, v in columns.items() if dataset_of(c) in ("d3", "d5")}
    dropped = min(c for c in changed if dataset_of(c) == "d5")
    changed.pop(dropped)
    frames = build_tables(spark, vectors_frame(spark, changed), previous=previous, changed=["d3", "d5"])
    tables = {name: frame.toArrow() for name, frame in frames.items()}
    pivots_before = rows(previous["pivots"].toArrow(), KEYS["pivots"])
    assert rows(tables["pivots"], KEYS["pivots"]) == pivots_before  # pivots are kept on update
    current = {c: v for c, v in columns.items() if c != dropped}
    assert tables["mapped"].num_rows == sum(len(v) for v in current.values())
    searcher = load(tables)
    for query in queries:
        for tau, T in ((0.04, 0.2), (0.06, 0.4)):
            check_threshold(searcher, current, query, tau, T)


def test_spark_build_rejects_bad_input(spark, lake):
    from lakejoin.spark.pexeso import build_tables

    columns, _ = lake
    frame = vectors_frame(spark, {1: columns[1000] * 2})
    with pytest.raises(ValueError, match="lack column"):
        build_tables(spark, frame.drop("value"))
    with pytest.raises(ValueError, match="metric"):
        build_tables(spark, frame, metric="cosine")
    with pytest.raises(ValueError, match="changed"):
        build_tables(spark, frame, previous={})
    with pytest.raises(Exception, match="L2-normalized"):
        build_tables(spark, frame, n_pivots=2, levels=2)["mapped"].count()
