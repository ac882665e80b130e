"""PEXESO in the family contract (``lakejoin.index.contract``): built from the embeddings of the distinct values;
threshold mode answers every column that reaches T (merged as a union), top-k mode the k best."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import pyarrow as pa
from typing_extensions import override

from lakejoin.index.contract import FamilyQuery, IndexFamily
from lakejoin.index.merge import Result, merge_threshold
from lakejoin.index.pexeso import build, update

DEFAULT_TAU = 0.06  # τ: a fraction of the maximum distance 2 of unit vectors
DEFAULT_T = 0.6  # T: the share of query records that must match (threshold mode)


class Pexeso(IndexFamily):
    """PEXESO as an index family: semantic joinability over the embeddings of the distinct values."""

    name = "pexeso"
    global_tables = update.GLOBAL_TABLES
    append_tables = update.APPEND_TABLES
    staleness_limit = update.STALENESS_LIMIT
    load_bytes_per_row: ClassVar[Mapping[str, int]] = {"mapped": 6_000}
    embeds = True

    @override
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        return build.build_tables(inputs, n_shards=n_shards, **params)

    @override
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        return update.update_tables(inputs, n_shards=n_shards, previous=previous, changed=changed)

    @override
    def staleness(self, global_tables: Mapping[str, pa.Table]) -> float:
        return update.staleness_of(global_tables["params"].to_pylist())

    @override
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> Any:
        # imported here: the search side compiles numba kernels, which a process that only builds never needs
        from lakejoin.index.pexeso import search

        return search.load(tables)

    @override
    def rank_key(self, result: Result) -> tuple:
        return (-result["matched"], result["column_id"])

    @override
    def score(self, result: Result) -> float:
        return float(result["joinability"])

    @override
    def describe_evidence(self, evidence: Mapping[str, Any]) -> str:
        return f"semantic: {evidence['matched']} values matched ({evidence['joinability']:.3f})"

    @override
    def query_values(self, values: list[list[Any]]) -> list[list[Any]]:
        return [[v for v in column if v is not None] for column in values]  # a null has no embedding

    @override
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        params = query.params
        model = params.get("model", searcher.model)
        kept, vectors = query.embedded(searcher, model)
        found = searcher.search(
            vectors,
            params.get("tau", DEFAULT_TAU),
            params.get("T", DEFAULT_T),
            query_values=kept,
            mode=params.get("mode", "threshold"),
            k=query.ask_k,
            exact=params.get("exact", False),
            lower_bound=params.get("lower_bound", False),
        )
        return [{**r, "model": model} for r in found]

    @override
    def merge(self, query: FamilyQuery, parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        if query.params.get("mode", "threshold") == "threshold":
            return merge_threshold(parts, self.rank_key)
        return super().merge(query, parts)


FAMILY = Pexeso()
