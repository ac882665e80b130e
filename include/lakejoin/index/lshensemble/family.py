"""LSH Ensemble in the family contract (``lakejoin.index.contract``): containment-threshold search whose shards
answer in threshold steps, merged by :func:`lakejoin.index.merge.merge_threshold_steps`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from typing_extensions import override

from lakejoin.index.contract import FamilyQuery, IndexFamily, prepared
from lakejoin.index.lshensemble import search, tables
from lakejoin.index.merge import Result, merge_threshold_steps

DEFAULT_THRESHOLD = 0.5  # the containment threshold t* a query gets when it names none


class LshEnsemble(IndexFamily):
    """LSH Ensemble as an index family: containment-threshold search, answered in threshold steps."""

    name = "lshensemble"
    global_tables = tables.GLOBAL_TABLES
    staleness_limit = tables.STALENESS_LIMIT
    load_bytes_per_row: ClassVar[Mapping[str, int]] = {"signatures": 15_000}
    arrays_format = search.ARRAYS_FORMAT

    @override
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        return tables.build_tables(inputs, n_shards=n_shards)

    @override
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        return tables.update_tables(inputs, n_shards=n_shards, previous=previous, changed=changed)

    @override
    def staleness(self, global_tables: Mapping[str, pa.Table]) -> float:
        return tables.staleness(global_tables["sizes"], global_tables["partitions"])

    @override
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> search.LshEnsembleSearcher:
        return search.load(tables)

    @override
    def to_arrays(self, searcher: search.LshEnsembleSearcher) -> dict[str, np.ndarray]:
        return search.to_arrays(searcher)

    @override
    def from_arrays(self, arrays: Mapping[str, np.ndarray], shared: Any = None) -> search.LshEnsembleSearcher:
        return search.from_arrays(arrays)

    @override
    def rank_key(self, result: Result) -> tuple:
        return search.rank_key(result)

    @override
    def score(self, result: Result) -> float:
        return search.score(result)

    @override
    def result_notes(self, results: Sequence[Result]) -> list[str]:
        if any(r.get("containment") is None for r in results):  # not verified: the score is the estimate
            return ["≈: LSH Ensemble's MinHash estimate (--verify computes the exact containment)"]
        return []

    @override
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        threshold = query.params.get("threshold", DEFAULT_THRESHOLD)
        return searcher.search_steps(
            prepared(searcher, query), threshold, verify=query.params.get("verify", False), k=query.ask_k
        )

    @override
    def merge(self, query: FamilyQuery, parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        return merge_threshold_steps(parts, query.ask_k, self.rank_key)


FAMILY = LshEnsemble()
