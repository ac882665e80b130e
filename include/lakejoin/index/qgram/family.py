"""The q-gram family in the family contract (``lakejoin.index.contract``): JOSIE's index over token sets, so JOSIE's
contract with the query tokenized first; its results are candidates for ``search transform``."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from typing_extensions import override

from lakejoin.index import qgram
from lakejoin.index.contract import FamilyQuery
from lakejoin.index.josie import josie
from lakejoin.index.josie.family import Josie


class Qgram(Josie):
    """The q-gram family: JOSIE over q-gram token sets; its results are candidates for transformation discovery."""

    name = "qgram"
    searched_by_score = False
    auto_ranked_by_quality = False  # never picked by ``auto``: it proposes the candidates of its fallback
    auto_falls_back = False

    @override
    def build_tables(self, inputs: pa.Table, *, n_shards: int, **params: Any) -> dict[str, pa.Table]:
        return qgram.build_in_memory(inputs, n_shards=n_shards)

    @override
    def update_tables(
        self, inputs: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
    ) -> dict[str, pa.Table]:
        return qgram.update_tables(inputs, n_shards=n_shards, previous=previous, changed=changed)

    @override
    def load(self, tables: Mapping[str, pa.Table], shared: Any = None) -> qgram.QgramSearcher:
        return qgram.load(tables, shared=shared) if shared is not None else qgram.load(tables)

    @override
    def from_arrays(self, arrays: Mapping[str, np.ndarray], shared: Any = None) -> qgram.QgramSearcher:
        return qgram.from_arrays(arrays, shared=shared)

    @override
    def ask(self, searcher: Any, query: FamilyQuery, floor: int | None = None) -> list[dict[str, Any]]:
        return searcher.search(query.values[0], k=query.ask_k, floor=floor or 0)

    @override
    def bound(self, searcher: Any, query: FamilyQuery) -> int | None:
        return None  # the query's tokens are counted by the searcher, not prepared once

    @override
    def index_of(self, searcher: Any) -> josie.JosieSearcher:
        return searcher.josie


FAMILY = Qgram()
