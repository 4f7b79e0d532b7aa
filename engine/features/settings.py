"""Knobs of the feature engine: sizes, budgets and thresholds, with defaults per device.
`FeatureSettings.for_device` picks them, `with_sae` applies the CLI's SAE options; tests and benchmarks pass
their own."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class FeatureSettings:
    """Sizes and budgets of one feature extraction. Every field is recorded in the run record."""

    # reader
    max_tokens: int = 256  # reader window per chunk, special tokens included (capped by the model)
    context_tokens: int = 32  # tokens of left context repeated at the start of each later chunk
    batch_tokens: int = 4096  # padded tokens per reader batch (batches are sorted by length)
    block_tokens: int = 65536  # tokens tokenised and length-sorted together before batching
    # sparse autoencoder (--sae train)
    sae_width: int | None = None  # None: sized from the data (see engine.features.sae.width_for)
    sae_k: int = 16  # active latents per token (TopK)
    sae_steps: int | None = None  # None: sized from the data (see engine.features.sae.steps_for)
    sae_max_steps: int = 300
    sae_batch: int = 512  # token activations per training step
    sae_lr: float = 2e-3
    max_train_tokens: int = 150_000  # discovery token activations sampled for training (memory bound)
    tokens_per_latent: int = 150  # training tokens per latent when sizing the width from the data
    # outputs
    top_examples: int = 8  # top-activating segments kept per feature and checkpoint
    threshold_fraction: float = 0.5  # a feature fires at this share of its strong (p99) activation
    encode_tokens: int = 8192  # token activations encoded by the SAE at once

    @classmethod
    def for_device(cls, device: str) -> FeatureSettings:
        """Defaults for a device: a 2-core CPU must finish the sample in minutes; a GPU can afford more."""
        if device.startswith("cuda"):
            return cls(
                batch_tokens=32768,
                block_tokens=262144,
                sae_max_steps=20_000,
                sae_batch=4096,
                sae_lr=5e-4,
                max_train_tokens=4_000_000,
                tokens_per_latent=100,
                encode_tokens=32768,
            )
        return cls()

    def with_sae(self, width: int | None, k: int | None, steps: int | None) -> FeatureSettings:
        """These settings with the SAE's size and training steps where given (`--sae-width/-k/-steps`)."""
        given = {"sae_width": width, "sae_k": k, "sae_steps": steps}
        return replace(self, **{name: value for name, value in given.items() if value is not None})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
