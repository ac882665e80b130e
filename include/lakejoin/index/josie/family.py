"""JOSIE in the family contract (``lakejoin.index.contract``): exact top-k overlap, a token dictionary shared by
every shard's searcher, cached arrays, and the query's held tokens as a shard's bound."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from typing_extensions import override

from lakejoin.index.contract import FamilyQuery, IndexFamily, prepared
from lakejoin.index.josie import arrays, dictionary, josie, tokens
from lakejoin.index.merge import Result


class Josie(IndexFamily):
    """JOSIE as an index family: exact top-k overlap search over the token posting lists."""

    name = "josie"
    global_tables = tokens.GLOBAL_TABLES
    append_tables = tokens.APPEND_TABLES
    staleness_limit = tokens.STALENESS_LIMIT
    load_columns = arrays.LOAD_COLUMNS
    load_bytes_per_row: ClassVar[Mapping[str, int]] = {"postings": 72, "tokens": 40, "sets": 100}
    arrays_format = arrays.ARRAYS_FORMAT
    floor_score = "overlap"
    auto_ranked_by_quality = True  # the best by overlap are not always the best joins
    auto_falls_back = True  # no value shared exactly: the values may still join once transformed

    @override
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        return tokens.build_tables(inputs, n_shards=n_shards)

    @override
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        return tokens.update_tables(inputs, n_shards=n_shards, previous=previous, changed=changed)

    @override
    def staleness(self, global_tables: Mapping[str, pa.Table]) -> float:
        return tokens.staleness(global_tables)

    @override
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> Any:
        return josie.load(tables, shared=shared) if shared is not None else josie.load(tables)

    @override
    def shared(self, global_tables: Mapping[str, pa.Table]) -> dictionary.TokenDictionary:
        return dictionary.shared(global_tables)

    @override
    def to_arrays(self, searcher: josie.JosieSearcher) -> dict[str, np.ndarray]:
        return josie.to_arrays(self.index_of(searcher))

    @override
    def from_arrays(self, arrays: Mapping[str, np.ndarray], shared: Any = None) -> Any:
        return josie.from_arrays(arrays, shared=shared)

    @override
    def scratch_bytes(self, searcher: Any) -> int | None:
        return self.index_of(searcher).scratch_bytes()

    @override
    def rank_key(self, result: Result) -> tuple:
        return (-result["overlap"], result["column_id"])

    @override
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        return searcher.search(prepared(searcher, query), k=query.ask_k, floor=floor or 0)

    @override
    def bound(self, searcher: Any, query: FamilyQuery) -> int | None:
        return searcher.held(prepared(searcher, query))

    @override
    def describe_evidence(self, evidence: Mapping[str, Any]) -> str:
        e = evidence
        return f"overlap {e['overlap']}, containment {e['containment']:.3f}, jaccard {e['jaccard']:.3f}"

    def index_of(self, searcher: Any) -> josie.JosieSearcher:
        """The JOSIE searcher that holds the arrays (the q-gram family wraps one)."""
        return searcher


FAMILY = Josie()
