"""XASH, MATE's syntactic hash, and the row super key (paper §5, Eq. 5-6; note mate.md §2.3).

Bit-for-bit the authors' reference (``XASH`` in LUH-DBS/MATE ``src/MATE.py`` and
``src/index_generation.py``), which differs from the paper's prose; the note lists where.
For a hash size ``A`` (bits) the value is split into

- a character region of ``C = 37·β`` bits (bits ``[0, C)``): one ``β``-bit segment per symbol
  of ``ALPHABET`` (space, digits, letters, in that order); and
- a length region of ``Lw = A − C`` bits (bits ``[C, A)``, the high-order "left-most" part).

``XASH(t)`` sets one bit for each of the ``K = 5`` least frequent characters of ``t`` (ties by
code point; a character outside the alphabet uses up its slot and sets nothing): the bit of the
segment area holding the character's mean 0-based position. The character region is then
rotated left by ``⌊C·(n mod Lw)/Lw⌋`` and the one-hot length bit ``C + (n mod Lw)`` is added.

The super key of a row is the OR of XASH over all its cells (paper §5.3); a query row's key is
the OR over its key values; the row may hold the key only if ``query_key & ~super_key == 0``
(the Lemma of §6.3: no false negatives). Keys are plain ints here; ``xash_words`` lays them out
as big-endian uint64 words, so word 0 holds the length bits and is the one tested first.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
from numba import njit

from lakejoin.index.values import string_buffers

ALPHABET = " 0123456789abcdefghijklmnopqrstuvwxyz"
_SEGMENT = {ch: i for i, ch in enumerate(ALPHABET)}
_ASCII_SEGMENT = np.array([_SEGMENT.get(chr(code), -1) for code in range(128)], dtype=np.int64)
BETA = {64: 1, 128: 3, 256: 6, 512: 13}  # Eq. 6: the largest β with 37·β < A
K = 5  # characters per value: the reference's ``number_of_ones`` (α − 1 of Eq. 5)


def _layout(bits: int) -> tuple[int, int, int]:
    """(β, C, Lw) for a hash size; only the sizes the reference defines."""
    if bits not in BETA:
        raise ValueError(f"XASH size must be one of {sorted(BETA)} bits, got {bits!r}")
    beta = BETA[bits]
    chars = 37 * beta
    return beta, chars, bits - chars


def xash(value: str, bits: int = 128) -> int:
    """XASH of one (already normalized) value as an int; bit i is worth 2**i."""
    beta, chars, length_bits = _layout(bits)
    n = len(value)
    counts: dict[str, int] = {}
    position_sums: dict[str, int] = {}
    for i, ch in enumerate(value):
        counts[ch] = counts.get(ch, 0) + 1
        position_sums[ch] = position_sums.get(ch, 0) + i
    h = 0
    for ch in sorted(counts, key=lambda c: (counts[c], c))[:K]:
        segment = _SEGMENT.get(ch)
        if segment is None:
            continue
        # Smallest area b whose right edge (b+1)·n/β is at or after the mean position,
        # in exact integers: Σpos·β <= (b+1)·n·count.
        area = 0
        while position_sums[ch] * beta > (area + 1) * n * counts[ch]:
            area += 1
        h |= 1 << (segment * beta + area)
    shift = chars * (n % length_bits) // length_bits
    h = ((h << shift) | (h >> (chars - shift))) & ((1 << chars) - 1)
    return h | (1 << (chars + n % length_bits))


def super_key(values: Iterable[str], bits: int = 128) -> int:
    """OR of XASH over values: a row's super key (all cells) or a query row's key (key cells)."""
    key = 0
    for value in values:
        key |= xash(value, bits)
    return key


def words_per_key(bits: int) -> int:
    """Number of uint64 words of a key."""
    _layout(bits)
    return bits // 64


def key_bytes(key: int, bits: int) -> bytes:
    """The key as ``bits/8`` big-endian bytes (the ``superkey`` column of the index)."""
    return key.to_bytes(bits // 8, "big")


def bytes_to_words(blob: bytes, bits: int) -> np.ndarray:
    """Big-endian key bytes (one or many keys concatenated) as an (n, bits/64) uint64 array."""
    return np.frombuffer(blob, dtype=">u8").astype(np.uint64).reshape(-1, words_per_key(bits))


def xash_words(values: Iterable[str], bits: int = 128) -> np.ndarray:
    """XASH of many values as an (n, bits/64) uint64 array, word 0 the most significant."""
    return bytes_to_words(b"".join(key_bytes(xash(v, bits), bits) for v in values), bits)


def xash_array(values: pa.Array, bits: int = 128) -> np.ndarray:
    """:func:`xash_words` of a non-null Arrow string array, compiled: ASCII values (one byte per
    character) are hashed in place from the array's buffers; the rest by :func:`xash`."""
    beta, chars, length_bits = _layout(bits)
    data, offsets = string_buffers(values)
    out = np.zeros((len(values), words_per_key(bits)), np.uint64)
    ascii_values = np.ones(len(values), np.bool_)
    _xash_ascii(data, offsets.astype(np.int64), beta, chars, length_bits, _ASCII_SEGMENT, out, ascii_values)
    others = np.flatnonzero(~ascii_values)
    if len(others):
        out[others] = xash_words(values.take(pa.array(others)).to_pylist(), bits)
    return out


@njit(cache=True, nogil=True)
def _set_bit(out: np.ndarray, v: int, bit: int) -> None:
    """Bit ``bit`` (worth 2**bit) of key ``v``; word 0 holds the most significant bits."""
    out[v, out.shape[1] - 1 - (bit >> 6)] |= np.uint64(1) << np.uint64(bit & 63)


@njit(cache=True, nogil=True)
def _xash_ascii(
    data: np.ndarray,
    offsets: np.ndarray,
    beta: int,
    chars: int,
    length_bits: int,
    segment_of: np.ndarray,
    out: np.ndarray,
    ascii_values: np.ndarray,
) -> None:
    """:func:`xash` of each value that is pure ASCII; ``ascii_values[v]`` set False for the others.
    Only up to K + 1 bits are set, so the rotation moves each bit rather than the whole region."""
    counts = np.zeros(128, np.int64)
    position_sums = np.zeros(128, np.int64)
    present = np.empty(128, np.int64)
    for v in range(len(offsets) - 1):
        lo, n = offsets[v], offsets[v + 1] - offsets[v]
        m = 0
        for i in range(n):
            ch = data[lo + i]
            if ch >= 128:
                ascii_values[v] = False
                break
            if counts[ch] == 0:
                present[m] = ch
                m += 1
            counts[ch] += 1
            position_sums[ch] += i
        if ascii_values[v]:
            shift = chars * (n % length_bits) // length_bits
            for _ in range(min(K, m)):  # the K least frequent characters, ties by code point
                best, slot = -1, -1
                for j in range(m):
                    ch = present[j]
                    if ch >= 0 and (
                        best < 0 or counts[ch] < counts[best] or (counts[ch] == counts[best] and ch < best)
                    ):
                        best, slot = ch, j
                present[slot] = -1
                if segment_of[best] >= 0:
                    # the smallest area b with Σpos·β <= (b+1)·n·count (as in xash)
                    area = max((position_sums[best] * beta + n * counts[best] - 1) // (n * counts[best]) - 1, 0)
                    _set_bit(out, v, (segment_of[best] * beta + area + shift) % chars)
            _set_bit(out, v, chars + n % length_bits)
        for i in range(n):
            ch = data[lo + i]
            if ch < 128:
                counts[ch] = 0
                position_sums[ch] = 0
