"""GPU benchmark: a reader of real architecture and size, truncated at its middle layer, plus a 64k-latent SAE.

    python bench/gpu_reader.py --out gpu_reader.json            # on a CUDA machine (about 2 minutes)
    python bench/gpu_reader.py --tiny --out /tmp/tiny.json      # correctness check of the script on CPU

Nothing is downloaded: Qwen3-1.7B is built from its published configuration values with random weights
(throughput does not depend on the weights), cut after block 14 of 28 (the default layer of a decoder), in
bf16. Segments are random token ids with lengths drawn from a log-normal like agent turns (median ~150 tokens,
long tail to 2,048), read through the stage's own code: `Reader.read_tokenized` (chunking, length-sorted
batches under a token budget, own-token activations copied to the host as the activation cache stores them),
then the stage's SAE pass (`segment_maxima`: host activations to the device, TopK SAE of 65,536 latents with
k=64, per-segment maxima reduced on the device, only the sparse result copied back).

Reported: tokens/s of each pass and of both; the reader's model FLOPs per token (matmuls of the 15 blocks,
plus attention over the padded batch) and the share of the bf16 matmul peak measured in this run (a large
torch.matmul) that the forward pass reaches. JSON goes to --out.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.features.encode import segment_maxima  # noqa: E402
from engine.features.reader import (  # noqa: E402
    Reader,
    ReaderStats,
    Tokenized,
    truncate_config,
    truncate_model,
)
from engine.features.reader_spec import ReaderSpec, default_layer  # noqa: E402
from engine.features.settings import FeatureSettings  # noqa: E402

# Qwen3-1.7B (Qwen/Qwen3-1.7B config.json)
QWEN3_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                  tie_word_embeddings=True, hidden_act="silu")  # fmt: skip
TINY = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)  # fmt: skip


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(device: str, dtype: torch.dtype, n: int, seconds: float) -> float:
    """Measured FLOP/s of a square matmul, the best of repeated timed loops."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        for _ in range(10):
            a @ b
        synchronize(device)
        best = max(best, 10 * 2 * n**3 / (time.perf_counter() - started))
    return best


def build_reader(values: dict, device: str, dtype: torch.dtype, settings: FeatureSettings) -> Reader:
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(**values, pad_token_id=0)
    layer = default_layer(config.num_hidden_layers, causal=True)
    truncate_config(config, layer + 1)
    with torch.device(device):
        model = Qwen3Model._from_config(config, dtype=dtype)
    base = truncate_model(model, layer + 1, causal=True).eval()
    spec = ReaderSpec(name="qwen3-1.7b (random weights)", source="config", local_only=True, fingerprint="random",
                      causal=True, n_layers=values["num_hidden_layers"], hidden_size=config.hidden_size, layer=layer,
                      window=settings.max_tokens)  # fmt: skip
    return Reader(spec, base, None, device, settings)


def synthetic_segments(n_tokens: int, vocab: int, window: int, seed: int) -> list[Tokenized]:
    """Random token ids, log-normal lengths (median 150, capped at 2,048 so some segments are chunked)."""
    rng = np.random.default_rng(seed)
    segments, total = [], 0
    while total < n_tokens:
        n = int(np.clip(rng.lognormal(np.log(150), 0.9), 4, 2048))
        ids = rng.integers(1, vocab, n).tolist()
        spans = np.stack([np.arange(n), np.arange(n) + 1], axis=1).astype(np.int32)
        segments.append(Tokenized(f"s{len(segments)}", [], ids, spans))
        total += n
    return segments


