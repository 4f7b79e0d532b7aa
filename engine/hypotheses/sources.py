"""What hypotheses are drafted from: clusters and unclustered features whose discovery change passes the drafting
level (`DRAFT_FDR`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from engine.deltas.ranking import conservative_effect
from engine.hypotheses.equal_length import LENGTH_FEATURE
from engine.hypotheses.length import BINNED_KINDS
from engine.hypotheses.verifier import KINDS
from engine.kinds import DISCOVERY, FAMILIES
from engine.store import Store
from engine.store.queries import ngram_list

# Distinct drafts (after merging) drafting aims at: the sources are taken in order until this many remain
# or `MAX_DRAFTED` have been drafted (`SourceQueue`, `engine.hypotheses.draft.draft_distinct`).
MAX_SOURCES = 40
# At most this many sources are drafted in a study. A behaviour said in many wordings fills the first 40 with
# its concept features, whose drafts merge into one: on the shift suite the first 40 sources (and the n-grams)
# gave 7-21 distinct drafts, and seed 7738's overclaiming, its concepts at q = 0.42, was never drafted. The
# bound is drafting's time: the demo pair's hypotheses stage takes 42 s with 40 sources, 57 s with up to 80
# and 90 s with up to 120 (docs/benchmarks.md, session 46).
MAX_DRAFTED = 2 * MAX_SOURCES
# The q below which a feature, cluster or n-gram is drafted, in every study. Drafting only chooses which claims
# the held-out test sees; that test, one BH family with every other, decides, whatever the drafting level, so a
# source is drafted when at most half of those so listed are expected to be noise. What a lower bar costs is
# power (more claims in the held-out family, each needing a smaller p), and `MAX_SOURCES` bounds it. A behaviour
# said in many wordings is spread over many concept latents, each a part of it tested among hundreds of its
# family: a small study's folds drafted nothing at q < fdr (session 28), and in a 40-task study where grader
# awareness rose two- to threefold its strongest latent stood at p = 0.0002, q = 0.09, and nothing of it was
# drafted (shift suite, seed 7716); at q < 0.5 a finding of it validates on held-out tasks (7.3% -> 17.4% of
# reasoning turns, p = 7.5e-05).
DRAFT_FDR = 0.5
# Drafting takes sources from each testing family in turn (clusters of SAE latents as one more queue, before
# the SAE family whose features they group): q-values from separate BH corrections do not compare, and a few strong
# structural or concept findings must not wait behind hundreds of SAE latents.
_DRAFT_ORDER: tuple[str, ...] = (
    "structural",
    "concept",
    "cluster",
    *(f for f in FAMILIES if f not in ("structural", "concept")),
)


@dataclass(frozen=True)
class SourceQueue:
    """What a study drafts from: `ranked` in drafting order, and `beside` (length bands of text or reasoning
    turns), drafted whatever the limit."""

    ranked: list[DraftSource]
    beside: list[DraftSource]

    def first(self, limit: int) -> list[DraftSource]:
        return self.ranked[:limit] + self.beside


@dataclass(frozen=True)
class DraftSource:
    """A cluster or a single feature whose prevalence changed on the discovery split."""

    kinds: tuple[str, ...]
    feature_ids: tuple[int, ...]  # a cluster's members strongest first
    names: tuple[str, ...]
    labels: tuple[str, ...]
    delta: float
    q_value: float
    prevalence_before: float | None
    prevalence_after: float | None
    cluster_id: int | None = None
    top_ngrams: tuple[str, ...] = field(default=())
    origins: tuple[str, ...] = field(default=())  # features.source of each feature ('ngram' for a lexical source)

    @property
    def origin(self) -> str:
        """What the source is drafted as: 'concept' (concept and group features only), 'structural' (structural
        features, or a cluster whose strongest member is one: SAE latents that merely fire with a fact name
        none), 'ngram', or 'sae' (SAE features, or another mix)."""
        kinds = set(self.origins)
        if kinds and kinds <= {"concept", "group"}:
            return "concept"
        if self.origins and self.origins[0] == "structural":
            return "structural"
        return next(iter(kinds)) if len(kinds) == 1 and kinds < {"ngram", "sae"} else "sae"

    @property
    def direction(self) -> str:
        return "increase" if self.delta > 0 else "decrease"

    @property
    def title(self) -> str:
        if not self.feature_ids:
            return f"phrase {self.labels[0]}"
        what = f"cluster {self.cluster_id}" if self.cluster_id is not None else f"feature {self.feature_ids[0]}"
        return f"{what} ({'; '.join(self.labels[:3])})"

    def provenance(self) -> dict[str, object]:
        return {
            "cluster_id": self.cluster_id,
            "feature_ids": list(self.feature_ids),
            "feature_names": list(self.names),
            "kinds": list(self.kinds),
            "discovery_delta": self.delta,
            "discovery_q": self.q_value,
        }


def _kinds(kind: str) -> tuple[str, ...]:
    return KINDS if kind == "any" else (kind,)


def source_queue(store: Store, fdr: float, significant: float | None = None) -> SourceQueue:
    """Clusters and the features no cluster covers at q < `fdr` (the stage's drafting level), strongest first
    within each testing family, taken from the families in turn (`_DRAFT_ORDER`): first those at q <
    `significant` (the study's FDR level; all of them when None), then the others. A looser level adds sources
    behind the significant ones and takes none of their places: taken in one turn, the weak rows of the
    structural, SAE and rollout families crowded a significant empathy concept out of the 40 slots (shift suite,
    seed 7722), and its finding with it. Beside them every such length band of text or reasoning turns (a fact
    about length, drafted so that `length_effects` can tell what it explains, takes no other source's place)."""
    features = store.frame("SELECT feature_id, source, name, label, top_ngrams FROM features")
    info = {r["feature_id"]: r for r in features.iter_rows(named=True)}
    kind_labels = store.frame("SELECT feature_id, kind, label FROM feature_kind_labels")
    called = {(f, kind): label for f, kind, label in kind_labels.iter_rows()}  # a kind's label, where there is one
    queues: dict[str, list[DraftSource]] = {}
    lengths: list[DraftSource] = []
    covered: set[tuple[int, str]] = set()
    clusters = strongest_first(
        store.frame(
            "SELECT cluster_id, kind, delta, q_value, prevalence_before, prevalence_after, ci_low, ci_high "
            "FROM clusters WHERE q_value < ? AND delta IS NOT NULL AND delta <> 0",
            [fdr],
        ),
        "cluster_id",
    )
    # A cluster's members strongest first; at equal membership a latent before a fact, so that a fact firing
    # exactly with a behaviour's latents (money amounts with re-checking) leaves the cluster their phrase.
    members = store.frame(
        "SELECT m.cluster_id, m.feature_id FROM cluster_members m JOIN features f USING (feature_id) "
        "ORDER BY m.cluster_id, m.membership DESC, f.source = 'structural', m.feature_id"
    )
    for c in clusters.iter_rows(named=True):
        ids = members.filter(pl.col("cluster_id") == c["cluster_id"])["feature_id"].to_list()
        if not ids:
            continue
        # a concept or group feature in a cluster is still drafted on its own: its sentences name a behaviour,
        # where the cluster's draft is the phrase of its strongest (SAE) member (docs/concepts.md); so is a
        # length band, a change of its own that may explain others (`length_effects`)
        covered.update((i, c["kind"]) for i in ids if not _drafted_alone(info[i], c["kind"]))
        queues.setdefault(_cluster_queue({info[i]["source"] for i in ids}), []).append(
            DraftSource(
                _kinds(c["kind"]),
                tuple(ids),
                tuple(info[i]["name"] for i in ids),
                tuple(called.get((i, c["kind"]), info[i]["label"]) for i in ids),
                c["delta"],
                c["q_value"],
                c["prevalence_before"],
                c["prevalence_after"],
                cluster_id=c["cluster_id"],
                top_ngrams=tuple(g for i in ids for g in ngram_list(info[i]["top_ngrams"])),
                origins=tuple(info[i]["source"] for i in ids),
            )
        )
    deltas = strongest_first(
        store.frame(
            "SELECT feature_id, kind, coalesce(family, 'sae') AS family, delta, q_value, prevalence_before, "
            "prevalence_after, ci_low, ci_high FROM feature_deltas "
            "WHERE tested AND q_value < ? AND delta IS NOT NULL AND delta <> 0",
            [fdr],
        ),
        "feature_id",
        "kind",
    )
    # A feature significant for a segment kind is drafted for that kind; its rollout-level ('any') row only
    # when no segment kind is significant.
    by_kind = {d["feature_id"] for d in deltas.iter_rows(named=True) if d["kind"] != "any"}
    for d in deltas.iter_rows(named=True):
        f = info.get(d["feature_id"])
        if f is None or (d["feature_id"], d["kind"]) in covered or (d["kind"] == "any" and d["feature_id"] in by_kind):
            continue
        (lengths if _turn_length(f, d["kind"]) else queues.setdefault(d["family"], [])).append(
            DraftSource(
                _kinds(d["kind"]),
                (f["feature_id"],),
                (f["name"],),
                (called.get((f["feature_id"], d["kind"]), f["label"]),),
                d["delta"],
                d["q_value"],
                d["prevalence_before"],
                d["prevalence_after"],
                top_ngrams=tuple(ngram_list(f["top_ngrams"])),
                origins=(f["source"],),
            )
        )
    strong = significant if significant is not None else fdr
    first = {name: [s for s in queue if s.q_value < strong] for name, queue in queues.items()}
    then = {name: [s for s in queue if s.q_value >= strong] for name, queue in queues.items()}
    return SourceQueue(_in_turn(first) + _in_turn(then), lengths)


def strongest_first(rows: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """Significant rows (delta, q_value, ci_low, ci_high), the largest credible change first: the distance of
    the 95% interval from 0 (the exploratory ranking's score), then |delta|, then `keys`. Not by q: the
    clearest changes share the refined Monte Carlo floor, where their q-values, and so which sources a limit
    kept and which draft absorbed which, were the random draws' (session 39)."""
    return rows.with_columns(score=conservative_effect(), size=pl.col("delta").abs()).sort(
        ["score", "size", *keys], descending=[True, True] + [False] * len(keys)
    )


def _drafted_alone(feature: dict[str, str], kind: str) -> bool:
    """Whether a feature is drafted on its own even inside a cluster (of segments of `kind`): a concept or
    group feature, or a turn-length band."""
    return feature["source"] in ("concept", "group") or _turn_length(feature, kind)


def _turn_length(feature: dict[str, str], kind: str) -> bool:
    """Whether a feature is a length band of text or reasoning turns (`kind`), whose relation to the sentence
    drafts of the same turns `length_effects` decides. A tool call's length stays an ordinary structural fact
    (a hand-off tool with long summaries gone makes short calls the rule: the tool's finding explains it)."""
    return feature["name"].startswith(LENGTH_FEATURE) and kind in BINNED_KINDS


def _cluster_queue(sources: set[str]) -> str:
    """A cluster waits with the structural or concept family when it holds such a feature: its statement is
    then that feature's fact (where the fact is its strongest member, `DraftSource.origin`) or sentence,
    not an SAE latent's phrase."""
    if "structural" in sources:
        return "structural"
    return "concept" if sources & {"concept", "group"} else "cluster"


def _in_turn(queues: dict[str, list[DraftSource]]) -> list[DraftSource]:
    """The first of each queue (in `_DRAFT_ORDER`, then any other), then the second of each, and so on."""
    order = [q for q in _DRAFT_ORDER if q in queues] + [q for q in queues if q not in _DRAFT_ORDER]
    picked: list[DraftSource] = []
    for rank in range(max((len(q) for q in queues.values()), default=0)):
        picked.extend(queues[name][rank] for name in order if rank < len(queues[name]))
    return picked


def firing_segments(store: Store, feature_ids: list[int]) -> pl.DataFrame:
    """segment_id, feature_id, activation where each feature fires (activation above its threshold)."""
    return store.frame(
        "SELECT sf.segment_id, sf.feature_id, sf.activation FROM segment_features sf "
        "JOIN features f USING (feature_id) WHERE sf.activation > f.threshold "
        "AND sf.feature_id IN (SELECT unnest(?::BIGINT[]))",
        [feature_ids],
    )


def example_sentences(store: Store, feature_ids: list[int]) -> list[str]:
    """The features' top discovery examples as their evidence spans (a concept's is its sentence): the span of
    each example's highest activation over its segment's text, or the whole text when it has no spans."""
    rows = store.frame(
        "SELECT s.text, e.tokens FROM feature_examples e JOIN segments s USING (segment_id) "
        "JOIN rollouts r USING (rollout_key) WHERE r.split = ? "
        "AND e.feature_id IN (SELECT unnest(?::BIGINT[])) ORDER BY e.rank, e.feature_id",
        [DISCOVERY, feature_ids],
    )
    out = []
    for text, tokens in rows.iter_rows():
        spans = json.loads(tokens) if isinstance(tokens, str) else tokens
        if spans:
            start, end, _ = max(spans, key=lambda span: span[2])
            text = text[int(start) : int(end)]
        if text.strip():
            out.append(text.strip())
    return list(dict.fromkeys(out))
