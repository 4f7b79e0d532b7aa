"""Every planted suite in one run: fixed phrases, paraphrased behaviours, a rate sweep, habits rldiff was not
developed on, the unmodified pairs.

Per suite and seed it scores rldiff, the naive n-gram baseline, and (where the configuration has the switch)
rldiff with concept and group sources off, on the same store and split. All studies share one activation
cache and one SAE folder, so a text read once (the background reasoning recurs across the suites of a seed)
is never read again. `rldiff bench-planted` and `bench/planted.py` call `run_suites`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.config import AnalyzeConfig
from engine.errors import InputError
from engine.planted import (
    BEHAVIOURS,
    F1_RECOVERED,
    F1_RELATED,
    FRAGMENT_PRECISION,
    SAMPLE_PAIR,
    Behaviour,
    PlantedSegment,
    Score,
    analysed_study,
    naive_baseline,
    pipeline_candidates,
    planted_segment_ids,
    run_planted_benchmark,
    score,
)
from engine.planted_oracle import SPLITS_TESTED, best_source_f1, perfect_labeler_p
from engine.planted_paraphrase import (
    PARAPHRASED,
    REPLIES,
    SWEEP_RATES,
    Planted,
    Variety,
    habits,
    plant_paraphrased,
    reasoning_behaviours,
    shifts,
    variety,
)
from engine.progress import NullProgress, Progress
from engine.store import Store
from engine.study import last_config

log = logging.getLogger(__name__)

RLDIFF, BASELINE, ABLATION = "rldiff", "naive n-gram baseline", "rldiff, no concept/group sources"
_VARIED = ("paraphrased", "replies", "habits", "shifts")  # suites whose planted sentences' variety is reported
# The statement a probe-call finding must carry (the target for structural findings).
PROBE_STATEMENT = "dummy/probe argument values"
# The configuration switch that turns concept and group sources off (issue 11, branch `concepts`).
_ABLATION_FIELD = "sentence_features"
_TRUTH_FIELDS = ("checkpoint", "rollout_id", "message_index", "part_index", "kind", "behaviour")


@dataclass
class SuiteResult:
    """One suite on one seed: a score per method."""

    # 'fixed' | 'paraphrased' | 'replies' | 'habits' | 'sweep 1%' ... | 'unmodified' | 'unmodified, reasoning'
    suite: str
    seed: int
    behaviours: list[str]
    scores: dict[str, Score]
    planted_counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    # behaviour -> the held-out test's p with the planted segments as labels, per split tested on
    # (`engine.planted_oracle`): what the study could confirm with a perfect labeler
    perfect_p: dict[str, list[float | None]] = field(default_factory=dict)
    # behaviour -> the best discovery F1 of a tested feature row of its kind (`engine.planted_oracle`): how well
    # the study's best source isolates it
    source_f1: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Ceilings:
    """What the study allows for each behaviour, whatever rldiff drafts: the perfect labeler's p and the best
    source's F1 (`engine.planted_oracle`)."""

    perfect_p: dict[str, list[float | None]]
    source_f1: dict[str, float | None]


@dataclass
class SuitesReport:
    results: list[SuiteResult]
    variety: dict[int, list[Variety]]
    ablation: str  # what the ablation ran with, or why it did not run


def ablation_config(config: AnalyzeConfig) -> AnalyzeConfig | None:
    """The configuration with concept/group sources off, or None where this code has no such switch."""
    if _ABLATION_FIELD not in {f.name for f in dataclasses.fields(config)}:
        return None
    off: dict[str, Any] = {_ABLATION_FIELD: False}
    return replace(config, **off)


def _scored(
    work: Path,
    shared: Path,
    files: tuple[Path, Path],
    truth: list,
    behaviours: tuple[Behaviour, ...],
    config: AnalyzeConfig,
    ablation: AnalyzeConfig | None,
    analyze: Callable[..., Any],
    progress: Progress,
) -> tuple[dict[str, Score], Ceilings]:
    """Analyse one pair (and its ablation) in `work`, score rldiff and the baseline against the truth, and
    measure what the study allows (`_ceilings`)."""
    with analysed_study(work, "study", *files, config, analyze, progress, shared) as store:
        scores = _store_scores(store, truth, behaviours, config.fdr)
        ceilings = _ceilings(store, truth, behaviours, config)
    if ablation is not None:
        with analysed_study(work, "ablation", *files, ablation, analyze, progress, shared) as store:
            scores[ABLATION] = _store_scores(store, truth, behaviours, None)[RLDIFF]
    return scores, ceilings


