"""Drafting hypotheses from sources: extractive (offline) from n-grams, or by an LLM from contrasting examples.

Extractive drafting mines word n-grams of the discovery segments where the source fires in the checkpoint
where it is more common (plus the features' own distinctive n-grams), greedily keeps the few whose union best
separates the checkpoints, and writes a verifier regex over them. Every draft records how its labeler splits
the discovery segments, which is also how near-duplicates are found and merged.
"""

from __future__ import annotations

import copy
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
    SENTENCE_KINDS,
    SentenceMatcher,
    Splitter,
    default_splitter,
    fit_exemplars,
    segment_units,
)
from engine.hypotheses.ngrams import NgramIndex, mostly_inside, nearly_equal, two_proportion_z
from engine.hypotheses.population import Population
from engine.hypotheses.sources import Source
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
from engine.store.queries import ngram_list
from engine.text import ngram_regex, ngrams

log = logging.getLogger(__name__)

MIN_GRAM_COUNT = 3
CANDIDATES = 25
MIN_PRECISION = 0.5  # share of a phrase's occurrences (in the 'more' checkpoint) where the source fires
MIN_Z = 2.0  # a draft whose labeler does not separate the discovery checkpoints this well is dropped
EXAMPLES = 4
# A draft co-occurs with another when the other's positives are this many times more common among its own than
# overall: wordings of one behaviour overlap far above chance (x10 and more on the planted benchmark), a
# common property (a length bin holding 80% of turns) can reach at most 1.25.
MIN_LIFT = 2.0
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
    kinds: tuple[str, ...] = ()  # the segment kinds `hits` is among (none for a judge draft)


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

    def with_examples(self, examples: Callable[[tuple[int, ...]], list[str]]) -> Discovery:
        """The same split (its indexes shared) with other example sentences."""
        other = copy.copy(self)
        other.examples = examples
        return other

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

    def z_among(self, draft: Draft, segments: frozenset[int], inside: bool) -> float:
        """The draft's discovery z in its direction among the segments of its kinds in `segments` (`inside`)
        or not in it."""
        index, _ = self.index(draft.kinds)
        among = np.isin(index.segment_ids, np.fromiter(segments, dtype=np.int64, count=len(segments))) == inside
        hits = np.isin(index.segment_ids, np.fromiter(draft.hits, dtype=np.int64, count=len(draft.hits)))[among]
        after = index.is_after[among]
        z = two_proportion_z(int(hits[after].sum()), int(after.sum()), int(hits[~after].sum()), int((~after).sum()))
        return z if draft.direction == "increase" else -z

    def explained(self, draft: Draft, segments: frozenset[int]) -> bool:
        """Whether other drafts' discovery positives `segments` explain the draft's change: it separates the
        checkpoints (z >= MIN_Z) neither outside them (its change is where they label) nor among them (it is
        not a change of its own inside theirs, as fewer apologies inside the many short turns would be). Only
        when `segments` leave at least half of each checkpoint's segments of the draft's kinds: setting most of
        a checkpoint aside removes the evidence, it does not explain the change."""
        index, _ = self.index(draft.kinds)
        aside = np.isin(index.segment_ids, np.fromiter(segments, dtype=np.int64, count=len(segments)))
        for side in (index.is_after, ~index.is_after):
            if 2 * (aside & side).sum() > side.sum():
                return False
        return max(self.z_among(draft, segments, False), self.z_among(draft, segments, True)) < MIN_Z

    def co_occurs(self, draft: Draft, other: Draft) -> bool:
        """Whether `other`'s positives are at least MIN_LIFT times more common among the draft's positives
        than among all discovery segments of its kinds: the two label one behaviour's segments, not merely
        common ones (most reasoning turns are 10-49 words, so any reasoning behaviour overlaps that bin)."""
        if not (draft.hits and other.hits and other.kinds):
            return False
        index, _ = self.index(other.kinds)
        share_inside = len(draft.hits & other.hits) / len(draft.hits)
        return share_inside >= MIN_LIFT * len(other.hits) / max(index.segment_ids.size, 1)

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
    return _phrase_or_its_sentences(source, fires, discovery)


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
        kinds,
    )


def _structural_draft(source: Source, discovery: Discovery) -> Draft | None:
    """One of the source's structural features as the labeler, the one that best separates the discovery
    checkpoints; the statement is its rates. A cluster groups features that fire together, but each is a
    distinct fact: their union (probe values, or an error result, or a retry) labels every call any of them
    fires on, and on the planted benchmark it more than tripled the probe finding's held-out positives. The
    others are kept in `provenance.co_firing`."""
    names = source.names
    drafts = [
        _finish(
            source,
            discovery,
            {"all": [_kind_node(source.kinds), {"structural": name}]},
            source.kinds,
            lambda rates, _n, name=name: structural_statement(structural.label(name), rates),
            {"structural_feature": name, "co_firing": [structural.label(n) for n in names if n != name]},
        )
        for name in names
    ]
    return max((d for d in drafts if d is not None), key=lambda d: d.score, default=None)


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


