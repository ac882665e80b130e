"""The Spark PEXESO build produces the tables ``build_in_memory`` produces, and updates
shard by shard as a fresh build of the same data answers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from testkit.pexeso import check_threshold, planted_lake, same_answers, unit

from lakejoin.index.pexeso import build_in_memory, load
from lakejoin.index.pexeso.update import APPEND_TABLES, GLOBAL_TABLES, update_tables
from lakejoin.index.shards import apply_update, in_shards, shards_of

pytestmark = pytest.mark.spark

VECTOR_SCHEMA = "dataset_id string, column_id long, vector_id long, value string, vector array<float>"


def dataset_of(column_id: int) -> str:
    return f"d{column_id % 7}"


def vector_rows(columns: dict[int, np.ndarray], datasets=dataset_of, tag: dict[int, int] | None = None) -> list[tuple]:
    return [
        (datasets(c), c, i, value(c, i, tag), v.tolist())
        for c, vectors in columns.items()
        for i, v in enumerate(vectors)
    ]


def vectors_frame(spark, columns: dict[int, np.ndarray], datasets=dataset_of, tag: dict[int, int] | None = None):
    return spark.createDataFrame(vector_rows(columns, datasets, tag), VECTOR_SCHEMA)


def vectors_table(columns: dict[int, np.ndarray], datasets=dataset_of, tag: dict[int, int] | None = None) -> pa.Table:
    """``vectors_frame``'s rows as Arrow: what the in-process incremental build takes."""
    names = ["dataset_id", "column_id", "vector_id", "value", "vector"]
    types = [pa.string(), pa.int64(), pa.int64(), pa.string(), pa.list_(pa.float32())]
    return pa.table(
        {n: pa.array(list(v), t) for n, t, v in zip(names, types, zip(*vector_rows(columns, datasets, tag)))}
    )


def value(column: int, i: int, tag: dict[int, int] | None = None) -> str:
    """A vector's text; ``tag`` (column → version) tells a column's versions apart."""
    return f"v{column}-{i}" + (f"@{tag[column]}" if tag else "")


def in_memory(
    columns: dict[int, np.ndarray], datasets=dataset_of, tag: dict[int, int] | None = None, **options
) -> dict[str, pa.Table]:
    values = {c: [value(c, i, tag) for i in range(len(v))] for c, v in columns.items()}
    return build_in_memory(columns, values=values, dataset_ids={c: datasets(c) for c in columns}, **options)


def frames(spark, tables: dict[str, pa.Table]) -> dict:
    return {name: spark.createDataFrame(t) for name, t in tables.items()}


def arrow(tables: dict) -> dict[str, pa.Table]:
    return {name: frame.toArrow() for name, frame in tables.items()}


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
    [
        {"n_pivots": 3, "levels": 4, "model": "glove-50", "n_shards": 1},
        {"n_partitions": 3, "n_pivots": 2, "levels": 5, "n_shards": 4},
        {"sample_size": 300, "n_shards": 3},
    ],
    ids=["given", "partitions-sharded", "cost-model-sharded"],
)
def test_spark_build_equals_in_memory(spark, lake, options):
    from lakejoin.spark.pexeso import build_tables

    columns, queries = lake
    built = build_tables(spark, vectors_frame(spark, columns), **options)
    expected = in_memory(columns, **options)
    assert set(built) == set(expected)
    spark_tables = arrow(built)
    for name, keys in KEYS.items():
        assert rows(spark_tables[name], keys) == rows(expected[name], keys), name
    searcher = load(spark_tables)
    for query in queries:
        check_threshold(searcher, columns, query, 0.06, 0.4)


def test_spark_incremental_update_equals_oracle(spark, lake):
    from lakejoin.spark.pexeso import build_tables, staleness

    columns, queries = lake
    n = 3
    before = {c: v for c, v in columns.items() if dataset_of(c) != "d3"}
    current = arrow(build_tables(spark, vectors_frame(spark, before), n_shards=n, n_pivots=3, levels=4, n_partitions=2))
    # d3 arrives and d5 changes (its first column disappears)
    changed = {c: v for c, v in columns.items() if dataset_of(c) in ("d3", "d5")}
    dropped = min(c for c in changed if dataset_of(c) == "d5")
    changed.pop(dropped)
    rewritten = shards_of(["d3", "d5"], n)
    previous = frames(spark, in_shards(current, rewritten, GLOBAL_TABLES))
    update = build_tables(spark, vectors_frame(spark, changed), n_shards=n, previous=previous, changed=["d3", "d5"])
    tables = apply_update(current, arrow(update), rewritten, GLOBAL_TABLES, APPEND_TABLES)
    assert rows(tables["pivots"], KEYS["pivots"]) == rows(
        current["pivots"], KEYS["pivots"]
    )  # pivots are kept on update
    current_columns = {c: v for c, v in columns.items() if c != dropped}
    assert tables["mapped"].num_rows == sum(len(v) for v in current_columns.values())
    params = tables["params"].to_pylist()
    assert sum(p["n_vectors"] for p in params) == tables["mapped"].num_rows
    assert sum(p["n_columns"] for p in params) == len(current_columns)
    inserted = sum(len(v) for v in changed.values())
    assert staleness(arrow(update)) == pytest.approx(inserted / tables["mapped"].num_rows)
    searcher = load(tables)
    for query in queries:
        for tau, T in ((0.04, 0.2), (0.06, 0.4)):
            check_threshold(searcher, current_columns, query, tau, T)


