"""An exemplar draft relabelled, restated and quoted: its labeler changed (`labelled_by`), its statement
restated with its discovery rates (`restated`), quoting the exemplar its positives are most like
(`quoting_the_most`) and named by its own words (`in_own_words`). Decided on discovery labels only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from engine.hypotheses.discovery import DiscoverySplit, Draft
from engine.hypotheses.exemplars import similar_nodes
from engine.hypotheses.statements import concept_statement, distinctive_words


def relabelled(draft: Draft, nodes: list[dict[str, Any]], discovery: DiscoverySplit) -> Draft | None:
    """The exemplar draft labelled by `nodes` (`labelled_by`) when that separates the discovery checkpoints
    better (higher z); else None."""
    other = labelled_by(draft, nodes, discovery)
    return other if other.score > draft.score else None


def labelled_by(draft: Draft, nodes: list[dict[str, Any]], discovery: DiscoverySplit) -> Draft:
    """The exemplar draft labelled by `nodes` (`any` of them), its discovery labels, delta and z recounted (its
    statement is the caller's to restate)."""
    spec = _exemplar_spec(draft, nodes)
    labels, delta, z = discovery.evaluate(discovery.verifier(spec), draft.kinds)
    index, _ = discovery.index(draft.kinds)
    hits = frozenset(index.segment_ids[labels].tolist())
    return replace(draft, spec=spec, score=z if draft.direction == "increase" else -z, discovery_delta=delta, hits=hits)


def _exemplar_spec(draft: Draft, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The draft's exemplar spec with `nodes` as its labeler: one `similar_to`, or several joined by `any`."""
    labeler = {"similar_to": nodes[0]} if len(nodes) == 1 else {"any": [{"similar_to": n} for n in nodes]}
    return {"all": [draft.spec["all"][0], labeler]}


def restated(draft: Draft, discovery: DiscoverySplit, quote: str, words: list[str]) -> str:
    """An exemplar draft's statement quoting `quote` and `words`, with its discovery counts and rates."""
    said = concept_statement(draft.direction == "increase", draft.kinds, quote, len(draft.hits), words)
    return f"{said}: {discovery.rates(positives_of(draft, discovery), draft.kinds).text(draft.kinds)}"


def quoting_the_most(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """An exemplar draft quoting the exemplar closest on average to its discovery positives' evidence sentences in
    the checkpoint it has more of (on a tie its own quote), that exemplar now first, its statement restated; any
    other draft as it is. A statement quotes the first exemplar, the medoid of the source's carriers, but what
    the labeler counts at its threshold can be another of its exemplars: the tau2 sample's "Fewer text turns like
    '3. **Flight Number: HAT100**'" counted the greeting "Hi!" (85% of its positives nearest to it, none to the
    quote), and joined wordings can leave the medoid a minority (paraphrased seed 89: a labeler fitted to the word
    "time" quoted a re-checking sentence after out-of-scope drafts were joined into it; 77% of its held-out
    positives were out-of-scope sentences, 5% nearest the quote). Done once every merge is decided, so the quotes
    the merge compares (`merge._same_quote`) are those the drafts were made with."""
    nodes = similar_nodes(draft.spec)
    evidence = evidence_of(draft, discovery) if nodes else []
    if not evidence:
        return draft
    places = [(n, i) for n, node in enumerate(nodes) for i in range(len(node["exemplars"]))]
    embed = discovery.population.embedder.embed
    vectors = embed([nodes[n]["exemplars"][i] for n, i in places])
    n, i = places[int((embed(evidence) @ vectors.T).mean(axis=0).argmax())]
    if (n, i) == (0, 0):
        return draft
    exemplars = nodes[n]["exemplars"]
    first = {**nodes[n], "exemplars": [exemplars[i], *exemplars[:i], *exemplars[i + 1 :]]}
    statement = restated(draft, discovery, exemplars[i], draft.provenance.get("words", []))
    return replace(draft, statement=statement, spec=_exemplar_spec(draft, [first, *nodes[:n], *nodes[n + 1 :]]))


def positives_of(draft: Draft, discovery: DiscoverySplit) -> np.ndarray:
    """Which discovery segments of the draft's kinds (`DiscoverySplit.index` order) it labels."""
    index, _ = discovery.index(draft.kinds)
    return np.isin(index.segment_ids, np.fromiter(draft.hits, dtype=np.int64, count=len(draft.hits)))


def evidence_of(draft: Draft, discovery: DiscoverySplit) -> list[str]:
    """The evidence sentences of the draft's discovery positives in the checkpoint it has more of."""
    return [said for said, _ in evidence_with_tasks(draft, discovery)]


def evidence_with_tasks(draft: Draft, discovery: DiscoverySplit) -> list[tuple[str, str]]:
    """`evidence_of`, each sentence with the task of its segment."""
    _, segs = discovery.index(draft.kinds)
    rows = segs[np.flatnonzero(positives_of(draft, discovery) & discovery.more_side(draft))]
    verdicts = discovery.verifier(draft.spec).label_all(discovery.population.views(rows))
    return [(v.evidence, task) for v, task in zip(verdicts, rows["task_id"], strict=True) if v.evidence]


def quote_of(draft: Draft) -> str | None:
    """The sentence an exemplar draft's statement quotes (its first exemplar)."""
    nodes = similar_nodes(draft.spec)
    return nodes[0]["exemplars"][0] if nodes else None


def closeness(draft: Draft, sentence: str, discovery: DiscoverySplit) -> float:
    """Mean cosine of the draft's discovery evidence (`evidence_of`) to `sentence`; -1 without evidence."""
    evidence = evidence_of(draft, discovery)
    if not evidence:
        return -1.0
    embed = discovery.population.embedder.embed
    return float((embed(evidence) @ embed([sentence])[0]).mean())


def keeping(draft: Draft, keep: Callable[[str], bool]) -> list[dict[str, Any]]:
    """The exemplar draft's `similar_to` nodes with only the exemplars `keep` holds for (empty nodes left out)."""
    return [
        {**node, "exemplars": kept}
        for node in similar_nodes(draft.spec)
        if (kept := [t for t in node["exemplars"] if keep(t)])
    ]


def _said_elsewhere(draft: Draft, discovery: DiscoverySplit) -> list[str]:
    """Every sentence (`segment_units`) of the discovery segments of the draft's kinds that it does not label, in
    either checkpoint."""
    units = discovery.units(draft.kinds)
    return [u for row in np.flatnonzero(~positives_of(draft, discovery)) for u in units[row]]


def in_own_words(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """An exemplar draft named by the words that set what its labeler counts apart: those of its discovery
    positives' evidence sentences, in the checkpoint it has more of, against every sentence of the segments it
    does not label (`distinctive_words`); its statement restated. Any other draft as it is. Done once its
    labeler is final: its source's words were those of the source's example sentences, and joining,
    narrowing and parting change what it counts (the tau2 sample: a finding quoting "Before we proceed, I need
    to confirm a few details regarding the cancellation ..." kept the words "apologize, cause, inconvenience"
    of the apologies it had given up to another finding; none of its held-out evidence had them). Against
    the other checkpoint alone, words of other behaviours that grew with it came in ("checking", "like")."""
    evidence = evidence_with_tasks(draft, discovery) if similar_nodes(draft.spec) else []
    if not evidence:
        return draft
    said, tasks = zip(*evidence, strict=True)
    words = distinctive_words(said, _said_elsewhere(draft, discovery), tasks)
    statement = restated(draft, discovery, quote_of(draft) or "", words)
    return replace(draft, statement=statement, provenance={**draft.provenance, "words": words})
