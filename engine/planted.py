"""The planted benchmark: known behaviours planted into one half of a same-model pair, then recovered.

Increases are planted into the *after* file and decreases into the *before* file, each at a known rate over
its eligible segments; the ground truth lists every planted segment. A behaviour counts as recovered when a
validated hypothesis's held-out labels match its planted held-out segments with F1 >= 0.5 and the
hypothesis claims the right direction (a cross-fitted small study's finding drafted on the held-out fold is
scored on discovery, where it was tested). A naive baseline (word n-gram prevalence differences with Fisher
tests, segments treated as independent) is scored the same way on the same split.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import fisher_exact

from engine.config import AnalyzeConfig
from engine.hypotheses.ngrams import NgramIndex
from engine.hypotheses.population import load_population
from engine.hypotheses.provenance import tested_split
from engine.hypotheses.verifier import Verifier
from engine.kinds import DISCOVERY, HELDOUT, Split
from engine.progress import NullProgress, Progress
from engine.stats.fdr import bh_qvalues
from engine.store import Store
from engine.store.queries.rollouts import segments_at
from engine.text import ngram_regex

log = logging.getLogger(__name__)

F1_RECOVERED = 0.5
F1_RELATED = 0.2
# An unrelated finding (F1 < F1_RELATED with every behaviour) is a fragment of one when at least this share of
# its held-out positives are that behaviour's planted segments: a narrow phrase of a paraphrased behaviour.
FRAGMENT_PRECISION = 0.5
_SAMPLES = Path(__file__).resolve().parents[1] / "sample_data" / "tau-bench-gpt4o"
SAMPLE_PAIR = (_SAMPLES / "trials01.jsonl.gz", _SAMPLES / "trials23.jsonl.gz")


@dataclass(frozen=True)
class Behaviour:
    name: str
    kind: str  # segment kind the planted segments have: 'text' | 'tool_call'
    direction: str  # 'increase' (planted into after) | 'decrease' (planted into before)
    rate: float  # share of eligible places that get it
    description: str
    # share of the other checkpoint's eligible places that get it too: a rate that moves, not a new behaviour
    # (the paraphrased planting only; `plant` ignores it)
    base_rate: float = 0.0


BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour("email_summary", "text", "increase", 0.25, "offers to email a written summary (3 phrasings)"),
    Behaviour("rest_assured", "text", "increase", 0.05, "opens a reply with 'Rest assured, ...' (rare)"),
    Behaviour("certainly", "text", "decrease", 0.30, "opens a reply with 'Certainly!'"),
    Behaviour("airport_check", "tool_call", "increase", 0.5, "calls list_all_airports before searching flights"),
    Behaviour(
        "include_history", "tool_call", "decrease", 0.35, "passes include_history=true to get_reservation_details"
    ),
)
_EMAIL = (
    "If it helps, I can also email you a written summary of these details.",
    "Would you like me to send a written summary of this to your email?",
    "I'm happy to email you a short summary of everything we covered.",
)
_SEARCHES = ("search_direct_flight", "search_onestop_flight")


@dataclass(frozen=True)
class PlantedSegment:
    checkpoint: str
    rollout_id: str
    message_index: int
    part_index: int
    kind: str
    behaviour: str


def read_records(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _plant_rollout(record: dict[str, Any], behaviours: list[Behaviour], rng: np.random.Generator) -> list[tuple]:
    """Plant `behaviours` into one rollout in place; returns (message object, part, kind, behaviour) marks."""
    marks: list[tuple] = []
    messages = record["messages"]
    for b in behaviours:
        for message in list(messages):
            if message.get("role") != "assistant":
                continue
            content = message.get("content")
            calls = message.get("tool_calls") or []
            if b.kind == "text" and isinstance(content, str) and content.strip():
                if rng.random() >= b.rate:
                    continue
                if b.name == "email_summary":
                    message["content"] = f"{content.rstrip()} {_EMAIL[int(rng.integers(len(_EMAIL)))]}"
                elif b.name == "rest_assured":
                    message["content"] = f"Rest assured, I will take care of this. {content.lstrip()}"
                else:
                    message["content"] = f"Certainly! {content.lstrip()}"
                marks.append((message, 0, "text", b.name))
            elif b.name == "include_history":
                for part, call in enumerate(calls):
                    if call.get("name") == "get_reservation_details" and isinstance(call.get("arguments"), dict):
                        if rng.random() < b.rate:
                            call["arguments"] = {**call["arguments"], "include_history": True}
                            marks.append((message, part, "tool_call", b.name))
            elif b.name == "airport_check" and any(c.get("name") in _SEARCHES for c in calls):
                if rng.random() >= b.rate:
                    continue
                call_id = f"planted_{int(rng.integers(1 << 40)):x}"
                check = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "name": "list_all_airports", "arguments": {}}],
                }
                result = {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": "list_all_airports",
                    "content": '{"JFK": "New York", "SEA": "Seattle", "LAX": "Los Angeles"}',
                }
                at = next(i for i, m in enumerate(messages) if m is message)
                messages[at:at] = [check, result]
                marks.append((check, 0, "tool_call", b.name))
    return marks


def plant(
    before_path: Path,
    after_path: Path,
    out_dir: Path,
    rng: np.random.Generator,
    behaviours: tuple[Behaviour, ...] = BEHAVIOURS,
) -> tuple[Path, Path, list[PlantedSegment]]:
    """Write planted copies of a before/after pair into `out_dir`; return their paths and the ground truth."""
    out_dir.mkdir(parents=True, exist_ok=True)
    truth: list[PlantedSegment] = []
    paths = []
    for checkpoint, path, direction in (("before", before_path, "decrease"), ("after", after_path, "increase")):
        records = read_records(Path(path))
        chosen = [b for b in behaviours if b.direction == direction]
        for record in records:
            marks = _plant_rollout(record, chosen, rng)
            for message, part, kind, name in marks:
                index = next(i for i, m in enumerate(record["messages"]) if m is message)
                truth.append(PlantedSegment(checkpoint, record["rollout_id"], index, part, kind, name))
        target = out_dir / f"{checkpoint}.jsonl"
        write_records(target, records)
        paths.append(target)
    (out_dir / "ground_truth.json").write_text(json.dumps([asdict(t) for t in truth], indent=1))
    return paths[0], paths[1], truth


# -- scoring --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A validated finding to score: its claimed direction and its positive segments on the split it was
    tested on (held-out; discovery for a small study's finding drafted on the held-out fold)."""

    label: str
    direction: str
    positives: frozenset[int]
    split: Split = HELDOUT