def random_batch(rng, data: dict[str, dict[int, np.ndarray]], pool: np.ndarray, next_id: list[int]) -> list[str]:
    """Adds, changes and removes a few datasets of ``data`` (dataset → column → vectors)."""

    def new_column() -> tuple[int, np.ndarray]:
        next_id[0] += 1
        size = int(rng.integers(8, 40))
        return next_id[0], unit(
            pool[rng.choice(len(pool), size, replace=False)] + rng.normal(scale=0.01, size=(size, pool.shape[1]))
        )

    names = sorted(data)
    changed = set(rng.choice(names, 2, replace=False).tolist())
    removed = str(rng.choice(sorted(set(names) - changed)))
    for name in changed:  # one column replaced in place (same column id, new vectors), one added
        columns = data[name]
        kept = int(rng.choice(sorted(columns)))
        columns[kept] = new_column()[1]
        columns.update([new_column()])
    del data[removed]
    added = f"new{next_id[0]}"
    data[added] = dict(new_column() for _ in range(2))
    return sorted(changed | {removed, added})


def test_spark_random_change_batches_equal_fresh_builds(spark):
    """Five batches applied shard by shard answer as fresh builds, and keep no stale row."""
    from lakejoin.spark.pexeso import build_tables

    rng = np.random.default_rng(3)
    n, dim = 4, 12
    pool = unit(rng.normal(size=(300, dim)))
    next_id = [0]
    data: dict[str, dict[int, np.ndarray]] = {}
    for d in range(10):
        data[f"d{d}"] = {}
        for _ in range(3):
            next_id[0] += 1
            size = int(rng.integers(8, 40))
            data[f"d{d}"][next_id[0]] = unit(
                pool[rng.choice(len(pool), size, replace=False)] + rng.normal(scale=0.01, size=(size, dim))
            )
    version = {c: 0 for columns in data.values() for c in columns}

    def flat() -> tuple[dict[int, np.ndarray], dict[int, str]]:
        return {c: v for columns in data.values() for c, v in columns.items()}, {
            c: d for d, columns in data.items() for c in columns
        }

    columns, owner = flat()
    options = {"n_pivots": 3, "levels": 3, "n_partitions": 2}
    current = arrow(build_tables(spark, vectors_frame(spark, columns, owner.get, version), n_shards=n, **options))
    for batch in range(5):
        before = dict(version.items())
        changed = random_batch(rng, data, pool, next_id)
        columns, owner = flat()
        for d in changed:
            for c in data.get(d, {}):
                version[c] = batch + 1
        new = {c: columns[c] for d in changed for c in data.get(d, {})}
        rewritten = shards_of(changed, n)
        previous = frames(spark, in_shards(current, rewritten, GLOBAL_TABLES))
        update = arrow(
            build_tables(
                spark, vectors_frame(spark, new, owner.get, version), n_shards=n, previous=previous, changed=changed
            )
        )
        assert set(update["mapped"]["shard"].to_pylist()) <= set(rewritten)
        # the same update built in this process (a small pipeline update) writes the same tables
        local = update_tables(
            vectors_table(new, owner.get, version),
            n_shards=n,
            previous=in_shards(current, rewritten, GLOBAL_TABLES),
            changed=changed,
        )
        assert {name: rows(t, KEYS[name]) for name, t in local.items()} == {
            name: rows(t, KEYS[name]) for name, t in update.items()
        }
        current = apply_update(current, update, rewritten, GLOBAL_TABLES, APPEND_TABLES)
        # exactly the current rows: no old version of a changed column survives anywhere
        expected = sorted((owner[c], c, i, value(c, i, version)) for c, v in columns.items() for i in range(len(v)))
        mapped = current["mapped"]
        assert (
            sorted(zip(*(mapped[k].to_pylist() for k in ("dataset_id", "column_id", "vector_id", "value")))) == expected
        )
        assert any(version[c] != before.get(c) for c in columns)
        # staleness counts the current vectors mapped since the full build, not every insertion ever
        inserted_now = sum(len(v) for c, v in columns.items() if version[c] > 0)
        assert sum(current["params"]["inserted"].to_pylist()) == inserted_now == sum(mapped["inserted"].to_pylist())
        assert sum(current["params"]["n_vectors"].to_pylist()) == mapped.num_rows
        posted = pc.list_flatten(current["cells"]["vector_ids"])
        assert len(posted) == mapped.num_rows and sorted(current["cells"]["column_id"].unique().to_pylist()) == sorted(
            columns
        )
        fresh = load(in_memory(columns, owner.get, version, n_shards=n, **options))
        searcher = load(current)
        for _q in range(4):
            source = columns[int(rng.choice(sorted(columns)))]
            query = unit(
                np.concatenate([source[: int(rng.integers(3, len(source) + 1))], pool[rng.choice(len(pool), 5)]])
                + rng.normal(scale=0.005, size=(1, dim))
            )
            same_answers(searcher, fresh, query)


def test_spark_build_rejects_bad_input(spark, lake):
    from lakejoin.spark.pexeso import build_tables

    columns, _ = lake
    frame = vectors_frame(spark, {1: columns[1000] * 2})
    with pytest.raises(ValueError, match="lack column"):
        build_tables(spark, frame.drop("value"), n_shards=1)
    with pytest.raises(ValueError, match="metric"):
        build_tables(spark, frame, n_shards=1, metric="cosine")
    with pytest.raises(ValueError, match="changed"):
        build_tables(spark, frame, n_shards=1, previous={})
    with pytest.raises(Exception, match="L2-normalized"):
        build_tables(spark, frame, n_shards=1, n_pivots=2, levels=2)["mapped"].count()
