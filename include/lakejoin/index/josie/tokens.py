"""JOSIE's index tables: global token order, integer sets, postings (thesis §3.4.2), sharded.

The steps, in the thesis's words, and the tables they produce (the Spark build in
``lakejoin.spark.josie`` and :func:`build_in_memory` here give equal tables):

1. *RawTokens* ``(RawToken, SetID)``: one row per distinct value of a column; SetID is the
   lake's ``column_id``.
2. Posting lists of sorted SetIDs, sorted by ``(length, MurmurHash3(list), list)`` and then
   by the token text so the order is total. The rank is the **TokenID**: rarest first, and
   identical lists adjacent. The hash is Spark's ``hash()`` (Murmur3 x86_32, seed 42,
   chained over the array), reproduced by :func:`list_hash` so both builds agree.
3. Duplicate groups (§3.4.1) are not stored: they are a property of the posting lists a
   searcher holds, which depend on the shards it loads, so :func:`duplicate_groups` finds
   them when the index is loaded (on bench_josie's 100,000-set open-data lake, 2.5 M tokens
   and 14.4 M entries, 0.44 s of a 2.7 s load; 0.01 s on its web-table lake).
4. Integer sets: each set as its TokenIDs ascending.
5. Posting entries ``(TokenID, SetID, position, set_size)``, 0-based positions.

Tables (Arrow schemas below). Global (one copy, shared by every shard):

- ``tokens`` (token, token_id): the token dictionary and its global order, append-only. An
  incremental build keeps every TokenID and appends the tokens it has never seen, numbered
  after the current maximum and ordered among themselves as in step 2 (the thesis's update
  rule: cases 3–4 of ADD, so positions in untouched sets never move). A token whose lists all
  went away stays (harmless: it matches nothing).
- ``dictionary``: one row, ``full_build_tokens`` (tokens numbered by the last full build) and
  ``appended_tokens`` (appended since), what ``lakejoin.spark.josie.staleness`` reads.

Sharded (an ``int32`` ``shard`` column, ``lakejoin.index.shards.shard_of(dataset_id)``; a set is
a column, so it lives in its dataset's shard): ``sets`` (set_id, dataset_id, size, tokens,
shard) and ``postings`` (token_id, set_id, dataset_id, position, set_size, shard).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from lakejoin.index.shards import SHARD, column_sets, shard_of
from lakejoin.normalize import normalize_set

TOKENS_SCHEMA = pa.schema([("token", pa.string()), ("token_id", pa.int64())])
DICTIONARY_SCHEMA = pa.schema([("full_build_tokens", pa.int64()), ("appended_tokens", pa.int64())])
SETS_SCHEMA = pa.schema(
    [
        ("set_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("size", pa.int32()),
        ("tokens", pa.list_(pa.int64())),
        (SHARD, pa.int32()),
    ]
)
POSTINGS_SCHEMA = pa.schema(
    [
        ("token_id", pa.int64()),
        ("set_id", pa.int64()),
        ("dataset_id", pa.string()),
        ("position", pa.int32()),
        ("set_size", pa.int32()),
        (SHARD, pa.int32()),
    ]
)
SCHEMAS = {"tokens": TOKENS_SCHEMA, "dictionary": DICTIONARY_SCHEMA, "sets": SETS_SCHEMA, "postings": POSTINGS_SCHEMA}
GLOBAL_TABLES = frozenset({"tokens", "dictionary"})
APPEND_TABLES = frozenset({"tokens"})  # an incremental build returns only the appended tokens
# Rebuild once this share of the dictionary was appended since the last full build: the extra posting reads stay
# near a fifth (the staleness rationale is in ``lakejoin.spark.josie``).
STALENESS_LIMIT = 0.15

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
def _mixed_runs(
    order: np.ndarray, freq: np.ndarray, hashes: np.ndarray, indptr: np.ndarray, set_ids: np.ndarray
) -> np.ndarray:
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


@njit(cache=True, inline="always")
def _mix64(x: np.uint64) -> np.uint64:
    """SplitMix64's finalizer: a bijective scramble of a 64-bit word."""
    x = np.uint64(x + np.uint64(0x9E3779B97F4A7C15))
    x = np.uint64((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9))
    x = np.uint64((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB))
    return np.uint64(x ^ (x >> np.uint64(31)))


