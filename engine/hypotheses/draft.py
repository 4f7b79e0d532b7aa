"""Drafting hypotheses from sources: extractive (offline) from n-grams, or by an LLM from contrasting examples.

Extractive drafting mines word n-grams of the discovery segments where the source fires in the checkpoint
where it is more common (plus the features' own distinctive n-grams), greedily keeps the few whose union best
separates the checkpoints, and writes a verifier regex over them. Every draft records how its labeler splits
the discovery segments, which is also how near-duplicates are found and merged.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from engine.features import structural
from engine.hypotheses.exemplars import (
    SentenceMatcher,
    Splitter,
    default_splitter,
    fit_exemplars,
    segment_units,
)
from engine.hypotheses.ngrams import NgramIndex, ngram_regex, same_segments
from engine.hypotheses.population import Population
from engine.hypotheses.sources import Source, ngram_list
from engine.hypotheses.statements import (
    Rates,
    concept_statement,
    distinctive_words,
    phrase_is_behaviour,
    phrase_statement,
    structural_statement,
)
from engine.hypotheses.verifier import SpecError, Verifier, spec_kinds
from engine.llm.client import LLMRequest
from engine.llm.fence import fence, fence_line
from engine.llm.session import LLMSession
from engine.llm.templates import render

log = logging.getLogger(__name__)

MIN_GRAM_COUNT = 3
CANDIDATES = 25
MIN_PRECISION = 0.5  # share of a phrase's occurrences (in the 'more' checkpoint) where the source fires
MIN_Z = 2.0  # a draft whose labeler does not separate the discovery checkpoints this well is dropped
EXAMPLES = 4
MAX_QUIET_SEGMENTS = 2000  # quiet segments a concept's labeler is fitted against (evenly drawn), to bound embedding

DRAFT_SCHEMA = {
    "type": "object",
    "required": ["statement", "direction", "judge_question", "verifier", "explanation"],
    "properties": {
        "statement": {"type": "string"},
        "direction": {"type": "string", "enum": ["increase", "decrease"]},
        "judge_question": {"type": "string"},
        "verifier": {"type": ["object", "null"]},
        "explanation": {"type": "string"},
    },
}


@dataclass
class Draft:
    """A hypothesis before it is stored: statement, labeler, and what drafting saw on discovery."""

    statement: str
    direction: str
    labeler: str  # 'verifier' | 'judge'
    spec: dict[str, Any]
    origin: str  # 'extractive' | 'llm'
    score: float  # signed-to-direction z of the labeler on discovery (judge drafts: the source's)
    discovery_delta: float | None
    provenance: dict[str, Any]
    hits: frozenset[int] = field(default=frozenset())  # discovery segment ids the verifier labels yes


class Discovery:
    """The discovery split, with n-gram indexes per kind set built on first use. `examples` gives a concept
    source's example sentences (its features' top discovery examples); `splitter` splits text into sentences."""

    def __init__(
        self,
        population: Population,
        examples: Callable[[tuple[int, ...]], list[str]] | None = None,
        splitter: Splitter | None = None,
    ) -> None:
        self.population = population
        self.examples = examples or (lambda _ids: [])
        self.splitter = splitter or default_splitter
        self._indexes: dict[tuple[str, ...], tuple[NgramIndex, pl.DataFrame]] = {}

    def index(self, kinds: tuple[str, ...]) -> tuple[NgramIndex, pl.DataFrame]:
        if kinds not in self._indexes:
            segs = self.population.of_kinds(list(kinds))
            is_after = (segs["checkpoint"] == self.population.after).to_numpy()
            self._indexes[kinds] = (
                NgramIndex.build(segs["text"].to_list(), is_after, segs["segment_id"].to_numpy()),
                segs,
            )
        return self._indexes[kinds]

    def verifier(self, spec: dict[str, Any]) -> Verifier:
        return Verifier(spec, embedder=self.population.embedder, splitter=self.splitter)

    def evaluate(self, verifier: Verifier, kinds: tuple[str, ...]) -> tuple[np.ndarray, float, float]:
        """(hits, delta, z) of a verifier over discovery segments of `kinds`."""
        index, segs = self.index(kinds)
        hits = np.array([v.label for v in verifier.label_all(Population.views(segs))], dtype=bool)
        a, b = index.is_after, ~index.is_after
        delta = (hits[a].mean() if a.any() else 0.0) - (hits[b].mean() if b.any() else 0.0)
        return hits, float(delta), index.z(hits)

    def rates(self, hits: np.ndarray, kinds: tuple[str, ...]) -> Rates:
        _, segs = self.index(kinds)
        return Rates.measure(hits, segs, self.population.rollouts, self.population.after)


def _quote(grams: list[str]) -> str:
    return ", ".join(f'"{g}"' for g in grams)


def _kind_node(kinds: tuple[str, ...]) -> dict[str, Any]:
    return {"kind": list(kinds) if len(kinds) > 1 else kinds[0]}


def extractive_draft(source: Source, fires: set[int], discovery: Discovery) -> Draft | None:
    """An offline, verifier-labelled hypothesis that names the source's behaviour, or None when its labeler
    does not separate the discovery checkpoints: structural features as rates, concept and group features by
    exemplar sentences (`similar_to`), tool features by tool name, others by their own phrase."""
    tools = [n.removeprefix("tool:") for n in source.names if n.startswith("tool:")]
    if source.origin == "concept":
        return _concept_draft(source, fires, discovery)
    if source.origin == "structural" and len(tools) < len(source.names):
        return _structural_draft(source, discovery)
    if tools and len(tools) == len(source.names):
        spec: dict[str, Any] = {"any": [{"tool_name": t} for t in tools]} if len(tools) > 1 else {"tool_name": tools[0]}
        return _finish(source, discovery, spec, ("tool_call",), lambda rates, _n: f"Calls {_quote(tools)}: {rates}")
    return _phrase_draft(source, fires, discovery)


def _finish(
    source: Source,
    discovery: Discovery,
    spec: dict[str, Any],
    kinds: tuple[str, ...],
    statement: Callable[[str, int], str],
    extra: dict[str, Any] | None = None,
) -> Draft | None:
    """Evaluate a drafted verifier on discovery; a Draft when it separates the checkpoints in the source's
    direction. `statement` gets the labeler's own discovery rates as text, and how many segments it labels."""
    sign = 1.0 if source.delta > 0 else -1.0
    hits, delta, z = discovery.evaluate(discovery.verifier(spec), kinds)
    if sign * z < MIN_Z:
        return None
    index, _ = discovery.index(kinds)
    return Draft(
        statement(discovery.rates(hits, kinds).text(kinds), int(hits.sum())),
        source.direction,
        "verifier",
        spec,
        "extractive",
        sign * z,
        delta,
        {**source.provenance(), "drafter": "extractive", **(extra or {})},
        frozenset(index.segment_ids[hits].tolist()),
    )


