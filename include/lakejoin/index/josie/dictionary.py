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

from lakejoin.index.josie.cost import ReadCost
from lakejoin.index.values import ValueDictionary
from lakejoin.normalize import normalize_set


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

    def found(self, values: Iterable[str]) -> dict[int, str]:
        """TokenID -> value of each of ``values`` that the dictionary holds, in their order."""
        values = list(values)
        rows = self.tokens.get_indexer(values)
        return {int(self.ids[r]): v for r, v in zip(rows.tolist(), values) if r >= 0}


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
    found: dict[int, str]  # TokenID -> value, for the values the dictionary holds
    global_ids: np.ndarray  # found's TokenIDs


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
        values = normalize_set(query)
        if not values:
            raise ValueError("empty query: no non-null value after normalization")
    found = dictionary.found(values)
    return PreparedQuery(values, dictionary, found, np.fromiter(found, np.int64, len(found)))
