"""One finding per behaviour: near-duplicate drafts merged, and drafts whose change others explain set aside.

Decided on discovery labels only, before anything is tested on held-out. What a draft became is kept in the
surviving draft's provenance: `merged` (the same behaviour, another wording or labeler) and `side_effects`
(a change that follows from the finding: in its segments, or right after them in the same rollout). The
labelers are changed by `engine.hypotheses.relabel`, parted by behaviour by `engine.hypotheses.parting`, and the
side effects found by `engine.hypotheses.side_effects`.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats

from engine.hypotheses.absorbed import absorbed, fresh, in_place_of, take_in
from engine.hypotheses.discovery import MIN_Z, DiscoverySplit, Draft
from engine.hypotheses.equal_length import about_length
from engine.hypotheses.exemplars import (
    DEFAULT_MIN_SIMILARITY,
    MIN_PART,
    SentenceMatcher,
    exemplar_texts,
    matched_rows,
    similar_nodes,
)
from engine.hypotheses.geometry import nearer_unrelated, neighbouring
from engine.hypotheses.length import BINNED_KINDS
from engine.hypotheses.ngrams import nearly_equal
from engine.hypotheses.parting import each_exemplar_once, parted
from engine.hypotheses.relabel import (
    closeness,
    in_own_words,
    positives_of,
    quote_of,
    quoting_the_most,
    relabelled,
    restated,
)
from engine.hypotheses.side_effects import without_side_effects

# Two exemplar drafts are wordings of one behaviour when one's labeler matches at least this share of the
# other's exemplars: its exemplars are that behaviour in the other's words, and a labeler matches most of its
# own behaviour's sentences (a fitted threshold sits at the best F1 against where its source fires).
MIN_EXEMPLARS_MATCHED = 0.5
LEANING_P = 0.05  # an exemplar leaning to the checkpoint with fewer, at this level over a labeler's exemplars
TIE = 1e-4  # two best matches this close, on the same sentence, are one match (an exemplar both labelers hold)
CARRIED = "true of the messages holding this finding's segments"
SAME_FACT = "the same fact about messages, in other turns"


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _same_statement(a: Draft, b: Draft) -> bool:
    """Drafts without discovery labels (judge drafts) are the same when their statements share most words."""
    wa, wb = _words(a.statement), _words(b.statement)
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.7


def _one_message_fact(a: Draft, b: Draft) -> bool:
    """Whether two drafts state one fact about messages (`message:*`), counted among different kinds of their
    segments: "Text and a tool call in the same message" was drafted from its text-turn row and its tool-call
    row, two findings and two held-out tests of one change (small studies, and the real 4 x 4 pair). The count
    among text or reasoning turns is kept: on the real pair the text turns beside a call are short, and kept
    as a rate of tool calls the fact no longer explained "Length: 10-49 words: 10% -> 28% of text turns"."""
    name = a.provenance.get("structural_feature")
    return isinstance(name, str) and name.startswith("message:") and name == b.provenance.get("structural_feature")


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


def merge_near_duplicates(drafts: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """One finding per behaviour, decided on discovery labels only (`_merge_pass`), the pass repeated on its own
    result until it merges nothing more: joining another wording into a draft, or narrowing it, changes its
    labeler, and a draft kept beside what it was may be a wording of what it became (the tau2 sample: "Is there
    anything else I can assist you with regarding this reservation ...?" took in other wordings of the closing
    offer after "Additionally, is there anything else I can assist you with ...?" had been kept beside it). Then
    each exemplar is left in one finding (`each_exemplar_once`), a labeler of several behaviours is parted into
    one finding each (`parted`), the merge settles again, and each exemplar draft is named by the words of
    what its labeler now counts (`in_own_words`). Drafts about the length of text or reasoning turns stay out of
    it, one per labeler: a band of turn lengths is no wording of a behaviour, and the behaviour's turns are longer,
    so its drafts lie inside the band and would be taken for narrower wordings of it; which explains which is
    `engine.hypotheses.length_effects`'s to decide."""
    lengths: list[Draft] = []
    for draft in (d for d in drafts if turn_length(d)):
        twin = next((k for k in lengths if k.spec == draft.spec), None)
        if twin is None:
            lengths.append(fresh(draft))
        else:
            take_in(twin, draft, "same labeler or statement")
    kept = _settled(_merge_pass([d for d in drafts if not turn_length(d)], discovery), discovery)
    apart = [part for draft in each_exemplar_once(kept, discovery) for part in parted(draft, discovery)]
    return [in_own_words(d, discovery) for d in _settled(apart, discovery)] + lengths


