"""A string dictionary (id -> string) kept as Arrow's UTF-8 buffers: MATE's value dictionary and
JOSIE's (and q-gram's) token dictionary.

A ``pd.Index`` or a ``dict`` of Python strings costs a str object per distinct value plus a
hash table; here the strings stay in one data buffer and its offsets, and a lookup
binary-searches the strings' 64-bit hashes, each packed with its id and sorted as one integer
(compiled; a hash collision is resolved by comparing the bytes). Sorting integers rather than
strings is what makes the dictionary cheap to build: for JOSIE's 22 M tokens of a
1,000,000-set lake a ``dict`` took 17.6 s and about 4.5 GiB, a permutation in byte order
(``pc.sort_indices``) 12.9 s for its sort alone, the sorted hashes 2.2 s for the whole build
(measured beside a test run); a key is 8 bytes a string where the permutation was 4. Every
process that searches shards builds it (each Spark executor of a batch discovery, the graph
for each group of MATE shards).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit


def string_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data bytes, offsets) of a string array without copying: value i is
    ``data[offsets[i]:offsets[i+1]]``."""
    if array.null_count:
        raise ValueError("the value dictionary holds a null")
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    _validity, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, offset_type)[array.offset : array.offset + len(array) + 1]
    return (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), offsets


def strings_of_buffers(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """The string array :func:`string_buffers` gave (``offsets`` int32), its bytes checked to be
    UTF-8 within bounds: ``ValueError`` (an Arrow error) otherwise."""
    strings = pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    strings.validate(full=True)
    return strings


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """``(codes, strings)``: each row's position (int32) among the column's distinct strings.
    A dictionary-encoded column (``lakejoin.lake.delta.ValuesIn(keep_codes=True)``) is read
    through its chunks' dictionaries, and ``strings`` keeps only those some row uses; a plain
    one is hashed row by row (``dictionary_encode``)."""
    if not pa.types.is_dictionary(column.type):
        encoded = pc.dictionary_encode(column).combine_chunks()
        return encoded.indices.to_numpy().astype(np.int32, copy=False), encoded.dictionary
    if column.null_count:
        raise ValueError("a dictionary-encoded string column holds a null")
    unified = column.unify_dictionaries()
    if not unified.num_chunks:
        return np.zeros(0, np.int32), pa.array([], column.type.value_type)
    strings = unified.chunk(0).dictionary
    codes = np.concatenate([chunk.indices.to_numpy() for chunk in unified.chunks]).astype(np.int32, copy=False)
    used = np.zeros(len(strings), bool)
    used[codes] = True
    renumbered = (np.cumsum(used) - 1).astype(np.int32)
    return renumbered[codes], strings.filter(pa.array(used))


class ValueDictionary:
    """Ids of strings: id i is ``strings[i]`` (for MATE the order ``dictionary_codes`` gave)."""

    def __init__(self, strings: pa.Array | pa.ChunkedArray):
        if isinstance(strings, pa.ChunkedArray):  # one buffer; large offsets past 2 GiB of text
            strings = (
                strings.cast(pa.large_string()) if sum(c.nbytes for c in strings.chunks) >= 2**31 - 1 else strings
            ).combine_chunks()
        self.data, self.offsets = string_buffers(strings)
        self.id_bits = max(1, (len(strings) - 1).bit_length())  # the low bits of a key hold the id
        self.keys = np.sort(_keys(self.data, self.offsets, np.uint64(self.id_bits)))

    @classmethod
    def from_arrays(cls, data: np.ndarray, offsets: np.ndarray, keys: np.ndarray) -> ValueDictionary:
        """The dictionary :meth:`arrays` gave (a shard's cached arrays): nothing hashed or sorted."""
        if (
            offsets.ndim != 1
            or len(offsets) != len(keys) + 1
            or keys.dtype != np.uint64
            or (len(offsets) and int(offsets[-1]) > len(data))
        ):
            raise ValueError("these arrays are not one value dictionary's")
        dictionary = cls.__new__(cls)
        dictionary.data, dictionary.offsets, dictionary.keys = data, offsets, keys
        dictionary.id_bits = max(1, (len(keys) - 1).bit_length())
        return dictionary

    def arrays(self) -> dict[str, np.ndarray]:
        """The strings' buffers and the sorted keys, all a lookup needs."""
        return {"data": self.data, "offsets": self.offsets, "keys": self.keys}

    def __len__(self) -> int:
        return len(self.keys)

    def get_indexer(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """Value id of each of ``values`` (int64), -1 where the index does not hold it. An Arrow
        string array is read in place (a query looked up in many shards converts its values once)."""
        data, offsets = string_buffers(values if isinstance(values, pa.Array) else pa.array(values, pa.string()))
        out = np.empty(len(values), np.int64)
        _lookup(self.data, self.offsets, self.keys, np.uint64(self.id_bits), data, offsets, out)
        return out


@njit(cache=True, nogil=True)
def _hash(data: np.ndarray, lo: int, hi: int) -> np.uint64:
    """64-bit FNV-1a of ``data[lo:hi]``, its bits mixed by the SplitMix64 finalizer (a key
    keeps the high bits)."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(lo, hi):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True)
def _keys(data: np.ndarray, offsets: np.ndarray, id_bits: np.uint64) -> np.ndarray:
    """Each string's key: its hash's high bits above its id."""
    n = len(offsets) - 1
    keys = np.empty(n, np.uint64)
    for i in range(n):
        keys[i] = ((_hash(data, offsets[i], offsets[i + 1]) >> id_bits) << id_bits) | np.uint64(i)
    return keys


@njit(cache=True, nogil=True)
def _equal(a: np.ndarray, a_lo: int, a_hi: int, b: np.ndarray, b_lo: int, b_hi: int) -> bool:
    if a_hi - a_lo != b_hi - b_lo:
        return False
    for i in range(a_hi - a_lo):
        if a[a_lo + i] != b[b_lo + i]:
            return False
    return True


@njit(cache=True, nogil=True)
def _lookup(
    data: np.ndarray,
    offsets: np.ndarray,
    keys: np.ndarray,
    id_bits: np.uint64,
    query_data: np.ndarray,
    query_offsets: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[q]``: the id whose bytes equal query value q, or -1: the keys with q's hash bits
    are one run of the sorted ``keys`` (lower bound, then each compared)."""
    id_mask = (np.uint64(1) << id_bits) - np.uint64(1)
    for q in range(len(query_offsets) - 1):
        q_lo, q_hi = query_offsets[q], query_offsets[q + 1]
        high = (_hash(query_data, q_lo, q_hi) >> id_bits) << id_bits
        lo, hi = 0, len(keys)
        while lo < hi:
            mid = (lo + hi) >> 1
            if keys[mid] < high:
                lo = mid + 1
            else:
                hi = mid
        out[q] = -1
        while lo < len(keys) and (keys[lo] & ~id_mask) == high:
            v = np.int64(keys[lo] & id_mask)
            if _equal(data, offsets[v], offsets[v + 1], query_data, q_lo, q_hi):
                out[q] = v
                break
            lo += 1
