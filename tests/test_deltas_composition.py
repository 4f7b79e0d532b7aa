"""Composition through `compute_deltas`: a new kind of tool call moves neither the tool-call rates of any
feature source nor the exposure-adjusted rollout-level rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from bench.calibration import SCENARIOS, simulate
from engine.deltas import ANY, compute_deltas
from engine.deltas.ranking import exploratory_order
from engine.progress import NullProgress


def _deltas(scenario, seed: int, studies: int = 1) -> list[pl.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(studies):
        data, _, _ = simulate(scenario, rng)
        tables = compute_deltas(data, rng, n_permutations=199, fdr=0.05, progress=NullProgress())
        out.append(tables.deltas.filter(pl.col("tested")))
    return out


def test_sae_tool_call_rate_is_stratified_over_tools():
    """SAE features fire on about 10% of calls to the old tools and 50% of calls to a new tool that appears in
    the after checkpoint only: their share of tool calls rises by about 8 points with the tool mix alone, the
    rate stratified over (task, tool) does not move."""
    scenario = SCENARIOS["composition_sae"]
    (rows,) = _deltas(scenario, seed=3)
    sae_tool = rows.filter(
        (pl.col("kind") == "tool_call") & (pl.col("feature_id") >= scenario.n_text + scenario.n_tool)
    )
    assert sae_tool.height == scenario.n_sae_tool
    pooled = (sae_tool["pooled_after"] - sae_tool["pooled_before"]).mean()
    assert pooled > 0.05, pooled
    assert abs(sae_tool["delta"].mean()) < 0.015, sae_tool["delta"].to_list()


def test_rollout_rows_are_adjusted_for_their_own_exposure():
    """Every after-rollout gets as many extra calls to a new tool as it has calls (total length up by about a
    third): features on text or on the old tools are exposed as before. Adjusting on total length made their
    'any' rows fall by about 8 points with 18 of 64 under p < 0.05 (measured on these seeds); on each feature's
    own exposure they stay put."""
    scenario = dataclasses.replace(SCENARIOS["composition"], new_tool_share=1.0)
    rows = pl.concat(_deltas(scenario, seed=4, studies=2)).filter(pl.col("kind") == ANY)
    assert rows.height >= 60
    assert abs(rows["delta"].mean()) < 0.04, rows["delta"].mean()
    assert (rows["p_value"] < 0.05).sum() <= 6


def test_a_study_where_nothing_can_be_tested_still_has_every_statistic_column():
    """One shared task (the tau2 grok-3-mini reasoning file: `rldiff check-null` split it and the exploratory
    ranking failed on a missing "ci_low"): no row can reach significance, none is tested, and the table still
    has the statistics, null, for every reader."""
    data, _, _ = simulate(dataclasses.replace(SCENARIOS["clean"], n_tasks=1, per_cell=2), np.random.default_rng(0))
    tables = compute_deltas(data, np.random.default_rng(1), n_permutations=199, fdr=0.05, progress=NullProgress())
    deltas = tables.deltas
    assert deltas.height and not deltas["tested"].any()
    for column in ("ci_low", "ci_high", "p_value", "q_value", "reward_assoc_before", "reward_assoc_after"):
        assert deltas[column].null_count() == deltas.height
    assert exploratory_order(deltas.filter(pl.col("tested")), 10).height == 0


def test_a_tool_call_change_reads_at_its_size_when_rollouts_call_few_tools():
    """About 1.5 calls a rollout over three tools: most rollouts never call a given tool. The planted rows'
    per-call rate rises by 0.3 on calls to their tool; the reported delta is the mean change among calls to a
    tool both checkpoints call in a task (about 0.16 when each rollout without calls to the tool counted as a
    rollout of no change), and the levels' difference is that delta."""
    scenario = dataclasses.replace(SCENARIOS["coverage_few_calls"], shift=0.3)
    rows = pl.concat(_deltas(scenario, seed=6, studies=2)).filter(pl.col("kind") == "tool_call")
    planted = rows.filter(pl.col("feature_id").is_between(scenario.n_text, scenario.n_text + scenario.n_shifted - 1))
    assert planted.height == 2 * scenario.n_shifted
    assert abs(planted["delta"].mean() - 0.3) < 0.07, planted["delta"].to_list()
    np.testing.assert_allclose(rows["prevalence_after"] - rows["prevalence_before"], rows["delta"], atol=1e-9)
