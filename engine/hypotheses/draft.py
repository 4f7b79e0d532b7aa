"""Drafting hypotheses from sources: extractive (offline) from n-grams, or by an LLM from contrasting examples.

Extractive drafting mines word n-grams of the discovery segments where the source fires in the checkpoint
where it is more common (plus the features' own distinctive n-grams), greedily keeps the few whose union best
separates the checkpoints, and writes a verifier regex over them. Every draft records how its labeler splits
the discovery segments, which is also how near-duplicates are found and merged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from engine.hypotheses.ngrams import NgramIndex, ngram_regex, same_segments
from engine.hypotheses.population import Population
from engine.hypotheses.sources import Source, ngram_list
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
    """The discovery split, with n-gram indexes per kind set built on first use."""

    def __init__(self, population: Population) -> None:
        self.population = population
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

    def evaluate(self, verifier: Verifier, kinds: tuple[str, ...]) -> tuple[np.ndarray, float, float]:
        """(hits, delta, z) of a verifier over discovery segments of `kinds`."""
        index, segs = self.index(kinds)
        hits = np.array([v.label for v in verifier.label_all(Population.views(segs))], dtype=bool)
        a, b = index.is_after, ~index.is_after
        delta = (hits[a].mean() if a.any() else 0.0) - (hits[b].mean() if b.any() else 0.0)
        return hits, float(delta), index.z(hits)


def _quote(grams: list[str]) -> str:
    return ", ".join(f'"{g}"' for g in grams)


def extractive_draft(source: Source, fires: set[int], discovery: Discovery) -> Draft | None:
    """A verifier-labelled hypothesis from n-grams (or a tool name), or None when nothing separates."""
    kinds = source.kinds
    sign = 1.0 if source.delta > 0 else -1.0
    tools = [n.removeprefix("tool:") for n in source.names if n.startswith("tool:")]
    if tools and len(tools) == len(source.names):
        spec: dict[str, Any] = {"any": [{"tool_name": t} for t in tools]} if len(tools) > 1 else {"tool_name": tools[0]}
        kinds = ("tool_call",)
        what = f"calls to {_quote(tools)}"
    else:
        index, segs = discovery.index(kinds)
        more = index.is_after if sign > 0 else ~index.is_after
        firing = np.isin(index.segment_ids, np.fromiter(fires, dtype=np.int64, count=len(fires))) & more
        counts = index.counts(np.flatnonzero(firing))
        in_more = index.counts(np.flatnonzero(more))
        # A phrase belongs to the source when it mostly occurs where the source fires: a different behaviour
        # that merely co-occurs would otherwise join the union.
        pool = [g for g, n in counts.items() if n >= MIN_GRAM_COUNT and n >= MIN_PRECISION * in_more[g]]
        pool += [g.lower() for g in source.top_ngrams if g.lower() not in counts]
        singles = {g: sign * index.z(index.matches({g})) for g in pool}
        candidates = sorted((g for g in singles if singles[g] > 0), key=lambda g: -singles[g])[:CANDIDATES]
        # One phrase per extractive hypothesis: a union of phrases picked for separating the checkpoints can
        # join two behaviours that one broad feature fires on (seen on the planted benchmark). Several phrasings
        # of one behaviour become separate hypotheses instead; the LLM judge path covers paraphrase.
        gram = index.best(candidates, sign)
        if gram is None:
            return None
        grams = [gram]
        spec = {
            "all": [
                {"kind": list(kinds) if len(kinds) > 1 else kinds[0]},
                {"regex": ngram_regex(grams), "ignore_case": True},
            ]
        }
        what = f"{' / '.join(kinds).replace('_', ' ')} segments containing {_quote(grams)}"
    verifier = Verifier(spec)
    hits, delta, z = discovery.evaluate(verifier, kinds)
    if sign * z < MIN_Z:
        return None
    index, _ = discovery.index(kinds)
    more_less = "More" if sign > 0 else "Fewer"
    statement = f"{more_less} {what} after the training step (from {source.title})"
    return Draft(
        statement,
        source.direction,
        "verifier",
        spec,
        "extractive",
        sign * z,
        delta,
        {**source.provenance(), "drafter": "extractive"},
        frozenset(index.segment_ids[hits].tolist()),
    )


# -- LLM drafting ----------------------------------------------------------------------------------------------


def _examples(segs: pl.DataFrame, n: int) -> str:
    if segs.height == 0:
        return "(none)"
    return "\n".join(fence(t, f"example {i + 1}") for i, t in enumerate(segs.head(n)["text"].to_list()))


def draft_request(source: Source, fires: set[int], discovery: Discovery, rng: np.random.Generator) -> LLMRequest:
    """Contrasting examples from discovery: firing segments of each checkpoint and quiet ones, fenced."""
    _, segs = discovery.index(source.kinds)
    firing = segs.filter(pl.col("segment_id").is_in(list(fires)))
    firing = firing[rng.permutation(firing.height)]
    quiet = segs.filter(~pl.col("segment_id").is_in(list(fires)))
    quiet = quiet[rng.permutation(quiet.height)]
    more, less = (discovery.population.after, discovery.population.before)
    if source.delta < 0:
        more, less = less, more
    rate = lambda p: "?" if p is None else f"{p:.1%}"  # noqa: E731
    user = render(
        "draft_user",
        pattern=fence_line(source.title, "pattern"),
        kind=", ".join(source.kinds),
        before_rate=rate(source.prevalence_before),
        after_rate=rate(source.prevalence_after),
        ngrams=fence_line(", ".join(source.top_ngrams[:12]), "phrases") if source.top_ngrams else "(none)",
        more="AFTER" if source.delta > 0 else "BEFORE",
        less="BEFORE" if source.delta > 0 else "AFTER",
        more_examples=_examples(firing.filter(pl.col("checkpoint") == more), EXAMPLES),
        less_examples=_examples(firing.filter(pl.col("checkpoint") == less), EXAMPLES),
        quiet_examples=_examples(quiet, EXAMPLES),
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
            verifier = Verifier(spec)
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


def merge_near_duplicates(drafts: list[Draft]) -> list[Draft]:
    """Keep the strongest of each group of drafts that label (nearly) the same discovery segments, or say
    (nearly) the same thing; the kept draft's provenance lists what it absorbed."""
    kept: list[Draft] = []
    for draft in sorted(drafts, key=lambda d: -d.score):
        twin = next((k for k in kept if _similar(k, draft)), None)
        if twin is None:
            kept.append(replace(draft, provenance={**draft.provenance, "merged": []}))
        else:
            twin.provenance["merged"].append(
                {"statement": draft.statement, "feature_ids": draft.provenance.get("feature_ids")}
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
