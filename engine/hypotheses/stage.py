"""The hypotheses stage: draft from the discovery split, label the held-out split, validate, write. In a
small study (split within task) also the other way round, cross-fitted: draft on the held-out fold and test on
discovery (engine.hypotheses.crossfit); all tests are one BH family.

Drafted hypotheses the user has not touched (no decision, note or hand label) are replaced on each run;
the user's own and triaged ones are kept and re-tested with the new ones as one family.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import polars as pl

from engine.config import AnalyzeConfig
from engine.hypotheses.budget import Budget, LabelerTooSlow
from engine.hypotheses.crossfit import heldout_fold_deltas, heldout_fold_sources
from engine.hypotheses.draft import MIN_Z, DiscoverySplit, Draft, draft_distinct, explanation_requests
from engine.hypotheses.judge import judge_labels, weighted_z
from engine.hypotheses.length_effects import without_length_effects
from engine.hypotheses.lexical import lexical_sources
from engine.hypotheses.lifecycle import (
    STAGE,
    hypothesis_kinds,
    label,
    labeler_provenance,
    labels_provenance,
    open_session,
    record_too_slow,
    replace_labels,
    revalidate,
)
from engine.hypotheses.merge import drop_repeats
from engine.hypotheses.population import Population, load_population, split_size
from engine.hypotheses.provenance import SPLIT_NAMES, tested_split
from engine.hypotheses.sources import (
    DRAFT_FDR,
    MAX_DRAFTED,
    DraftSource,
    SourceQueue,
    example_sentences,
    firing_segments,
    source_queue,
)
from engine.kinds import DISCOVERY, HELDOUT, HYPOTHESIS_STATUSES, Split
from engine.llm.client import LLMResult
from engine.llm.session import LLMSession
from engine.progress import Progress
from engine.runs import is_done, record_run
from engine.store import Store
from engine.store.queries import testing
from engine.study import stream

log = logging.getLogger(__name__)

UPSTREAM = ("split", "features", "deltas", "clusters")
EXPLAINED_FEATURES = 30
NOTHING_HELD_OUT = (
    "no rollout of the compared checkpoints is held out (a task's only rollout of a checkpoint stays in "
    "discovery, and --holdout 0 holds none out), so no hypothesis can be tested and none is drafted; the deltas "
    "and the exploratory ranking stand"
)


def _input_hash(store: Store) -> str:
    runs = store.frame(
        "SELECT stage, arg_max(run_id, finished_at) AS run_id FROM runs WHERE status = 'done' "
        "AND stage IN (SELECT unnest(?::VARCHAR[])) GROUP BY stage ORDER BY stage",
        [list(UPSTREAM)],
    )
    user = store.frame("SELECT hypothesis_id, spec FROM hypotheses WHERE origin = 'user' ORDER BY hypothesis_id")
    payload = json.dumps([runs.rows(), user.rows()], default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _stage_config(config: AnalyzeConfig) -> dict[str, object]:
    return {
        k: getattr(config, k) for k in ("before", "after", "llm", "seed", "fdr", "permutations", "max_cost", "holdout")
    }


def run(store: Store, config: AnalyzeConfig, rng: np.random.Generator, progress: Progress) -> int:
    stage_config = _stage_config(config)
    input_hash = _input_hash(store)
    if is_done(store, STAGE, stage_config, input_hash):
        log.info("hypotheses: up to date")
        return 0
    with record_run(store, STAGE, stage_config, input_hash, config.seed) as record:
        if not split_size(store, *config.checkpoints, HELDOUT):
            with store.transaction():
                testing.keep_only(store, _kept(store)["hypothesis_id"].to_list())
            log.warning("hypotheses: %s", NOTHING_HELD_OUT)
            record.metrics = {"skipped": NOTHING_HELD_OUT}
            return 0
        too_slow = 0
        session = open_session(store, config)
        discovery = DiscoverySplit(
            load_population(store, *config.checkpoints, DISCOVERY),
            examples=lambda ids: example_sentences(store, list(ids)),
        )
        cross_fitted = store.meta("split_mode") == "rollout"  # a small study: each fold drafts, the other tests
        draft_fdr = max(config.fdr, DRAFT_FDR)  # drafting chooses what is tested; the held-out test decides
        queue = source_queue(store, draft_fdr, significant=config.fdr)
        drafts, sources, judge_dropped = _draft_fold(store, queue, discovery, session, config, draft_fdr, rng, progress)
        explanations = _explain(store, session, sources) if session else {}

        heldout = load_population(store, *config.checkpoints, HELDOUT)
        heldout = replace(heldout, embedder=discovery.population.embedder)  # one sentence embedder loaded, not two
        populations = {HELDOUT: heldout, DISCOVERY: discovery.population}
        folds = [(drafts, HELDOUT, rng)]
        if cross_fitted:  # fold B draws from its own stream: its results do not depend on how much fold A drew
            rng_b = stream(config.seed, "crossfit")
            fold_b = DiscoverySplit(heldout)  # no feature examples: those are fold A's
            queue_b = heldout_fold_sources(store, heldout_fold_deltas(store, config, rng_b), draft_fdr, config.fdr)
            drafts_b, sources_b, dropped_b = _draft_fold(
                store, queue_b, fold_b, session, config, draft_fdr, rng_b, progress
            )
            folds.append((drop_repeats(drafts_b, drafts, fold_b), DISCOVERY, rng_b))  # a behaviour is tested once
            judge_dropped += dropped_b
            sources += sources_b
        labelled: list[tuple[Draft, pl.DataFrame, Split]] = []
        for fold_drafts, tested_on, fold_rng in folds:
            with progress.track(f"labelling {SPLIT_NAMES[tested_on]} segments", len(fold_drafts)) as advance:
                for draft in fold_drafts:
                    try:
                        labels = label(populations[tested_on], draft.labeler, draft.spec, session, fold_rng, Budget())
                        labelled.append((draft, labels, tested_on))
                    except LabelerTooSlow as exc:  # not tested: dropped, and counted in the run's metrics
                        log.warning("draft %r not tested: %s", draft.statement[:80], exc)
                        too_slow += 1
                    advance(1)
        kept = _kept(store)
        relabelled, slow = [], {}
        for r in kept.iter_rows(named=True):
            if r["labeler"] == "verifier" or session is not None:
                population = populations[tested_split(r["provenance"])]
                spec = json.loads(r["spec"])
                relabels: pl.DataFrame | None
                try:
                    relabels = label(population, r["labeler"], spec, session, rng, Budget())
                except LabelerTooSlow as exc:  # its old labels go; it is recorded inconclusive below
                    slow[r["hypothesis_id"]] = str(exc)
                    relabels = None
                provenance = json.loads(r["provenance"] or "{}")
                if relabels is not None:
                    provenance |= labels_provenance(spec, relabels, population)
                relabelled.append((r["hypothesis_id"], relabels, provenance))
        with store.transaction():
            keep_ids = kept["hypothesis_id"].to_list()
            testing.keep_only(store, keep_ids)
            _write_drafts(store, labelled, populations, session, config)
            for hypothesis_id, relabels, provenance in relabelled:
                if relabels is None:
                    testing.delete_labels(store, hypothesis_id)
                else:
                    replace_labels(store, hypothesis_id, relabels)
                    testing.set_provenance(store, hypothesis_id, json.dumps(provenance, default=str))
            for feature_id, text in explanations.items():
                testing.set_explanation(store, feature_id, text)
            results = revalidate(store, populations, config, stream(config.seed, "revalidation"))
        for hypothesis_id, reason in slow.items():
            record_too_slow(store, hypothesis_id, reason)
        statuses = [v.status for v in results]
        record.metrics = {
            "sources": len(sources),
            "drafts": len(labelled),
            "cross_fitted": cross_fitted,
            "tested": len(results),
            "too_slow": too_slow + len(slow),
            "judge_dropped": judge_dropped,
            **{s: statuses.count(s) for s in HYPOTHESIS_STATUSES if s != "proposed"},
            **(session.meter.summary() if session else {}),
        }
        return len(labelled)


def _kept(store: Store) -> pl.DataFrame:
    """The hypotheses a re-run keeps: the user's own, and those with a decision, a note or user labels."""
    return store.frame(
        "SELECT hypothesis_id, labeler, spec, provenance FROM hypotheses h WHERE origin = 'user' "
        "OR decision IS NOT NULL OR note IS NOT NULL "
        "OR EXISTS (SELECT 1 FROM user_labels u WHERE u.hypothesis_id = h.hypothesis_id)"
    )


