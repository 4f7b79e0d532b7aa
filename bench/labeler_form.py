"""Benchmark: what limits a finding's labeler on new tasks, its form or what it is fitted to.

    .venv/bin/python bench/labeler_form.py WORK [WORK ...]

WORK: the folder of an earlier `rldiff bench-planted --work WORK` run (only its stores are read; a few seconds a
suite). For each planted behaviour of each suite there, two labeler forms are fitted on the discovery split and
scored on the held-out segments of its kind:
- **exemplars**: `fit_exemplars`, as drafting fits a concept labeler (at most MAX_EXEMPLARS sentences, a cosine
  threshold at the best discovery F1, strays dropped);
- **probe**: a logistic regression on the same sentence embeddings (a learned direction), each labelled
  segment's carrier sentence against every sentence of the unlabelled segments, class-balanced; a segment
  scores its best sentence, matched at the threshold with the best discovery F1.
Each form is fitted to two labellings of the discovery segments: the behaviour's own planted segments (its
carriers the planted sentences: what a source of exactly the behaviour would give), and, as "source ...", the
firing of the tested discovery feature row that matches the planted segments best (`best_sources`; its
carriers chosen from the feature's example sentences, `carrier_seeds`): the best a drafter could start from.
Printed per behaviour: held-out recall in each checkpoint, false positives, F1, and the held-out test's p with
the form's positives as the labels (`perfect_labeler_p`), beside the planted labels' own p; then totals.

A second table takes each tested exemplar finding of a study split by task and distils its final labeler into
a probe (fitted to the finding's discovery labels, the evidence sentences of its positives the carriers): both
scored held out against the planted behaviour the finding's own labels match best, their p on the finding's
first kind in its direction. Suites planted into sentences only (paraphrased, replies, habits, shifts); the
fixed suite's folder has no `files/ground_truth.json` and is skipped.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression

from engine.hypotheses.exemplars import (
    Embedder,
    SentenceMatcher,
    best_f1_threshold,
    default_splitter,
    fit_exemplars,
    segment_units,
    similar_nodes,
    store_embedder,
)
from engine.hypotheses.lifecycle import hypothesis_kinds
from engine.hypotheses.population import load_population
from engine.hypotheses.seeds import carrier_seeds
from engine.hypotheses.sources import example_sentences, firing_segments
from engine.hypotheses.verifier import Verifier
from engine.kinds import DISCOVERY, HELDOUT
from engine.planted import F1_RELATED, Behaviour, planted_segment_ids
from engine.planted_oracle import best_sources, perfect_labeler_p
from engine.planted_suites import planted_segments, suite_behaviours, suite_folder
from engine.store import Store

PROBE_C = 1.0  # inverse L2 strength of the probe (sklearn's default)
FORMS = ("planted", "exemplars", "probe", "source exemplars", "source probe")
CONFIRMED_P = 0.01  # a behaviour counts as confirmable by a form when its held-out p is at most this


@dataclass(frozen=True)
class Held:
    """One form's held-out positives of a behaviour, against its planted held-out segments."""

    positives: set[int]
    planted: set[int]
    after: set[int]

    def recall(self, after: bool) -> tuple[int, int]:
        side = self.planted & self.after if after else self.planted - self.after
        return len(side & self.positives), len(side)

    @property
    def false_positives(self) -> int:
        return len(self.positives - self.planted)

    @property
    def f1(self) -> float:
        return 2 * len(self.positives & self.planted) / max(len(self.positives) + len(self.planted), 1)


def _units(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, ...]], list[str], np.ndarray]:
    """Each (kind, text) segment's units (`segment_units`), all of them in order, and the segment each is of."""
    units = [segment_units(kind, text, default_splitter) for kind, text in pairs]
    return units, [u for us in units for u in us], np.repeat(np.arange(len(units)), [len(us) for us in units])


def planted_carriers(units: list[str], owner: np.ndarray, planted: np.ndarray, said: list[str]) -> np.ndarray:
    """Per unit, whether it is a planted segment's carrier: a unit of the segment inside a planted text (or one
    holding it), else the segment's only unit (a tool call)."""
    carrier = np.zeros(len(units), dtype=bool)
    for seg in np.flatnonzero(planted):
        rows = np.flatnonzero(owner == seg)
        inside = [r for r in rows if any(units[r] in s or s in units[r] for s in said)]
        carrier[inside or rows[:1]] = True
    return carrier