def _settled(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """The merge's pass repeated on `kept`, a pass's result, until it merges nothing more."""
    while len(again := _merge_pass(kept, discovery, settled=True)) < len(kept):
        kept = again
    return kept


def _merge_pass(drafts: list[Draft], discovery: DiscoverySplit, settled: bool = False) -> list[Draft]:
    """One pass of the merge. Drafts are taken broadest first (most discovery positives; of as many, by
    `_preference`), each against the drafts already kept in the same direction:

    - the same verifier, or (judge drafts) nearly the same statement, or the same fact about messages counted
      among other turns (`_one_message_fact`, counted among text turns where one is): merged into one;
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
    most of its positives are like (`quoting_the_most`), and `without_side_effects` drops the kept drafts
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
            take_in(twin, draft, "same labeler or statement")
            continue
        same_fact = next((k for k in peers if _one_message_fact(k, draft)), None)
        if same_fact is not None:
            # counted among text turns, a band of their lengths may be its side effect (`length_effects`)
            if set(draft.kinds) <= set(BINNED_KINDS) and not set(same_fact.kinds) <= set(BINNED_KINDS):
                kept[kept.index(same_fact)] = in_place_of(draft, same_fact, SAME_FACT)
            else:
                take_in(same_fact, draft, SAME_FACT)
            continue
        main = _wording_inside(draft, _near(draft, peers, discovery), discovery)
        if main is not None:
            if (
                _names_a_behaviour(draft)
                and not _names_a_behaviour(main)
                and nearly_equal(len(main.hits & draft.hits), len(draft.hits), len(main.hits))
            ):
                kept[kept.index(main)] = in_place_of(draft, main, "same segments")
            elif _structural(main) and len(draft.hits) < len(main.hits) and discovery.carried_by(main, draft):
                kept[kept.index(main)] = in_place_of(draft, main, CARRIED)
            elif similar_nodes(draft.spec) and similar_nodes(main.spec):
                kept[kept.index(main)] = _joined(main, draft, discovery, "narrower wording")
            else:
                take_in(main, draft, "narrower wording")
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
        kept.append(fresh(draft))
    changed = [not settled or all(d.spec != s.spec for s in drafts) for d in kept]
    narrowed = [_narrowed(d, discovery) if c else d for d, c in zip(kept, changed, strict=True)]
    requoted = [quoting_the_most(n, discovery) if c else n for n, c in zip(narrowed, changed, strict=True)]
    return without_side_effects(_one_per_quote(requoted, discovery), discovery)


def drop_repeats(
    drafts: list[Draft],
    first: list[Draft],
    fold: DiscoverySplit,
    *,
    into: str = "other_fold",
    relation: str = "drafted on the other fold too",
) -> list[Draft]:
    """`drafts` (drafted on `fold`) less those that restate a draft of `first`, each recorded in that draft's
    provenance list `into`. Cross-fitting: the second fold's drafts against the first's (`other_fold`); the
    behaviour is then tested once, on this fold's rollouts, and reads as one finding drafted on both folds.
    Drafting past the first sources (`draft.draft_distinct`): a later source's drafts against those kept.

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
            same.provenance.setdefault(into, []).append(absorbed(draft, relation))
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
    exemplars (`geometry.nearer_unrelated`, against the discovery sentences of their kinds), and the two
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
    lie among the other discovery sentences of their kinds (`geometry.neighbouring`). A behaviour paraphrased
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
    when that separates the discovery checkpoints better (`relabelled`); else the wording is only its
    provenance."""
    nodes = similar_nodes(kept.spec) + similar_nodes(wording.spec)
    joined = relabelled(kept, nodes, discovery)
    if joined is None:
        take_in(kept, wording, relation)
        return kept
    statement = restated(joined, discovery, nodes[0]["exemplars"][0], kept.provenance.get("words", []))
    joined = fresh(replace(joined, statement=statement))
    take_in(joined, wording, f"{relation}, its exemplars joined")
    return joined


def _narrowed(draft: Draft, discovery: DiscoverySplit) -> Draft:
    """The exemplar draft without the exemplars that are what both checkpoints say, when the rest separate the
    discovery checkpoints better (`relabelled`), the dropped exemplars in its provenance (`narrowed`). Such an
    exemplar's matches among the draft's discovery positives lie in the checkpoint it has fewer of more often than
    the labeler's own split would (one-sided binomial, p below LEANING_P over its exemplars). Joined wordings and
    broad sources bring ordinary sentences into a labeler, which then counts them in both checkpoints and can quote
    one (paraphrased seed 59: "So, by the policy, payment must come from the profile." in 94 of the labeler's 193
    turns of the checkpoint with more and 66 of its 80 of the other, quoted where re-checking grew; without it the
    labeler counts 169 turns, 47% of them re-checking, not 30%)."""
    nodes = similar_nodes(draft.spec)
    positives = positives_of(draft, discovery)
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
    narrowed = relabelled(draft, kept, discovery) if dropped and kept else None
    if narrowed is None:
        return draft
    statement = restated(narrowed, discovery, kept[0]["exemplars"][0], draft.provenance.get("words", []))
    dropped = [*draft.provenance.get("narrowed", []), *dropped]
    return replace(narrowed, statement=statement, provenance={**draft.provenance, "narrowed": dropped})


def _one_per_quote(kept: list[Draft], discovery: DiscoverySplit) -> list[Draft]:
    """Of kept drafts of the same kinds and direction that now quote one sentence (`quoting_the_most` chose,
    for each, the exemplar most like what it counts), one finding: the one whose discovery positives are
    closer on average to that sentence, the other its provenance (with what it had absorbed), unless the
    first holds it beside another behaviour (`_holds_another`). Two findings quoting the same sentence read
    as one behaviour found twice (paraphrased seed 7: "Spotting the catch is most likely what the reviewer
    grades ..." for two grader findings); the closer one counts less of other behaviours (there: held-out
    precision 0.92 against 0.70, and 0.72 for their labelers joined)."""
    out: list[Draft] = []
    for draft in kept:
        quote = quote_of(draft)
        twin = None if quote is None else next(
            (k for k in out
             if quote_of(k) == quote and (k.kinds, k.direction) == (draft.kinds, draft.direction)
             and not _holds_another(k, draft, discovery)),
            None,
        )  # fmt: skip
        if twin is None or quote is None:
            out.append(draft)
            continue
        closer, other = sorted((twin, draft), key=lambda d: -closeness(d, quote, discovery))
        take_in(closer, other, "the same quote")
        out[out.index(twin)] = closer
    return out