@njit(cache=True)
def _list_sums(indptr: np.ndarray, set_ids: np.ndarray) -> np.ndarray:
    """Two 64-bit hashes of every posting list: sums (mod 2^64) of two scrambles of its members."""
    sums = np.zeros((2, indptr.shape[0] - 1), np.uint64)
    for t in range(sums.shape[1]):
        a, b = np.uint64(0), np.uint64(0)
        for e in range(indptr[t], indptr[t + 1]):
            x = np.uint64(set_ids[e])
            a += _mix64(x)
            b += _mix64(x ^ np.uint64(0x5851F42D4C957F2D))
        sums[0, t], sums[1, t] = a, b
    return sums


@njit(cache=True)
def _groups_of_runs(
    order: np.ndarray, length: np.ndarray, sums: np.ndarray, indptr: np.ndarray, set_ids: np.ndarray
) -> np.ndarray:
    """Group of every token (named by a member), given ``order``: the tokens with a non-empty
    list, those of equal (length, sums) adjacent. Within a run of equal keys each list is compared
    with the run's distinct lists so far, so a hash collision never merges different lists."""
    group = np.arange(length.shape[0])
    distinct = np.empty(order.shape[0], np.int64)
    start = 0
    for pos in range(1, order.shape[0] + 1):
        a = order[start]
        if pos < order.shape[0]:
            b = order[pos]
            if length[b] == length[a] and sums[0, b] == sums[0, a] and sums[1, b] == sums[1, a]:
                continue
        n_distinct = 0
        for m in range(start, pos):
            t = order[m]
            found = False
            for r in range(n_distinct):
                if _same_list(indptr, set_ids, distinct[r], t):
                    group[t] = group[distinct[r]]
                    found = True
                    break
            if not found:
                distinct[n_distinct] = t
                n_distinct += 1
        start = pos
    return group


@njit(cache=True)
def _named_by_smallest(group: np.ndarray) -> np.ndarray:
    """Each group named by its smallest member."""
    smallest = np.arange(group.shape[0])
    for t in range(group.shape[0]):
        smallest[group[t]] = min(smallest[group[t]], t)
    for t in range(group.shape[0]):
        group[t] = smallest[group[t]]
    return group


def duplicate_groups(indptr: np.ndarray, set_ids: np.ndarray) -> np.ndarray:
    """Step 3 (§3.4.1), on the posting lists a searcher holds: for every TokenID, the smallest
    TokenID whose list is identical to its own (its own if none; empty lists are not grouped).

    ``indptr``/``set_ids`` hold the list of every TokenID in CSR form. Identical lists are
    adjacent in a full build's order, so there a group is a run of TokenIDs named by its start
    as in the thesis; after appends, or in a subset of shards, members may be apart, and a
    searcher only skips the members a query holds consecutively (``reads.is_group_end``).
    """
    length = np.diff(indptr)
    sums = _list_sums(indptr, set_ids)
    held = np.flatnonzero(length > 0)
    # one 64-bit key per list (its hash and its length), sorted by the fast unstable sort: equal
    # lists are adjacent; the groups' names are made the smallest TokenID afterwards
    key = sums[0][held] ^ (length[held].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    group = _groups_of_runs(held[np.argsort(key)], length, sums, indptr, set_ids)
    return _named_by_smallest(group)


class _Entries:
    """The (set, token) entries of the non-empty sets: set ids and sizes, each entry's set id
    and token code, and the distinct tokens (``uniques[code]``)."""

    def __init__(self, sets: Mapping[int, Iterable[str]], normalize: bool) -> None:
        ids, values = [], []
        for set_id, column in sets.items():
            distinct = list(normalize_set(column)) if normalize else list(dict.fromkeys(map(str, column)))
            if distinct:
                ids.append((int(set_id), len(distinct)))
                values.extend(distinct)
        self.set_ids = np.array([i for i, _ in ids], np.int64)
        self.sizes = np.array([n for _, n in ids], np.int64)
        if len(np.unique(self.set_ids)) != len(self.set_ids):
            raise ValueError("JOSIE build: duplicate set ids")
        self.codes, self.uniques = pd.factorize(np.array(values, dtype=object))
        self.uniques = np.asarray(self.uniques, dtype=object)
        self.entry_set = np.repeat(self.set_ids, self.sizes)


def _numbered(uniques: np.ndarray, codes: np.ndarray, entry_set: np.ndarray, first_id: int) -> np.ndarray:
    """Step 2 over tokens whose posting lists are complete in the entries (``codes``,
    ``entry_set``): each token's TokenID, numbered from ``first_id`` in the global order."""
    by_token = np.lexsort((entry_set, codes))
    indptr = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=len(uniques)))))
    token_id = np.empty(len(uniques), np.int64)
    token_id[global_order(uniques, indptr, entry_set[by_token])] = first_id + np.arange(len(uniques))
    return token_id


