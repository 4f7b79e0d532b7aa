"""Benchmark: calibration of the deltas' statistics by replication, through the real `compute_deltas`.

    .venv/bin/python bench/calibration.py [--studies 200] [--seed 0] [--scenarios clean,length,...]

Each scenario simulates `--studies` independent studies of nested rollout data (tasks, rollouts per
checkpoint, segments per rollout; task effects, rollout effects and a shared rollout factor make features
correlated and clustered) and runs each through `engine.deltas.compute_deltas`. Null scenarios change nothing
in the per-segment behaviour; the others plant known shifts (per-segment rates, or the share of rollouts in
which an "event" feature fires). Printed per scenario and family: size (share of null rows with p < 0.05), the
share of studies with any false q < 0.05, FDR, CI coverage of the true effect, and power (share of planted rows
with q < 0.05), each with its target; where shifts are planted, the coverage among planted rows alone and
their mean estimate over the truth (1 without bias). Beside the power, a reference on the same studies: a
Cochran-Mantel-Haenszel test by task on pooled counts, BH in the family, with every segment (or call) an
independent unit for segment-level rows and every rollout a unit for 'any' rows. For segment-level rows it
ignores the clustering of segments within rollouts, so it is too liberal (its size is printed too) and its
power is more than the usual valid tests of the design reach: where the reference is below a power target,
that design does not carry the information for it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy import stats

from engine.deltas import ANY, DiscoveryCounts, compute_deltas
from engine.kinds import family_of
from engine.progress import NullProgress
from engine.stats.design import task_onehot
from engine.stats.fdr import family_qvalues

N_TOOLS = 3  # tools the structural (tool-call) features are about, one feature family per tool
LEVEL = 0.05
# Per-call firing probability of the SAE tool-call features on calls to the new tool: far above their rate on
# the other tools (about 0.1), so a share of all tool calls rises with the new tool's share alone.
NEW_TOOL_FIRING = 0.5
# Nominal levels at which the null p-values' tail is compared with its expected share (invalid tails can hide
# behind a nominal size at 0.05 and still break BH, which uses the smallest p-values).
TAILS = (0.001, 0.005, 0.01)


@dataclass(frozen=True)
class Scenario:
    """One simulated design. Multipliers apply to the after checkpoint's segment counts."""

    name: str
    n_tasks: int = 40
    per_cell: int = 4
    n_text: int = 20  # SAE-family features on text segments
    n_tool: int = 12  # structural features on tool calls, N_TOOLS tools
    tool_messages: float = 6.0  # mean tool-call messages per rollout (one call each, N_TOOLS tools)
    n_sae_tool: int = 0  # SAE-family features firing on calls to every tool, the new one included
    length: float = 1.0  # after-rollouts' segments, x
    task_length_sd: float = 0.0  # sd of a per-task log length change, tied to the task's rate
    factor_loading: float = 0.6  # every feature's loading on one rollout factor (0: independent given the task)
    new_tool_share: float = 0.0  # share of tool-call messages given an extra call to a new tool (after)
    unbalanced: bool = False  # cell sizes follow the task's rate (after cells larger in high-rate tasks)
    shift: float = 0.0  # planted per-segment probability shift (after) on the first `n_shifted` of each family
    n_shifted: int = 0
    # Structural "event" features that fire in at most one text segment of a rollout (a hand-off, say): the
    # share of rollouts with one moves by +-event_shift (alternating signs), so their 'any' rows (the rollout
    # family) carry a known truth.
    n_events: int = 0
    event_shift: float = 0.0
    targets: dict[str, float] = field(default_factory=dict)

    @property
    def null(self) -> bool:
        return self.n_shifted == 0 and self.event_shift == 0


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("clean"),
        Scenario("length", length=1.6),
        Scenario("task_length", task_length_sd=0.5),
        Scenario("composition", new_tool_share=0.25),
        Scenario("composition_sae", new_tool_share=0.25, n_sae_tool=12),
        Scenario("unbalanced", unbalanced=True),
        Scenario("few_tasks", n_tasks=4, per_cell=16, task_length_sd=0.5),
        Scenario("coverage_10", n_tasks=10, shift=0.08, n_shifted=4),
        Scenario("coverage_20", n_tasks=20, shift=0.08, n_shifted=4),
        Scenario("power_40", n_tasks=40, shift=0.08, n_shifted=4),
        Scenario("power_40_calls", n_tasks=40, shift=0.08, n_shifted=4, tool_messages=30.0),
        Scenario("structural_4x8", n_tasks=4, per_cell=8, shift=0.30, n_shifted=4, n_text=10),
        Scenario("independent", factor_loading=0.0),  # the seeds of those above stay those of earlier runs
        Scenario("rollout_4x8", n_tasks=4, per_cell=8, n_text=10, n_events=4, event_shift=0.30),
        Scenario("rollout_40", n_tasks=40, n_events=4, event_shift=0.15),
        # Few calls a rollout: many rollouts call a tool not at all, so a tool's within-task contrast rests on
        # the rollouts that do (the effect is a mean over (task, tool) cells, not over every rollout).
        Scenario("coverage_few_calls", n_tasks=20, shift=0.08, n_shifted=4, tool_messages=1.5),
    )
}


