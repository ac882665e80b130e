"""JOSIE's in-memory storage (Zhu et al., SIGMOD 2019; thesis §3.4.3): the index tables as CSR arrays.

Algorithm 2 reads posting lists and set suffixes by offset, so a searcher holds the ``sets`` and
``postings`` tables as the arrays of ``reads.py`` (:data:`ARRAYS`): built from the tables on load
(:func:`arrays_from_tables`), or taken as they are from the shard cache (:func:`check_arrays`,
``lakejoin.query.shard_arrays``), nothing sorted or grouped again.

Memory: the searcher holds per posting entry 16 bytes (``post_set``, ``post_pos`` and
``post_size``, int32, plus the entry's token id in its integer set, int32); per token about
17 bytes of arrays (list offset int64, group int64, query mark) plus a Python dict entry for
the token text (about 100 bytes + the text); per set 52 bytes (id and set offset int64,
12 bytes of state, a 16-byte candidate row and two int32 scratch slots). The Arrow tables
passed to ``load`` are not kept; a decision allocates 12 bytes per unread candidate and 8
per query token while it runs. So N entries, T tokens and M sets take about
``16·N + (117 + mean text length)·T + 52·M`` bytes; tests/benchmarks/bench_josie.py prints
the arrays' size (dict left out). On a 24 GiB
machine, leaving ~8 GiB to the OS, Spark-free serving and the load peak, about 16 GiB serve
e.g. 800 M posting entries with 20 M tokens and 1 M sets; on a lake with many distinct
values the token dictionary, not the postings, runs out first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from lakejoin.index.josie.tokens import duplicate_groups

# The columns ``load`` reads of the sharded tables (``lakejoin.query.family.load_columns``): the
# dataset ids a shard's rows carry for the pipeline are not needed to search, and each set's
# tokens are rebuilt from its postings.
LOAD_COLUMNS = {"sets": ["set_id", "size"], "postings": ["token_id", "set_id", "position", "set_size"]}


class IndexArrays(NamedTuple):
    """The arrays a searcher holds (the storage of ``reads.py``), one bundle for the compiled
    algorithms: numba takes a named tuple of arrays as one argument."""

    set_ids: np.ndarray  # each set's ``set_id`` (column id), ascending
    set_indptr: np.ndarray  # set X's tokens are set_tokens[set_indptr[X]:set_indptr[X+1]]
    token_of: np.ndarray  # local token id -> TokenID, ascending
    list_indptr: np.ndarray  # token t's posting list is post_*[list_indptr[t]:list_indptr[t+1]]
    post_set: np.ndarray  # int32 set index of each posting entry
    post_pos: np.ndarray  # int32 position of the token in that set
    post_size: np.ndarray  # int32 size of that set
    set_tokens: np.ndarray  # int32 local token ids of each set, in its order
    group: np.ndarray  # duplicate group of each list (§3.4.1)


# What a searcher holds besides scratch space (``JosieSearcher.arrays``), and the version of that
# layout: a shard's arrays cached on disk under another version are rebuilt, never read
# (``lakejoin.query.shard_arrays``). Bump it when what these arrays mean changes.
ARRAYS = IndexArrays._fields
ARRAYS_FORMAT = 1


def arrays_from_tables(sets: pa.Table, postings: pa.Table, n_tokens: int) -> dict[str, np.ndarray]:
    """The :data:`ARRAYS` of the ``sets`` and ``postings`` tables (of any subset of shards), for a
    dictionary of ``n_tokens`` TokenIDs. Raises ``ValueError`` when the tables disagree."""
    set_ids, set_indptr = _set_arrays(sets)
    arrays = {"set_ids": set_ids, "set_indptr": set_indptr, **_posting_arrays(postings, set_ids, n_tokens)}
    arrays["set_tokens"] = _sets_from_postings(arrays)
    arrays["group"] = duplicate_groups(arrays["list_indptr"], arrays["post_set"])
    return arrays


def _set_arrays(sets: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Set ids, ascending, and the sets' CSR offsets (their tokens come from the postings)."""
    sets = sets.sort_by("set_id")
    set_ids = sets["set_id"].to_numpy()
    if len(np.unique(set_ids)) != len(set_ids):
        raise ValueError("JOSIE sets table has duplicate set_id")
    return set_ids, np.concatenate(([0], np.cumsum(sets["size"].to_numpy(), dtype=np.int64)))