def _shard_of(dataset_id: str | None, n_shards: int) -> int:
    if dataset_id is None:
        if n_shards != 1:
            raise ValueError("JOSIE build: dataset_ids are required with n_shards > 1")
        return 0
    return shard_of(dataset_id, n_shards)


def _set_tables(
    entries: _Entries, entry_token: np.ndarray, dataset_ids: Mapping[int, str] | None, n_shards: int
) -> tuple[pa.Table, pa.Table]:
    """Steps 4–5: integer sets sorted by TokenID, then posting entries with positions."""
    entry_set, sizes = entries.entry_set, entries.sizes
    by_set = np.lexsort((entry_token, entry_set))
    set_order = np.argsort(entries.set_ids)
    set_ids, sizes = entries.set_ids[set_order], sizes[set_order]
    set_tokens = entry_token[by_set]
    set_starts = np.concatenate(([0], np.cumsum(sizes)))
    positions = np.arange(len(by_set)) - np.repeat(set_starts[:-1], sizes)
    entry_set_sorted = entry_set[by_set]
    datasets = [None if dataset_ids is None else dataset_ids.get(int(s)) for s in set_ids]
    shards = np.array([_shard_of(d, n_shards) for d in datasets], np.int32)
    set_table = pa.table(
        {
            "set_id": set_ids,
            "dataset_id": pa.array(datasets, pa.string()),
            "size": sizes.astype(np.int32),
            "tokens": pa.ListArray.from_arrays(pa.array(set_starts, pa.int32()), pa.array(set_tokens, pa.int64())),
            SHARD: shards,
        },
        schema=SETS_SCHEMA,
    )
    by_posting = np.lexsort((entry_set_sorted, set_tokens))
    entry_dataset = pa.array(np.repeat(np.array(datasets, dtype=object), sizes), pa.string())
    postings = pa.table(
        {
            "token_id": set_tokens[by_posting],
            "set_id": entry_set_sorted[by_posting],
            "dataset_id": entry_dataset.take(pa.array(by_posting, pa.int64())),
            "position": positions[by_posting].astype(np.int32),
            "set_size": np.repeat(sizes, sizes)[by_posting].astype(np.int32),
            SHARD: np.repeat(shards, sizes)[by_posting],
        },
        schema=POSTINGS_SCHEMA,
    )
    return set_table, postings


def _token_table(tokens: np.ndarray, token_id: np.ndarray) -> pa.Table:
    order = np.argsort(token_id)
    return pa.table(
        {"token": pa.array(tokens[order].tolist(), pa.string()), "token_id": token_id[order]}, schema=TOKENS_SCHEMA
    )


def _dictionary(full_build_tokens: int, appended_tokens: int) -> pa.Table:
    return pa.table(
        {"full_build_tokens": [full_build_tokens], "appended_tokens": [appended_tokens]}, schema=DICTIONARY_SCHEMA
    )


def build_in_memory(
    sets: Mapping[int, Iterable[str]],
    *,
    dataset_ids: Mapping[int, str] | None = None,
    normalize: bool = True,
    n_shards: int = 1,
) -> dict[str, pa.Table]:
    """Build JOSIE's tables without Spark (the Spark full build's tables over cells holding
    these values, in ``n_shards`` shards).

    ``sets`` maps set id (``column_id``) to its values, ``dataset_ids`` set id to dataset (needed
    for more than one shard; without it every ``dataset_id`` is null). Values pass through
    ``normalize_value`` (idempotent, so already-normalized cells give the Spark build's
    tables); ``normalize=False`` skips that for values known to be normalized. Sets left
    empty are not indexed.
    """
    entries = _Entries(sets, normalize)
    if not len(entries.set_ids):
        raise ValueError("build_in_memory: no set has a non-null value")
    token_id = _numbered(entries.uniques, entries.codes, entries.entry_set, 0)
    set_table, postings = _set_tables(entries, token_id[entries.codes], dataset_ids, n_shards)
    tokens = _token_table(entries.uniques, token_id)
    return {"tokens": tokens, "dictionary": _dictionary(tokens.num_rows, 0), "sets": set_table, "postings": postings}


