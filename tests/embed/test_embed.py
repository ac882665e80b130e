"""Embedding models (lakejoin.embed): shape, dtype, norms, determinism, semantics, errors."""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest

from lakejoin.embed import MODELS, PEXESO_MODEL, embed, load_model, model_dim, value_hash

OFFLINE_MODELS = ["char-ngram", "glove-50", "minilm-onnx"]
VALUES = ["Korea, Rep.", "South Korea", "United Air Lines Inc.", "N14228", "2013", "JFK"]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


@pytest.mark.parametrize("model", OFFLINE_MODELS)
def test_shape_dtype_norms(model):
    vectors = embed(VALUES, model)
    assert vectors.shape == (len(VALUES), model_dim(model))
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("model", OFFLINE_MODELS)
def test_deterministic_and_order_independent(model):
    once = embed(VALUES, model)
    reversed_rows = embed(VALUES[::-1], model)[::-1]
    np.testing.assert_allclose(once, reversed_rows, atol=1e-5)  # batching must not change a row
    np.testing.assert_array_equal(once, embed(VALUES, model))


@pytest.mark.parametrize("model", OFFLINE_MODELS)
def test_values_are_normalized_first(model):
    np.testing.assert_allclose(
        embed(["  SOUTH   Korea ", "2019.0"], model), embed(["south korea", "2019"], model), atol=1e-6
    )


def test_minilm_batches_keep_to_their_token_budget():
    from lakejoin.embed.models.minilm_onnx import BATCH, BATCH_TOKENS, _batches

    lengths = np.array([3] * 300 + [9] * 100 + [40] * 30 + [256] * 3 + [700])  # ascending, as encode sorts them
    order = np.arange(len(lengths))[::-1].copy()  # any positions: batches must keep them in order
    batches = _batches(order, lengths)
    np.testing.assert_array_equal(np.concatenate(batches), order)
    sizes = [len(b) for b in batches]
    for size, end in zip(sizes, np.cumsum(sizes)):
        assert size <= BATCH
        assert size == 1 or lengths[end - 1] * size <= BATCH_TOKENS  # a batch pads to its longest (last) value
    assert (
        sizes[0] == BATCH and sizes[-1] == 1 and sizes[-2] == 1
    )  # short values fill whole batches; 256- and 700-token values go alone


def test_semantic_pair_beats_unrelated_pair_minilm_onnx():
    korea_rep, south_korea, bicycle = embed(["Korea, Rep.", "South Korea", "bicycle"], "minilm-onnx")
    assert cosine(korea_rep, south_korea) > cosine(korea_rep, bicycle) + 0.3
    assert cosine(korea_rep, south_korea) == pytest.approx(0.737, abs=0.02)  # fp32 model: 0.737


def test_glove_averages_known_words_and_falls_back_deterministically():
    glove = load_model("glove-50")
    mean = glove.encode(["south", "korea"]).mean(axis=0)  # raw GloVe vectors, averaged
    np.testing.assert_allclose(embed(["south korea"], "glove-50")[0], mean / np.linalg.norm(mean), atol=1e-5)
    oov = embed(["xqzvblw", "xqzvblw", "zzkqptr"], "glove-50")
    np.testing.assert_array_equal(oov[0], oov[1])
    assert abs(cosine(oov[0], oov[2])) < 0.6  # random 50-d unit vectors: |cos| ~ 0.14
    assert glove.dim == 50


def test_char_ngram_measures_spelling():
    a, typo, other = embed(["n14228", "n14229", "delta air lines"], "char-ngram")
    assert cosine(a, typo) > cosine(a, other)


def test_empty_input_and_errors():
    assert embed([], "char-ngram").shape == (0, model_dim("char-ngram"))
    with pytest.raises(ValueError, match="unknown embedding model"):
        embed(["x"], "word2vec")
    with pytest.raises(ValueError, match="null-like"):
        embed(["x", "N/A"], "char-ngram")
    with pytest.raises(ValueError, match="list"):
        embed("korea", "char-ngram")


def test_models_and_default():
    assert set(MODELS) == {"glove-50", "minilm-onnx", "minilm", "char-ngram"}
    assert PEXESO_MODEL in MODELS
    assert load_model("char-ngram") is load_model("char-ngram")  # one instance per process


def test_value_hash_is_sha256_hex():
    assert value_hash("ua") == hashlib.sha256(b"ua").hexdigest()
    assert value_hash("séoul") == hashlib.sha256("séoul".encode()).hexdigest()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch installed: the minilm model can load")
def test_minilm_without_torch_says_how_to_install():
    with pytest.raises(ImportError, match="torch"):
        embed(["x"], "minilm")


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None, reason="sentence-transformers (and torch) not installed"
)
def test_minilm_matches_onnx():
    full, int8 = embed(VALUES, "minilm"), embed(VALUES, "minilm-onnx")
    assert np.min(np.sum(full * int8, axis=1)) > 0.99
