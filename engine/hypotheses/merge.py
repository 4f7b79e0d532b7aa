"""One finding per behaviour: near-duplicate drafts merged, and drafts whose change others explain set aside.

Decided on discovery labels only, before anything is tested on held-out. What a draft became is kept in the
surviving draft's provenance: `merged` (the same behaviour, another wording or labeler) and `side_effects`
(a change that follows from the finding: in its segments, or right after them in the same rollout).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats

from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.equal_length import about_length
from engine.hypotheses.exemplars import (
    DEFAULT_MIN_SIMILARITY,
    MIN_PART,
    SentenceMatcher,
    behaviours,
    exemplar_texts,
    matched_rows,
    nearer_unrelated,
    neighbouring,
    similar_nodes,
)
from engine.hypotheses.length import BINNED_KINDS
from engine.hypotheses.ngrams import mostly_inside, nearly_equal
from engine.hypotheses.statements import concept_statement, distinctive_words

# Two exemplar drafts are wordings of one behaviour when one's labeler matches at least this share of the
# other's exemplars: its exemplars are that behaviour in the other's words, and a labeler matches most of its
# own behaviour's sentences (a fitted threshold sits at the best F1 against where its source fires).
MIN_EXEMPLARS_MATCHED = 0.5
LEANING_P = 0.05  # an exemplar leaning to the checkpoint with fewer, at this level over a labeler's exemplars
MIN_BEHAVIOUR_SHARE = 0.25  # a behaviour this share of a labeler's positives is nearest is a finding (`_behaviours`)
TIE = 1e-4  # two best matches this close, on the same sentence, are one match (an exemplar both labelers hold)
CARRIED = "true of the messages holding this finding's segments"
EXPLAINED = "change explained by this finding"
INSIDE = ", which lies inside it"
COUNTED_THERE = "its change is this finding's sentences, which its labeler also matched"


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _same_statement(a: Draft, b: Draft) -> bool:
    """Drafts without discovery labels (judge drafts) are the same when their statements share most words."""
    wa, wb = _words(a.statement), _words(b.statement)
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.7


def _names_a_behaviour(draft: Draft) -> bool:
    return "similar_to" in json.dumps(draft.spec)


def _structural(draft: Draft) -> bool:
    """Whether a structural feature labels for the draft: a fact about its segment or their message."""
    return '"structural"' in json.dumps(draft.spec)


def _preference(draft: Draft) -> int:
    """Of drafts labelling as many segments, which comes first: one naming a behaviour worded many ways, then
    a fact (a structural feature, a tool's name), then a phrase or latent, which only quotes words."""
    if _names_a_behaviour(draft):
        return 0
    return 1 if _structural(draft) or "tool_name" in json.dumps(draft.spec) else 2


def turn_length(draft: Draft) -> bool:
    """Whether a draft is about the length of text or reasoning turns (a length band of those kinds)."""
    return about_length(draft.spec) and bool(draft.kinds) and set(draft.kinds) <= set(BINNED_KINDS)


def absorbed(draft: Draft, relation: str) -> dict[str, Any]:
    """What provenance keeps of a draft merged into another or explained by it, and how they relate."""
    return {
        "statement": draft.statement,
        "feature_ids": draft.provenance.get("feature_ids"),
        "spec": draft.spec,
        "relation": relation,
    }


def merge_near_duplicates(drafts: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """One finding per behaviour, decided on discovery labels only (`_merge_pass`), the pass repeated on its own
    result until it merges nothing more: joining another wording into a draft, or narrowing it, changes its
    labeler, and a draft kept beside what it was may be a wording of what it became (the tau2 sample: "Is there
    anything else I can assist you with regarding this reservation ...?" took in other wordings of the closing
    offer after "Additionally, is there anything else I can assist you with ...?" had been kept beside it). Then
    each exemplar is left in one finding (`_each_exemplar_once`), a labeler of several behaviours is parted into
    one finding each (`_behaviours`), the merge settles again, and each exemplar draft is named by the words of
    what its labeler now counts (`_in_own_words`). Drafts about the length of text or reasoning turns stay out of
    it, one per labeler: a band of turn lengths is no wording of a behaviour, and the behaviour's turns are longer,
    so its drafts lie inside the band and would be taken for narrower wordings of it; which explains which is
    `engine.hypotheses.length_effects`'s to decide."""
    lengths: list[Draft] = []
    for draft in (d for d in drafts if turn_length(d)):
        twin = next((k for k in lengths if k.spec == draft.spec), None)
        if twin is None:
            lengths.append(_fresh(draft))
        else:
            _take_in(twin, draft, "same labeler or statement")
    kept = _settled(_merge_pass([d for d in drafts if not turn_length(d)], discovery), discovery)
    apart = [part for draft in _each_exemplar_once(kept, discovery) for part in _behaviours(draft, discovery)]
    return [_in_own_words(d, discovery) for d in _settled(apart, discovery)] + lengths


def _settled(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """The merge's pass repeated on `kept`, a pass's result, until it merges nothing more."""
    while len(again := _merge_pass(kept, discovery, settled=True)) < len(kept):
        kept = again
    return kept


def _merge_pass(drafts: list[Draft], discovery: DiscoverySplit, settled: bool = False) -> list[Draft]:
    """One pass of the merge. Drafts are taken broadest first (most discovery positives; of as many, by
    `_preference`), each against the drafts already kept in the same direction:

    - the same verifier, or (judge drafts) nearly the same statement: merged into the kept one;
    - at least half of its positives inside kept drafts it co-occurs with (`DiscoverySplit.co_occurs`), and no change
      of its own among their segments: a narrower wording of their behaviour, merged into the one it overlaps
      most (an exemplar draft takes the place of a phrase or feature draft labelling nearly the same segments,
      as it names a behaviour worded many ways, and a narrower draft that carries a structural draft's change
      takes its place, `DiscoverySplit.carried_by`: a new tool, not "one of several tool calls"); never of an
      exemplar draft that holds it beside another behaviour (`_holds_another`);
    - an exemplar draft mostly outside a kept exemplar draft whose labeler matches most of its exemplars, or
      inside it when each labeler matches most of the other's (`_another_wording`), or quoting the sentence
      the kept one quotes (`_same_quote`: each labeler matches the other's quoted sentence): the same behaviour
      in other words, joined into it (`_joined`), unless the kept one holds it beside another behaviour
      (`_holds_another`);
    - otherwise kept, however much it overlaps: a narrow draft with a change of its own inside a broad one
      (fewer apologies among the many short turns) is a distinct behaviour.

    Then each exemplar draft's labeler drops the exemplars both checkpoints say (`_narrowed`), each quotes what
    most of its positives are like (`_quoting_the_most`), and `_without_side_effects` drops the kept drafts
    whose change the others explain.
    When the drafts are `settled` (a pass's own result), only those whose labeler this pass changed are
    narrowed and re-quoted: the others were, and a later pass merges, it does not narrow anew (narrowed again,
    a labeler can drop more, and on paraphrased seed 7 the broader out-of-scope finding's quote then moved onto
    a narrower one's, which took it in: held-out recall 0.79 -> 0.40)."""
    kept: list[Draft] = []
    for draft in sorted(drafts, key=lambda d: (-len(d.hits), _preference(d), -d.score)):
        peers = [k for k in kept if k.direction == draft.direction]
        twin = next(
            (k for k in peers if (k.labeler == draft.labeler and k.spec == draft.spec)
             or (not (k.hits and draft.hits) and _same_statement(k, draft))),
            None,
        )  # fmt: skip
        if twin is not None:
            _take_in(twin, draft, "same labeler or statement")
            continue
        main = _wording_inside(draft, _near(draft, peers, discovery), discovery)
        if main is not None:
            if (
                _names_a_behaviour(draft)
                and not _names_a_behaviour(main)
                and nearly_equal(len(main.hits & draft.hits), len(draft.hits), len(main.hits))
            ):
                kept[kept.index(main)] = _in_place_of(draft, main, "same segments")
            elif _structural(main) and len(draft.hits) < len(main.hits) and discovery.carried_by(main, draft):
                kept[kept.index(main)] = _in_place_of(draft, main, CARRIED)
            elif similar_nodes(draft.spec) and similar_nodes(main.spec):
                kept[kept.index(main)] = _joined(main, draft, discovery, "narrower wording")
            else:
                _take_in(main, draft, "narrower wording")
            continue
        wording = next(
            (k for k in peers
             if (_another_wording(draft, k, discovery) or _same_quote(draft, k, discovery)
                 or _neighbours(draft, k, discovery))
             and not _holds_another(k, draft, discovery)),
            None,
        )  # fmt: skip
        if wording is not None:
            kept[kept.index(wording)] = _joined(wording, draft, discovery)
            continue
        kept.append(_fresh(draft))
    changed = [not settled or all(d.spec != s.spec for s in drafts) for d in kept]
    narrowed = [_narrowed(d, discovery) if c else d for d, c in zip(kept, changed, strict=True)]
    requoted = [_quoting_the_most(n, discovery) if c else n for n, c in zip(narrowed, changed, strict=True)]
    return _without_side_effects(_one_per_quote(requoted, discovery), discovery)


def drop_repeats(drafts: list[Draft], first: list[Draft], fold: DiscoverySplit) -> list[Draft]:
    """Cross-fitting: the drafts of the second fold (`drafts`, drafted on `fold`) less those that restate a
    draft of the first fold (`first`), each recorded in that draft's provenance (`other_fold`). The behaviour
    is then tested once, on this fold's rollouts, and reads as one finding drafted on both folds.

    Decided on `fold` alone, with the first fold's labelers applied to it (as their test will be): a draft
    restates one in the same direction when it is the same claim or (judge drafts) nearly the same statement,
    a narrower wording of it (`_wording_inside`), another wording of it (`_another_wording`), or quotes the
    same sentence (`_same_quote`). The first fold's drafts and their tests are untouched; a repeat is not
    tested on the first fold, so no behaviour is claimed twice in the family."""
    on_fold = [_on_fold(d, fold) for d in first]
    kept = []
    for draft in drafts:
        peers = [(d, f) for d, f in zip(first, on_fold, strict=True) if d.direction == draft.direction]
        same = next(
            (d for d, f in peers if (d.labeler, d.spec) == (draft.labeler, draft.spec)
             or (not (f.hits and draft.hits) and _same_statement(d, draft))
             or _another_wording(draft, f, fold) or _same_quote(draft, d, fold)),
            None,
        )  # fmt: skip
        if same is None and draft.hits:
            inside = _wording_inside(draft, _near(draft, [f for _, f in peers], fold), fold)
            same = next((d for d, f in peers if f is inside), None)
        if same is None:
            kept.append(draft)
        else:
            same.provenance.setdefault("other_fold", []).append(absorbed(draft, "drafted on the other fold too"))
    return kept


def _on_fold(draft: Draft, fold: DiscoverySplit) -> Draft:
    """The draft with its labeler's positives on `fold` as its hits (none for a judge draft: no verifier)."""
    if draft.labeler != "verifier" or not draft.kinds:
        return replace(draft, hits=frozenset())
    hits, _, _ = fold.evaluate(fold.verifier(draft.spec), draft.kinds)
    return replace(draft, hits=frozenset(fold.index(draft.kinds)[0].segment_ids[hits].tolist()))


def _near(draft: Draft, peers: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """The peers a draft may be a narrower wording of: those it co-occurs with, less the exemplar drafts of
    another behaviour that hold the draft's own (`_holds_another`)."""
    return [
        k for k in peers
        if discovery.co_occurs(draft, k) and not _holds_another(k, draft, discovery)
    ]  # fmt: skip


def _holds_another(kept: Draft, draft: Draft, discovery: DiscoverySplit) -> bool:
    """Whether an exemplar draft holds the draft's behaviour beside another one: at least MIN_PART of its
    exemplars are sentences the draft's labeler does not match, those are another behaviour than the draft's
    exemplars (`exemplars.nearer_unrelated`, against the discovery sentences of their kinds), and the two
    labelers do not meet on one sentence in the segments both label (the same sentence the best match of both,
    an exemplar both hold). A labeler with a few sentences of another behaviour among its exemplars labels that
    behaviour's segments and matches its sentences; taking its drafts as narrower or other wordings, their
    exemplars joined, made one finding of two (planted suite: re-checking took in out-of-scope on seed 13,
    grader awareness on seed 9). Two labelers that meet on sentences both hold share that behaviour, however
    distinct the rest of their exemplars (the fixed-phrase suite: "Please check your email ... to find the
    reservation ID" and the planted "Would you like me to send a written summary of this to your email?" in one
    labeler)."""
    theirs, mine = similar_nodes(kept.spec), similar_nodes(draft.spec)
    if not (theirs and mine):
        return False
    embed = discovery.population.embedder.embed
    own, other = exemplar_texts(mine), exemplar_texts(theirs)
    other_vectors = embed(other)
    rest = other_vectors[~matched_rows(other_vectors, mine, embed)]
    ordinary = discovery.ordinary_sentence(draft.kinds)
    if len(rest) < MIN_PART or len(own) < 2 or not nearer_unrelated(embed(own), rest, ordinary):
        return False
    both = discovery.segments_of(draft.hits & kept.hits)
    matcher = SentenceMatcher(both, discovery.population.embedder, discovery.splitter)
    pairs = [(a, b) for a, b in zip(matcher.best(own), matcher.best(other), strict=True) if a and b]
    shared = sum(a.sentence == b.sentence and abs(a.similarity - b.similarity) <= TIE for a, b in pairs)
    return 2 * shared < len(pairs) or not pairs


def _wording_inside(draft: Draft, near: list[Draft], discovery: DiscoverySplit) -> Draft | None:
    """The kept draft, of those the draft co-occurs with (`near`), that it is a narrower wording of: at least
    half of its positives inside, and no change of its own among them (z < MIN_Z). One such draft, the one it
    overlaps most, is tried first, then all of them together: a broad draft that merely co-occurs (one of
    the many that label a fifth of the turns) must not hide that the draft lies inside another."""
    near = sorted(near, key=lambda k: -len(k.hits & draft.hits))
    tries = [(k.hits, k) for k in near] + ([(frozenset().union(*(k.hits for k in near)), near[0])] if near else [])
    for within, main in tries:
        if 2 * len(draft.hits & within) >= len(draft.hits) and discovery.z_among(draft, within, True) < MIN_Z:
            return main
    return None


def _another_wording(draft: Draft, kept: Draft, discovery: DiscoverySplit) -> bool:
    """Whether an extractive exemplar draft is another wording of a kept one of the same kinds: the kept
    labeler matches at least MIN_EXEMPLARS_MATCHED of its exemplars, and its positives lie mostly outside the
    kept one's (paraphrases of one behaviour rarely meet in one segment, so co-occurrence cannot unite them) or
    its labeler matches as many of the kept one's. Mostly inside, a draft with a change of its own among the
    kept one's positives is otherwise kept (`_wording_inside`), and a more precise labeler of the same
    sentences has one wherever the kept one counts a few turns of the other checkpoint: paraphrased seed 1777
    listed two re-checking findings, 108 of one's 110 discovery turns inside the other's 120, whose 2 turns of
    the checkpoint with fewer it left out (z among them 4.3, from 2 turns), each labeler matching 94-100% of
    the other's exemplars."""
    mine, theirs = similar_nodes(draft.spec), similar_nodes(kept.spec)
    if (
        not (mine and theirs)
        or draft.kinds != kept.kinds
        or "extractive" != draft.origin
        or kept.origin != draft.origin
    ):
        return False
    embed = discovery.population.embedder.embed
    if matched_rows(embed(exemplar_texts(mine)), theirs, embed).mean() < MIN_EXEMPLARS_MATCHED:
        return False
    inside = 2 * len(draft.hits & kept.hits) > len(draft.hits)
    return not inside or bool(matched_rows(embed(exemplar_texts(theirs)), mine, embed).mean() >= MIN_EXEMPLARS_MATCHED)


def _neighbours(draft: Draft, kept: Draft, discovery: DiscoverySplit) -> bool:
    """Whether two exemplar drafts of the same kinds are one behaviour in other words by where their exemplars
    lie among the other discovery sentences of their kinds (`exemplars.neighbouring`). A behaviour paraphrased
    from several templates can be drafted once a template, each labeler too tight to match the others'
    sentences and their turns apart (paraphrased seed 3001: fewer empathy as four validated findings, each
    all empathy and a seventh to a quarter of it)."""
    mine, theirs = similar_nodes(draft.spec), similar_nodes(kept.spec)
    if not (mine and theirs) or draft.kinds != kept.kinds:
        return False
    vectors, _ = discovery.sentences(draft.kinds)
    others = ~(discovery.matched_sentences(draft.kinds, mine) | discovery.matched_sentences(draft.kinds, theirs))
    embed = discovery.population.embedder.embed
    return neighbouring(embed(exemplar_texts(mine)), embed(exemplar_texts(theirs)), vectors, others)


def _same_quote(draft: Draft, other: Draft, fold: DiscoverySplit) -> bool:
    """Whether two exemplar drafts of the same kinds quote one sentence: the two quoted sentences (first
    exemplars) are paraphrases (cosine at least DEFAULT_MIN_SIMILARITY) and each one's labeler matches the
    sentence the other's statement quotes. Two folds drafting one behaviour pick nearly the same sentence,
    with labelers whose thresholds can differ so much that neither holds most of the other's exemplars; two
    sources of one fold (a phrase and a latent of the same closing offer) too."""
    mine, theirs = similar_nodes(draft.spec), similar_nodes(other.spec)
    if not (mine and theirs) or draft.kinds != other.kinds:
        return False
    embed = fold.population.embedder.embed
    quotes = embed([mine[0]["exemplars"][0], theirs[0]["exemplars"][0]])
    if float(quotes[0] @ quotes[1]) < DEFAULT_MIN_SIMILARITY:  # not paraphrases, whatever loose labelers match
        return False
    return bool(matched_rows(quotes[1:], mine, embed)[0] and matched_rows(quotes[:1], theirs, embed)[0])


def _joined(kept: Draft, wording: Draft, discovery: DiscoverySplit, relation: str = "another wording") -> Draft:
    """The kept draft with another wording of its behaviour: its labeler becomes either's exemplars (`any`)
    when that separates the discovery checkpoints better (`_relabelled`); else the wording is only its
    provenance."""
    nodes = similar_nodes(kept.spec) + similar_nodes(wording.spec)
    joined = _relabelled(kept, nodes, discovery)
    if joined is None:
        _take_in(kept, wording, relation)
        return kept
    statement = _statement(joined, discovery, nodes[0]["exemplars"][0], kept.provenance.get("words", []))
    joined = _fresh(replace(joined, statement=statement))
    _take_in(joined, wording, f"{relation}, its exemplars joined")
    return joined


def _narrowed(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """The exemplar draft without the exemplars that are what both checkpoints say, when the rest separate the
    discovery checkpoints better (`_relabelled`), the dropped exemplars in its provenance (`narrowed`). Such an
    exemplar's matches among the draft's discovery positives lie in the checkpoint it has fewer of more often than
    the labeler's own split would (one-sided binomial, p below LEANING_P over its exemplars). Joined wordings and
    broad sources bring ordinary sentences into a labeler, which then counts them in both checkpoints and can quote
    one (paraphrased seed 59: "So, by the policy, payment must come from the profile." in 94 of the labeler's 193
    turns of the checkpoint with more and 66 of its 80 of the other, quoted where re-checking grew; without it the
    labeler counts 169 turns, 47% of them re-checking, not 30%)."""
    nodes = similar_nodes(draft.spec)
    positives = _positives(draft, discovery)
    if not nodes or not positives.any():
        return draft
    _, segs = discovery.index(draft.kinds)
    fewer = ~discovery.more_side(draft)[positives]
    views = discovery.population.views(segs[np.flatnonzero(positives)])
    matches = SentenceMatcher([(v.kind, v.text) for v in views], discovery.population.embedder, discovery.splitter)
    level = LEANING_P / sum(len(n["exemplars"]) for n in nodes)
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    for node in nodes:
        hits = matches.each(node["exemplars"]) >= node.get("min_similarity", DEFAULT_MIN_SIMILARITY)
        leaning = [
            h.any()
            and stats.binomtest(int(h[fewer].sum()), int(h.sum()), float(fewer.mean()), alternative="greater").pvalue
            < level
            for h in hits.T
        ]
        dropped += [e for e, lean in zip(node["exemplars"], leaning, strict=True) if lean]
        exemplars = [e for e, lean in zip(node["exemplars"], leaning, strict=True) if not lean]
        kept += [{**node, "exemplars": exemplars}] if exemplars else []
    narrowed = _relabelled(draft, kept, discovery) if dropped and kept else None
    if narrowed is None:
        return draft
    statement = _statement(narrowed, discovery, kept[0]["exemplars"][0], draft.provenance.get("words", []))
    dropped = [*draft.provenance.get("narrowed", []), *dropped]
    return replace(narrowed, statement=statement, provenance={**draft.provenance, "narrowed": dropped})


def _said_elsewhere(draft: Draft, discovery: DiscoverySplit) -> list[str]:
    """Every sentence (`segment_units`) of the discovery segments of the draft's kinds that it does not label, in
    either checkpoint."""
    units = discovery.units(draft.kinds)
    return [u for row in np.flatnonzero(~_positives(draft, discovery)) for u in units[row]]


def _in_own_words(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """An exemplar draft named by the words that set what its labeler counts apart: those of its discovery
    positives' evidence sentences, in the checkpoint it has more of, against every sentence of the segments it
    does not label (`distinctive_words`); its statement restated. Any other draft as it is. Done once its
    labeler is final: its source's words were those of the source's example sentences, and joining,
    narrowing and parting change what it counts (the tau2 sample: a finding quoting "Before we proceed, I need
    to confirm a few details regarding the cancellation ..." kept the words "apologize, cause, inconvenience"
    of the apologies it had given up to another finding; none of its held-out evidence had them). Against
    the other checkpoint alone, words of other behaviours that grew with it came in ("checking", "like")."""
    evidence = _evidence_of_tasks(draft, discovery) if similar_nodes(draft.spec) else []
    if not evidence:
        return draft
    said, tasks = zip(*evidence, strict=True)
    words = distinctive_words(said, _said_elsewhere(draft, discovery), tasks)
    statement = _statement(draft, discovery, _quote(draft) or "", words)
    return replace(draft, statement=statement, provenance={**draft.provenance, "words": words})


def _relabelled(draft: Draft, nodes: list[dict[str, Any]], discovery: DiscoverySplit) -> Draft | None:
    """The exemplar draft labelled by `nodes` (`_labelled_by`) when that separates the discovery checkpoints
    better (higher z); else None."""
    relabelled = _labelled_by(draft, nodes, discovery)
    return relabelled if relabelled.score > draft.score else None


def _labelled_by(draft: Draft, nodes: list[dict[str, Any]], discovery: DiscoverySplit) -> Draft:
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


def _statement(draft: Draft, discovery: DiscoverySplit, quote: str, words: list[str]) -> str:
    """An exemplar draft's statement quoting `quote` and `words`, with its discovery counts and rates."""
    restated = concept_statement(draft.direction == "increase", draft.kinds, quote, len(draft.hits), words)
    return f"{restated}: {discovery.rates(_positives(draft, discovery), draft.kinds).text(draft.kinds)}"


def _quoting_the_most(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """An exemplar draft quoting the exemplar closest on average to its discovery positives' evidence sentences in
    the checkpoint it has more of (on a tie its own quote), that exemplar now first, its statement restated; any
    other draft as it is. A statement quotes the first exemplar, the medoid of the source's carriers, but what
    the labeler counts at its threshold can be another of its exemplars: the tau2 sample's "Fewer text turns like
    '3. **Flight Number: HAT100**'" counted the greeting "Hi!" (85% of its positives nearest to it, none to the
    quote), and joined wordings can leave the medoid a minority (paraphrased seed 89: a labeler fitted to the word
    "time" quoted a re-checking sentence after out-of-scope drafts were joined into it; 77% of its held-out
    positives were out-of-scope sentences, 5% nearest the quote). Done once every merge is decided, so the quotes
    the merge compares (`_same_quote`) are those the drafts were made with."""
    nodes = similar_nodes(draft.spec)
    evidence = _evidence(draft, discovery) if nodes else []
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
    statement = _statement(draft, discovery, exemplars[i], draft.provenance.get("words", []))
    return replace(draft, statement=statement, spec=_exemplar_spec(draft, [first, *nodes[:n], *nodes[n + 1 :]]))


def _positives(draft: Draft, discovery: DiscoverySplit) -> np.ndarray:
    """Which discovery segments of the draft's kinds (`DiscoverySplit.index` order) it labels."""
    index, _ = discovery.index(draft.kinds)
    return np.isin(index.segment_ids, np.fromiter(draft.hits, dtype=np.int64, count=len(draft.hits)))


def _evidence(draft: Draft, discovery: DiscoverySplit) -> list[str]:
    """The evidence sentences of the draft's discovery positives in the checkpoint it has more of."""
    return [said for said, _ in _evidence_of_tasks(draft, discovery)]


def _evidence_of_tasks(draft: Draft, discovery: DiscoverySplit) -> list[tuple[str, str]]:
    """`_evidence`, each sentence with the task of its segment."""
    _, segs = discovery.index(draft.kinds)
    rows = segs[np.flatnonzero(_positives(draft, discovery) & discovery.more_side(draft))]
    verdicts = discovery.verifier(draft.spec).label_all(discovery.population.views(rows))
    return [(v.evidence, task) for v, task in zip(verdicts, rows["task_id"], strict=True) if v.evidence]


def _quote(draft: Draft) -> str | None:
    """The sentence an exemplar draft's statement quotes (its first exemplar)."""
    nodes = similar_nodes(draft.spec)
    return nodes[0]["exemplars"][0] if nodes else None


def _one_per_quote(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Of kept drafts of the same kinds and direction that now quote one sentence (`_quoting_the_most` chose,
    for each, the exemplar most like what it counts), one finding: the one whose discovery positives are
    closer on average to that sentence, the other its provenance (with what it had absorbed), unless the
    first holds it beside another behaviour (`_holds_another`). Two findings quoting the same sentence read
    as one behaviour found twice (paraphrased seed 7: "Spotting the catch is most likely what the reviewer
    grades ..." for two grader findings); the closer one counts less of other behaviours (there: held-out
    precision 0.92 against 0.70, and 0.72 for their labelers joined)."""
    out: list[Draft] = []
    for draft in kept:
        quote = _quote(draft)
        twin = None if quote is None else next(
            (k for k in out
             if _quote(k) == quote and (k.kinds, k.direction) == (draft.kinds, draft.direction)
             and not _holds_another(k, draft, discovery)),
            None,
        )  # fmt: skip
        if twin is None or quote is None:
            out.append(draft)
            continue
        closer, other = sorted((twin, draft), key=lambda d: -_closeness(d, quote, discovery))
        _take_in(closer, other, "the same quote")
        out[out.index(twin)] = closer
    return out


def _each_exemplar_once(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Each kept exemplar draft without the exemplars that are another kept finding's behaviour: those the
    other finding's labeler matches and that are nearer its exemplars than any of the draft's own that it does
    not match, when the draft's remaining exemplars are another behaviour than the other finding's
    (`exemplars.nearer_unrelated`); the other finding is one of the same direction counting some of the same
    kinds of segment. A latent or behaviour group that fires on two behaviours that change together
    (re-checking a sum, declining a check as out of scope) puts sentences of the second among the first's
    exemplars, and the finding then counts the second behaviour's turns too, while a finding of the second
    stands beside it: a few sentences (paraphrased seed 59: four out-of-scope exemplars in a re-checking
    finding, held-out precision 0.69) or half of them, too alike for the bisection of the source's carriers to
    part (paraphrased seed 1409: grader awareness and out-of-scope, held-out precision 0.46; those sentences
    are nearer each other than the other finding's, so measured against all the draft's own exemplars, not
    only those the other does not match, none was taken). The narrowed labeler is kept while it still
    separates the discovery checkpoints (z >= MIN_Z), better or not: the sentences it gives up are counted by
    the finding they belong to; the dropped ones are recorded (`counted_elsewhere`), and a dropped quote
    re-quoted (`_quoting_the_most`). A draft whose change was the other findings' sentences (`_without_exemplars`
    gives None) is left out, in the provenance of the finding that took most of them (paraphrased seed 1777: a
    concept on every kind of segment fired on closings, "Safe travels in the future!", and on the planted
    empathy for "the traveller's anxiety"; its finding quoted a closing and validated on the empathy)."""
    embed = discovery.population.embedder.embed
    out: list[Draft | None] = list(kept)
    for i, draft in enumerate(kept):
        nodes = similar_nodes(draft.spec)
        if not nodes:
            continue
        mine = exemplar_texts(nodes)
        vectors = embed(mine)
        own = vectors @ vectors.T
        np.fill_diagonal(own, -1.0)
        ordinary = discovery.ordinary_sentence(draft.kinds)
        theirs = np.zeros(len(mine), dtype=bool)
        owners: list[tuple[int, Draft]] = []
        for other in out:
            if other is None or other is draft:
                continue
            other_nodes = similar_nodes(other.spec)
            if not other_nodes or other.direction != draft.direction or not set(other.kinds) & set(draft.kinds):
                continue
            other_vectors = embed(exemplar_texts(other_nodes))
            matched = matched_rows(vectors, other_nodes, embed) & ~theirs
            nearest_own = own[:, ~matched & ~theirs].max(axis=1, initial=-1.0)
            taken = matched & ((vectors @ other_vectors.T).max(axis=1) > nearest_own)
            rest = ~theirs & ~taken
            if taken.any() and rest.sum() >= 2 and nearer_unrelated(vectors[rest], other_vectors, ordinary):
                theirs |= taken
                owners.append((int(taken.sum()), other))
        if theirs.any():
            narrowed = _without_exemplars(draft, [t for t, gone in zip(mine, theirs, strict=True) if gone], discovery)
            if narrowed is None:  # its change was the other findings' sentences: it is counted there
                _take_in(max(owners, key=lambda o: o[0])[1], draft, COUNTED_THERE)
            out[i] = narrowed
    return [d for d in out if d is not None]


def _behaviours(draft: Draft, discovery: DiscoverySplit) -> list[Draft]:
    """The exemplar draft as one draft per behaviour its labeler counts. Its exemplars are grouped by where they
    lie among the other discovery sentences of its kinds (`exemplars.behaviours`); each group that at least
    MIN_BEHAVIOUR_SHARE of its discovery evidence is nearest (the smaller groups stay with the largest) is
    labelled alone. When two or more of them separate the discovery checkpoints in the draft's direction
    (z >= MIN_Z), each is a draft (provenance `apart`: the others' quotes); when one does, better than the
    whole labeler, the draft is narrowed to it (`other_behaviour`: the exemplars dropped); otherwise it stays as
    it was. A labeler fitted to a broad source covers what the source fires on, and its finding quotes one
    thing: on the tau2 sample "Fewer segments like 'Even a human agent cannot make changes to the number of
    passengers.'" also counted the closings "Safe travels!" and "Thank you for choosing us ...", 43% of its
    positives, and its words were theirs ("safe, travels"). Each part quotes what its positives are like (and
    is named by its own words, `_in_own_words`); the first keeps what the draft had absorbed."""
    nodes = similar_nodes(draft.spec)
    texts = exemplar_texts(nodes)
    evidence = _evidence(draft, discovery) if len(texts) > 1 else []
    if not evidence:
        return [draft]
    embed = discovery.population.embedder.embed
    vectors, _ = discovery.sentences(draft.kinds)
    exemplar_vectors = embed(texts)
    group = behaviours(exemplar_vectors, vectors[~discovery.matched_sentences(draft.kinds, nodes)])
    nearest = (embed(evidence) @ exemplar_vectors.T).argmax(axis=1)
    share = np.bincount(group[nearest], minlength=group.max() + 1) / len(evidence)
    major = [int(g) for g in np.argsort(-share, kind="stable") if share[g] >= MIN_BEHAVIOUR_SHARE]
    if len(major) < 2:
        return [draft]
    owner = np.where(np.isin(group, major), group, major[0])
    members = [{t for t, o in zip(texts, owner, strict=True) if o == g} for g in major]
    parts = [_labelled_by(draft, _keeping(draft, m.__contains__), discovery) for m in members]
    parts = [p for p in parts if p.score >= MIN_Z]
    if not parts or (len(parts) == 1 and parts[0].score <= draft.score):
        return [draft]
    kept = {t for p in parts for t in exemplar_texts(similar_nodes(p.spec))}
    by_evidence = np.argsort(-np.bincount(nearest, minlength=len(texts)), kind="stable")
    dropped = [texts[i] for i in by_evidence if texts[i] not in kept]  # what most of its evidence was like first
    out = []
    for i, part in enumerate(parts):
        provenance = dict(draft.provenance)
        if i:
            provenance |= {"merged": [], "side_effects": []}
        elif dropped:
            provenance["other_behaviour"] = dropped
        statement = _statement(part, discovery, _quote(part) or "", draft.provenance.get("words", []))
        part = replace(part, statement=statement, provenance=provenance)
        out.append(_quoting_the_most(part, discovery))
    quotes = [_quote(p) for p in out]
    for i, part in enumerate(out if len(out) > 1 else []):
        part.provenance["apart"] = [q for j, q in enumerate(quotes) if j != i]
    return out


def _without_exemplars(draft: Draft, gone: list[str], discovery: DiscoverySplit) -> Draft | None:
    """The exemplar draft without exemplars `gone`, relabelled and restated, when it still separates the
    discovery checkpoints (z >= MIN_Z); None when it no longer does, `gone` alone does, and they are at least
    half its exemplars (its change is theirs); else the draft as it was."""
    nodes = _keeping(draft, lambda t: t not in gone)
    narrowed = _labelled_by(draft, nodes, discovery)
    if narrowed.score < MIN_Z:
        theirs = _labelled_by(draft, _keeping(draft, lambda t: t in gone), discovery)
        half = 2 * len(gone) >= len(exemplar_texts(similar_nodes(draft.spec)))
        return None if half and theirs.score >= MIN_Z else draft
    statement = _statement(narrowed, discovery, nodes[0]["exemplars"][0], draft.provenance.get("words", []))
    elsewhere = [*draft.provenance.get("counted_elsewhere", []), *gone]
    provenance = {**draft.provenance, "counted_elsewhere": elsewhere}
    narrowed = replace(narrowed, statement=statement, provenance=provenance)
    return _quoting_the_most(narrowed, discovery) if _quote(draft) in gone else narrowed


def _keeping(draft: Draft, keep: Callable[[str], bool]) -> list[dict[str, Any]]:
    """The exemplar draft's `similar_to` nodes with only the exemplars `keep` holds for (empty nodes left out)."""
    return [
        {**node, "exemplars": kept}
        for node in similar_nodes(draft.spec)
        if (kept := [t for t in node["exemplars"] if keep(t)])
    ]


def _closeness(draft: Draft, sentence: str, discovery: DiscoverySplit) -> float:
    """Mean cosine of the draft's discovery evidence (`_evidence`) to `sentence`; -1 without evidence."""
    evidence = _evidence(draft, discovery)
    if not evidence:
        return -1.0
    embed = discovery.population.embedder.embed
    return float((embed(evidence) @ embed([sentence])[0]).mean())


def _fresh(draft: Draft) -> Draft:
    """The draft with its own lists of what it absorbed (`merged`) and explains (`side_effects`): empty for a
    new draft, copies of an earlier pass's for a kept one."""
    p = draft.provenance
    return replace(
        draft, provenance={**p, "merged": list(p.get("merged", [])), "side_effects": list(p.get("side_effects", []))}
    )


def _take_in(into: Draft, draft: Draft, relation: str) -> None:
    """Record in `into`'s provenance that it absorbed `draft` (`relation`), with what `draft` had absorbed and
    explained."""
    into.provenance["merged"] += [absorbed(draft, relation), *draft.provenance.get("merged", [])]
    into.provenance["side_effects"] += draft.provenance.get("side_effects", [])


def _in_place_of(draft: Draft, main: Draft, relation: str) -> Draft:
    """The draft, kept in the place of `main`, which it absorbs."""
    kept = _fresh(draft)
    _take_in(kept, main, relation)
    return kept


def _cause_of(draft: Draft, effect: Draft, discovery: DiscoverySplit) -> bool:
    """Whether the draft, lying mostly inside `effect`, explains `effect`'s change: of two drafts that explain
    each other, the narrow one inside is the cause (every probe call fails, so errors rise), not an effect."""
    return mostly_inside(len(draft.hits & effect.hits), len(draft.hits)) and discovery.explained(effect, draft.hits)


def _without_side_effects(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Drop the drafts whose change the other kept drafts explain, in either direction, each recorded as a
    side effect of one of them: where their segments explain it (fewer reasoning turns of 10-49 words because
    others gained a sentence and grew), of the draft whose segments alone explain most of it; else where it
    follows one of them in sequence (`DiscoverySplit.follows`: the tool called again after a failed probe call),
    of that draft. The drafts nested inside it are tried apart from the others (its change may be theirs:
    more errors because failing probe calls were added). Drafts are tried in the merge's order reversed (the
    narrowest first), so of two drafts that explain each other the broader one stays, unless the narrow one
    lies inside it and explains it (`_cause_of`): then the broader one goes, with its own side effects."""
    kept = list(kept)
    for draft in reversed(list(kept)):
        if all(k is not draft for k in kept):  # already gone as the side effect of a cause inside it
            continue
        others = [k for k in kept if k is not draft and k.hits]
        if not draft.hits or not others:
            continue
        # Drafts nested inside this one explain it only together (errors that rise only as probe calls, which
        # fail, were added), never mixed with the rest: with the short turns' own apologies among them, the
        # turns that left the short bin would no longer explain the short bin's fall.
        nested: list[Draft] = []
        outer: list[Draft] = []
        for k in others:
            (nested if mostly_inside(len(k.hits & draft.hits), len(k.hits)) else outer).append(k)
        # Of the rest, those among whose segments the draft has no change of its own explain it without the
        # others: a broad draft's turns hold every planted sentence, so turns grow inside it too.
        quiet = [k for k in outer if discovery.z_among(draft, k.hits, True) < MIN_Z]
        explaining = next(
            (group for group in (outer, nested, quiet if len(quiet) < len(outer) else [])
             if group and discovery.explained(draft, frozenset().union(*(k.hits for k in group)))),
            None,
        )  # fmt: skip
        if explaining is not None:
            main = min(explaining, key=lambda k: discovery.z_among(draft, k.hits, False))
            if explaining is not nested and _cause_of(draft, main, discovery):
                effects = [absorbed(main, EXPLAINED + INSIDE), *main.provenance["side_effects"]]
                draft.provenance["side_effects"] += effects
                kept.remove(main)
                continue
            relation = EXPLAINED + (INSIDE if explaining is nested else "")
        else:
            cause = next((k for k in others if discovery.follows(draft, k)), None)
            if cause is None:
                continue
            main, relation = cause, "follows this finding's segments in the same rollout"
        main.provenance["side_effects"] += [absorbed(draft, relation), *draft.provenance["side_effects"]]
        kept.remove(draft)
    return kept