def _draft_fold(
    store: Store,
    queue: SourceQueue,
    discovery: DiscoverySplit,
    session: LLMSession | None,
    config: AnalyzeConfig,
    draft_fdr: float,
    rng: np.random.Generator,
    progress: Progress,
) -> tuple[list[Draft], list[DraftSource], int]:
    """Drafts from `queue` (`draft_distinct`) and the fold's lexical sources at q < `draft_fdr`, all checked on
    the fold they are drafted on; also the sources drafted and how many judge drafts that check dropped."""
    lexical = lexical_sources(discovery, rng, fdr=config.fdr, n_permutations=config.permutations, draft_fdr=draft_fdr)
    listed = queue.ranked[:MAX_DRAFTED] + queue.beside
    fires_by_feature = firing_segments(store, sorted({f for s in listed for f in s.feature_ids}))
    fold_ids = discovery.population.segments["segment_id"].to_list()
    fires_by_feature = fires_by_feature.filter(pl.col("segment_id").is_in(fold_ids))

    def fires(source: DraftSource) -> set[int]:
        if not source.feature_ids:  # a lexical source fires where its n-gram occurs
            index, _ = discovery.index(source.kinds)
            return set(index.segment_ids[index.matches(set(source.top_ngrams))].tolist())
        return set(fires_by_feature.filter(pl.col("feature_id").is_in(list(source.feature_ids)))["segment_id"])

    with progress.track(f"drafting hypotheses on {SPLIT_NAMES[discovery.population.split]}", len(listed)) as advance:
        drafts, sources = draft_distinct(queue, lexical, fires, discovery, session, rng)
        drafts = without_length_effects(drafts, discovery, rng, fdr=config.fdr, n_permutations=config.permutations)
        advance(len(sources), status=f"{len(drafts)} drafts from {len(sources)} sources")
    checked, dropped = _check_judges(drafts, discovery, session, rng, progress)
    return checked, sources, dropped