def _phrase_or_its_sentences(source: Source, fires: set[int], discovery: Discovery) -> Draft | None:
    """A phrase draft, or, when the sentences that carry the phrase label the behaviour better, those
    sentences as exemplars. A behaviour written many ways surfaces as several narrow phrases ("whoever scores
    this", "the auto grader"), each a fragment that recurs in a few turns; the sentences around a phrase are
    its behaviour in one wording, and their exemplar labeler also matches the paraphrases (as for a concept
    source). Kept only when it separates the discovery checkpoints better (higher z) than the phrase, so a
    phrase that is the behaviour (a fixed formula) stays a phrase. Text and reasoning only (a tool call is one
    unit)."""
    phrase = _phrase_draft(source, fires, discovery)
    if phrase is None or not set(source.kinds) <= set(SENTENCE_KINDS):
        return phrase
    gram = phrase.provenance["phrase"]
    index, segs = discovery.index(source.kinds)
    carrying = index.matches({gram})
    more = carrying & (index.is_after if source.delta > 0 else ~index.is_after)
    sentences = [
        unit
        for kind, text in segs.filter(pl.Series(more)).select("kind", "text").iter_rows()
        for unit in segment_units(kind, text, discovery.splitter)
        if gram in ngrams(unit)
    ]
    worded = _concept_draft(
        source, set(index.segment_ids[carrying].tolist()), discovery.with_examples(lambda _ids: sentences)
    )
    if worded is None or worded.score <= phrase.score:
        return phrase
    return replace(worded, provenance={**worded.provenance, "from_phrase": gram})


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
                    kinds,
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
    return merge_near_duplicates(drafts, discovery)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _same_statement(a: Draft, b: Draft) -> bool:
    """Drafts without discovery labels (judge drafts) are the same when their statements share most words."""
    wa, wb = _words(a.statement), _words(b.statement)
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.7


def _names_a_behaviour(draft: Draft) -> bool:
    return "similar_to" in json.dumps(draft.spec)


def _absorbed(draft: Draft, relation: str) -> dict[str, Any]:
    return {
        "statement": draft.statement,
        "feature_ids": draft.provenance.get("feature_ids"),
        "spec": draft.spec,
        "relation": relation,
    }


def merge_near_duplicates(drafts: list[Draft], discovery: Discovery) -> list[Draft]:
    """One finding per behaviour, decided on discovery labels only. Drafts are taken broadest first (most
    discovery positives), each against the drafts already kept in the same direction:

    - the same verifier, or (judge drafts) nearly the same statement: merged into the kept one;
    - at least half of its positives inside kept drafts it co-occurs with (`Discovery.co_occurs`), and no change
      of its own among their segments: a narrower wording of their behaviour, merged into the one it overlaps
      most (an exemplar draft takes the place of a phrase or feature draft labelling nearly the same segments,
      as it names a behaviour worded many ways);
    - otherwise kept, however much it overlaps: a narrow draft with a change of its own inside a broad one
      (fewer apologies among the many short turns) is a distinct behaviour.

    Then `_without_side_effects` drops the kept drafts whose change the others explain."""
    kept: list[Draft] = []
    for draft in sorted(drafts, key=lambda d: (-len(d.hits), not _names_a_behaviour(d), -d.score)):
        peers = [k for k in kept if k.direction == draft.direction]
        twin = next(
            (k for k in peers if (k.labeler == draft.labeler and k.spec == draft.spec)
             or (not (k.hits and draft.hits) and _same_statement(k, draft))),
            None,
        )  # fmt: skip
        if twin is not None:
            twin.provenance["merged"].append(_absorbed(draft, "same labeler or statement"))
            continue
        near = [k for k in peers if discovery.co_occurs(draft, k)]
        near.sort(key=lambda k: -len(k.hits & draft.hits))
        within = frozenset().union(*(k.hits for k in near))
        if near and 2 * len(draft.hits & within) >= len(draft.hits) and discovery.z_among(draft, within, True) < MIN_Z:
            main = near[0]
            if (
                _names_a_behaviour(draft)
                and not _names_a_behaviour(main)
                and nearly_equal(len(main.hits & draft.hits), len(draft.hits), len(main.hits))
            ):
                kept[kept.index(main)] = _fresh(draft, [_absorbed(main, "same segments"), *main.provenance["merged"]])
            else:
                main.provenance["merged"].append(_absorbed(draft, "narrower wording"))
            continue
        kept.append(_fresh(draft, []))
    return _without_side_effects(kept, discovery)


def _fresh(draft: Draft, merged: list[dict[str, Any]]) -> Draft:
    return replace(draft, provenance={**draft.provenance, "merged": merged, "side_effects": []})


def _without_side_effects(kept: list[Draft], discovery: Discovery) -> list[Draft]:
    """Drop the drafts whose change the other kept drafts explain, in either direction (fewer reasoning turns
    of 10-49 words because others gained a sentence and grew), each recorded as a side effect of the draft
    whose segments alone explain most of it. The least preferred are tried first, so of two drafts that
    explain each other the preferred one stays."""
    kept = list(kept)
    for draft in reversed(list(kept)):
        # A draft nested inside this one is a part of it, not an explanation (fewer apologies in short turns).
        others = [
            k for k in kept if k is not draft and k.hits and not mostly_inside(len(k.hits & draft.hits), len(k.hits))
        ]
        if not draft.hits or not others:
            continue
        if not discovery.explained(draft, frozenset().union(*(k.hits for k in others))):
            continue
        main = min(others, key=lambda k: discovery.z_among(draft, k.hits, False))
        main.provenance["side_effects"].append(_absorbed(draft, "change explained by this finding"))
        kept.remove(draft)
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