def _posting_arrays(postings: pa.Table, set_ids: np.ndarray, n_tokens: int) -> dict[str, np.ndarray]:
    """Posting lists in CSR form over *local* token ids: the position of each TokenID among
    the loaded lists' TokenIDs (``token_of``, ascending, so the global order is kept). The
    arrays are sized by the tokens these shards hold, not by the whole lake's dictionary."""
    token_id = postings["token_id"].to_numpy()
    set_index = pd.Index(set_ids).get_indexer(postings["set_id"].to_numpy())  # a hash lookup: -1 when missing
    if np.any(set_index < 0):
        raise ValueError("JOSIE postings table names a set_id missing from the sets table")
    if len(token_id) and (token_id.max() >= n_tokens or token_id.min() < 0):
        raise ValueError("JOSIE postings table names a token_id missing from the tokens table")
    # each list by set: one sort of a unique key, several times faster than a stable sort by token
    order = (
        np.argsort(token_id * len(set_ids) + set_index)
        if n_tokens * len(set_ids) < 2**62
        else np.lexsort((set_index, token_id))
    )
    ordered = token_id[order]
    starts = (
        np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if len(ordered) else np.empty(0, np.int64)
    )
    return {
        "post_set": set_index[order].astype(np.int32),
        "post_pos": postings["position"].to_numpy()[order].astype(np.int32),
        "post_size": postings["set_size"].to_numpy()[order].astype(np.int32),
        "token_of": ordered[starts],
        "list_indptr": np.concatenate((starts, [len(ordered)])).astype(np.int64),
    }


def _sets_from_postings(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """Every set's tokens (local ids, in its order) from the postings: the posting of token t
    in set s at position p is ``set_tokens[set_indptr[s] + p] = t``. So the ``sets`` table's own
    token lists are not read (a shard loads about half the bytes)."""
    set_indptr, post_set, post_pos = arrays["set_indptr"], arrays["post_set"], arrays["post_pos"]
    sizes = np.diff(set_indptr)
    slots = set_indptr[post_set] + post_pos
    total = int(set_indptr[-1])
    if len(slots) != total or (
        total
        and (
            np.any(post_pos < 0) or np.any(post_pos >= sizes[post_set]) or np.bincount(slots, minlength=total).max() > 1
        )
    ):
        raise ValueError("JOSIE sets and postings disagree: the postings do not fill each set's positions exactly once")
    set_tokens = np.empty(total, np.int32)
    set_tokens[slots] = np.repeat(np.arange(len(arrays["token_of"]), dtype=np.int32), np.diff(arrays["list_indptr"]))
    return set_tokens


def check_arrays(arrays: Mapping[str, np.ndarray], n_tokens: int) -> None:
    """Raise ``ValueError`` unless ``arrays`` have the shape of one searcher's :data:`ARRAYS`:
    every one present, one-dimensional integers, lengths and end offsets that agree. Their
    contents are not scanned (a load must cost less than a query; the shard cache checks a
    CRC-32 of what it wrote)."""
    missing = [name for name in ARRAYS if name not in arrays]
    if missing:
        raise ValueError(f"JOSIE arrays are missing {missing}")
    if any(arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu" for name in ARRAYS):
        raise ValueError("JOSIE arrays must be one-dimensional integer arrays")
    n_sets, n_lists, n_postings = len(arrays["set_ids"]), len(arrays["token_of"]), len(arrays["post_set"])
    set_indptr, list_indptr = arrays["set_indptr"], arrays["list_indptr"]
    if len(set_indptr) != n_sets + 1 or len(list_indptr) != n_lists + 1 or len(arrays["group"]) != n_lists:
        raise ValueError("JOSIE arrays disagree: offsets and ids have different lengths")
    if not len(arrays["post_pos"]) == len(arrays["post_size"]) == len(arrays["set_tokens"]) == n_postings:
        raise ValueError("JOSIE arrays disagree: the postings' columns and the sets' tokens have different lengths")
    if set_indptr[0] != 0 or set_indptr[-1] != n_postings or list_indptr[0] != 0 or list_indptr[-1] != n_postings:
        raise ValueError("JOSIE arrays disagree: an offset array does not run from 0 to the postings' count")
    if n_lists and arrays["token_of"][-1] >= n_tokens:
        raise ValueError("JOSIE arrays name a token missing from the index's token dictionary")
