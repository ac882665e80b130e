"""Search results ranked by join quality (``method="auto"``'s single-column searches).

JOSIE answers the exact top-k by overlap; the join a person wants is the one
``lakejoin.profile.join_quality`` scores best: a key of theirs holding your values, shared values that
are rare in the lake. ``auto`` asks JOSIE for ``WIDEN`` times ``k`` candidates (at least
``MIN_CANDIDATES``), scores each, and keeps the best ``k`` by quality (ties by overlap). The
informativeness of the shared values is the graph's: ``1 - ln f(v) / ln N`` for a value held by
``f(v)`` of the lake's ``N`` columns, read from JOSIE's posting lists of the query's values alone.
``search josie`` still answers the exact top-k by overlap.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lakejoin.lake.delta import ValuesIn
from lakejoin.normalize import normalize_set
from lakejoin.profile import profile_values
from lakejoin.profile.join_quality import Side, quality
from lakejoin.query.snapshot import LoadedSnapshot
from lakejoin.query.tables import QueryTable

WIDEN = 4
MIN_CANDIDATES = 40


def candidates_for(k: int) -> int:
    """How many of JOSIE's best by overlap are scored to keep ``k`` by quality."""
    return max(k * WIDEN, MIN_CANDIDATES)


def by_quality(
    loaded: LoadedSnapshot, query: QueryTable, column: str, found: list[dict[str, Any]], k: int
) -> list[dict[str, Any]]:
    """JOSIE's ``found`` (result rows with ``column_id`` and ``overlap``) with their quality
    (``quality``, ``reason`` and the parts under ``quality_parts``), best ``k`` first."""
    if not found:
        return found
    values = sorted(normalize_set(query.column_values(column)))
    frequency, shared = _postings(loaded, values, {int(r["column_id"]) for r in found})
    lake_columns = max(loaded.row_count("index/josie/sets") or 0, len(loaded.columns), 2)
    mine = _query_side(loaded, query, column, len(values))
    scored = []
    for result in found:
        judged = quality(
            mine,
            _lake_side(loaded, result),
            int(result["overlap"]),
            _informativeness(shared.get(int(result["column_id"]), []), frequency, lake_columns),
        )
        parts = judged.evidence()
        scored.append({**result, "quality": parts.pop("score"), "reason": parts.pop("reason"), "quality_parts": parts})
    scored.sort(key=lambda r: (-r["quality"], -r["overlap"], r["column_id"]))
    return scored[:k]


def _postings(
    loaded: LoadedSnapshot, values: list[str], column_ids: set[int]
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Each query value's posting-list length (by TokenID), and the TokenIDs each of
    ``column_ids`` shares with the query."""
    tokens = loaded.index_rows("josie", "tokens", ["token_id"], ValuesIn({"token": pa.array(values, pa.string())}))
    token_ids = tokens["token_id"]
    if not len(token_ids):
        return {}, {}
    postings = loaded.index_rows("josie", "postings", ["token_id", "set_id"], pads.field("token_id").isin(token_ids))
    counts = pc.value_counts(postings["token_id"]).to_pylist()
    frequency = {int(c["values"]): int(c["counts"]) for c in counts}
    shared: dict[int, list[int]] = defaultdict(list)
    for token, set_id in zip(postings["token_id"].to_pylist(), postings["set_id"].to_pylist()):
        if set_id in column_ids:
            shared[set_id].append(token)
    return frequency, shared


def _informativeness(tokens: list[int], frequency: dict[int, int], lake_columns: int) -> float:
    if not tokens:
        return 0.0
    return sum(1.0 - math.log(max(frequency.get(t, 1), 1)) / math.log(lake_columns) for t in tokens) / len(tokens)


def _query_side(loaded: LoadedSnapshot, query: QueryTable, column: str, distinct: int) -> Side:
    """The query column as the catalog profiles it (a lake dataset), or profiled here (a file)."""
    if query.dataset_id is not None:
        info = next((c for c in loaded.columns_of(query.dataset_id) if c.name == column), None)
        if info is not None:
            return Side(column, info.type, info.count or distinct, distinct, query.name)
    profile = profile_values(query.column_values(column), name=column)
    return Side(column, profile["type"], profile["count"] or distinct, distinct, query.name)


def _lake_side(loaded: LoadedSnapshot, result: dict[str, Any]) -> Side:
    info = loaded.columns.get(int(result["column_id"]))
    if info is None:
        return Side(result.get("column") or "", None, int(result["overlap"]), int(result["overlap"]))
    distinct = info.distinct or int(result["overlap"])
    return Side(info.name, info.type, info.count or distinct, distinct, result.get("table") or "")
