"""Drafting hypotheses from sources: offline (extractive) or by an LLM from contrasting examples.

Offline, each source's behaviour is named: structural features by their rates, concept and group features
(and a phrase's sentences) by exemplar sentences, phrases only when the phrase is the behaviour. Every draft
records how its labeler splits the discovery segments, by which near-duplicates are merged (`merge`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from engine.features import structural
from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.exemplars import (
    SENTENCE_KINDS,
    Exemplars,
    SentenceMatcher,
    fit_exemplars,
    unit_ngrams,
)
from engine.hypotheses.merge import drop_repeats, merge_near_duplicates
from engine.hypotheses.seeds import carrier_seeds
from engine.hypotheses.sources import MAX_DRAFTED, MAX_SOURCES, DraftSource, SourceQueue
from engine.hypotheses.statements import (
    concept_statement,
    content_words,
    distinctive_words,
    phrase_statement,
    structural_statement,
)
from engine.hypotheses.verifier import SpecError, spec_kinds
from engine.llm.client import LLMRequest
from engine.llm.fence import fence, fence_line
from engine.llm.session import LLMSession
from engine.llm.templates import render
from engine.store.queries import ngram_list
from engine.text import ngram_regex

__all__ = [
    "MIN_Z",
    "DiscoverySplit",
    "Draft",
    "draft_distinct",
    "draft_request",
    "explanation_requests",
    "extractive_draft",
    "extractive_drafts",
]

log = logging.getLogger(__name__)

MIN_GRAM_COUNT = 3
CANDIDATES = 25
MIN_PRECISION = 0.5  # share of a phrase's occurrences (in the 'more' checkpoint) where the source fires
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


def _quote(grams: list[str]) -> str:
    return ", ".join(f'"{g}"' for g in grams)


def _kind_node(kinds: tuple[str, ...]) -> dict[str, Any]:
    return {"kind": list(kinds) if len(kinds) > 1 else kinds[0]}


def extractive_drafts(source: DraftSource, fires: set[int], discovery: DiscoverySplit) -> list[Draft]:
    """The offline drafts of a source: one for each distinct behaviour a concept or group feature fires on that
    separates the discovery checkpoints in its direction (`_concept_drafts`), else `extractive_draft`'s one."""
    if source.origin == "concept":
        return _concept_drafts(source, fires, discovery)
    draft = extractive_draft(source, fires, discovery)
    return [] if draft is None else [draft]


def extractive_draft(source: DraftSource, fires: set[int], discovery: DiscoverySplit) -> Draft | None:
    """An offline, verifier-labelled hypothesis that names the source's behaviour, or None when its labeler
    does not separate the discovery checkpoints: structural features as rates (a cluster whose strongest
    member is a fact as that fact, or by its latents' phrase where no fact separates the checkpoints), concept
    and group features by exemplar sentences (`similar_to`), tool features by tool name, others by their own
    phrase."""
    tools = [n.removeprefix("tool:") for n in source.names if n.startswith("tool:")]
    if source.origin == "concept":
        return _most_separating(_concept_drafts(source, fires, discovery))
    if source.origin == "structural" and len(tools) < len(source.names):
        drafted = _structural_draft(source, discovery)
        if drafted is not None or set(source.origins) == {"structural"}:
            return drafted
    if tools and len(tools) == len(source.names):
        spec: dict[str, Any] = {"any": [{"tool_name": t} for t in tools]} if len(tools) > 1 else {"tool_name": tools[0]}
        return _finish(source, discovery, spec, ("tool_call",), lambda rates, _n: f"Calls {_quote(tools)}: {rates}")
    return _phrase_or_its_sentences(source, fires, discovery)


