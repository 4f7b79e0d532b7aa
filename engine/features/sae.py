"""The sparse autoencoder over reader activations, through sae-lens: train, save, load, check, encode.

`--sae train` trains a TopK SAE (sae-lens' `TopKTrainingSAE` stepped by its `SAETrainer`) on token activations
sampled from the discovery split, sized from the data, and saves it beside the store for reuse. `--sae PATH`
loads a folder saved by sae-lens; `--sae RELEASE/SAE_ID` a pretrained release from sae-lens' list, which needs
the Hugging Face hub: when the hub cannot be reached, loading fails in seconds with what to do instead.
Every SAE is checked against the reader: its input width must be the reader's hidden size, and a residual
stream hook (`blocks.L.hook_resid_post` / `hook_resid_pre`) must name the layer the reader reads.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import InputError
from engine.features.hub import hub_offline, hub_reachable
from engine.features.settings import FeatureSettings
from engine.progress import Progress

if TYPE_CHECKING:
    import torch
    from sae_lens import SAE

log = logging.getLogger(__name__)

TRAINING_RECORD = "rldiff_training.json"  # metrics and settings saved beside a trained SAE
_HOOK = re.compile(r"blocks\.(\d+)\.hook_resid_(post|pre)$")


@dataclass(frozen=True)
class SaeSpec:
    """What `--sae` asked for: 'train', a local folder, or a pretrained release and SAE id."""

    kind: str  # 'train' | 'folder' | 'pretrained'
    path: Path | None = None
    release: str | None = None
    sae_id: str | None = None


def parse_sae_spec(value: str) -> SaeSpec:
    """`train`, an existing folder, or RELEASE/SAE_ID (the SAE id may contain slashes)."""
    if value == "train":
        return SaeSpec("train")
    folder = Path(value).expanduser()
    if folder.is_dir():
        return SaeSpec("folder", path=folder.resolve())
    if folder.exists() or value.startswith((".", "/", "~")) or "/" not in value:
        raise InputError(f"--sae {value}: expected 'train', an SAE folder saved by sae-lens, or RELEASE/SAE_ID")
    release, sae_id = value.split("/", 1)
    return SaeSpec("pretrained", release=release, sae_id=sae_id)


def sae_device_dtype(device: str) -> str:
    return "bfloat16" if device.startswith("cuda") else "float32"


def load_folder(path: Path, device: str) -> SAE:
    from sae_lens import SAE

    if not (path / "cfg.json").is_file():
        raise InputError(f"--sae {path}: not an SAE folder saved by sae-lens (no cfg.json)")
    return SAE.load_from_disk(path, device=device, dtype=sae_device_dtype(device))


def load_pretrained(release: str, sae_id: str, device: str) -> SAE:
    """A pretrained sae-lens release; when the hub is unreachable only the local cache is tried."""
    from sae_lens import SAE
    from sae_lens.loading.pretrained_saes_directory import get_pretrained_saes_directory

    directory = get_pretrained_saes_directory()
    if release not in directory:
        raise InputError(f"--sae {release}/{sae_id}: {release!r} is not in sae-lens' pretrained list")
    if sae_id not in directory[release].saes_map:
        ids = list(directory[release].saes_map)
        raise InputError(f"--sae {release}/{sae_id}: no SAE {sae_id!r} in {release} (e.g. {', '.join(ids[:3])})")
    dtype = sae_device_dtype(device)
    if hub_reachable():
        return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
    with hub_offline():
        try:
            return SAE.from_pretrained(release, sae_id, device=device, dtype=dtype)
        except Exception as exc:  # any miss in the local cache: the hub library raises several kinds
            raise InputError(
                f"--sae {release}/{sae_id}: the Hugging Face hub cannot be reached and this SAE is not in the "
                "local cache. Use --sae train (an SAE trained on this study), or download it where there is "
                "network, save it with sae-lens (sae.save_model(FOLDER)) and pass --sae FOLDER."
            ) from exc


def hook_layer(sae: SAE) -> int | None:
    """The reader layer an SAE reads, from its residual stream hook name; None when it has none."""
    name = sae.cfg.metadata.hook_name
    match = _HOOK.match(name or "")
    if match is None:
        return None
    layer = int(match.group(1))
    return layer if match.group(2) == "post" else layer - 1


def check_sae(sae: SAE, hidden_size: int, layer: int, source: str) -> None:
    """The SAE must read the reader's width at the reader's layer."""
    if sae.cfg.d_in != hidden_size:
        raise InputError(
            f"{source}: SAE input width {sae.cfg.d_in} does not match the reader's hidden size "
            f"{hidden_size}; pick the reader the SAE was trained on"
        )
    name = sae.cfg.metadata.hook_name
    if name and _HOOK.match(name) is None:
        raise InputError(f"{source}: SAE reads {name!r}; only residual stream SAEs (hook_resid_post/pre) fit")
    sae_layer = hook_layer(sae)
    if sae_layer is not None and sae_layer != layer:
        raise InputError(
            f"{source}: SAE reads layer {sae_layer} ({name}), the reader reads layer {layer}; pass --layer {sae_layer}"
        )


def width_for(n_tokens: int, d_in: int, settings: FeatureSettings) -> int:
    """Latents: one per `tokens_per_latent` training tokens, between 2x and 32x the input width, in 64s."""
    if settings.sae_width is not None:
        return settings.sae_width
    width = min(max(n_tokens // settings.tokens_per_latent, 2 * d_in), 32 * d_in)
    return max(64, width // 64 * 64)


def steps_for(n_tokens: int, settings: FeatureSettings) -> int:
    """Steps: two passes over the sample, at least 100, at most `sae_max_steps`."""
    if settings.sae_steps is not None:
        return settings.sae_steps
    return int(min(settings.sae_max_steps, max(100, 2 * n_tokens // settings.sae_batch)))


@dataclass
class TrainedSae:
    sae: SAE
    metrics: dict[str, Any]


def train_sae(
    sample: torch.Tensor,
    *,
    hook_name: str,
    model_name: str,
    settings: FeatureSettings,
    device: str,
    seed: int,
    folder: Path,
    progress: Progress,
) -> TrainedSae:
    """Train a TopK SAE on `sample` ([tokens, d_in]); 5% of the rows (at most 20k) are held out to evaluate it.

    Saves the inference SAE and a training record to `folder`.
    """
    import torch
    from sae_lens import SAE, SAETrainer, TopKTrainingSAE, TopKTrainingSAEConfig
    from sae_lens.config import LoggingConfig, SAETrainerConfig
    from sae_lens.saes.sae import SAEMetadata

    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(sample.shape[0], generator=generator)
    n_eval = min(20_000, max(1, sample.shape[0] // 20))
    evaluation, train = sample[order[:n_eval]], sample[order[n_eval:]]
    d_in = int(sample.shape[1])
    width = width_for(train.shape[0], d_in, settings)
    steps = steps_for(train.shape[0], settings)
    batch = min(settings.sae_batch, train.shape[0])
    cfg = TopKTrainingSAEConfig(
        d_in=d_in,
        d_sae=width,
        k=min(settings.sae_k, width),
        device=device,
        dtype="float32",
        metadata=SAEMetadata(hook_name=hook_name, model_name=model_name),
    )
    with torch.random.fork_rng(devices=[]):  # weight init draws from torch's global generator: scope it
        torch.manual_seed(seed)
        sae = TopKTrainingSAE(cfg)
    trainer_cfg = SAETrainerConfig(
        total_training_samples=steps * batch,
        train_batch_size_samples=batch,
        lr=settings.sae_lr,
        lr_end=settings.sae_lr / 10,
        lr_warm_up_steps=max(1, steps // 20),
        lr_decay_steps=max(1, steps // 5),
        device=device,
        autocast=device.startswith("cuda"),
        dead_feature_window=max(50, steps // 4),
        feature_sampling_window=max(100, steps // 2),
        logger=LoggingConfig(log_to_wandb=False),
    )
    trainer = SAETrainer(cfg=trainer_cfg, sae=sae, data_provider=_minibatches(train, batch, generator))
    # The mean norm over the whole sample (exact, instead of sae-lens' estimate from a few batches) scales
    # inputs to norm sqrt(d_in); the scaled mean starts the decoder bias. Both are folded into the weights.
    mean_norm = float(train.float().norm(dim=-1).mean())
    trainer.activation_scaler.scaling_factor = math.sqrt(d_in) / max(mean_norm, 1e-12)
    with torch.no_grad():
        sae.b_dec.copy_(train.float().mean(0).to(device) * trainer.activation_scaler.scaling_factor)
    with progress.track("training SAE", steps) as advance:
        while trainer.n_training_samples < trainer_cfg.total_training_samples:
            trainer.maybe_reset_sparsity()
            trainer.step(next(trainer.data_provider))
            trainer.n_training_steps += 1
            advance(1)
    sae.fold_activation_norm_scaling_factor(trainer.activation_scaler.scaling_factor)
    trainer.activation_scaler.scaling_factor = None
    trainer.set_final_sae_metadata()
    folder.mkdir(parents=True, exist_ok=True)
    sae.save_inference_model(folder)
    inference = SAE.load_from_disk(folder, device=device, dtype=sae_device_dtype(device))
    metrics = {
        "sae_width": width,
        "sae_k": cfg.k,
        "sae_steps": steps,
        "sae_batch": batch,
        "sae_train_tokens": int(train.shape[0]),
        "sae_eval_tokens": int(n_eval),
        **evaluate(inference, evaluation, settings.encode_tokens),
    }
    (folder / TRAINING_RECORD).write_text(json.dumps(metrics, indent=2))
    return TrainedSae(inference, metrics)


def load_trained(folder: Path, device: str) -> TrainedSae | None:
    """An SAE this study trained before with the same inputs and settings, if it was saved completely."""
    record = folder / TRAINING_RECORD
    if not record.is_file():
        return None
    return TrainedSae(load_folder(folder, device), json.loads(record.read_text()))


def _minibatches(x: torch.Tensor, batch: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Shuffled epochs over the sample, as float32 batches."""
    import torch

    while True:
        order = torch.randperm(x.shape[0], generator=generator)
        for start in range(0, x.shape[0] - batch + 1, batch):
            yield x[order[start : start + batch]].float()