def _structural_draft(source: Source, discovery: Discovery) -> Draft | None:
    """A structural source's own features as the labeler; the statement is its rates."""
    nodes = [{"structural": n} for n in source.names]
    spec = {"all": [_kind_node(source.kinds), nodes[0] if len(nodes) == 1 else {"any": nodes}]}
    what = " or ".join(dict.fromkeys(structural.label(n) for n in source.names[:3]))
    what += f" (+{len(source.names) - 3} more)" if len(source.names) > 3 else ""
    return _finish(source, discovery, spec, source.kinds, lambda rates, _n: structural_statement(what, rates))


def _concept_draft(source: Source, fires: set[int], discovery: Discovery) -> Draft | None:
    """Exemplar sentences and threshold fitted to where the source fires on discovery (`fit_exemplars`,
    quiet segments sampled evenly); the statement quotes the first exemplar (the carriers' medoid) and the
    words that set the source's example sentences apart."""
    _, segs = discovery.index(source.kinds)
    firing = segs["segment_id"].is_in(list(fires)).to_numpy()
    quiet = np.flatnonzero(~firing)
    step = max(1, quiet.size // MAX_QUIET_SEGMENTS)
    sample = segs[np.sort(np.r_[np.flatnonzero(firing), quiet[::step]])]
    positives = discovery.examples(source.feature_ids)
    chosen = fit_exemplars(
        list(sample.select("kind", "text").iter_rows()),
        sample["segment_id"].is_in(list(fires)).to_numpy(),
        positives,
        discovery.population.embedder,
        discovery.splitter,
        negative_weight=step,
    )
    if chosen is None:
        return None
    negatives = [
        u for kind, text in segs[quiet[::step]].select("kind", "text").iter_rows()
        for u in segment_units(kind, text, discovery.splitter)
    ]  # fmt: skip
    spec = {"all": [_kind_node(source.kinds), chosen.node()]}
    words = distinctive_words(positives, negatives)
    more = source.delta > 0
    return _finish(
        source,
        discovery,
        spec,
        source.kinds,
        lambda rates, n: f"{concept_statement(more, source.kinds, chosen.texts[0], n, words)}: {rates}",
        {"exemplar_f1": chosen.f1, "words": words},
    )


def _phrase_draft(source: Source, fires: set[int], discovery: Discovery) -> Draft | None:
    """One phrase of the source's own, and only when the phrase itself is the behaviour (statements module):
    a lexical source's n-gram, or for a feature source a phrase among its distinctive n-grams or mostly found
    where it fires."""
    kinds = source.kinds
    sign = 1.0 if source.delta > 0 else -1.0
    index, segs = discovery.index(kinds)
    more = index.is_after if sign > 0 else ~index.is_after
    firing = np.isin(index.segment_ids, np.fromiter(fires, dtype=np.int64, count=len(fires))) & more
    counts = index.counts(np.flatnonzero(firing))
    in_more = index.counts(np.flatnonzero(more))
    # A phrase belongs to the source when it mostly occurs where the source fires: a different behaviour
    # that merely co-occurs would otherwise join the union.
    pool = [g for g, n in counts.items() if n >= MIN_GRAM_COUNT and n >= MIN_PRECISION * in_more[g]]
    own = [g.lower() for g in source.top_ngrams]
    if source.origin == "ngram":  # its n-gram, or a longer phrase around it ("assured" -> "rest assured")
        pool = own + [g for g in pool if any(f" {o} " in f" {g} " for o in own)]
    else:
        pool += [g for g in own if g not in counts]
    texts = segs["text"].to_list()
    named: dict[str, bool] = {}
    for gram in dict.fromkeys(pool):
        with_it = [texts[i] for i in np.flatnonzero(index.matches({gram}))]
        is_behaviour, opening = phrase_is_behaviour(gram, with_it)
        if is_behaviour:
            named[gram] = opening
    singles = {g: sign * index.z(index.matches({g})) for g in named}
    candidates = sorted((g for g in singles if singles[g] > 0), key=lambda g: -singles[g])[:CANDIDATES]
    # One phrase per extractive hypothesis: a union of phrases picked for separating the checkpoints can
    # join two behaviours that one broad feature fires on (seen on the planted benchmark).
    gram = index.best(candidates, sign)
    if gram is None:
        return None
    spec = {"all": [_kind_node(kinds), {"regex": ngram_regex([gram]), "ignore_case": True}]}
    more_less = sign > 0
    return _finish(
        source,
        discovery,
        spec,
        kinds,
        lambda rates, _n: f"{phrase_statement(more_less, kinds, gram, named[gram])}: {rates}",
        {"phrase": gram},
    )


# -- LLM drafting ----------------------------------------------------------------------------------------------


def _fenced(texts: list[str]) -> str:
    return "\n".join(fence(t, f"example {i + 1}") for i, t in enumerate(texts)) if texts else "(none)"


def _examples(segs: pl.DataFrame, n: int, like: list[str], discovery: Discovery) -> str:
    """Up to `n` segments, fenced; for a concept source (`like`: its example sentences) each segment's sentence
    closest to them instead, so the contrast is between sentences, not long turns."""
    segs = segs.head(n)
    if not like:
        return _fenced(segs["text"].to_list())
    pairs = list(segs.select("kind", "text").iter_rows())
    matches = SentenceMatcher(pairs, discovery.population.embedder, discovery.splitter).best(like)
    return _fenced(list(dict.fromkeys(m.sentence for m in matches if m is not None)))


def draft_request(source: Source, fires: set[int], discovery: Discovery, rng: np.random.Generator) -> LLMRequest:
    """Contrasting examples from discovery: firing segments of each checkpoint and quiet ones, fenced (for a
    concept or group source, their sentences closest to its example sentences)."""
    _, segs = discovery.index(source.kinds)
    firing = segs.filter(pl.col("segment_id").is_in(list(fires)))
    firing = firing[rng.permutation(firing.height)]
    quiet = segs.filter(~pl.col("segment_id").is_in(list(fires)))
    quiet = quiet[rng.permutation(quiet.height)]
    more, less = (discovery.population.after, discovery.population.before)
    if source.delta < 0:
        more, less = less, more
    rate = lambda p: "?" if p is None else f"{p:.1%}"  # noqa: E731
    like = discovery.examples(source.feature_ids) if source.origin == "concept" else []
    user = render(
        "draft_user",
        pattern=fence_line(source.title, "pattern"),
        kind=", ".join(source.kinds),
        before_rate=rate(source.prevalence_before),
        after_rate=rate(source.prevalence_after),
        ngrams=fence_line(", ".join(source.top_ngrams[:12]), "phrases") if source.top_ngrams else "(none)",
        more="AFTER" if source.delta > 0 else "BEFORE",
        less="BEFORE" if source.delta > 0 else "AFTER",
        more_examples=_examples(firing.filter(pl.col("checkpoint") == more), EXAMPLES, like, discovery),
        less_examples=_examples(firing.filter(pl.col("checkpoint") == less), EXAMPLES, like, discovery),
        quiet_examples=_examples(quiet, EXAMPLES, like, discovery),
    )
    system = render("draft_system", verifier_language=render("verifier_language"))
    return LLMRequest(system=system, user=user, schema=DRAFT_SCHEMA, max_tokens=800)


def llm_draft(
    source: Source, fires: set[int], discovery: Discovery, answer: dict[str, Any], model: str, prompt_hash: str
) -> Draft:
    """Turn the LLM's answer into a draft: its verifier when valid and it separates the discovery
    checkpoints in the stated direction, else its judge question."""
    direction = answer["direction"]
    sign = 1.0 if direction == "increase" else -1.0
    provenance = {
        **source.provenance(),
        "drafter": "llm",
        "model": model,
        "prompt_hash": prompt_hash,
        "explanation": answer["explanation"],
    }
    spec = answer.get("verifier")
    if isinstance(spec, dict):
        try:
            verifier = discovery.verifier(spec)
            kinds = tuple(k for k in spec_kinds(spec) if k in source.kinds) or source.kinds
            hits, delta, z = discovery.evaluate(verifier, kinds)
            if sign * z >= MIN_Z:
                index, _ = discovery.index(kinds)
                return Draft(
                    answer["statement"],
                    direction,
                    "verifier",
                    spec,
                    "llm",
                    sign * z,
                    delta,
                    {**provenance, "judge_question": answer["judge_question"]},
                    frozenset(index.segment_ids[hits].tolist()),
                )
            provenance["verifier_dropped"] = f"did not separate discovery checkpoints (z={z:.1f})"
        except SpecError as exc:
            provenance["verifier_dropped"] = str(exc)
    spec = {"question": answer["judge_question"], "kinds": list(source.kinds)}
    return Draft(
        answer["statement"], direction, "judge", spec, "llm", abs(source.delta) * 100, source.delta, provenance
    )


def draft_all(
    sources: list[Source],
    fires: Callable[[Source], set[int]],
    discovery: Discovery,
    session: LLMSession | None,
    rng: np.random.Generator,
) -> list[Draft]:
    """One draft per source (LLM when a session is given, falling back to extractive), then merged."""
    drafts: list[Draft] = []
    answers: list[Any] = [None] * len(sources)
    requests = []
    if session is not None:
        requests = [draft_request(s, fires(s), discovery, rng) for s in sources]
        answers = session.ask_many(requests)
    for i, source in enumerate(sources):
        answer = answers[i]
        draft = None
        if answer is not None and hasattr(answer, "data"):
            draft = llm_draft(
                source, fires(source), discovery, answer.data, answer.model, requests[i].prompt_hash(session.model)
            )  # type: ignore[union-attr]
        elif answer is not None:
            log.warning("LLM drafting failed for %s (%s); drafting extractively", source.title, answer.reason)
        draft = draft or extractive_draft(source, fires(source), discovery)
        if draft is not None:
            drafts.append(draft)
    return merge_near_duplicates(drafts)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _similar(a: Draft, b: Draft) -> bool:
    if a.direction != b.direction:
        return False
    if a.labeler == b.labeler == "verifier" and a.spec == b.spec:
        return True
    if a.hits and b.hits:
        return same_segments(len(a.hits & b.hits), len(a.hits), len(b.hits))
    wa, wb = _words(a.statement), _words(b.statement)
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.7


def _names_a_behaviour(draft: Draft) -> bool:
    return "similar_to" in json.dumps(draft.spec)


def merge_near_duplicates(drafts: list[Draft]) -> list[Draft]:
    """One finding per behaviour: of each group of drafts that label (nearly) the same discovery segments, or
    say (nearly) the same thing, keep the one that names a behaviour (a concept or group's exemplars before a
    phrase, as the same behaviour worded many ways is what a phrase misses), then the strongest; the kept
    draft's provenance lists what it absorbed."""
    kept: list[Draft] = []
    for draft in sorted(drafts, key=lambda d: (not _names_a_behaviour(d), -d.score)):
        twin = next((k for k in kept if _similar(k, draft)), None)
        if twin is None:
            kept.append(replace(draft, provenance={**draft.provenance, "merged": []}))
        else:
            twin.provenance["merged"].append(
                {"statement": draft.statement, "feature_ids": draft.provenance.get("feature_ids"), "spec": draft.spec}
            )
    return kept


def explanation_requests(features: pl.DataFrame, examples: dict[int, list[str]]) -> list[tuple[int, LLMRequest]]:
    """Requests for one-sentence explanations of features (feature_id, label, top_ngrams)."""
    schema = {"type": "object", "required": ["explanation"], "properties": {"explanation": {"type": "string"}}}
    system = render("explain_system")
    out = []
    for r in features.iter_rows(named=True):
        grams = ", ".join(ngram_list(r["top_ngrams"])[:12])
        text = "\n".join(fence(t, f"example {i + 1}") for i, t in enumerate(examples.get(r["feature_id"], [])))
        user = render(
            "explain_user",
            label=fence_line(r["label"], "feature"),
            ngrams=fence_line(grams, "phrases") if grams else "(none)",
            examples=text or "(none)",
        )
        out.append((r["feature_id"], LLMRequest(system=system, user=user, schema=schema, max_tokens=120)))
    return out