def _finish(
    source: DraftSource,
    discovery: DiscoverySplit,
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


def _structural_draft(source: DraftSource, discovery: DiscoverySplit) -> Draft | None:
    """One of the source's structural features as the labeler, the one that best separates the discovery
    checkpoints with rollouts as the units (`DiscoverySplit.rollout_z`: ten lookups in a few rollouts are not
    more change than a failed one in many); the statement is its rates. A cluster groups features that fire
    together, but each is a distinct fact: their union (probe values, or an error result, or a retry) labels
    every call any of them fires on, and on the planted benchmark it more than tripled the probe finding's
    held-out positives. A narrower member whose messages carry the best one's change
    (`DiscoverySplit.carried_by`) is drafted instead: a new tool called beside other calls, not "one of several
    tool calls in one message", which its calls make true of every call they join. A member that follows
    another in sequence (`DiscoverySplit.follows`: calls made again after a failed one, when guessed identifiers
    fail) gives way to it, as a side effect gives way to its cause (`merge`). The others are kept in
    `provenance.co_firing`. A cluster's other members (SAE latents that fire with the fact) are not facts: they
    name no structural labeler."""
    names = [n for n, origin in zip(source.names, source.origins, strict=True) if origin == "structural"]
    sign = 1.0 if source.delta > 0 else -1.0

    def draft(name: str) -> Draft | None:
        kinds = _kinds_labelled(source.kinds, {"structural": name}, sign, discovery)
        return _finish(
            source,
            discovery,
            {"all": [_kind_node(kinds), {"structural": name}]},
            kinds,
            lambda rates, _n: structural_statement(structural.label(name), rates),
            {"structural_feature": name, "co_firing": [structural.label(n) for n in names if n != name]},
        )

    drafted = [d for name in names if (d := draft(name)) is not None]
    if not drafted:
        return None
    best = max(drafted, key=discovery.rollout_z)
    best = next((d for d in drafted if d is not best and discovery.follows(best, d)), best)
    tools = [d for name in _tools_in_its_messages(source, discovery, best) if (d := draft(name)) is not None]
    carriers = [d for d in drafted + tools if d is not best and discovery.carried_by(best, d)]
    return _fact_or_its_sentences(source, discovery, max(carriers, key=discovery.rollout_z, default=best))


def _tools_in_its_messages(source: DraftSource, discovery: DiscoverySplit, fact: Draft) -> list[str]:
    """The tool features (`tool:NAME`, not the source's) of the tools called at least MIN_GRAM_COUNT times in the
    messages a fact about messages (`message:*`) labels on the checkpoint with more: candidates to carry its
    change, as a cluster's members are. A small study's new tool, called beside others, was found as "One of several
    tool calls in one message: 0% -> 30% of tool calls" (paraphrased seed 41): on a fold of 4 tasks the tool's
    own row could not reach significance, so no member of the fact's cluster named it."""
    if not str(fact.provenance["structural_feature"]).startswith("message:") or "tool_call" not in fact.kinds:
        return []
    index, segs = discovery.index(("tool_call",))
    more = index.is_after if source.delta > 0 else ~index.is_after
    labelled = np.isin(index.segment_ids, np.fromiter(fact.hits, dtype=np.int64, count=len(fact.hits))) & more
    counts = segs.filter(pl.Series(labelled))["tool_name"].drop_nulls().value_counts()
    tools = {f"tool:{t}" for t, n in counts.iter_rows() if n >= MIN_GRAM_COUNT}
    return sorted(tools - set(source.names))


def _fact_or_its_sentences(source: DraftSource, discovery: DiscoverySplit, fact: Draft) -> Draft:
    """A fact's draft, or, when the sentences that say it (`structural.said_in`) label the behaviour better
    (higher z on discovery), those sentences as exemplars, with `provenance.from_fact` naming the fact. A
    behaviour whose every sentence says a fact surfaces as the fact, though others say it alike: re-checking a
    sum, each time naming its amounts, was found as "Mentions an amount of money: 15% -> 9% of reasoning
    turns" (shift suite, seed 5309), which a reader takes for a change in how often amounts are mentioned. A
    fact that is itself the change (apologising more, citing policy) separates at least as well as any of its
    sentences and stays the fact."""
    name = fact.provenance["structural_feature"]
    says = structural.said_in(name)
    if says is None or not set(fact.kinds) <= set(SENTENCE_KINDS):
        return fact
    _, segs = discovery.index(fact.kinds)
    rows = np.flatnonzero(segs["structural"].list.contains(name).to_numpy())
    worded = _said_in_sentences(source, discovery, fact.kinds, rows, lambda unit: says.search(unit) is not None)
    if worded is None or worded.score <= fact.score:
        return fact
    return replace(worded, provenance={**worded.provenance, "from_fact": name})


def _most_separating(drafts: list[Draft]) -> Draft | None:
    """The draft that best separates the discovery checkpoints (highest z), None of none."""
    return max(drafts, key=lambda d: d.score, default=None)


def _concept_drafts(source: DraftSource, fires: set[int], discovery: DiscoverySplit) -> list[Draft]:
    """Exemplar sentences and threshold fitted to where the source fires on discovery (`fit_exemplars`,
    quiet segments sampled evenly); the statement quotes the first exemplar (the carriers' medoid) and the
    words that set apart the source's example sentences its labeler counts (a concept's examples can hold
    another behaviour's sentences: small planted seed 17's grader-awareness finding named "disappointment,
    grader, auto, explain", from the planted empathy of the other checkpoint). Where the source fires on
    distinct behaviours (a phrase two of them share, a cluster of two concepts), one draft is made for each,
    and each that separates the discovery checkpoints in the source's direction is kept: a finding names one
    behaviour (a labeler of two would join both their drafts into one finding, `merge`), and the behaviour
    that separates less may still be a change of its own. Exemplars are fitted knowing which
    sampled segments are of the checkpoint the source has more of, so that a stock sentence among the carriers
    is dropped."""
    index, segs = discovery.index(source.kinds)
    firing = segs["segment_id"].is_in(list(fires)).to_numpy()
    quiet = np.flatnonzero(~firing)
    step = max(1, quiet.size // MAX_QUIET_SEGMENTS)
    rows = np.sort(np.r_[np.flatnonzero(firing), quiet[::step]])
    sample = segs[rows]
    pairs = list(sample.select("kind", "text").iter_rows())
    in_sample = sample["segment_id"].is_in(list(fires)).to_numpy()
    said = discovery.units(source.kinds)
    units = [said[int(r)] for r in rows]
    embedder = discovery.population.embedder
    positives = carrier_seeds(discovery.examples(source.feature_ids), units, in_sample, embedder.embed)
    more = (index.is_after if source.delta > 0 else ~index.is_after)[rows]
    parts = fit_exemplars(pairs, in_sample, positives, embedder, discovery.splitter, negative_weight=step, more=more)
    if not parts:
        return []
    negatives = [u for us, fired in zip(units, in_sample, strict=True) if not fired for u in us]
    # each example sentence speaks for the part whose exemplars it is most like, if that part's labeler counts it
    vectors = embedder.embed(positives)
    sims = np.array([(vectors @ embedder.embed(p.texts).T).max(axis=1) for p in parts])
    like = sims.argmax(axis=0)
    counted = sims.max(axis=0) >= np.array([p.min_similarity for p in parts])[like]
    drafts = [
        _exemplar_draft(
            source,
            discovery,
            chosen,
            distinctive_words([t for t, j, c in zip(positives, like, counted, strict=True) if j == i and c], negatives),
            {"source_behaviours": len(parts)},
        )
        for i, chosen in enumerate(parts)
    ]
    return [d for d in drafts if d is not None]


def _exemplar_draft(
    source: DraftSource, discovery: DiscoverySplit, chosen: Exemplars, words: list[str], extra: dict[str, Any]
) -> Draft | None:
    """The draft whose labeler is `chosen` and whose statement quotes its first exemplar and `words`, on the kinds
    of segment its exemplars were said in."""
    more = source.delta > 0
    return _finish(
        source,
        discovery,
        {"all": [_kind_node(chosen.kinds), chosen.node()]},
        chosen.kinds,
        lambda rates, n: f"{concept_statement(more, chosen.kinds, chosen.texts[0], n, words)}: {rates}",
        {"exemplar_f1": chosen.f1, "words": words, **extra},
    )


def _phrase_or_its_sentences(source: DraftSource, fires: set[int], discovery: DiscoverySplit) -> Draft | None:
    """A phrase draft, or, when the sentences that carry the phrase label the behaviour better (higher z on
    discovery), those sentences as exemplars: a behaviour written many ways surfaces as narrow phrases ("whoever
    scores this"), and a phrase's sentences are its behaviour in one wording, whose exemplar labeler also
    matches paraphrases. A phrase that is the behaviour (a fixed formula) stays a phrase. A lexical source's
    sentences are its own n-gram's when that has a content word, though the phrase stated is a longer one
    around it ("since" -> "baggage allowance since", one wording of it) or none: the n-gram is what changed.
    Text and reasoning only (a tool call is one unit)."""
    phrase = _phrase_draft(source, fires, discovery)
    own = source.top_ngrams[0].lower() if source.origin == "ngram" and source.top_ngrams else ""
    gram = own if content_words(own) else phrase.provenance["phrase"] if phrase is not None else ""
    if not gram or not set(source.kinds) <= set(SENTENCE_KINDS):
        return phrase
    index, _ = discovery.index(source.kinds)
    # Only the segments the n-gram index finds are read: a sentence's n-grams are its segment's.
    rows = np.flatnonzero(index.matches({gram}))
    worded = _said_in_sentences(source, discovery, source.kinds, rows, lambda unit: gram in unit_ngrams(unit))
    if worded is None or (phrase is not None and worded.score <= phrase.score):
        return phrase
    return replace(worded, provenance={**worded.provenance, "from_phrase": gram})


def _said_in_sentences(
    source: DraftSource,
    discovery: DiscoverySplit,
    kinds: tuple[str, ...],
    rows: np.ndarray,
    says: Callable[[str], bool],
) -> Draft | None:
    """The source's behaviour as exemplar sentences fitted to the sentences that say it (`says`) in the discovery
    segments `rows` of `kinds` (`_concept_drafts`), the draft that best separates the checkpoints. A segment
    carries it in a sentence of its own (a phrase not only across two), and that sentence is its carrier: every
    such sentence is a seed, so no other sentence of its segment (a stock "Please let me know how you'd like to
    proceed.") can become an exemplar of the behaviour."""
    index, _ = discovery.index(kinds)
    said = discovery.units(kinds)
    carried = {int(row): [u for u in said[int(row)] if says(u)] for row in rows}
    sentences = [u for units in carried.values() for u in units]
    carrying = {int(index.segment_ids[row]) for row, units in carried.items() if units}
    examples = discovery.with_examples(lambda _ids: sentences)
    return _most_separating(_concept_drafts(replace(source, kinds=kinds), carrying, examples))


def _phrase_draft(source: DraftSource, fires: set[int], discovery: DiscoverySplit) -> Draft | None:
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
    named: dict[str, bool] = {}
    for gram in dict.fromkeys(pool):
        is_behaviour, opening = discovery.phrase_is_behaviour(kinds, gram)
        if is_behaviour:
            named[gram] = opening
    singles = {g: sign * index.z(index.matches({g})) for g in named}
    candidates = sorted((g for g in singles if singles[g] > 0), key=lambda g: -singles[g])[:CANDIDATES]
    # One phrase per extractive hypothesis: a union of phrases picked for separating the checkpoints can
    # join two behaviours that one broad feature fires on (seen on the planted benchmark).
    best = index.best(candidates, sign)
    if best is None:
        return None
    gram = best
    node = {"regex": ngram_regex([gram]), "ignore_case": True}
    kinds = _kinds_labelled(kinds, node, sign, discovery)
    spec = {"all": [_kind_node(kinds), node]}
    more_less = sign > 0
    return _finish(
        source,
        discovery,
        spec,
        kinds,
        lambda rates, _n: f"{phrase_statement(more_less, kinds, gram, named[gram])}: {rates}",
        {"phrase": gram},
    )


def _kinds_labelled(
    kinds: tuple[str, ...], node: dict[str, Any], sign: float, discovery: DiscoverySplit
) -> tuple[str, ...]:
    """Of `kinds`, those in whose discovery segments of the checkpoint the change claims more of the labeler
    `node` labels at least MIN_GRAM_COUNT (the kind it labels most when none has so many). A rollout-level
    source reads every kind, and what its draft counts among every segment moves with how many turns of each
    kind the rollouts have: a tool's name said in tool calls read "More segments containing
    'check_policy_section': 0% -> 5% of segments" (small paraphrased study, seed 43), and a fact of tool
    calls "Calls tool check_policy_section: 0% -> 6% of segments" (paraphrased seed 1777), where the same
    drafts from a tool-call row read "... of tool calls: 0% -> 20%"."""
    if len(kinds) == 1:
        return kinds
    index, segs = discovery.index(kinds)
    hits, _, _ = discovery.evaluate(discovery.verifier(node), kinds)
    more = hits & (index.is_after if sign > 0 else ~index.is_after)
    said = {k: int((more & (segs["kind"] == k).to_numpy()).sum()) for k in kinds}
    return tuple(k for k in kinds if said[k] >= MIN_GRAM_COUNT) or (max(kinds, key=lambda k: said[k]),)


# -- LLM drafting ----------------------------------------------------------------------------------------------


def _fenced(texts: list[str]) -> str:
    return "\n".join(fence(t, f"example {i + 1}") for i, t in enumerate(texts)) if texts else "(none)"


def _examples(segs: pl.DataFrame, n: int, like: list[str], discovery: DiscoverySplit) -> str:
    """Up to `n` segments, fenced; for a concept source (`like`: its example sentences) each segment's sentence
    closest to them instead, so the contrast is between sentences, not long turns."""
    segs = segs.head(n)
    if not like:
        return _fenced(segs["text"].to_list())
    pairs = list(segs.select("kind", "text").iter_rows())
    matches = SentenceMatcher(pairs, discovery.population.embedder, discovery.splitter).best(like)
    return _fenced(list(dict.fromkeys(m.sentence for m in matches if m is not None)))


def draft_request(
    source: DraftSource, fires: set[int], discovery: DiscoverySplit, rng: np.random.Generator
) -> LLMRequest:
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
    source: DraftSource,
    fires: set[int],
    discovery: DiscoverySplit,
    answer: dict[str, Any],
    model: str,
    prompt_hash: str,
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


def draft_distinct(
    queue: SourceQueue,
    extra: list[DraftSource],
    fires: Callable[[DraftSource], set[int]],
    discovery: DiscoverySplit,
    session: LLMSession | None,
    rng: np.random.Generator,
) -> tuple[list[Draft], list[DraftSource]]:
    """(drafts, the sources drafted): the queue's first `MAX_SOURCES` sources, those beside them and `extra`,
    drafted and merged; then, while fewer than `MAX_SOURCES` distinct drafts remain, the next sources, as many
    as the places left (up to `MAX_DRAFTED` of the ranked ones), merged among themselves, less those that
    restate a draft kept (`drop_repeats`, recorded in its `merged`). What bounds the held-out family is its
    distinct claims, not the sources that merge into one; and a later, weaker source never takes in or
    rewords a draft of the stronger ones (merged with them, a loose concept of neutral sentences took in
    grader awareness's wordings and quoted "In passing, as of now nothing has been changed.", shift seed 7730)."""
    taken = queue.first(MAX_SOURCES) + extra
    drafts = merge_near_duplicates(draft_each(taken, fires, discovery, session, rng), discovery)
    left = queue.ranked[MAX_SOURCES:MAX_DRAFTED]
    while left and len(drafts) < MAX_SOURCES:
        more, left = left[: MAX_SOURCES - len(drafts)], left[MAX_SOURCES - len(drafts) :]
        taken += more
        new = merge_near_duplicates(draft_each(more, fires, discovery, session, rng), discovery)
        drafts += drop_repeats(new, drafts, discovery, into="merged", relation="a later source's wording")
    return drafts, taken


def draft_each(
    sources: list[DraftSource],
    fires: Callable[[DraftSource], set[int]],
    discovery: DiscoverySplit,
    session: LLMSession | None,
    rng: np.random.Generator,
) -> list[Draft]:
    """One draft per source (LLM when a session is given, falling back to extractive: one for each distinct
    behaviour a concept source fires on), not merged."""
    drafts: list[Draft] = []
    answers: list[Any] = [None] * len(sources)
    requests = []
    model = ""
    if session is not None:
        requests = [draft_request(s, fires(s), discovery, rng) for s in sources]
        answers = session.ask_many(requests)
        model = session.model
    for i, source in enumerate(sources):
        answer = answers[i]
        draft = None
        if answer is not None and hasattr(answer, "data"):
            draft = llm_draft(
                source, fires(source), discovery, answer.data, answer.model, requests[i].prompt_hash(model)
            )
        elif answer is not None:
            log.warning("LLM drafting failed for %s (%s); drafting extractively", source.title, answer.reason)
        drafts.extend([draft] if draft is not None else extractive_drafts(source, fires(source), discovery))
    return drafts


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
