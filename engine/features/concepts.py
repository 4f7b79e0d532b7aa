"""Concept features: a TopK SAE over sentence embeddings (HypotheSAEs: SAEs on text embeddings give
interpretable concepts), trained with sae-lens' trainer through `engine.features.sae.train_sae`.

Sizing from the data: one latent per SENTENCES_PER_LATENT distinct discovery sentences, between MIN_WIDTH and
MAX_WIDTH_FACTOR x the embedding width, in multiples of 32; K active latents per sentence (HypotheSAEs
uses k of 4 to 8 with widths of tens to hundreds). Fewer latents than the token SAE: a sentence embedding
holds one meaning where a token holds many contexts, and a concept needs enough sentences to be estimated.
`--concept-sae PATH` loads a folder saved by sae-lens instead; its input width must be the embedding width.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import InputError
from engine.features.sae import TrainedSae, encode, load_folder, load_trained, sparse_codes, train_sae
from engine.features.settings import FeatureSettings
from engine.progress import Progress

if TYPE_CHECKING:
    from sae_lens import SAE

log = logging.getLogger(__name__)

CONCEPT_HOOK = "rldiff.sentence_embedding"  # hook name recorded in a concept SAE's metadata
# A latent fires on about n * K / width of n sentences: at one latent per 10 sentences, 80, the size of a behaviour
# said in a few dozen discovery sentences. At one per 40 (320) a latent was a topic that such a behaviour shared
# with hundreds of ordinary sentences (docs/concepts.md, "Width").
SENTENCES_PER_LATENT = 10
MIN_WIDTH = 32
MAX_WIDTH_FACTOR = 4
K = 8  # active concepts per sentence
BATCH = 256  # sentences per training step
MIN_STEPS, MAX_STEPS = 300, 3000  # at least a few hundred steps even for a small study: sentences are few
EPOCHS = 10  # passes over the sample (bounded by MAX_STEPS)
LR = 1e-3
MIN_SENTENCES = 64  # fewer distinct discovery sentences than this: too few for concepts (twice MIN_WIDTH)


def concept_width(n_sentences: int, dim: int) -> int:
    """Latents for `n_sentences` training sentences of width `dim`."""
    width = min(max(n_sentences // SENTENCES_PER_LATENT, MIN_WIDTH), MAX_WIDTH_FACTOR * dim)
    return max(MIN_WIDTH, width // 32 * 32)


def concept_settings(settings: FeatureSettings, n_sentences: int, dim: int) -> FeatureSettings:
    """The token SAE's settings with the concept SAE's size, batch and steps."""
    batch = min(BATCH, n_sentences)
    steps = int(min(MAX_STEPS, max(MIN_STEPS, EPOCHS * n_sentences // max(batch, 1))))
    return replace(
        settings, sae_width=concept_width(n_sentences, dim), sae_k=K, sae_steps=steps, sae_batch=batch, sae_lr=LR
    )


def train_concepts(
    vectors: np.ndarray,
    *,
    reader: str,
    settings: FeatureSettings,
    device: str,
    seed: int,
    folder: Path,
    progress: Progress,
) -> TrainedSae:
    """Train (or reuse, when `folder` holds a complete one) a concept SAE on float32 [n, d] embeddings."""
    import torch

    reused = load_trained(folder, device)
    if reused is not None:
        log.info("reusing the concept SAE trained before: %s", folder)
        return TrainedSae(sparse_codes(reused.sae), {**reused.metrics, "concept_sae_trained": False})
    if len(vectors) < MIN_SENTENCES:
        raise InputError(f"only {len(vectors)} discovery sentences: too few to train a concept SAE")
    trained = train_sae(
        torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)),
        hook_name=CONCEPT_HOOK,
        model_name=reader,
        settings=concept_settings(settings, len(vectors), vectors.shape[1]),
        device=device,
        seed=seed,
        folder=folder,
        progress=progress,
    )
    return TrainedSae(sparse_codes(trained.sae), {**trained.metrics, "concept_sae_trained": True})


def load_concepts(path: Path, device: str, dim: int) -> SAE:
    """A concept SAE saved by sae-lens (`--concept-sae PATH`), checked against the embedding width."""
    if not path.is_dir():
        raise InputError(f"--concept-sae {path}: not a folder")
    sae = load_folder(path, device)
    if sae.cfg.d_in != dim:
        raise InputError(
            f"--concept-sae {path}: SAE input width {sae.cfg.d_in} does not match the sentence embedding width "
            f"{dim} of this study's reader"
        )
    return sparse_codes(sae)


def concept_codes(sae: SAE, vectors: np.ndarray, chunk: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Non-zero concept activations of embedding rows: (row, latent, activation) numpy arrays per chunk."""
    import torch

    for row, latent, value in encode(sae, torch.from_numpy(vectors), chunk):
        yield row.cpu().numpy(), latent.cpu().numpy(), value.float().cpu().numpy()