def update_in_memory(
    previous: Mapping[str, pa.Table],
    sets: Mapping[int, Iterable[str]],
    *,
    changed: Iterable[str],
    dataset_ids: Mapping[int, str],
    normalize: bool = True,
    n_shards: int = 1,
) -> dict[str, pa.Table]:
    """The Spark incremental build without Spark (same tables, ``lakejoin.spark.josie``).

    ``previous``: the last build's global tables whole and its sharded tables cut to the
    rewritten shards (``shards.in_shards``); ``changed``: the datasets added, changed or
    removed; ``sets``/``dataset_ids``: the new content of the changed datasets' sets. Returns
    the rewritten shards' sets and postings, the tokens to append and the new ``dictionary``.
    """
    entries = _Entries(sets, normalize)
    (row,) = previous["dictionary"].to_pylist()
    full_build, appended = row["full_build_tokens"], row["appended_tokens"]
    uniques = pa.array(entries.uniques.tolist(), pa.string())
    # the lake's dictionary probed with the change's few tokens, not hashed whole (10 ms instead of
    # 80-220 ms for 2,500 tokens against the whole bundled lake's 628k)
    old = previous["tokens"].filter(pc.is_in(previous["tokens"]["token"], value_set=uniques))
    known = pc.fill_null(pc.index_in(uniques, value_set=old["token"]), -1).to_numpy()
    new = known < 0
    token_id = np.full(len(known), -1, dtype=np.int64)
    token_id[~new] = old["token_id"].to_numpy()[known[~new]]
    in_new = new[entries.codes]
    renumber = np.cumsum(new) - 1
    token_id[new] = _numbered(
        entries.uniques[new], renumber[entries.codes[in_new]], entries.entry_set[in_new], full_build + appended
    )
    set_table, postings = _set_tables(entries, token_id[entries.codes], dataset_ids, n_shards)
    gone = pa.array(sorted(set(changed)), pa.string())

    def carried(name: str, fresh: pa.Table) -> pa.Table:
        kept = previous[name].filter(pc.invert(pc.is_in(previous[name]["dataset_id"], value_set=gone)))
        return pa.concat_tables([kept.cast(SCHEMAS[name]), fresh])

    return {
        "tokens": _token_table(entries.uniques[new], token_id[new]),
        "dictionary": _dictionary(full_build, appended + int(new.sum())),
        "sets": carried("sets", set_table),
        "postings": carried("postings", postings),
    }


def build_tables(cells: pa.Table, *, n_shards: int) -> dict[str, pa.Table]:
    """The full build of ``lakejoin.spark.josie.build_tables`` in this process, for a lake small
    enough to build here (``lakejoin.spark.indexing``): ``cells`` are ``lake/cells`` rows of the
    columns JOSIE indexes, already normalized."""
    sets, dataset_ids = column_sets(cells)
    return build_in_memory(sets, dataset_ids=dataset_ids, normalize=False, n_shards=n_shards)


def update_tables(
    cells: pa.Table, *, n_shards: int, previous: Mapping[str, pa.Table], changed: Collection[str]
) -> dict[str, pa.Table]:
    """The incremental build of ``lakejoin.spark.josie.build_tables`` in this process (for an
    update small enough to run here, ``lakejoin.spark.indexing``): ``cells`` are the changed
    datasets' ``lake/cells`` rows, already normalized."""
    sets, dataset_ids = column_sets(cells)
    return update_in_memory(
        previous, sets, changed=changed, dataset_ids=dataset_ids, normalize=False, n_shards=n_shards
    )


def staleness(tables: Mapping[str, pa.Table]) -> float:
    """Share of the token dictionary appended since the last full build (0 right after one), from
    the global tables just written (read as Arrow)."""
    (row,) = tables["dictionary"].to_pylist()
    total = row["full_build_tokens"] + row["appended_tokens"]
    return row["appended_tokens"] / total if total else 0.0