def _nearest_carriers(to_seeds: np.ndarray, owner: np.ndarray, fires: np.ndarray) -> np.ndarray:
    """Per unit, whether it is a firing segment's carrier: its unit most like the source's seed sentences
    (`to_seeds`: units x seeds cosine), as `fit_exemplars` picks them."""
    carrier = np.zeros(len(owner), dtype=bool)
    best = to_seeds.max(axis=1)
    for seg in np.flatnonzero(fires):
        rows = np.flatnonzero(owner == seg)
        if rows.size:
            carrier[rows[np.argmax(best[rows])]] = True
    return carrier


def fit_probe(
    vectors: np.ndarray, owner: np.ndarray, carrier: np.ndarray, labelled: np.ndarray
) -> tuple[LogisticRegression, float]:
    """The probe fitted on units (`vectors`, each of segment `owner`): the `carrier` units against every unit of
    the segments not `labelled`; and its segment threshold at the best F1 against `labelled`."""
    train = carrier | ~labelled[owner]
    probe = LogisticRegression(C=PROBE_C, class_weight="balanced", max_iter=2000)
    probe.fit(vectors[train], carrier[train])
    scores = segment_scores(probe.decision_function(vectors), owner, len(labelled))
    threshold, _ = best_f1_threshold(scores[labelled], scores[~labelled])
    return probe, threshold


