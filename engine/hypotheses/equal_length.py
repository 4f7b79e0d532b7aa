"""What the equal-length test of a held-out claim found (computed in `engine.hypotheses.length`), in words for
provenance, and which claims it does not apply to. Free of numpy and polars: the TUI imports it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

LENGTH_FEATURE = "length:"  # prefix of the structural length bands (engine.features.structural)
# A length change smaller than this share of the words before is no reason for caution: a turn 5% longer
# raises a 'contains' rate by at most about 5% of itself, and noise alone moves the mean words that much.
MIN_LENGTH_CHANGE = 0.05


@dataclass(frozen=True)
class EqualLength:
    """The equal-length test of one claim, beside the words per labelled turn without the claimed content in
    each checkpoint."""

    delta: float
    ci_low: float | None
    ci_high: float | None
    p_value: float
    words_before: float
    words_after: float
    caution: bool = False  # set on a validated claim it does not support (`needs_caution`)
    # BH q of `p_value` among the validated claims whose turns changed length their way (`moved`); None where
    # the claim is not one of them (or in a store written before the q was kept)
    q_value: float | None = None

    @property
    def informative(self) -> bool:
        """False where no stratum varies (every turn of a length labelled alike): length and label coincide, and
        the test cannot tell a behaviour from its length."""
        return self.ci_low is not None and self.ci_high is not None

    def moved(self, sign: float) -> bool:
        """Whether the turns without the claimed content grew (or shrank) the way a claim in direction `sign`
        (+1 more, -1 fewer) says, by MIN_LENGTH_CHANGE or more, which raises (or lowers) any 'contains' rate by
        itself, and the test can tell (`informative`): the claims whose face value rests on this test."""
        grew = sign * (self.words_after - self.words_before) > MIN_LENGTH_CHANGE * self.words_before
        return grew and self.informative

    def needs_caution(self, sign: float, fdr: float) -> bool:
        """Whether a validated claim in direction `sign` may be length alone: its turns `moved` its way and it
        does not hold at equal length (q below `fdr` in its direction; the p where no q was computed). A claim
        against the length change is conservative under length, and another behaviour's added sentences lower
        the equal-length rate, so neither gets a caution, and none rejects."""
        level = self.p_value if self.q_value is None else self.q_value
        return self.moved(sign) and not (sign * self.delta > 0 and level < fdr)

    def caution_text(self, sign: float) -> str:
        return f"it may be {'longer' if sign > 0 else 'shorter'} turns: {self.phrase()}"

    def phrase(self) -> str:
        """E.g. 'at equal turn length +4.1 pts (CI +1.0 to +7.2), p=0.003, q=0.009; turns without it 120 -> 180
        words'."""
        turns = f"turns without it {self.words_before:.0f} -> {self.words_after:.0f} words"
        lo, hi = self.ci_low, self.ci_high
        if lo is None or hi is None:
            return f"at equal turn length: no variation within lengths (length and label coincide); {turns}"
        interval = f"CI {lo * 100:+.1f} to {hi * 100:+.1f}"
        q = "" if self.q_value is None else f", q={self.q_value:.2g}"
        return f"at equal turn length {self.delta * 100:+.1f} pts ({interval}), p={self.p_value:.2g}{q}; {turns}"

    def as_json(self) -> dict[str, float | bool | None]:
        return asdict(self)


def about_length(spec: Any) -> bool:
    """Whether a verifier spec tests a length band itself (standardising it over length would erase it)."""
    if isinstance(spec, dict):
        name = spec.get("structural")
        if isinstance(name, str) and name.startswith(LENGTH_FEATURE):
            return True
        return any(about_length(v) for v in spec.values() if isinstance(v, dict | list))
    if isinstance(spec, list):
        return any(about_length(v) for v in spec)
    return False