def evaluate(sae: SAE, x: torch.Tensor, chunk: int) -> dict[str, float]:
    """Explained variance, mean L0 and the share of latents that never fire, on held-out activations."""
    import torch

    squared_error = total = l0 = 0.0
    fired = torch.zeros(sae.cfg.d_sae, dtype=torch.bool, device=sae.W_dec.device)
    mean = x.float().mean(0)
    with torch.inference_mode():
        for start in range(0, x.shape[0], chunk):
            part = x[start : start + chunk].to(sae.W_dec.device, sae.W_dec.dtype)
            acts = sae.encode(part)
            recon = sae.decode(acts).float()
            part = part.float()
            squared_error += float((part - recon).pow(2).sum())
            total += float((part - mean.to(part.device)).pow(2).sum())
            l0 += float((acts > 0).sum())
            fired |= (acts > 0).any(0)
    return {
        "explained_variance": 1.0 - squared_error / max(total, 1e-12),
        "l0": l0 / max(1, x.shape[0]),
        "dead_share": 1.0 - float(fired.float().mean()),
    }


def sparse_codes(sae: SAE) -> SAE:
    """Have a TopK SAE return its codes as a sparse tensor built from the top-k indices: no dense
    [tokens, latents] array is scattered and searched again. Other architectures stay dense."""
    from sae_lens.saes.topk_sae import TopK

    if isinstance(getattr(sae, "activation_fn", None), TopK):
        sae.activation_fn.use_sparse_activations = True
    return sae


def encode(sae: SAE, x: torch.Tensor, chunk: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Non-zero SAE activations of token rows `x` ([tokens, d_in], any device), `chunk` rows at a time, as
    (token row, latent, activation) tensors on the SAE's device."""
    import torch

    # sae-lens builds the sparse codes from valid top-k indices: invariant checks would only cost time
    with torch.inference_mode(), torch.sparse.check_sparse_tensor_invariants(enable=False):
        for start in range(0, x.shape[0], chunk):
            part = x[start : start + chunk].to(sae.W_dec.device, sae.W_dec.dtype, non_blocking=True)
            codes = sae.encode(part)
            if codes.is_sparse:
                (token, latent), value = codes._indices(), codes._values()
                keep = value > 0
                yield start + token[keep], latent[keep], value[keep]
            else:
                token, latent = (codes > 0).nonzero(as_tuple=True)
                yield start + token, latent, codes[token, latent]