def _cell_sizes(scenario: Scenario, task_effect: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n_tasks, 2) rollouts per (task, checkpoint): equal, or (unbalanced) after cells growing with task rate."""
    sizes = np.full((scenario.n_tasks, 2), scenario.per_cell)
    if scenario.unbalanced:
        tilt = np.clip(np.round(2.5 * task_effect), -3, 3).astype(int)
        sizes[:, 0] = scenario.per_cell - tilt
        sizes[:, 1] = scenario.per_cell + tilt
    return np.maximum(sizes, 1)


def _events(
    scenario: Scenario, logit: np.ndarray, is_after: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(n_rollouts, n_events) 0/1 event features (one firing text segment when 1) from their (n_rollouts,
    n_events) `logit`, and each one's planted shift in the share of rollouts (alternating signs; rates near 0 or
    1 are clipped, so the realised shift can be a little smaller: the sign is what power counts)."""
    shift = scenario.event_shift * np.where(np.arange(scenario.n_events) % 2 == 0, 1.0, -1.0)
    prob = np.clip(1 / (1 + np.exp(-logit)) + is_after[:, None] * shift, 0, 1)
    return (rng.random(logit.shape) < prob).astype(float), shift


def simulate(scenario: Scenario, rng: np.random.Generator) -> tuple[DiscoveryCounts, np.ndarray, np.ndarray]:
    """One study: (its counts, true effect per feature column on its own kind, true effect on its 'any' row),
    NaN where the truth is unknown.

    The SAE tool-call features fire on the new tool's calls, so their "fires anywhere" truly rises with the new
    tool: their 'any' rows have no known truth."""
    g = scenario.n_tasks
    task_effect = rng.normal(0, 1, g)
    sizes = _cell_sizes(scenario, task_effect, rng)
    task = np.concatenate([np.repeat(t, sizes[t].sum()) for t in range(g)])
    is_after = np.concatenate([np.r_[np.zeros(sizes[t, 0], bool), np.ones(sizes[t, 1], bool)] for t in range(g)])
    n = task.size
    multiplier = np.where(is_after, scenario.length, 1.0)
    if scenario.task_length_sd:
        multiplier = multiplier * np.where(is_after, np.exp(scenario.task_length_sd * task_effect[task]), 1.0)
    messages = rng.poisson(scenario.tool_messages * multiplier) + 1
    text_segments = rng.poisson(10 * multiplier) + 1
    tool_of_call = rng.multinomial(messages, np.full(N_TOOLS, 1 / N_TOOLS))  # (n, N_TOOLS) one call per message
    new_calls = rng.binomial(messages, scenario.new_tool_share * is_after)
    factor = rng.normal(0, 1, n)  # a rollout-level factor every feature loads on: correlated features

    def logits(base: np.ndarray) -> np.ndarray:
        """(n, features) firing logits around each feature's `base`: task, task-feature, shared-factor and
        rollout-feature effects."""
        return (
            base
            + 0.8 * task_effect[task][:, None]
            + rng.normal(0, 0.5, (g, base.size))[task]
            + scenario.factor_loading * factor[:, None]
            + rng.normal(0, 0.6, (n, base.size))
        )

    def probabilities(n_features: int) -> np.ndarray:
        prob = 0.6 / (1 + np.exp(-logits(rng.normal(-1.5, 0.7, n_features))))
        planted = is_after[:, None] & (np.arange(n_features) < scenario.n_shifted)
        return prob + scenario.shift * planted

    text_counts = rng.binomial(text_segments[:, None], probabilities(scenario.n_text))
    tool_feature = np.arange(scenario.n_tool) % N_TOOLS  # feature j fires only on calls to its tool
    tool_counts = rng.binomial(tool_of_call[:, tool_feature], probabilities(scenario.n_tool))
    n_fixed = scenario.n_text + scenario.n_tool
    m = n_fixed + scenario.n_sae_tool + scenario.n_events
    tool_totals = np.column_stack([tool_of_call, new_calls])
    per_tool = np.zeros((N_TOOLS + 1, n, m))  # firing calls per tool
    per_tool[tool_feature, :, scenario.n_text + np.arange(scenario.n_tool)] = tool_counts.T
    sae_tool = probabilities(scenario.n_sae_tool)  # same per-call rate on every old tool, NEW_TOOL_FIRING on the new
    sae_columns = slice(n_fixed, n_fixed + scenario.n_sae_tool)
    per_tool[:N_TOOLS, :, sae_columns] = rng.binomial(tool_of_call.T[:, :, None], sae_tool[None])
    per_tool[N_TOOLS, :, sae_columns] = rng.binomial(
        new_calls[:, None], np.full((n, scenario.n_sae_tool), NEW_TOOL_FIRING)
    )
    text = np.hstack([text_counts, np.zeros((n, m - scenario.n_text))])
    event_shift = np.zeros(0)
    if scenario.n_events:
        events, event_shift = _events(scenario, logits(rng.normal(0, 0.5, scenario.n_events)), is_after, rng)
        text[:, m - scenario.n_events :] = events
    tool = per_tool.sum(axis=0)
    support = (per_tool.sum(axis=1) > 0).astype(float)
    counts = {"text": sp.csc_array(text), "tool_call": sp.csc_array(tool), ANY: sp.csc_array((text + tool) > 0)}
    totals = {"text": text_segments.astype(float), "tool_call": tool_totals.sum(axis=1).astype(float)}
    totals[ANY] = np.ones(n)
    rollouts = pl.DataFrame(
        {
            "rollout_key": np.arange(n),
            "task_id": [f"t{t:03d}" for t in task],
            "task_code": task.astype(np.int64),
            "is_after": is_after,
            "reward": rng.random(n),
        }
    )
    source = ["sae"] * scenario.n_text + ["structural"] * scenario.n_tool + ["sae"] * scenario.n_sae_tool
    source += ["structural"] * scenario.n_events
    features = pl.DataFrame({"feature_id": np.arange(m), "source": source})
    truth = np.zeros(m)
    truth[: scenario.n_shifted] = scenario.shift
    truth[scenario.n_text : scenario.n_text + scenario.n_shifted] = scenario.shift
    # 'any' rows: null for unshifted fixed features; unknown for planted ones and the SAE tool-call features.
    any_truth = np.where(truth[:n_fixed] == 0, 0.0, np.nan)
    any_truth = np.r_[any_truth, np.full(scenario.n_sae_tool, np.nan), event_shift]
    truth[m - scenario.n_events :] = np.nan  # an event's rate among text segments: 1 / segments, no fixed truth
    data = DiscoveryCounts(
        rollouts,
        features,
        totals,
        counts,
        0,
        (text_segments + tool_totals.sum(axis=1)).astype(float),
        tool_totals.astype(float),
        sp.csr_array(support),
        tuple(sp.csc_array(part) for part in per_tool),
    )
    return data, truth, any_truth


