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

ALPHABET = " 0123456789abcdefghijklmnopqrstuvwxyz"
_SEGMENT = {ch: i for i, ch in enumerate(ALPHABET)}
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
