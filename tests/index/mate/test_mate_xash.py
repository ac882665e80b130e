"""XASH (MATE §5) against the note's test vectors and an independent transcription."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from lakejoin.index.mate import super_key, xash
from lakejoin.index.mate.xash import ALPHABET, BETA, bytes_to_words, key_bytes, xash_array, xash_words


def bit_indices(h: int) -> list[int]:
    return [i for i in range(h.bit_length()) if h >> i & 1]


@pytest.mark.parametrize(
    ("token", "hex_value", "bits_set"),
    [
        ("muhammad", "00800401004000000000000400000800", [11, 34, 86, 96, 106, 119]),
        ("lee", "00040000002000020000000000000000", [65, 85, 114]),
        ("", "00008000000000000000000000000000", [111]),
    ],
)
def test_note_vectors_128(token: str, hex_value: str, bits_set: list[int]) -> None:
    h = xash(token, 128)
    assert f"{h:032x}" == hex_value
    assert bit_indices(h) == bits_set


def test_query_key_vector() -> None:
    assert f"{super_key(['muhammad', 'lee', 'us'], 128):032x}" == "00860421006000020000000400000800"


def test_length_bit_is_not_rotated_and_wraps() -> None:
    for bits, beta in BETA.items():
        chars, length_bits = 37 * beta, bits - 37 * beta
        assert xash("", bits) == 1 << chars
        # Lengths are taken modulo the length region: n and n + Lw set the same length bit.
        a, b = xash("x" * 3, bits), xash("x" * (3 + length_bits), bits)
        assert a >> chars == b >> chars == 1 << 3
        assert xash("a" * 50, bits).bit_length() <= bits


def test_out_of_alphabet_characters_use_up_slots() -> None:
    # Five distinct symbols outside the alphabet are the rarest (count 1, smallest code points
    # first), so they take all K slots and only the length bit remains.
    assert bit_indices(xash("!#$%&zzzz", 128)) == [111 + 9]
    assert xash("é", 128) == 1 << (111 + 1)


def test_popcount_at_most_six() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        token = "".join(rng.choice(ALPHABET + "-.,é") for _ in range(rng.randint(0, 30)))
        for bits in (128, 256, 512):
            assert 1 <= xash(token, bits).bit_count() <= 6


def transcription(token: str, bits: int) -> int:
    """The authors' XASH written the way their code computes it (float mean position, a bit
    string rotated as text), independent of ``lakejoin.index.mate.xash``."""
    beta = {128: 3, 256: 6, 512: 13}[bits]
    chars = 37 * beta
    length_bits = bits - chars
    n = len(token)
    array = [0] * chars
    counts = Counter(token)
    for ch, count in sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))[:5]:
        if ch not in ALPHABET:
            continue
        mean = sum(i for i, c in enumerate(token) if c == ch) / count
        area = max(int(mean / n * beta - 1e-9), 0)
        array[ALPHABET.index(ch) * beta + area] = 1
    text = "".join(map(str, reversed(array)))  # most significant bit first
    shift = int(chars * (n % length_bits) / length_bits)
    text = text[shift:] + text[:shift]  # rotate left
    value = int(text, 2) if text else 0
    return value | 1 << (chars + n % length_bits)


@pytest.mark.parametrize("bits", [128, 256, 512])
def test_matches_independent_transcription(bits: int) -> None:
    rng = random.Random(bits)
    alphabet = ALPHABET + "-./'é"
    tokens = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    tokens += ["new york", "2013", "jfk", "muhammad ali", "bay ridge", "cambridge"]
    for token in tokens:
        assert xash(token, bits) == transcription(token, bits), token


def test_super_key_contains_each_cell() -> None:
    row = ["ewr", "2013", "1", "1", "5", "39.02"]
    key = super_key(row, 256)
    for value in row:
        assert xash(value, 256) & ~key == 0


@pytest.mark.parametrize("bits", [128, 256, 512])
def test_words_are_big_endian_keys(bits: int) -> None:
    values = ["muhammad", "lee", "", "2013-01-01"]
    words = xash_words(values, bits)
    assert words.shape == (4, bits // 64) and words.dtype == np.uint64
    for value, row in zip(values, words):
        assert int("".join(f"{int(w):016x}" for w in row), 16) == xash(value, bits)
        assert np.array_equal(bytes_to_words(key_bytes(xash(value, bits), bits), bits)[0], row)
    # Word 0 holds the length region (the high-order bits), tested first by the row filter.
    assert int(words[2, 0]) != 0 and not words[2, 1:].any()


def test_unsupported_size() -> None:
    with pytest.raises(ValueError, match="XASH size"):
        xash("a", 100)


@pytest.mark.parametrize("bits", [64, 128, 256, 512])
def test_compiled_array_equals_xash(bits: int) -> None:
    """``xash_array`` (compiled over Arrow's buffers, ASCII values; the others by ``xash``) gives
    ``xash_words`` bit for bit, on a sliced array (non-zero offset) too."""
    rng = random.Random(bits)
    alphabet = ALPHABET + "-./'!~é中"
    tokens = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(4000)]
    tokens += ["", "a" * 300, "!#$%&zzzz", "café", "muhammad", "2013-01-01", "\x7f\x00a"]
    values = pa.array(["skipped"] + tokens, pa.string()).slice(1)
    assert np.array_equal(xash_array(values, bits), xash_words(tokens, bits))
