"""rldiff's vocabulary: segment kinds (the store's `segments.kind`), feature sources, directions, delta sorts,
the pre-declared testing families, hypothesis statuses, decisions, labelers and splits; each a `Literal` type
with the tuple of its values. Imports only `typing`, so anything may use it (the TUI included)."""

from typing import Literal, get_args

Kind = Literal["reasoning", "text", "tool_call"]
SEGMENT_KINDS: tuple[Kind, ...] = get_args(Kind)
# The rollout-level view of a feature in the deltas: fires anywhere in the rollout.
ANY: Literal["any"] = "any"
DeltaKind = Literal["reasoning", "text", "tool_call", "any"]
DELTA_KINDS: tuple[DeltaKind, ...] = get_args(DeltaKind)

Source = Literal["sae", "structural", "concept", "group"]  # features.source
SOURCES: tuple[Source, ...] = get_args(Source)
# Features whose examples and labels are sentences (concepts and behaviour groups), not token n-grams.
SENTENCE_SOURCES: tuple[Source, ...] = ("concept", "group")
Direction = Literal["increase", "decrease"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
DeltaSort = Literal["abs_delta", "increase", "decrease", "q", "label"]  # orders of the deltas table
DELTA_SORTS: tuple[DeltaSort, ...] = get_args(DeltaSort)

# Each family gets its own Benjamini-Hochberg correction (docs/statistics.md): a few strong structural tests
# must not drown among thousands of SAE tests, and rollout-level rows (which length can move) stay apart, the
# structural facts' ('rollout': calls a tool, meets an error; a few dozen) from the latents' ('latent_rollout':
# SAE latents, concepts and groups, hundreds).
Family = Literal["structural", "sae", "concept", "lexical", "rollout", "latent_rollout"]
FAMILIES: tuple[Family, ...] = get_args(Family)
# features.source -> family; concept features and behaviour groups are one family.
SOURCE_FAMILIES: dict[str, Family] = {
    "structural": "structural",
    "sae": "sae",
    "concept": "concept",
    "group": "concept",
}

# hypotheses.status. 'exploratory': written after held-out evidence was shown, so never 'validated' whatever its
# test said (engine/hypotheses/exposure.py).
Status = Literal["proposed", "validated", "rejected", "inconclusive", "exploratory"]
HYPOTHESIS_STATUSES: tuple[Status, ...] = get_args(Status)
EXPLORATORY: Status = "exploratory"
Decision = Literal["accepted", "rejected"]  # hypotheses.decision, a person's triage; NULL is undecided
DECISIONS: tuple[Decision, ...] = get_args(Decision)
# The triage filter: a decision, or "undecided" for hypotheses without one.
DecisionFilter = Literal["accepted", "rejected", "undecided"]
DECISION_FILTERS: tuple[DecisionFilter, ...] = get_args(DecisionFilter)
UNDECIDED: DecisionFilter = "undecided"
Labeler = Literal["verifier", "judge"]  # hypotheses.labeler: a verifier spec, or an LLM judge's question
LABELERS: tuple[Labeler, ...] = get_args(Labeler)
Split = Literal["discovery", "heldout"]  # rollouts.split; also 'excluded' (by --where) and NULL (before the split)
SPLITS: tuple[Split, ...] = get_args(Split)
DISCOVERY: Split = "discovery"
HELDOUT: Split = "heldout"


def family_of(source: str, kind: str) -> str:
    """The testing family of a feature of `source` on segment `kind`: 'any' rows are the rollout family for
    structural facts, the latent_rollout family for every other source. A source not listed is its own family,
    so a new source never joins another's correction silently."""
    if kind == ANY:
        return "rollout" if source == "structural" else "latent_rollout"
    return SOURCE_FAMILIES.get(source, source)
