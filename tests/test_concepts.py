"""The concept SAE: sized from the data, trained with sae-lens on real sentences of the demo pair (packaged
MiniLM embeddings), reaching a stated explained variance; a given SAE must fit the embedding width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.sentences import sample_texts
from engine.errors import InputError
from engine.features.concepts import (
    MIN_WIDTH,
    K,
    concept_codes,
    concept_settings,
    concept_width,
    load_concepts,
    train_concepts,
)
from engine.features.reader_spec import resolve_reader
from engine.features.sentence_embed import SentenceEmbedder
from engine.features.sentences import split_sentences
from engine.features.settings import FeatureSettings
from engine.progress import NullProgress
from tests.factories_features import MINILM

N_SENTENCES = 600
EXPLAINED_VARIANCE = 0.5  # on held-out sentences; measured 0.567 (32 latents, k 8; docs/concepts.md)


def test_width_grows_with_the_data_within_bounds() -> None:
    assert concept_width(100, 384) == MIN_WIDTH
    assert concept_width(5_000, 384) == 500 // 32 * 32  # one latent per SENTENCES_PER_LATENT sentences
    assert concept_width(20_000, 384) == concept_width(10**7, 384) == 4 * 384
    settings = concept_settings(FeatureSettings(), 5000, 384)
    assert settings.sae_k == K and settings.sae_width == concept_width(5000, 384) and settings.sae_steps >= 300


@pytest.mark.slow
def test_a_concept_sae_on_real_sentences_explains_most_of_their_variance(tmp_path: Path) -> None:
    texts = sorted({t[a:b] for t in sample_texts(300) for a, b in split_sentences(t)})
    texts = list(np.random.default_rng(0).permutation(texts)[:N_SENTENCES])
    embedder = SentenceEmbedder(resolve_reader(str(MINILM), None, FeatureSettings()), "cpu", tmp_path / "cache")
    vectors = embedder.embed(texts)
    trained = train_concepts(
        vectors, reader="minilm", settings=FeatureSettings(), device="cpu", seed=0, folder=tmp_path / "sae",
        progress=NullProgress(),
    )  # fmt: skip
    assert trained.metrics["explained_variance"] >= EXPLAINED_VARIANCE
    assert trained.sae.cfg.d_sae == concept_width(len(texts), vectors.shape[1])
    codes = list(concept_codes(trained.sae, vectors, 256))
    row, value = np.concatenate([c[0] for c in codes]), np.concatenate([c[2] for c in codes])
    assert (value > 0).all() and np.bincount(row, minlength=len(texts)).max() <= K
    again = train_concepts(
        vectors, reader="minilm", settings=FeatureSettings(), device="cpu", seed=0, folder=tmp_path / "sae",
        progress=NullProgress(),
    )  # fmt: skip
    assert again.metrics["concept_sae_trained"] is False  # reused from its folder
    assert load_concepts(tmp_path / "sae", "cpu", vectors.shape[1]).cfg.d_sae == trained.sae.cfg.d_sae
    with pytest.raises(InputError, match="does not match the sentence embedding width"):
        load_concepts(tmp_path / "sae", "cpu", 32)
