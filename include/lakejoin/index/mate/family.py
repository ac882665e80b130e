"""MATE in the family contract (``lakejoin.index.contract``): composite-key search whose results are tables, the
query dataset left out by the searcher itself."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
from typing_extensions import override

from lakejoin.index.contract import FamilyQuery, IndexFamily
from lakejoin.index.mate import build, index, search
from lakejoin.index.merge import Result


class Mate(IndexFamily):
    """MATE as an index family: composite-key search over XASH super keys; results are tables."""

    name = "mate"
    global_tables = build.GLOBAL_TABLES
    staleness_limit = build.STALENESS_LIMIT
    load_bytes_per_row: ClassVar[Mapping[str, int]] = {"postings": 135}
    arrays_format = index.ARRAYS_FORMAT
    arrays_globals = index.ARRAYS_GLOBALS
    table_level = True
    multi_column = True

    @override
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        return build.build_tables(inputs, n_shards=n_shards)

    @override
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        return build.update_tables(inputs, n_shards=n_shards, previous=previous, changed=changed)

    @override
    def staleness(self, global_tables: Mapping[str, pa.Table]) -> float:
        return build.staleness(global_tables["params"], global_tables["widths"])

    @override
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> search.MateSearcher:
        return search.load(dict(tables))

    @override
    def to_arrays(self, searcher: search.MateSearcher) -> dict[str, np.ndarray]:
        return search.to_arrays(searcher)

    @override
    def from_arrays(self, arrays: Mapping[str, np.ndarray], shared: Any = None) -> search.MateSearcher:
        return search.from_arrays(arrays)

    @override
    def rank_key(self, result: Result) -> tuple:
        return (-result["joinability"], result["dataset_id"])

    @override
    def describe_evidence(self, evidence: Mapping[str, Any]) -> str:
        return f"joinable keys {evidence['joinability']} ({evidence['share']:.3f} of the key's tuples)"

    @override
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        frame = pd.DataFrame(dict(zip(query.columns, query.values)))
        return searcher.search(
            frame,
            query.columns,
            k=query.ask_k,
            initial_column=query.params.get("initial_column"),
            exclude_datasets=[query.dataset_id] if query.dataset_id else [],
        )


FAMILY = Mate()
