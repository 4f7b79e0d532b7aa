"""SAE encoding of cached reader activations: per-segment maxima (sparse) and per-token activations.

Only the SAE's non-zero outputs leave the device: for a block of segments the (segment, latent) maxima are
reduced on the device with one `unique` and one `scatter_reduce`, never as a dense [segments, latents] array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.features.sae import encode

if TYPE_CHECKING:
    import torch
    from sae_lens import SAE

    from engine.features.cache import ActivationCache


def gather(cache: ActivationCache, refs: Sequence[tuple[str, int, int]]) -> tuple[torch.Tensor, list[np.ndarray]]:
    """Token activations of segments given as (shard, start, n_tokens), stacked, and their character spans."""
    import torch

    parts, spans = [], []
    for shard, start, n in refs:
        acts, span = cache.rows(shard, start, n)
        parts.append(acts)
        spans.append(span)
    hidden = cache.hidden_size
    return (torch.cat(parts) if parts else torch.empty(0, hidden, dtype=torch.bfloat16)), spans


def segment_maxima(
    sae: SAE, acts: torch.Tensor, lengths: Sequence[int], chunk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(segment position, latent, max activation over the segment's tokens) for every non-zero pair."""
    import torch

    device = sae.W_dec.device
    d_sae = int(sae.cfg.d_sae)
    owner = torch.repeat_interleave(torch.arange(len(lengths)), torch.as_tensor(lengths, dtype=torch.long))
    owner = owner.to(device)
    keys, values = [], []
    for token, latent, value in encode(sae, acts, chunk):
        keys.append(owner[token] * d_sae + latent)
        values.append(value.float())
    if not keys:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0, dtype=np.float32)
    flat_keys, flat_values = torch.cat(keys), torch.cat(values)
    unique, inverse = torch.unique(flat_keys, return_inverse=True)
    best = torch.zeros(unique.shape[0], device=device).scatter_reduce_(
        0, inverse, flat_values, "amax", include_self=False
    )
    unique = unique.cpu()
    return (unique // d_sae).numpy(), (unique % d_sae).numpy(), best.cpu().numpy()


def token_activations(
    sae: SAE, acts: torch.Tensor, spans: Sequence[np.ndarray], wanted: Sequence[Sequence[int]], chunk: int
) -> list[dict[int, list[list[float]]]]:
    """For a block of segments (their tokens stacked in `acts`, each with its spans and wanted latents): per
    segment and wanted latent, [[char_start, char_end, activation], ...] over the tokens where it is non-zero."""
    import torch

    lengths = [len(s) for s in spans]
    owner = torch.repeat_interleave(torch.arange(len(lengths)), torch.as_tensor(lengths, dtype=torch.long))
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    d_sae = int(sae.cfg.d_sae)
    device = sae.W_dec.device
    keys = torch.as_tensor([i * d_sae + f for i, fs in enumerate(wanted) for f in fs], dtype=torch.long)
    owner, keys = owner.to(device), keys.to(device)
    result: list[dict[int, list[list[float]]]] = [{f: [] for f in fs} for fs in wanted]
    for token, latent, value in encode(sae, acts, chunk):
        keep = torch.isin(owner[token] * d_sae + latent, keys)
        rows = zip(token[keep].tolist(), latent[keep].tolist(), value[keep].float().tolist(), strict=True)
        for t, f, v in rows:
            i = int(owner[t])
            span = spans[i][t - first[i]]
            result[i][f].append([int(span[0]), int(span[1]), round(v, 4)])
    for per_latent in result:
        for tokens in per_latent.values():
            tokens.sort()
    return result