@dataclass
class Tally:
    """Counts over the studies of one scenario, per family (and 'all')."""

    null_tests: dict[str, int] = field(default_factory=dict)
    null_p05: dict[str, int] = field(default_factory=dict)
    studies_false_q: dict[str, int] = field(default_factory=dict)
    false_discoveries: dict[str, int] = field(default_factory=dict)
    fdp_sum: dict[str, float] = field(default_factory=dict)
    planted: dict[str, int] = field(default_factory=dict)
    planted_found: dict[str, int] = field(default_factory=dict)
    covered: dict[str, int] = field(default_factory=dict)
    intervals: dict[str, int] = field(default_factory=dict)
    planted_covered: dict[str, int] = field(default_factory=dict)  # the same among planted rows alone
    planted_intervals: dict[str, int] = field(default_factory=dict)
    planted_estimate: dict[str, float] = field(default_factory=dict)  # sum of estimate / truth over them
    null_p: dict[str, list[np.ndarray]] = field(default_factory=dict)
    null_z: dict[str, list[np.ndarray]] = field(default_factory=dict)
    reference_found: dict[str, int] = field(default_factory=dict)  # planted rows the reference finds
    reference_null: dict[str, int] = field(default_factory=dict)  # its null rows, and those with p < 0.05
    reference_null_p05: dict[str, int] = field(default_factory=dict)

    def add(self, table: dict[str, int], family: str, value: float) -> None:
        table[family] = table.get(family, 0) + value