def _ceilings(store: Store, truth: list, behaviours: tuple[Behaviour, ...], config: AnalyzeConfig) -> Ceilings:
    """The truth tested as labels (`perfect_labeler_p`) and the best source's F1 (`best_source_f1`)."""
    planted = planted_segment_ids(store, truth)
    return Ceilings(
        perfect_labeler_p(store, planted, behaviours, fdr=config.fdr, n_permutations=config.permutations),
        best_source_f1(store, planted, behaviours),
    )


def _store_scores(store: Store, truth: list, behaviours: tuple[Behaviour, ...], fdr: float | None) -> dict[str, Score]:
    """rldiff's validated findings in an analysed store, scored; and the baseline's on it unless `fdr` is None."""
    planted = planted_segment_ids(store, truth)
    scores = {RLDIFF: score(RLDIFF, pipeline_candidates(store), planted, behaviours)}
    if fdr is not None:
        scores[BASELINE] = score(BASELINE, naive_baseline(store, "before", "after", fdr=fdr), planted, behaviours)
    return scores


def rescore(work_dir: str | Path, fdr: float = 0.05) -> SuitesReport:
    """Score the stores of an earlier `run_suites` in `work_dir` again (after a change to the scoring), without
    analysing anything; the variety comes from the saved ground truth."""
    work = Path(work_dir)
    saved = json.loads((work / "suites.json").read_text())
    report = SuitesReport([], {}, saved["ablation"])
    for row in saved["results"]:
        suite, seed = row["suite"], row["seed"]
        behaviours = suite_behaviours(suite, seed)
        if suite in ("fixed", "unmodified"):
            stores = {RLDIFF: work / f"fixed-{seed}" / ("planted" if suite == "fixed" else "null")}
            truth_file = work / f"fixed-{seed}" / "planted" / "ground_truth.json"
        else:
            folder = suite_folder(work, suite, seed)
            stores = {RLDIFF: folder / "study", ABLATION: folder / "ablation"}
            truth_file = folder / "files" / "ground_truth.json"
        rows = json.loads(truth_file.read_text()) if suite != "unmodified" else []
        truth = planted_segments(rows)
        scores: dict[str, Score] = {}
        ceilings = Ceilings({}, {})
        for method, path in stores.items():
            if path.with_suffix(".duckdb").is_file():
                with Store(path.with_suffix(".duckdb")) as store:
                    found = _store_scores(store, truth, behaviours, fdr if method == RLDIFF else None)
                    if method == RLDIFF:
                        ceilings = _ceilings(store, truth, behaviours, replace(last_config(store), fdr=fdr))
                scores.update({method: found[RLDIFF], **({BASELINE: found[BASELINE]} if method == RLDIFF else {})})
        if suite in _VARIED:
            texts = [r["planted"] for r in rows]
            report.variety.setdefault(seed, []).extend(variety(Planted(Path(), Path(), truth, texts), seed))
        counts = _counts(truth, behaviours)
        report.results.append(
            SuiteResult(
                suite, seed, row["behaviours"], scores, counts, row["seconds"], ceilings.perfect_p, ceilings.source_f1
            )
        )
    _save(report, work)
    return report


def planted_segments(rows: list[dict[str, Any]]) -> list[PlantedSegment]:
    """The planted segments of a suite's `ground_truth.json` rows."""
    return [PlantedSegment(**{k: r[k] for k in _TRUTH_FIELDS}) for r in rows]


def suite_behaviours(suite: str, seed: int) -> tuple[Behaviour, ...]:
    """The behaviours a suite plants with a vocabulary seed (none for the unmodified pairs)."""
    if suite == "fixed":
        return BEHAVIOURS
    if suite == "paraphrased":
        return PARAPHRASED
    if suite == "replies":
        return REPLIES
    if suite == "habits":
        return habits(seed)
    if suite == "shifts":
        return shifts(seed)
    if suite.startswith("sweep"):
        return reasoning_behaviours(float(suite.split()[1].rstrip("%")) / 100)
    return ()


