"""JOSIE's index tables: global token order, duplicate groups, integer sets (thesis §3.4.2).

The steps, in the thesis's words, and the tables they produce (the Spark build in
``lakejoin.spark.josie`` and :func:`build_in_memory` here give equal tables):

1. *RawTokens* ``(RawToken, SetID)``: one row per distinct value of a column; SetID is the
   lake's ``column_id``.
2. Posting lists of sorted SetIDs, sorted by ``(length, MurmurHash3(list), list)`` and then
   by the token text so the order is total. The rank is the **TokenID**: rarest first, and
   identical lists adjacent. The hash is Spark's ``hash()`` (Murmur3 x86_32, seed 42,
   chained over the array), reproduced by :func:`list_hash` so both builds agree.
3. Duplicate groups: runs of identical adjacent lists. A group is named by its starting
   TokenID (the thesis's "starting position"); ``group_size`` counts its tokens.
4. Integer sets: each set as its TokenIDs ascending.
5. Posting entries ``(TokenID, SetID, position, set_size)``, 0-based positions.

Tables (Arrow schemas below): ``tokens`` (token, token_id, group_id, group_size,
frequency), ``sets`` (set_id, dataset_id, size, tokens) and ``postings`` (token_id, set_id,
dataset_id, position, set_size). ``group_id < 0`` marks a list changed by an incremental
update since the last full build: it is its own group (see ``lakejoin.spark.josie``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
from numba import njit

from lakejoin.normalize import normalize_set

TOKENS_SCHEMA = pa.schema(
    [
        ("token", pa.string()),
        ("token_id", pa.int64()),
        ("group_id", pa.int64()),
        ("group_size", pa.int32()),
        ("frequency", pa.int32()),
    ]
)
SETS_SCHEMA = pa.schema(
    [
        ("set_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("size", pa.int32()),
        ("tokens", pa.list_(pa.int64())),
    ]
)
POSTINGS_SCHEMA = pa.schema(
    [
        ("token_id", pa.int64()),
        ("set_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("position", pa.int32()),
        ("set_size", pa.int32()),
    ]
)
SCHEMAS = {"tokens": TOKENS_SCHEMA, "sets": SETS_SCHEMA, "postings": POSTINGS_SCHEMA}

_SPARK_HASH_SEED = 42


@njit(cache=True, inline="always")
def _mix_k1(k1: np.uint32) -> np.uint32:
    k1 = np.uint32(k1 * np.uint32(0xCC9E2D51))
    k1 = np.uint32((k1 << np.uint32(15)) | (k1 >> np.uint32(17)))
    return np.uint32(k1 * np.uint32(0x1B873593))


@njit(cache=True, inline="always")
def _mix_h1(h1: np.uint32, k1: np.uint32) -> np.uint32:
    h1 = np.uint32(h1 ^ k1)
    h1 = np.uint32((h1 << np.uint32(13)) | (h1 >> np.uint32(19)))
    return np.uint32(h1 * np.uint32(5) + np.uint32(0xE6546B64))


@njit(cache=True)
def _murmur3_long(value: np.int64, seed: np.uint32) -> np.uint32:
    """Spark's ``Murmur3_x86_32.hashLong``."""
    bits = np.uint64(value)
    h1 = _mix_h1(seed, _mix_k1(np.uint32(bits & np.uint64(0xFFFFFFFF))))
    h1 = _mix_h1(h1, _mix_k1(np.uint32(bits >> np.uint64(32))))
    h1 = np.uint32(h1 ^ np.uint32(8))
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(16)))
    h1 = np.uint32(h1 * np.uint32(0x85EBCA6B))
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(13)))
    h1 = np.uint32(h1 * np.uint32(0xC2B2AE35))
    return np.uint32(h1 ^ (h1 >> np.uint32(16)))


@njit(cache=True)
def list_hash(indptr: np.ndarray, set_ids: np.ndarray) -> np.ndarray:
    """Spark ``hash(array<bigint>)`` of every posting list: Murmur3 chained from seed 42."""
    out = np.empty(indptr.shape[0] - 1, np.int32)
    for t in range(out.shape[0]):
        h = np.uint32(_SPARK_HASH_SEED)
        for e in range(indptr[t], indptr[t + 1]):
            h = _murmur3_long(set_ids[e], h)
        out[t] = np.int32(h)
    return out


@njit(cache=True)
def _same_list(indptr: np.ndarray, set_ids: np.ndarray, a: int, b: int) -> bool:
    if indptr[a + 1] - indptr[a] != indptr[b + 1] - indptr[b]:
        return False
    for e in range(indptr[a + 1] - indptr[a]):
        if set_ids[indptr[a] + e] != set_ids[indptr[b] + e]:
            return False
    return True


@njit(cache=True)
def _mixed_runs(order: np.ndarray, freq: np.ndarray, hashes: np.ndarray, indptr: np.ndarray, set_ids: np.ndarray) -> np.ndarray:
    """Start/end of each run of equal (length, hash) whose lists are not all identical.

    Those runs (hash collisions, rare) still need sorting by the list itself (step 2).
    """
    out = []
    start = 0
    n = order.shape[0]
    for pos in range(1, n + 1):
        if pos < n and freq[order[pos]] == freq[order[start]] and hashes[order[pos]] == hashes[order[start]]:
            continue
        for m in range(start + 1, pos):
            if not _same_list(indptr, set_ids, order[start], order[m]):
                out.append((start, pos))
                break
        start = pos
    result = np.empty((len(out), 2), np.int64)
    for r in range(len(out)):
        result[r, 0] = out[r][0]
        result[r, 1] = out[r][1]
    return result


