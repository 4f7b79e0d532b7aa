"""What the per-rollout count test of a held-out claim found (computed in `engine.hypotheses.validate`), in words
for provenance. A claim's rate is a share of each rollout's turns, so a sentence said once a conversation ("Hi!
How can I help you today?") falls as a share when conversations take more turns, with no change in what the
model says; the number of turns like it a rollout tells the two apart. Free of numpy and polars: the TUI
imports it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Turns a rollout that moved by less than this share of the turns before are no reason for caution: noise alone
# moves the mean that much, and a once-a-conversation sentence's share by as little.
MIN_TURN_CHANGE = 0.1


@dataclass(frozen=True)
class TurnCount:
    """The change in turns like the claim's a rollout (the main test's design, each rollout's count as its
    value), beside the turns of the claim's kinds a rollout in each checkpoint."""

    delta: float
    ci_low: float | None
    ci_high: float | None
    p_value: float
    turns_before: float
    turns_after: float
    caution: bool = False  # set on a validated claim it does not support (`needs_caution`)
    q_value: float | None = None  # BH q among the validated claims whose turns a rollout moved their way

    def moved(self, sign: float) -> bool:
        """Whether the turns a rollout changed the way that moves a claim in direction `sign` (+1 more, -1 fewer)
        by itself, by MIN_TURN_CHANGE or more: fewer turns raise the share of a once-a-rollout sentence, more
        lower it."""
        return -sign * (self.turns_after - self.turns_before) > MIN_TURN_CHANGE * self.turns_before

    def needs_caution(self, sign: float, fdr: float) -> bool:
        """Whether a validated claim in direction `sign` may be the number of turns alone: the turns `moved` its
        way and the turns like it a rollout did not change its way (q below `fdr`). A claim against the change
        in turns is conservative under it, so it gets no caution."""
        level = self.p_value if self.q_value is None else self.q_value
        return self.moved(sign) and not (sign * self.delta > 0 and level < fdr)

    def caution_text(self, sign: float) -> str:
        return f"it may be {'fewer' if sign > 0 else 'more'} turns: {self.phrase()}"

    def phrase(self) -> str:
        """E.g. 'turns like it a rollout +0.02 (CI -0.10 to +0.14), p=0.8, q=0.8; turns a rollout 6.1 -> 9.0'."""
        turns = f"turns a rollout {self.turns_before:.1f} -> {self.turns_after:.1f}"
        lo, hi = self.ci_low, self.ci_high
        interval = "" if lo is None or hi is None else f" (CI {lo:+.2f} to {hi:+.2f})"
        q = "" if self.q_value is None else f", q={self.q_value:.2g}"
        return f"turns like it a rollout {self.delta:+.2f}{interval}, p={self.p_value:.2g}{q}; {turns}"

    def as_json(self) -> dict[str, float | bool | None]:
        return asdict(self)