def run_study(scenario: Scenario, rng: np.random.Generator, n_permutations: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tested rows of one simulated study, with the truth beside them ('truth' NaN where unknown), and its
    independent-units reference (planted scenarios only; empty otherwise)."""
    data, truth, any_truth = simulate(scenario, rng)
    reference = pl.DataFrame() if scenario.null else independent_units_reference(scenario, data, truth, any_truth)
    tables = compute_deltas(data, rng, n_permutations=n_permutations, fdr=LEVEL, progress=NullProgress())
    rows = tables.deltas.filter(pl.col("tested"))
    true_effect = pl.DataFrame(
        {"feature_id": np.arange(truth.size), "truth": truth, "any_truth": any_truth}, nan_to_null=True
    )
    rows = rows.join(true_effect, on="feature_id")
    rows = rows.with_columns(truth=pl.when(pl.col("kind") == ANY).then("any_truth").otherwise("truth"))
    return rows.drop("any_truth"), reference


def signed_z(rows: pl.DataFrame) -> np.ndarray:
    """Each row's p-value as a normal score signed by its delta: mean 0 under a null without bias in either
    direction, a sharper check of a biased statistic (an offset that is wrong for long rollouts) than the
    size, whose two tails can cancel."""
    return np.sign(rows["delta"].to_numpy()) * stats.norm.isf(rows["p_value"].to_numpy() / 2)


def _cmh_p(counts: np.ndarray, totals: np.ndarray, task: np.ndarray, is_after: np.ndarray) -> np.ndarray:
    """Two-sided Cochran-Mantel-Haenszel p-value per column of (n_rollouts, k) `counts` out of `totals`, strata
    the tasks, the rollouts' segments pooled: each segment an independent unit."""

    onehot = task_onehot(task, int(task.max()) + 1)
    fired_after, n_after = onehot @ (counts * is_after[:, None]), onehot @ (totals * is_after[:, None])
    fired, n = onehot @ counts, onehot @ totals
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(n > 0, n_after * fired / n, 0.0)
        variance = np.where(n > 1, n_after * (n - n_after) * fired * (n - fired) / (n**2 * (n - 1)), 0.0)
        z = (fired_after - expected).sum(axis=0) / np.sqrt(variance.sum(axis=0))
    return np.where(np.isfinite(z), 2 * stats.norm.sf(np.abs(z)), np.nan)


def independent_units_reference(
    scenario: Scenario, data: DiscoveryCounts, truth: np.ndarray, any_truth: np.ndarray
) -> pl.DataFrame:
    """Each fixed feature on its own kind tested with its segments as independent units (`_cmh_p`), and every
    feature's 'any' row with its rollouts as units (no length adjustment: these scenarios change no length),
    BH within each family: the reference beside the power (module docstring). Structural features count calls
    to their own tool."""
    task, after = data.task, data.is_after
    text = _cmh_p(data.counts["text"][:, : scenario.n_text].toarray(), np.repeat(
        data.totals["text"][:, None], scenario.n_text, axis=1), task, after)  # fmt: skip
    per_tool = data.per_tool()
    assert per_tool is not None
    tool_totals, _, tool_counts = per_tool
    tools = np.arange(scenario.n_tool) % N_TOOLS
    columns = scenario.n_text + np.arange(scenario.n_tool)
    calls = np.column_stack([tool_counts[t][:, [c]].toarray()[:, 0] for t, c in zip(tools, columns, strict=True)])
    tool = _cmh_p(calls, tool_totals[:, tools], task, after)
    fires = data.counts[ANY].toarray().astype(float)
    anywhere = _cmh_p(fires, np.ones_like(fires), task, after)
    p = np.r_[text, tool, anywhere]
    family = np.r_[
        np.repeat("sae", scenario.n_text),
        np.repeat("structural", scenario.n_tool),
        [family_of(source, ANY) for source in data.features["source"].to_list()],
    ]
    return pl.DataFrame(
        {
            "family": family,
            "p_value": p,
            "q_value": family_qvalues(p, family),
            "truth": np.r_[truth[: scenario.n_text + scenario.n_tool], any_truth],
        },
        nan_to_null=True,
    )


def tally(scenario: Scenario, studies: int, seed: int, n_permutations: int) -> Tally:
    rng = np.random.default_rng(seed)
    out = Tally()
    for _ in range(studies):
        rows, reference = run_study(scenario, rng, n_permutations)
        for family, part in reference.group_by("family") if reference.height else []:
            family = family[0]
            out.add(out.reference_found, family, int(((part["truth"] != 0) & (part["q_value"] < LEVEL)).sum()))
            out.add(out.reference_null, family, int((part["truth"] == 0).sum()))
            out.add(out.reference_null_p05, family, int(((part["truth"] == 0) & (part["p_value"] < LEVEL)).sum()))
        for family, part in [("all", rows), *rows.group_by("family")]:
            family = family if isinstance(family, str) else family[0]
            null = part.filter(pl.col("truth") == 0)
            planted = part.filter(pl.col("truth") != 0)
            found = part.filter(pl.col("q_value") < LEVEL)
            false = found.filter(pl.col("truth") == 0)
            out.add(out.null_tests, family, null.height)
            out.add(out.null_p05, family, int((null["p_value"] < LEVEL).sum()))
            out.null_p.setdefault(family, []).append(null["p_value"].to_numpy())
            out.null_z.setdefault(family, []).append(signed_z(null))
            out.add(out.studies_false_q, family, int(false.height > 0))
            out.add(out.fdp_sum, family, false.height / found.height if found.height else 0.0)
            out.add(out.planted, family, planted.height)
            out.add(out.planted_found, family, int((planted["q_value"] < LEVEL).sum()))
            known = part.filter(pl.col("truth").is_not_null() & (pl.col("kind") != ANY))
            inside = (known["ci_low"] <= known["truth"]) & (known["truth"] <= known["ci_high"])
            out.add(out.covered, family, int(inside.sum()))
            out.add(out.intervals, family, known.height)
            shifted = (known["truth"] != 0).to_numpy()
            out.add(out.planted_covered, family, int(inside.to_numpy()[shifted].sum()))
            out.add(out.planted_intervals, family, int(shifted.sum()))
            ratio = (known["delta"] / known["truth"]).to_numpy()[shifted]
            out.add(out.planted_estimate, family, float(ratio.sum()))
    return out


def _share(a: float, b: float) -> str:
    return f"{a / b:6.1%}" if b else "     -"


def report(scenario: Scenario, result: Tally, studies: int, seconds: float) -> list[str]:
    lines = [f"{scenario.name}: {scenario.n_tasks} tasks x {scenario.per_cell}+{scenario.per_cell}, "
             f"{studies} studies, {seconds:.0f} s"]  # fmt: skip
    for family in sorted(result.null_tests, key=lambda f: (f == "all", f)):
        size = _share(result.null_p05.get(family, 0), result.null_tests.get(family, 0))
        any_false = _share(result.studies_false_q.get(family, 0), studies)
        fdr = _share(result.fdp_sum.get(family, 0), studies)
        cover = _share(result.covered.get(family, 0), result.intervals.get(family, 0))
        power = _share(result.planted_found.get(family, 0), result.planted.get(family, 0))
        if scenario.null:
            p = np.concatenate(result.null_p.get(family, [np.array([])]))
            tails = " ".join(f"{(p <= a).mean() / a if p.size else np.nan:4.2f}" for a in TAILS)
            z = np.concatenate(result.null_z.get(family, [np.array([])]))
            what = (f"size {size} (<= 5.5%)  any false q {any_false} (<= 6% a family)  FDR {fdr}  "
                    f"tail/nominal {tails}  signed z {z.mean() if z.size else np.nan:+5.3f}")  # fmt: skip
        else:
            what = f"FDR {fdr} (<= 5%)  power {power}"
            if result.planted_intervals.get(family):
                n = result.planted_intervals[family]
                what += (f"  planted: coverage {_share(result.planted_covered.get(family, 0), n)}, "
                         f"estimate / truth {result.planted_estimate.get(family, 0.0) / n:.2f}")  # fmt: skip
            if result.planted.get(family) and family in result.reference_null:
                reference_power = _share(result.reference_found[family], result.planted.get(family, 0))
                reference_size = _share(result.reference_null_p05[family], result.reference_null[family])
                what += f" (independent units: power {reference_power}, size {reference_size})"
        lines.append(f"  {family:<14} {what}  coverage {cover} (>= 94% from 10 tasks)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--permutations", type=int, default=400)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"tail/nominal: the share of null p-values <= {', '.join(map(str, TAILS))}, each over its nominal value")
    print("signed z: mean normal score of null rows signed by their delta (0 without bias; rows of a study are")
    print("correlated, so its standard error is larger than 1 / sqrt(rows))")
    for name in args.scenarios.split(","):
        scenario = SCENARIOS[name]
        t0 = time.perf_counter()
        # Each scenario's seed is --seed plus its place in SCENARIOS, whichever scenarios are run.
        result = tally(scenario, args.studies, args.seed + list(SCENARIOS).index(name), args.permutations)
        print("\n".join(report(scenario, result, args.studies, time.perf_counter() - t0)), flush=True)
    print(f"seed {args.seed}, {args.permutations} permutations, wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