def suite_folder(work: Path, suite: str, seed: int) -> Path:
    """Where `run_suites` keeps a suite's files and stores under `work`."""
    return work / f"{suite.replace(' ', '').replace(',', '-').replace('%', 'pct')}-{seed}"


def _counts(truth: list, behaviours: tuple[Behaviour, ...]) -> dict[str, int]:
    return {b.name: sum(t.behaviour == b.name for t in truth) for b in behaviours}


def check_selection(suite: str, quick: bool) -> None:
    """Refuse a selection that would run nothing: `quick` keeps the paraphrased, reply, habit or shift suite only."""
    if quick and suite == "fixed":
        raise InputError(
            "--quick runs the paraphrased (or reply, habit or shift) suite only, so it selects nothing of --suite fixed"
        )


def run_suites(
    work_dir: str | Path,
    config: AnalyzeConfig | None = None,
    *,
    suite: str = "all",
    quick: bool = False,
    sweep: tuple[float, ...] = SWEEP_RATES,
    pair: tuple[str | Path, str | Path] = SAMPLE_PAIR,
    progress: Progress | None = None,
    analyze: Callable[..., Any] | None = None,
) -> SuitesReport:
    """Run the suites on seeds `config.seed` and the next (the seed drives vocabulary, planting, split and SAE)
    and score them. `suite`: 'all', 'fixed', 'paraphrased' (with the rate sweep), 'replies', 'habits' or 'shifts';
    `quick`: one seed, the paraphrased suite (or with `suite` one of the others, that suite) and its unmodified pair
    only (an error with `suite='fixed'`, which it would leave empty). The rate sweep runs on the first seed
    (three more studies a seed on two cores is more than the benchmark's time allows)."""
    from engine.pipeline import analyze as run_pipeline

    check_selection(suite, quick)
    fixed = suite in ("all", "fixed") and not quick
    main: list[str] = [name for name in _VARIED if name == suite]
    if suite == "all":
        main = ["paraphrased"] + ([] if quick else ["replies", "habits", "shifts"])
    sweep = () if quick or suite not in ("all", "paraphrased") else sweep

    analyze = analyze or run_pipeline
    base = config or AnalyzeConfig()
    seeds = (base.seed,) if quick else (base.seed, base.seed + 1)
    progress = progress or NullProgress()
    work = Path(work_dir)
    pair_paths = (Path(pair[0]), Path(pair[1]))
    ablation = ablation_config(base)
    note = f"{_ABLATION_FIELD}=False" if ablation else f"not run: AnalyzeConfig has no {_ABLATION_FIELD}"
    report = SuitesReport([], {}, note)
    shared = work / "shared"
    for seed in seeds if fixed else ():
        config = replace(base, seed=seed)
        start = time.perf_counter()
        bench = run_planted_benchmark(work / f"fixed-{seed}", config, pair, progress, analyze, shared)
        names = [b.name for b in BEHAVIOURS]
        scores = {RLDIFF: bench.planted, BASELINE: bench.planted_baseline}
        folder = work / f"fixed-{seed}"
        with Store(folder / "planted.duckdb") as store:
            truth = planted_segments(json.loads((folder / "planted" / "ground_truth.json").read_text()))
            ceilings = _ceilings(store, truth, BEHAVIOURS, config)
        seconds = time.perf_counter() - start
        report.results.append(
            SuiteResult(
                "fixed", seed, names, scores, bench.planted_counts, seconds, ceilings.perfect_p, ceilings.source_f1
            )
        )
        report.results.append(SuiteResult("unmodified", seed, [], {RLDIFF: bench.null, BASELINE: bench.null_baseline}))
        _save(report, work)
    # Both seeds' main suites first, then the sweep: an interrupted run still has the main figures. The
    # unmodified pair with reasoning is the null of every suite planted into that pair.
    studies: list[tuple[int, str, tuple[Behaviour, ...]]] = [
        *((seed, name, suite_behaviours(name, seed)) for seed in seeds for name in (*main, "unmodified, reasoning")),
        *((seeds[0], f"sweep {rate:.0%}", reasoning_behaviours(rate)) for rate in sweep),
    ]
    for seed, suite, behaviours in studies if main else ():
        config = replace(base, seed=seed)
        start = time.perf_counter()
        folder = suite_folder(work, suite, seed)
        planted = plant_paraphrased(*pair_paths, folder / "files", seed, behaviours)
        if suite in _VARIED:
            report.variety.setdefault(seed, []).extend(variety(planted, seed))
        with_ablation = replace(ablation, seed=seed) if ablation and not suite.startswith("sweep") else None
        scores, ceilings = _scored(
            folder,
            shared,
            (planted.before, planted.after),
            planted.truth,
            behaviours,
            config,
            with_ablation,
            analyze,
            progress,
        )
        counts = _counts(planted.truth, behaviours)
        report.results.append(
            SuiteResult(
                suite,
                seed,
                [b.name for b in behaviours],
                scores,
                counts,
                time.perf_counter() - start,
                ceilings.perfect_p,
                ceilings.source_f1,
            )
        )
        log.info("suite %s seed %d done in %.0f s", suite, seed, report.results[-1].seconds)
        _save(report, work)
    return report


