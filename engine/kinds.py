"""rldiff's vocabulary: segment kinds (the store's `segments.kind`), feature sources, directions, delta sorts,
and the pre-declared testing families; each a `Literal` type with the tuple of its values.
Imports only `typing`, so anything may use it."""

from typing import Literal, get_args

Kind = Literal["reasoning", "text", "tool_call"]
SEGMENT_KINDS: tuple[Kind, ...] = get_args(Kind)
# The rollout-level view of a feature in the deltas: fires anywhere in the rollout.
ANY: Literal["any"] = "any"
DeltaKind = Literal["reasoning", "text", "tool_call", "any"]

Source = Literal["sae", "structural", "concept", "group"]  # features.source
SOURCES: tuple[Source, ...] = get_args(Source)
Direction = Literal["increase", "decrease"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
DeltaSort = Literal["abs_delta", "increase", "decrease", "q", "label"]  # orders of the deltas table
DELTA_SORTS: tuple[DeltaSort, ...] = get_args(DeltaSort)

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