@dataclass
class Score:
    method: str
    recall: dict[str, float] = field(default_factory=dict)  # behaviour -> best F1 in the right direction
    recovered: dict[str, bool] = field(default_factory=dict)
    validated: int = 0
    false_discoveries: int = 0  # validated, best F1 with every behaviour < F1_RELATED
    partial: int = 0  # validated, related to a behaviour (F1 in [F1_RELATED, F1_RECOVERED)) but not a match
    best: dict[str, str] = field(default_factory=dict)  # behaviour -> label of its best candidate (right direction)
    unrelated: list[str] = field(default_factory=list)  # labels of the false discoveries
    fragments: int = 0  # false discoveries whose positives lie mostly in one behaviour's planted segments

    @property
    def n_recovered(self) -> int:
        return sum(self.recovered.values())


# Each split's segment ids of each planted behaviour: {split: {behaviour: ids}}.
PlantedIds = dict[str, dict[str, set[int]]]


def planted_segment_ids(store: Store, truth: list[PlantedSegment]) -> PlantedIds:
    """The segment ids of each planted behaviour, split by split (a finding is scored on the split it was
    tested on)."""
    if not truth:
        return {}
    frame = pl.DataFrame([asdict(t) for t in truth]).select(
        "checkpoint", "rollout_id", "message_index", "part_index", "kind", label="behaviour"
    )
    out: PlantedIds = {}
    for name, split, sid in segments_at(store.cursor(), frame.to_arrow()):
        out.setdefault(split, {}).setdefault(name, set()).add(sid)
    return out