def _save(report: SuitesReport, work: Path) -> None:
    """The report so far, as JSON and Markdown, after every suite (a long run interrupted keeps its figures)."""
    (work / "suites.json").write_text(json.dumps(asdict(report), indent=1, default=str))
    (work / "report.md").write_text("\n".join(report_lines(report)) + "\n")


# -- the report -----------------------------------------------------------------------------------------------


def _summary(r: Score, n: int) -> str:
    matched = r.validated - r.false_discoveries - r.partial
    recovered = f"{r.n_recovered}/{n}" if n else "-"
    return f"{recovered} | {r.validated} | {matched} | {r.partial} | {r.false_discoveries} | {r.fragments}"


def _targets(results: list[SuiteResult]) -> Iterator[str]:
    """Each target of issue 11 as holds / does not hold, from the rldiff rows."""
    by = {(r.suite, r.seed): r.scores[RLDIFF] for r in results}
    seeds = sorted({r.seed for r in results})
    para = [(s, by[("paraphrased", s)]) for s in seeds if ("paraphrased", s) in by]
    if para:
        ok = all(sc.n_recovered >= 4 for _, sc in para)
        yield f"- paraphrased suite, >= 4 behaviours recovered on every seed: {_verdict(ok)} " + _each(
            para, lambda sc: f"{sc.n_recovered}/{len(sc.recall)}"
        )
        ok = all(sc.false_discoveries <= 1 for _, sc in para)
        yield f"- paraphrased suite, <= 1 unrelated validated finding: {_verdict(ok)} " + _each(
            para, lambda sc: str(sc.false_discoveries)
        )
        probe = [
            (s, sc.recovered.get("probe_calls", False) and PROBE_STATEMENT in sc.best.get("probe_calls", ""))
            for s, sc in para
        ]
        yield (
            f'- probe calls recovered by a finding saying "{PROBE_STATEMENT}": {_verdict(all(p for _, p in probe))} '
            + _each([(s, sc) for s, sc in para], lambda sc: repr(sc.best.get("probe_calls", "none"))[:90])
        )
    for name, title, what in (("habits", "habit", "new behaviours"), ("shifts", "shift", "rates that move")):
        rows = [(s, by[(name, s)]) for s in seeds if (name, s) in by]
        if rows:
            yield f"- {title} suite (no target of its own: whether the results above carry over to {what}): " + _each(
                rows, lambda sc: f"{sc.n_recovered}/{len(sc.recall)} recovered, {sc.false_discoveries} unrelated"
            )
    nulls = [(s, sc) for (suite, s), sc in by.items() if suite.startswith("unmodified")]
    if nulls:
        ok = all(sc.validated == 0 for _, sc in nulls)
        yield f"- nothing validated on the unmodified pairs: {_verdict(ok)} " + _each(
            nulls, lambda sc: str(sc.validated)
        )
    fixed = [(s, by[("fixed", s)]) for s in seeds if ("fixed", s) in by]
    if fixed:
        ok = all(sc.n_recovered == len(BEHAVIOURS) for _, sc in fixed)
        yield f"- fixed-phrase suite 5/5: {_verdict(ok)} " + _each(fixed, lambda sc: f"{sc.n_recovered}/5")


def _verdict(ok: bool) -> str:
    return "**holds**" if ok else "**does not hold**"