def _check_judges(
    drafts: list[Draft],
    discovery: DiscoverySplit,
    session: LLMSession | None,
    rng: np.random.Generator,
    progress: Progress,
) -> tuple[list[Draft], int]:
    """Judge drafts pass the discovery check verifier drafts pass: the judge labels a stratified sample of the
    discovery segments of the draft's kinds, and the draft is kept only if its weighted shares separate the
    checkpoints in its direction by MIN_Z. Returns the kept drafts and how many were dropped."""
    judges = [d for d in drafts if d.labeler == "judge"]
    if not judges or session is None:
        return drafts, 0
    kept, dropped = [d for d in drafts if d.labeler != "judge"], 0
    population = discovery.population
    with progress.track("checking judge drafts on discovery", len(judges)) as advance:
        for draft in judges:
            segments = population.of_kinds(hypothesis_kinds("judge", draft.spec))
            labels = judge_labels(session, draft.spec["question"], segments, rng)
            delta, z = weighted_z(labels, segments, population.after)
            sign = 1.0 if draft.direction == "increase" else -1.0
            check = {"judge_discovery_delta": delta, "judge_discovery_z": z, "judge_discovery_n": labels.height}
            if sign * z >= MIN_Z:
                kept.append(replace(draft, score=sign * z, provenance={**draft.provenance, **check}))
            else:
                log.info("judge draft %r dropped: discovery z=%.2f", draft.statement[:80], z)
                dropped += 1
            advance(1)
    return kept, dropped


def _write_drafts(
    store: Store,
    labelled: list[tuple[Draft, pl.DataFrame, Split]],
    populations: dict[Split, Population],
    session: LLMSession | None,
    config: AnalyzeConfig,
) -> None:
    first = store.next_id("hypotheses", "hypothesis_id")
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = []
    for offset, (draft, labels, tested_on) in enumerate(labelled):
        provenance = {
            **draft.provenance,
            **labeler_provenance(draft.labeler, session, config, tested_on),
            **labels_provenance(draft.spec, labels, populations[tested_on]),
            "drafted_on": HELDOUT if tested_on == DISCOVERY else DISCOVERY,
            "labeler_discovery_delta": draft.discovery_delta,
        }
        rows.append(
            {
                "hypothesis_id": first + offset,
                "statement": draft.statement,
                "direction": draft.direction,
                "labeler": draft.labeler,
                "spec": json.dumps(draft.spec),
                "status": "proposed",
                "origin": draft.origin,
                "provenance": json.dumps(provenance, default=str),
                "created_at": now,
            }
        )
    if rows:
        store.append("hypotheses", pl.DataFrame(rows).with_columns(pl.col("hypothesis_id").cast(pl.Int32)))
    for offset, (_, labels, _) in enumerate(labelled):
        replace_labels(store, first + offset, labels)


def _explain(store: Store, session: LLMSession, sources: list[DraftSource]) -> dict[int, str]:
    """LLM explanations for the features hypotheses were drafted from (top-activating discovery examples)."""
    ids = list(dict.fromkeys(f for s in sources for f in s.feature_ids))[:EXPLAINED_FEATURES]
    if not ids:
        return {}
    features = store.frame(
        "SELECT feature_id, label, top_ngrams FROM features WHERE feature_id IN (SELECT unnest(?::BIGINT[]))", [ids]
    )
    examples = store.frame(
        "SELECT e.feature_id, s.text FROM feature_examples e JOIN segments s USING (segment_id) "
        "JOIN rollouts r USING (rollout_key) WHERE r.split = ? AND e.rank < 3 "
        "AND e.feature_id IN (SELECT unnest(?::BIGINT[])) ORDER BY e.feature_id, e.rank",
        [DISCOVERY, ids],
    )
    by_feature: dict[int, list[str]] = {}
    for feature_id, text in examples.iter_rows():
        by_feature.setdefault(feature_id, []).append(text)
    pairs = explanation_requests(features, by_feature)
    answers = session.ask_many([r for _, r in pairs])
    return {f: a.data["explanation"] for (f, _), a in zip(pairs, answers, strict=True) if isinstance(a, LLMResult)}