def score(
    method: str,
    candidates: list[Candidate],
    planted: PlantedIds,
    behaviours: tuple[Behaviour, ...] = BEHAVIOURS,
) -> Score:
    result = Score(method, validated=len(candidates))
    for b in behaviours:
        result.recall[b.name] = 0.0
    for c in candidates:
        best, precision = 0.0, 0.0
        on_split = planted.get(c.split, {})
        for b in behaviours:
            truth = on_split.get(b.name, set())
            f1 = 2 * len(c.positives & truth) / (len(c.positives) + len(truth)) if truth or c.positives else 0.0
            best = max(best, f1)
            precision = max(precision, len(c.positives & truth) / max(len(c.positives), 1))
            if c.direction == b.direction and f1 > result.recall[b.name]:
                result.recall[b.name], result.best[b.name] = f1, c.label
        if best < F1_RELATED:
            result.false_discoveries += 1
            result.fragments += precision >= FRAGMENT_PRECISION
            result.unrelated.append(c.label)
        elif best < F1_RECOVERED:
            result.partial += 1
    result.recovered = {name: f1 >= F1_RECOVERED for name, f1 in result.recall.items()}
    return result


def pipeline_candidates(store: Store) -> list[Candidate]:
    """Validated hypotheses of an analysed store, with their positive labels on the split each was tested on."""
    rows = store.frame(
        "SELECT h.hypothesis_id, h.statement, h.direction, list(l.segment_id) FILTER (WHERE l.label) AS positives, "
        "h.provenance FROM hypotheses h LEFT JOIN hypothesis_labels l USING (hypothesis_id) "
        "WHERE h.status = 'validated' GROUP BY ALL ORDER BY h.hypothesis_id"
    )
    return [Candidate(r[1], r[2], frozenset(r[3] or []), tested_split(r[4])) for r in rows.iter_rows()]


# -- the naive baseline ---------------------------------------------------------------------------------------


def _fisher(hits: np.ndarray, is_after: np.ndarray) -> tuple[float, float]:
    a, b = int(hits[is_after].sum()), int(is_after.sum())
    c, d = int(hits[~is_after].sum()), int((~is_after).sum())
    delta = a / max(b, 1) - c / max(d, 1)
    return float(fisher_exact([[a, b - a], [c, d - c]])[1]), delta


def naive_baseline(
    store: Store, before: str, after: str, *, fdr: float = 0.05, min_count: int = 5, max_hypotheses: int = 200
) -> list[Candidate]:
    """Word n-grams whose segment prevalence differs by Fisher's exact test on discovery (BH), re-tested the
    same way on held-out (BH): every segment an independent observation, as a naive analysis would have it."""
    discovery = load_population(store, before, after, DISCOVERY)
    heldout = load_population(store, before, after, HELDOUT)
    tested: list[tuple[float, float, str, str]] = []
    for kind in ("text", "reasoning", "tool_call"):
        segs = discovery.of_kinds([kind])
        if segs.height == 0:
            continue
        index = NgramIndex.build(
            segs["text"].to_list(), (segs["checkpoint"] == after).to_numpy(), segs["segment_id"].to_numpy()
        )
        for gram, n in index.counts().items():
            if n >= min_count:
                p, delta = _fisher(index.matches({gram}), index.is_after)
                tested.append((p, delta, gram, kind))
    q = bh_qvalues(np.array([t[0] for t in tested])) if tested else np.array([])
    chosen = sorted((t for t, qi in zip(tested, q, strict=True) if qi < fdr), key=lambda t: t[0])[:max_hypotheses]
    results = []
    for _, delta, gram, kind in chosen:
        segs = heldout.of_kinds([kind])
        verdicts = Verifier({"regex": ngram_regex([gram]), "ignore_case": True}).label_all(heldout.views(segs))
        hits = np.array([v.label for v in verdicts], dtype=bool)
        p, held_delta = _fisher(hits, (segs["checkpoint"] == after).to_numpy())
        results.append((p, held_delta, delta, gram, kind, frozenset(segs["segment_id"].to_numpy()[hits].tolist())))
    q_held = bh_qvalues(np.array([r[0] for r in results])) if results else np.array([])
    return [
        Candidate(f"{kind}: '{gram}'", "increase" if delta > 0 else "decrease", positives)
        for (_, held_delta, delta, gram, kind, positives), qh in zip(results, q_held, strict=True)
        if qh < fdr and np.sign(held_delta) == np.sign(delta)
    ]