def segment_scores(unit_scores: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Each of `n` segments' best unit score (-inf for a segment without units)."""
    out = np.full(n, -np.inf)
    np.maximum.at(out, owner, unit_scores)
    return out


@dataclass(frozen=True)
class Split:
    """One split's segments of a kind: ids, checkpoints, (kind, text) pairs, their units (per segment, and all
    in order with the segment each is of) and the units' embeddings."""

    ids: np.ndarray
    after: np.ndarray
    pairs: list[tuple[str, str]]
    by_segment: list[tuple[str, ...]]
    units: list[str]
    owner: np.ndarray
    vectors: np.ndarray

    @classmethod
    def of(cls, frame: pl.DataFrame, kind: str, embedder: Embedder) -> Split:
        pairs = [(kind, t) for t in frame["text"]]
        by_segment, units, owner = _units(pairs)
        after = (frame["checkpoint"] == "after").to_numpy()
        return cls(frame["segment_id"].to_numpy(), after, pairs, by_segment, units, owner, embedder.embed(units))


def _fitted(
    disc: Split, held: Split, fires: np.ndarray, carrier: np.ndarray, more: np.ndarray, embedder: Embedder
) -> tuple[set[int], set[int]]:
    """Held-out positives of the exemplar labeler and of the probe, both fitted to `fires` on discovery
    (`carrier`: per discovery unit, whether it carries a firing segment's behaviour)."""
    seeds = [u for u, c in zip(disc.units, carrier, strict=True) if c]
    parts = fit_exemplars(disc.pairs, fires, seeds, embedder, default_splitter, more=more)
    matcher = SentenceMatcher(held.pairs, embedder, default_splitter)
    matched = np.zeros(len(held.ids), dtype=bool)
    for part in parts:
        matched |= np.array([m is not None and m.similarity >= part.min_similarity for m in matcher.best(part.texts)])
    probe, threshold = fit_probe(disc.vectors, disc.owner, carrier, fires)
    scores = segment_scores(probe.decision_function(held.vectors), held.owner, len(held.ids))
    return set(held.ids[matched].tolist()), set(held.ids[scores >= threshold].tolist())


def _forms(store: Store, truth: list, behaviour: Behaviour, said: list[str]) -> dict[str, Held]:
    """Held-out positives of the planted labels and of each labeler form fitted to them and to the best source."""
    planted = planted_segment_ids(store, truth)
    segs = store.frame(
        "SELECT s.segment_id, s.text, r.checkpoint, r.split FROM segments s JOIN rollouts r USING (rollout_key) "
        "WHERE s.kind = ? ORDER BY s.segment_id",
        [behaviour.kind],
    )
    embedder = store_embedder(store)
    disc, held = (
        Split.of(segs.filter(pl.col("split") == split), behaviour.kind, embedder) for split in (DISCOVERY, HELDOUT)
    )
    more = disc.after if behaviour.direction == "increase" else ~disc.after
    is_planted = np.isin(disc.ids, list(planted[DISCOVERY].get(behaviour.name, set())))
    truth_ids = set(planted.get(HELDOUT, {}).get(behaviour.name, set()))
    after = set(held.ids[held.after].tolist())
    carrier = planted_carriers(disc.units, disc.owner, is_planted, said)
    exemplars, probe = _fitted(disc, held, is_planted, carrier, more, embedder)
    found = {"planted": truth_ids, "exemplars": exemplars, "probe": probe}
    source = best_sources(store, planted, (behaviour,))[behaviour.name]
    if source is not None and source.feature_id is not None:
        fid = source.feature_id
        fires = np.isin(disc.ids, firing_segments(store, [fid])["segment_id"].to_numpy())
        seeds = carrier_seeds(example_sentences(store, [fid]), disc.by_segment, fires, embedder.embed)
        carrier = _nearest_carriers(disc.vectors @ embedder.embed(seeds).T, disc.owner, fires)
        found["source exemplars"], found["source probe"] = _fitted(disc, held, fires, carrier, more, embedder)
    return {name: Held(positives, truth_ids, after) for name, positives in found.items()}


def _held_out_p(store: Store, behaviour: Behaviour, positives: set[int]) -> float | None:
    """The held-out test's p with `positives` as the labels of the behaviour's kind, in its direction."""
    ps = perfect_labeler_p(store, {HELDOUT: {behaviour.name: positives}}, (behaviour,))[behaviour.name]
    return ps[0] if ps else None


@dataclass(frozen=True)
class Finding:
    """A tested exemplar finding: its held-out positives and its labeler's distilled into a probe, against the
    planted behaviour its own labels match best (F1; "-" below F1_RELATED, then as a behaviour of its kind and
    direction with no planted segments)."""

    hypothesis_id: int
    status: str
    behaviour: Behaviour
    own: Held
    probe: Held


def _distilled(store: Store, truth: list) -> Iterator[Finding]:
    """Each tested exemplar finding of a study split by task, its labeler distilled into a probe: fitted to its
    discovery labels, the evidence sentences of its positives the carriers."""
    if store.meta("split_mode") == "rollout":
        return  # a small study's findings are tested on either fold
    planted = planted_segment_ids(store, truth).get(HELDOUT, {})
    embedder = store_embedder(store)
    disc, held = (
        replace(load_population(store, "before", "after", s), embedder=embedder) for s in (DISCOVERY, HELDOUT)
    )
    after = set(
        held.segments.join(held.rollouts, on="rollout_key").filter(pl.col("checkpoint") == "after")["segment_id"]
    )
    rows = store.frame(
        "SELECT hypothesis_id, status, direction, spec FROM hypotheses WHERE labeler = 'verifier' ORDER BY 1"
    )
    for hypothesis_id, status, direction, raw in rows.iter_rows():
        spec = json.loads(raw)
        if not similar_nodes(spec):
            continue
        kinds = hypothesis_kinds("verifier", spec)
        labels = disc.verifier_labels(Verifier(spec, embedder=embedder), kinds)
        _, units, owner = _units(list(disc.of_kinds(kinds).select("kind", "text").iter_rows()))
        fires, evidence = labels["label"].to_numpy(), labels["evidence"].to_list()
        carrier = np.array([fires[o] and u == evidence[o] for u, o in zip(units, owner, strict=True)], dtype=bool)
        probe, threshold = fit_probe(embedder.embed(units), owner, carrier, fires)
        segs = held.of_kinds(kinds)
        _, held_units, held_owner = _units(list(segs.select("kind", "text").iter_rows()))
        scores = segment_scores(probe.decision_function(embedder.embed(held_units)), held_owner, segs.height)
        probed = set(segs["segment_id"].to_numpy()[scores >= threshold].tolist())
        own = set(
            store.frame("SELECT segment_id FROM hypothesis_labels WHERE hypothesis_id = ? AND label", [hypothesis_id])[
                "segment_id"
            ].to_list()
        )
        f1, name = max(((Held(own, ids, after).f1, b) for b, ids in planted.items()), default=(0.0, "-"))
        name = name if f1 >= F1_RELATED else "-"
        truth_ids = planted.get(name, set())
        behaviour = Behaviour(name, kinds[0], direction, 0.0, "a finding")
        yield Finding(hypothesis_id, status, behaviour, Held(own, truth_ids, after), Held(probed, truth_ids, after))


def _fmt_p(p: float | None) -> str:
    return "-" if p is None else f"{p:.2g}"


def _confirmed(p: float | None) -> bool:
    return p is not None and p <= CONFIRMED_P


@dataclass
class Total:
    """One form's held-out results summed over behaviours."""

    caught: int = 0
    planted: int = 0
    false_positives: int = 0
    behaviours: int = 0
    confirmed: int = 0  # behaviours whose held-out p is at most CONFIRMED_P

    def add(self, held: Held, p: float | None) -> None:
        for after in (False, True):
            caught, planted = held.recall(after)
            self.caught, self.planted = self.caught + caught, self.planted + planted
        self.false_positives += held.false_positives
        self.behaviours += 1
        self.confirmed += _confirmed(p)


def _line(name: str, form: str, held: Held, p: float | None) -> str:
    (b, nb), (a, na) = held.recall(False), held.recall(True)
    return (
        f"{name:<36} {form:<16} {f'{b}/{nb}':>13} {f'{a}/{na}':>12} {held.false_positives:>5} "
        f"{held.f1:>5.2f} {_fmt_p(p):>8}"
    )


def _studies(works: list[Path]) -> list[tuple[str, int, list[dict[str, Any]], Path]]:
    """The planted suite studies of earlier `bench-planted` runs: suite, seed, ground truth rows, store path."""
    found = []
    for work in works:
        for row in json.loads((work / "suites.json").read_text())["results"]:
            truth_file = suite_folder(work, row["suite"], row["seed"]) / "files" / "ground_truth.json"
            if truth_file.is_file():  # the unmodified pairs plant nothing
                rows = json.loads(truth_file.read_text())
                found.append((row["suite"], row["seed"], rows, truth_file.parent.parent / "study.duckdb"))
    return found


def _forms_table(works: list[Path]) -> None:
    """Each labeler form fitted to each planted behaviour and to its best source, scored held out."""
    header = ("suite, seed, behaviour", "form", "recall before", "recall after", "FP", "F1", "p")
    print(
        f"{header[0]:<36} {header[1]:<16} {header[2]:>13} {header[3]:>12} {header[4]:>5} {header[5]:>5} {header[6]:>8}"
    )
    totals = {name: Total() for name in FORMS}
    for suite, seed, rows, path in _studies(works):
        with Store(path) as store:
            for behaviour in suite_behaviours(suite, seed):
                said = [r["planted"].strip() for r in rows if r["behaviour"] == behaviour.name]
                forms = _forms(store, planted_segments(rows), behaviour, said)
                for form, held in forms.items():  # the source forms are absent where no feature fires
                    p = _held_out_p(store, behaviour, held.positives)
                    totals[form].add(held, p)
                    print(_line(f"{suite} {seed} {behaviour.name}", form, held, p))
    print()
    for form, t in totals.items():
        print(
            f"{form:<16} held-out recall {t.caught}/{t.planted} ({t.caught / max(t.planted, 1):.0%}), "
            f"{t.false_positives} false positives, p <= {CONFIRMED_P} for {t.confirmed} of {t.behaviours} behaviours"
        )
    for fitted in ("", "source "):
        exemplars, probe = totals[f"{fitted}exemplars"], totals[f"{fitted}probe"]
        print(
            f"{fitted}probe / {fitted}exemplars: recall {probe.caught / max(exemplars.caught, 1):.2f}, "
            f"false positives {probe.false_positives / max(exemplars.false_positives, 1):.2f}"
        )


def _findings_table(works: list[Path]) -> None:
    """Each tested exemplar finding's labeler beside its distillation into a probe, scored held out."""
    print(f"{'suite, seed, finding':<28} {'status':<12} {'behaviour':<20} {'F1':>5} {'p':>8} {'probe F1':>9} {'p':>8}")
    totals = {"labeler": Total(), "probe": Total()}
    unrelated = {"labeler": 0, "probe": 0}  # findings of no planted behaviour, p <= CONFIRMED_P
    for suite, seed, rows, path in _studies(works):
        with Store(path) as store:
            for f in _distilled(store, planted_segments(rows)):
                ps = {
                    "labeler": _held_out_p(store, f.behaviour, f.own.positives),
                    "probe": _held_out_p(store, f.behaviour, f.probe.positives),
                }
                for form, held in (("labeler", f.own), ("probe", f.probe)):
                    if f.behaviour.name == "-":
                        unrelated[form] += _confirmed(ps[form])
                    else:
                        totals[form].add(held, ps[form])
                print(
                    f"{f'{suite} {seed} #{f.hypothesis_id}':<28} {f.status:<12} {f.behaviour.name:<20} "
                    f"{f.own.f1:>5.2f} {_fmt_p(ps['labeler']):>8} {f.probe.f1:>9.2f} {_fmt_p(ps['probe']):>8}"
                )
    print()
    for form, t in totals.items():
        print(
            f"{form:<8} findings of a planted behaviour: held-out recall {t.caught}/{t.planted}, {t.false_positives} "
            f"false positives, p <= {CONFIRMED_P} for {t.confirmed} of {t.behaviours}; findings of none with "
            f"p <= {CONFIRMED_P}: {unrelated[form]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("work", nargs="+", type=Path, help="folders of earlier `rldiff bench-planted --work` runs")
    args = parser.parse_args()
    start = time.perf_counter()
    _forms_table(args.work)
    print()
    _findings_table(args.work)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