def _each(rows: list[tuple[int, Score]], show: Callable[[Score], str]) -> str:
    return "(" + ", ".join(f"seed {s}: {show(sc)}" for s, sc in rows) + ")"


def report_lines(report: SuitesReport) -> Iterator[str]:
    """The benchmark as Markdown: variety, one row per suite, seed and method, F1 per behaviour, targets."""
    for seed, rows in sorted(report.variety.items()):
        yield f"Variety of the planted sentences (reasoning and replies), vocabulary seed {seed}:"
        yield ""
        yield "| behaviour | sentences | distinct | most common word 3-gram | in share of sentences | grammar size |"
        yield "|---|---:|---:|---|---:|---:|"
        for v in rows:
            yield (
                f'| {v.behaviour} | {v.sentences} | {v.distinct_share:.1%} | "{v.top_trigram}" | '
                f"{v.top_trigram_share:.1%} | {v.grammar_size:,} |"
            )
        yield ""
    yield f"Ablation (concept/group sources off): {report.ablation}."
    yield ""
    yield (
        "| suite | seed | method | recovered | validated | match a behaviour | partly related | unrelated "
        "| of which fragments |"
    )
    yield "|---|---:|---|---:|---:|---:|---:|---:|---:|"
    for r in report.results:
        for method, sc in r.scores.items():
            yield f"| {r.suite} | {r.seed} | {method} | {_summary(sc, len(r.behaviours))} |"
    yield ""
    yield (
        "F1 of the best validated finding in the right direction, on the split it was tested on (held-out; a "
        "small study's findings drafted on the held-out fold, discovery); planted: segments in all splits:"
    )
    yield ""
    methods = _methods(report)
    yield (
        "| suite | seed | behaviour | planted | " + " | ".join(methods) + " | best source's F1 | perfect labeler's p |"
    )
    yield "|---|---:|---|---:|" + "---:|" * len(methods) + "---:|---:|"
    for r in report.results:
        for name in r.behaviours:
            f1 = [f"{r.scores[m].recall[name]:.2f}" if m in r.scores else "-" for m in methods]
            source = r.source_f1.get(name)
            perfect = " / ".join(f"{p:.2g}" if p is not None else "-" for p in r.perfect_p.get(name, [])) or "-"
            yield (
                f"| {r.suite} | {r.seed} | {name} | {r.planted_counts.get(name, 0)} | "
                + " | ".join([*f1, "-" if source is None else f"{source:.2f}", perfect])
                + " |"
            )
    yield ""
    folds = " / ".join(SPLITS_TESTED["rollout"])
    yield (
        "Perfect labeler's p: the held-out test of the behaviour with its planted segments as the labels "
        f"(`engine.planted_oracle`), on held-out tasks; in a small study on each fold ({folds}), as its "
        "findings are tested on either. Where it is far above the level, not even a labeler of exactly the "
        "behaviour confirms it in this study: a miss there is the study's size, not rldiff's drafting. Best "
        "source's F1: of the tested feature row of the behaviour's kind that fires most like it on discovery "
        "(a latent, concept, group or structural feature: what drafting starts from). Where it is low, no "
        "source isolates the behaviour, and a finding drafted from one measures part of it."
    )
    yield ""
    yield (
        f"Recovered: F1 >= {F1_RECOVERED}; partly related: F1 >= {F1_RELATED}; unrelated: below that for all; "
        f"fragments: unrelated, but >= {FRAGMENT_PRECISION:.0%} of the finding's positives are one "
        "behaviour's planted segments."
    )
    yield ""
    yield "Unrelated validated rldiff findings:"
    for r in report.results:
        for label in r.scores[RLDIFF].unrelated if RLDIFF in r.scores else ():
            yield f"- {r.suite}, seed {r.seed}: {label[:160]}"
    yield ""
    yield "Targets (rldiff):"
    yield from _targets(report.results)
    seconds = ", ".join(f"{r.suite} seed {r.seed} {r.seconds:.0f} s" for r in report.results if r.seconds)
    yield ""
    yield f"Seconds per suite: {seconds}."


def _methods(report: SuitesReport) -> list[str]:
    return [m for m in (RLDIFF, BASELINE, ABLATION) if any(m in r.scores for r in report.results)]