class PlainTopKSAE(torch.nn.Module):
    """sae-lens' TopK SAE encoder in plain torch, for a machine without sae-lens: (x - b_dec) @ W_enc + b_enc,
    top k, ReLU, returned as the same sparse COO tensor sae-lens builds with sparse activations on."""

    def __init__(self, d_in: int, d_sae: int, k: int, device: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.cfg = type("Cfg", (), {"d_sae": d_sae, "d_in": d_in})()
        self.k = k
        self.W_enc = torch.nn.Parameter(torch.randn(d_in, d_sae, device=device, dtype=dtype) / d_in**0.5)
        self.W_dec = torch.nn.Parameter(self.W_enc.data.T.contiguous())
        self.b_enc = torch.nn.Parameter(torch.zeros(d_sae, device=device, dtype=dtype))
        self.b_dec = torch.nn.Parameter(torch.zeros(d_in, device=device, dtype=dtype))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        values, indices = torch.topk((x - self.b_dec) @ self.W_enc + self.b_enc, self.k, dim=-1, sorted=False)
        rows = torch.arange(x.shape[0], device=x.device).repeat_interleave(self.k)
        return torch.sparse_coo_tensor(torch.stack([rows, indices.flatten()]), values.relu().flatten(),
                                       (x.shape[0], self.cfg.d_sae))  # fmt: skip


def topk_sae(d_in: int, d_sae: int, k: int, device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, str]:
    """sae-lens' TopK SAE with sparse codes (as the stage runs it), or its plain-torch equivalent."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            from sae_lens import TopKSAE, TopKSAEConfig

            from engine.features.sae import sparse_codes
        except ImportError:
            return PlainTopKSAE(d_in, d_sae, k, device, dtype), "plain torch TopK (sae-lens not installed)"
        config = TopKSAEConfig(d_in=d_in, d_sae=d_sae, k=k, dtype=str(dtype).removeprefix("torch."), device=device)
        return sparse_codes(TopKSAE(config)), "sae-lens TopKSAE"


def blocks(segments: list[Tokenized], block_tokens: int) -> list[list[Tokenized]]:
    """Consecutive blocks of about `block_tokens` tokens, as `Reader.read` forms them."""
    out, block, size = [], [], 0
    for segment in segments:
        block.append(segment)
        size += len(segment.text_ids)
        if size >= block_tokens:
            out.append(block)
            block, size = [], 0
    return out + ([block] if block else [])


def forward_flops(values: dict, n_blocks: int, padded_tokens: int, mean_width: float) -> float:
    """Model FLOPs of the truncated forward pass: 2 x matmul parameters per token, plus attention scores and
    values over the padded batch (the causal mask does not save work in the padded SDPA kernel)."""
    d, heads, kv, hd, inter = (values[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads",
                                                    "head_dim", "intermediate_size"))  # fmt: skip
    per_block = d * heads * hd + 2 * d * kv * hd + heads * hd * d + 3 * d * inter
    matmuls = 2 * per_block * n_blocks * padded_tokens
    attention = 4 * heads * hd * mean_width * padded_tokens * n_blocks
    return float(matmuls + attention)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny Qwen3-like model: checks the script on CPU")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tokens", type=int, help="segment tokens to read (default 2M on GPU, 20k tiny)")
    parser.add_argument("--width", type=int, default=65536, help="SAE latents")
    parser.add_argument("--k", type=int, default=64)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.tiny:
        parser.error("no CUDA device: run with --tiny to check the script on CPU")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    values = TINY if args.tiny else QWEN3_1_7B
    width = min(args.width, 1024) if args.tiny else args.width
    n_tokens = args.tokens or (20_000 if args.tiny else 2_000_000)
    settings = FeatureSettings.for_device(device)
    settings = FeatureSettings(**{**settings.as_dict(), "max_tokens": 1024})

    started = time.perf_counter()
    peak = matmul_peak(device, dtype, 8192 if device == "cuda" else 1024, 10.0 if device == "cuda" else 2.0)
    reader = build_reader(values, device, dtype, settings)
    segments = synthetic_segments(n_tokens, values["vocab_size"], settings.max_tokens, seed=0)
    build_s = time.perf_counter() - started

    # warm-up: a slice of the segments, then the timed pass (pass 1 of the stage: reader -> host activations)
    list(reader.read_tokenized(segments[:64]))
    synchronize(device)
    reader.stats = ReaderStats()
    t0 = time.perf_counter()
    read = [s for block in blocks(segments, settings.block_tokens) for s in reader.read_tokenized(block)]
    synchronize(device)
    read_s = time.perf_counter() - t0
    text_tokens = sum(len(s.spans) for s in read)
    input_tokens = sum(s.input_tokens for s in read)
    padded = reader.stats.padded_tokens

    sae, sae_impl = topk_sae(values["hidden_size"], width, args.k, device, dtype)
    segment_maxima(sae, read[0].acts, [len(read[0].spans)], settings.encode_tokens)  # warm-up
    synchronize(device)
    t0 = time.perf_counter()
    pairs = 0
    for i in range(0, len(read), 512):  # pass 2 of the stage, in its block size
        block = read[i : i + 512]
        position, _, _ = segment_maxima(sae, torch.cat([s.acts for s in block]), [len(s.spans) for s in block],
                                        settings.encode_tokens)  # fmt: skip
        pairs += len(position)
    synchronize(device)
    sae_s = time.perf_counter() - t0

    n_blocks = reader.spec.layer + 1
    flops = forward_flops(values, n_blocks, padded, reader.stats.mean_width)
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "model": "tiny qwen3-like" if args.tiny else "Qwen3-1.7B architecture, random weights",
        "dtype": str(dtype), "blocks_run": n_blocks, "blocks_total": values["num_hidden_layers"],
        "window": settings.max_tokens, "batch_tokens": settings.batch_tokens, "segments": len(segments),
        "text_tokens": text_tokens, "input_tokens": input_tokens, "padded_tokens": padded,
        "reader_seconds": round(read_s, 3), "reader_tokens_per_s": round(text_tokens / read_s),
        "sae_latents": width, "sae_k": args.k, "sae_impl": sae_impl, "sae_seconds": round(sae_s, 3),
        "sae_tokens_per_s": round(text_tokens / sae_s), "sae_share_of_reader": round(sae_s / read_s, 3),
        "segment_feature_pairs": pairs, "total_tokens_per_s": round(text_tokens / (read_s + sae_s)),
        "gflop_per_input_token": round(flops / input_tokens / 1e9, 3),
        "measured_matmul_peak_tflops": round(peak / 1e12, 1),
        "reader_achieved_tflops": round(flops / read_s / 1e12, 1),
        "reader_share_of_peak": round(flops / read_s / peak, 3),
        "setup_seconds": round(build_s, 1), "total_seconds": round(time.perf_counter() - started, 1),
        "torch": torch.__version__,
    }  # fmt: skip
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{result['model']} on {result['device']}, {n_blocks}/{values['num_hidden_layers']} blocks, {dtype}")
    print(f"reader: {result['reader_tokens_per_s']:,} tokens/s ({text_tokens:,} tokens, {padded:,} padded), "
          f"{result['reader_achieved_tflops']} TFLOP/s = {100 * result['reader_share_of_peak']:.0f}% of the "
          f"measured matmul peak {result['measured_matmul_peak_tflops']} TFLOP/s")  # fmt: skip
    print(f"SAE ({width:,} latents, k={args.k}): {result['sae_tokens_per_s']:,} tokens/s, "
          f"{100 * result['sae_share_of_reader']:.0f}% of reader time; both: {result['total_tokens_per_s']:,} "
          f"tokens/s; {result['total_seconds']}s in all -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
