"""The family registry: every family the lake builds is one registered instance of the contract, with its Spark
build, and the query layer reaches each only through it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakejoin.index import FAMILIES, SEARCH_FAMILIES, registry
from lakejoin.index.contract import FamilyQuery, IndexFamily
from lakejoin.query import family as query_family


def test_the_registry_holds_every_family_once_in_the_names_order() -> None:
    assert tuple(registry.REGISTRY) == FAMILIES
    assert tuple(registry.search_families()) == SEARCH_FAMILIES
    assert all(isinstance(f, IndexFamily) and f.name == name for name, f in registry.REGISTRY.items())


def test_every_family_has_a_spark_build_of_itself() -> None:
    from lakejoin.spark.builders import BUILDERS

    assert list(BUILDERS) == list(registry.REGISTRY)
    assert all(build.family is registry.family(name) for name, build in BUILDERS.items())


@pytest.mark.parametrize("name", FAMILIES)
def test_a_family_with_an_arrays_format_writes_and_reads_arrays(name: str) -> None:
    family = registry.family(name)
    overrides = {m for m in ("to_arrays", "from_arrays") if getattr(type(family), m) is not getattr(IndexFamily, m)}
    assert overrides == ({"to_arrays", "from_arrays"} if family.arrays_format is not None else set())
    assert family.global_tables >= family.append_tables


def test_an_unknown_family_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown index family 'bloom'.*josie"):
        registry.family("bloom")


class _Exact(IndexFamily):
    """A sixth family, for the test: columns whose values equal the query's first value."""

    name = "exact"
    staleness_limit = 1.0

    def build_tables(self, inputs, *, n_shards, **params):  # type: ignore[no-untyped-def]
        return {}

    def update_tables(self, inputs, *, n_shards, previous, changed):  # type: ignore[no-untyped-def]
        return {}

    def staleness(self, global_tables):  # type: ignore[no-untyped-def]
        return 0.0

    def load(self, tables, shared=None):  # type: ignore[no-untyped-def]
        return tables["cells"].to_pylist()

    def rank_key(self, result):  # type: ignore[no-untyped-def]
        return (-result["hits"], result["column_id"])

    def ask(self, searcher, query, floor=None):  # type: ignore[no-untyped-def]
        hits: dict[int, int] = {}
        for row in searcher:
            hits[row["column_id"]] = hits.get(row["column_id"], 0) + (row["value"] == query.values[0][0])
        return [{"column_id": c, "hits": h} for c, h in hits.items() if h]


def test_a_sixth_family_is_a_class_and_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The query layer's steps (query, load, ask, merge) reach a new family through the registry alone."""
    monkeypatch.setitem(registry.REGISTRY, "exact", _Exact())
    shard = [pa.table({"column_id": [1, 1, 2], "value": ["a", "a", "b"]}), pa.table({"column_id": [3], "value": ["a"]})]
    query = query_family.family_query("exact", ["c"], [["a"]], 2, {})
    assert isinstance(query, FamilyQuery) and query.ask_k == 2
    parts = [query_family.ask(registry.family("exact").load({"cells": t}), query) for t in shard]
    assert query_family.merge(query, parts) == [{"column_id": 1, "hits": 2}, {"column_id": 3, "hits": 1}]
    assert not query_family.has_arrays("exact")


def test_the_cli_text_and_auto_ask_the_family_and_a_new_one_gets_the_defaults() -> None:
    """``lakejoin search``/``related`` text and ``auto``'s policy ask the family: a new one gets the defaults."""
    exact = _Exact()
    assert exact.result_notes([{"column_id": 1, "hits": 2}]) == []
    assert exact.describe_evidence({"hits": 2, "found": "to_this"}) == "hits 2, found to_this"
    assert not (exact.auto_ranked_by_quality or exact.auto_falls_back or exact.multi_column)
    lsh = registry.family("lshensemble")
    assert lsh.result_notes([{"containment": 0.5}]) == [] and len(lsh.result_notes([{"containment": None}])) == 1
    assert [n for n, f in registry.REGISTRY.items() if f.auto_falls_back or f.auto_ranked_by_quality] == ["josie"]
    assert not registry.TRANSFORM_CANDIDATES.searched_by_score
