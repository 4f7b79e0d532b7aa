"""The kinds of segment rldiff analyses (the store's `segments.kind`) and the pre-declared testing families.
Imports nothing, so anything may use it."""

SEGMENT_KINDS: tuple[str, ...] = ("reasoning", "text", "tool_call")
# The rollout-level view of a feature in the deltas: fires anywhere in the rollout.
ANY = "any"

# Each family gets its own Benjamini-Hochberg correction (docs/statistics.md): a few strong structural tests
# must not drown among thousands of SAE tests, and rollout-level rows (which length can move) stay apart.
FAMILIES: tuple[str, ...] = ("structural", "sae", "concept", "lexical", "rollout")
ROLLOUT_FAMILY = "rollout"
# features.source -> family; concept features and behaviour groups are one family.
SOURCE_FAMILIES: dict[str, str] = {"structural": "structural", "sae": "sae", "concept": "concept", "group": "concept"}


def family_of(source: str, kind: str) -> str:
    """The testing family of a feature of `source` on segment `kind` ('any' rows are the rollout family).
    A source not listed is its own family, so a new source never joins another's correction silently."""
    if kind == ANY:
        return ROLLOUT_FAMILY
    return SOURCE_FAMILIES.get(source, source)