@njit(cache=True)
def _duplicate_groups(order: np.ndarray, indptr: np.ndarray, set_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 3: group start TokenID and group size for every TokenID."""
    n = order.shape[0]
    group = np.empty(n, np.int64)
    size = np.empty(n, np.int32)
    start = 0
    for pos in range(1, n + 1):
        if pos < n and _same_list(indptr, set_ids, order[pos - 1], order[pos]):
            continue
        group[start:pos] = start
        size[start:pos] = pos - start
        start = pos
    return group, size


def global_order(tokens: np.ndarray, indptr: np.ndarray, set_ids: np.ndarray) -> np.ndarray:
    """Step 2: token indices sorted by (frequency, list hash, list, token text).

    ``indptr``/``set_ids`` hold each token's posting list (set ids ascending) in CSR form.
    """
    freq = np.diff(indptr)
    hashes = list_hash(indptr, set_ids)
    text_rank = np.empty(len(tokens), np.int64)
    text_rank[np.argsort(tokens, kind="stable")] = np.arange(len(tokens))
    order = np.lexsort((text_rank, hashes, freq))
    for start, end in _mixed_runs(order, freq, hashes, indptr, set_ids):
        run = order[start:end]
        key = {t: (tuple(set_ids[indptr[t] : indptr[t + 1]]), text_rank[t]) for t in run}
        order[start:end] = sorted(run, key=key.__getitem__)
    return order


def _distinct_values(values: Iterable[object], normalize: bool) -> list[str]:
    return list(normalize_set(values)) if normalize else list(dict.fromkeys(map(str, values)))


def build_in_memory(
    sets: Mapping[int, Iterable[str]],
    *,
    dataset_ids: Mapping[int, str] | None = None,
    normalize: bool = True,
) -> dict[str, pa.Table]:
    """Build the ``tokens``/``sets``/``postings`` tables without Spark (same tables as the
    Spark build over cells holding these values).

    ``sets`` maps set id (``column_id``) to its values. Values pass through
    ``normalize_value`` (idempotent, so already-normalized cells give the Spark build's
    tables); ``normalize=False`` skips that for values known to be normalized. Sets left
    empty are not indexed.
    """
    ids, values = [], []
    for set_id, column in sets.items():
        distinct = _distinct_values(column, normalize)
        if distinct:
            ids.append((int(set_id), len(distinct)))
            values.extend(distinct)
    if not ids:
        raise ValueError("build_in_memory: no set has a non-null value")
    set_ids = np.array([i for i, _ in ids], np.int64)
    sizes = np.array([n for _, n in ids], np.int64)
    if len(np.unique(set_ids)) != len(set_ids):
        raise ValueError("build_in_memory: duplicate set ids")
    codes, uniques = pd.factorize(np.array(values, dtype=object))
    entry_set = np.repeat(set_ids, sizes)

    # Step 2: posting lists (set ids ascending) and the global order.
    by_token = np.lexsort((entry_set, codes))
    list_sets = entry_set[by_token]
    freq = np.bincount(codes, minlength=len(uniques))
    indptr = np.concatenate(([0], np.cumsum(freq)))
    order = global_order(uniques, indptr, list_sets)
    token_id = np.empty(len(uniques), np.int64)
    token_id[order] = np.arange(len(uniques))
    group_id, group_size = _duplicate_groups(order, indptr, list_sets)

    # Steps 4-5: integer sets sorted by TokenID, then posting entries with positions.
    entry_token = token_id[codes]
    by_set = np.lexsort((entry_token, entry_set))
    set_order = np.argsort(set_ids)
    set_tokens = entry_token[by_set]
    set_starts = np.concatenate(([0], np.cumsum(sizes[set_order])))
    positions = np.arange(len(by_set)) - np.repeat(set_starts[:-1], sizes[set_order])
    entry_set_sorted = entry_set[by_set]
    entry_size = np.repeat(sizes[set_order], sizes[set_order])
    datasets = [None if dataset_ids is None else dataset_ids.get(int(s)) for s in set_ids[set_order]]

    tokens = pa.table(
        {
            "token": pa.array(uniques[order].tolist(), pa.string()),
            "token_id": np.arange(len(uniques), dtype=np.int64),
            "group_id": group_id,
            "group_size": group_size,
            "frequency": freq[order].astype(np.int32),
        },
        schema=TOKENS_SCHEMA,
    )
    set_table = pa.table(
        {
            "set_id": set_ids[set_order],
            "dataset_id": pa.array(datasets, pa.string()),
            "size": sizes[set_order].astype(np.int32),
            "tokens": pa.ListArray.from_arrays(pa.array(set_starts, pa.int32()), pa.array(set_tokens)),
        },
        schema=SETS_SCHEMA,
    )
    by_posting = np.lexsort((entry_set_sorted, set_tokens))
    entry_dataset = pa.array(np.repeat(np.array(datasets, dtype=object), sizes[set_order]), pa.string())
    postings = pa.table(
        {
            "token_id": set_tokens[by_posting],
            "set_id": entry_set_sorted[by_posting],
            "dataset_id": entry_dataset.take(pa.array(by_posting)),
            "position": positions[by_posting].astype(np.int32),
            "set_size": entry_size[by_posting].astype(np.int32),
        },
        schema=POSTINGS_SCHEMA,
    )
    return {"tokens": tokens, "sets": set_table, "postings": postings}
