"""JOSIE's token dictionary and a query looked up in it (Zhu et al., SIGMOD 2019; thesis §3.4.2).

JOSIE works on TokenIDs, each token's rank in the global order (rarest first): a query's values
are normalized and looked up once in the dictionary of the ``tokens`` table, and the TokenIDs
found are what every shard's searcher of that index reads lists for. The dictionary is the
state those searchers share, so it lives apart from any one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakejoin.index.josie.cost import ReadCost
from lakejoin.index.values import ValueDictionary
from lakejoin.normalize import already_normalized, normalize_set, normalize_value

VECTORIZED_FROM = 300  # values from which normalized_set's Arrow path beats normalize_set (timed on 2 loaded cores)


@dataclasses.dataclass
class TokenDictionary:
    """What every searcher over shards of one JOSIE index shares: the global token dictionary
    (token -> TokenID, the global order) and the read costs fitted by the first of them. Built
    once per process and index (``lakejoin.query.family.load_searcher``), so loading a shard reads
    and builds only that shard's sets and postings; the costs steer JOSIE's reads, never its
    answer, and the shards of one lake have the same shape. The tokens stay in Arrow's buffers
    (``lakejoin.index.values``), not in a ``dict``: 22 M tokens of a 1,000,000-set lake are
    about 0.6 GiB that way, over 4 GiB as Python strings."""

    tokens: ValueDictionary  # the ``tokens`` table's tokens, in its row order
    ids: np.ndarray  # each row's TokenID (int64)
    n_tokens: int
    read_cost: ReadCost | None = None

    def found(self, values: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The TokenIDs of the ``values`` the dictionary holds, ascending, and where in ``values``
        each one's value is (not the values themselves: a result shows a few of them)."""
        rows = self.tokens.get_indexer(values)
        hit = np.flatnonzero(rows >= 0)
        ids = self.ids[rows[hit]]
        order = np.argsort(ids)  # TokenIDs are distinct: any sort gives the one order
        return ids[order], hit[order]


def token_dictionary(tokens: pa.Table) -> TokenDictionary:
    """The :class:`TokenDictionary` of a ``tokens`` table (no read cost fitted yet)."""
    ids = tokens["token_id"].to_numpy().astype(np.int64)
    return TokenDictionary(ValueDictionary(tokens["token"]), ids, int(ids.max()) + 1 if len(ids) else 1)


def shared(tables: Mapping[str, pa.Table]) -> TokenDictionary:
    """The family's state shared by every shard's searcher (family shape, ``lakejoin.index``),
    from the global tables."""
    if "tokens" not in tables:
        raise ValueError(f"JOSIE index is missing tables: ['tokens'], got {sorted(tables)}")
    return token_dictionary(tables["tokens"])


@dataclasses.dataclass
class PreparedQuery:
    """A query's distinct normalized values and their TokenIDs in one index's token dictionary
    (``JosieSearcher.prepare``)."""

    values: set[str]
    dictionary: TokenDictionary  # the dictionary they were looked up in
    global_ids: np.ndarray  # TokenIDs of the values the dictionary holds, ascending
    listed: list[str]  # ``values`` in the order ``value_at`` counts
    value_at: np.ndarray  # each of ``global_ids``' value, as a position in ``listed``

    def value_of(self, position: int) -> str:
        """The value of ``global_ids[position]``."""
        return self.listed[self.value_at[position]]


def prepare(query: Iterable[str] | PreparedQuery, dictionary: TokenDictionary) -> PreparedQuery:
    """``query`` normalized and looked up in ``dictionary``; a query prepared with another
    dictionary is looked up again (its values are kept)."""
    if isinstance(query, PreparedQuery):
        if query.dictionary is dictionary:
            return query
        values = query.values
    else:
        if isinstance(query, (str, bytes)):
            raise ValueError("query must be an iterable of values, not a single string")
        values = normalized_set(query)
        if not values:
            raise ValueError("empty query: no non-null value after normalization")
    listed = list(values)
    global_ids, value_at = dictionary.found(listed)
    return PreparedQuery(values, dictionary, global_ids, listed, value_at)


def normalized_set(query: Iterable[object]) -> set[str]:
    """``normalize_set(query)``, vectorized where the values are all text: Arrow finds the
    distinct texts and which of them are their own normalization (``already_normalized``, as
    the cells are normalized on ingest), and only the rest go through ``normalize_value`` one
    by one. A query of 10,000 values spent several times the search in ``normalize_set``;
    below ``VECTORIZED_FROM`` values Arrow's fixed cost per call is the larger."""
    values = query if isinstance(query, (list, tuple)) else list(query)
    if len(values) < VECTORIZED_FROM:
        return normalize_set(values)
    try:
        texts = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: each value normalized as a cell
        return normalize_set(values)
    if not pa.types.is_string(texts.type):  # numbers, booleans, bytes: their own rules
        return normalize_set(values)
    distinct = pc.unique(texts).drop_null()
    plain = pa.array(already_normalized(distinct))
    normalized = set(distinct.filter(plain).to_pylist())
    normalized.update(v for v in map(normalize_value, distinct.filter(pc.invert(plain)).to_pylist()) if v is not None)
    return normalized