# -- the whole benchmark --------------------------------------------------------------------------------------


@dataclass
class BenchResult:
    planted: Score
    planted_baseline: Score
    null: Score
    null_baseline: Score
    planted_counts: dict[str, int]
    seconds: dict[str, float] = field(default_factory=dict)


def analysed_study(
    work: Path,
    name: str,
    before: Path,
    after: Path,
    config: AnalyzeConfig,
    analyze: Callable[..., Any],
    progress: Progress,
    shared: Path | None = None,
) -> Store:
    """Ingest a pair into a fresh store and analyse it. With `shared`, the store's activation cache and trained
    SAEs are that folder's, so the studies of one benchmark read each distinct text once."""
    from engine.features.cache import side_dir
    from engine.ingest import ingest_file

    path = work / f"{name}.duckdb"
    path.unlink(missing_ok=True)
    if shared is not None:
        side = side_dir(path)
        side.mkdir(parents=True, exist_ok=True)
        for part in ("cache", "sae"):
            (shared / part).mkdir(parents=True, exist_ok=True)
            if not (side / part).is_symlink():
                (side / part).symlink_to((shared / part).resolve(), target_is_directory=True)
    store = Store(path)
    ingest_file(store, before, "before")
    ingest_file(store, after, "after")
    analyze(store, replace(config, before="before", after="after"), progress)
    return store


def run_planted_benchmark(
    work_dir: str | Path,
    config: AnalyzeConfig | None = None,
    pair: tuple[str | Path, str | Path] = SAMPLE_PAIR,
    progress: Progress | None = None,
    analyze: Callable[..., Any] | None = None,
    shared: Path | None = None,
) -> BenchResult:
    """Plant, analyse and score; the same for the unmodified pair (every validated finding there is false).

    `rldiff bench-planted` calls this (the fixed-phrase suite). The analysis runs offline unless `config.llm`
    names a model. `shared`: a folder for activations and SAEs shared with other studies (see `_study`).
    """
    import time

    from engine.pipeline import analyze as run_pipeline

    analyze = analyze or run_pipeline
    config = config or AnalyzeConfig()
    progress = progress or NullProgress()
    work = Path(work_dir)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    before, after, truth = plant(Path(pair[0]), Path(pair[1]), work / "planted", np.random.default_rng(config.seed))
    counts = {b.name: sum(t.behaviour == b.name for t in truth) for b in BEHAVIOURS}
    with analysed_study(work, "planted", before, after, config, analyze, progress, shared) as store:
        seconds["planted_analysis"] = time.perf_counter() - start
        planted = planted_segment_ids(store, truth)
        pipeline = score("rldiff", pipeline_candidates(store), planted)
        t = time.perf_counter()
        baseline = score("naive n-gram + Fisher", naive_baseline(store, "before", "after", fdr=config.fdr), planted)
        seconds["planted_baseline"] = time.perf_counter() - t
    t = time.perf_counter()
    with analysed_study(work, "null", Path(pair[0]), Path(pair[1]), config, analyze, progress, shared) as store:
        seconds["null_analysis"] = time.perf_counter() - t
        null = score("rldiff", pipeline_candidates(store), {})
        null_baseline = score("naive n-gram + Fisher", naive_baseline(store, "before", "after", fdr=config.fdr), {})
    result = BenchResult(pipeline, baseline, null, null_baseline, counts, seconds)
    (work / "result.json").write_text(json.dumps(asdict(result), indent=1))
    return result
