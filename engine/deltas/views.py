"""Per-kind views of discovery data: each kind's design and rollout rates (tool calls stratified over tools) and,
for rollout-level ('any') rows, each feature's expected firing, the covariate of the length adjustment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.deltas.data import KINDS, DiscoveryCounts
from engine.kinds import ANY
from engine.stats.design import CheckpointDesign, task_onehot
from engine.stats.permutation import PermutationBlock, dense_columns
from engine.stats.rates import Contrast, Effects, Matrix, TaskLevels, effects, rollout_rates, task_levels
from engine.stats.strata import Strata, stratified_levels, stratified_rates


def _rows_of_kind(data: DiscoveryCounts, kind: str) -> tuple[np.ndarray, CheckpointDesign]:
    """(rollout indices, design) of the rollouts with segments of `kind` in tasks both checkpoints share."""
    rows = np.flatnonzero(data.totals[kind] > 0)
    design = CheckpointDesign.from_labels(data.is_after[rows], data.task[rows])
    return rows[design.keep], design


def _denominators(data: DiscoveryCounts, kind: str, rows: np.ndarray) -> np.ndarray:
    """Segments behind each pooled share: the kind's segments; for tool calls, per feature, the calls to the
    tools the feature fires on anywhere in discovery."""
    tools = data.per_tool()
    if kind == "tool_call" and tools is not None:
        tool_totals, support, _ = tools
        return np.asarray(support.T @ tool_totals[rows].T, dtype=np.float64).T
    return data.totals[kind][rows]


def _tool_strata(tools: tuple[np.ndarray, sp.csr_array, tuple[sp.csc_array, ...]], rows: np.ndarray) -> Strata:
    """(counts per tool, calls per tool, support) over `rows`: the tool-call strata of `engine.stats.strata`."""
    tool_totals, support, tool_counts = tools
    return [counts[rows] for counts in tool_counts], tool_totals[rows], support.toarray()


def _exposures(data: DiscoveryCounts, rows: np.ndarray) -> np.ndarray:
    """(rows, n_features) each feature's exposure in each rollout, for 'any' rows.

    A feature's exposure in a rollout is the number of segments it could fire on: those of every kind it fires
    on anywhere in discovery (both checkpoints pooled, so label-free), counting for tool calls only the calls
    to the tools it fires on. A feature that fires on every call to its tools (a tool's identity, `tool:X`)
    is about the choice of tool, not about the calls (adjusting for calls to X would explain "calls X anywhere"
    away entirely), and so is a feature that never fires: their exposure is the rollout's length. Features
    with the same pattern (kinds and tools) share one exposure column.
    """
    kinds = [k for k in KINDS if k in data.counts]
    n_features = data.features.height
    tools = data.per_tool() if "tool_call" in kinds else None
    fires = [np.asarray(data.counts[k][rows].sum(axis=0)).ravel() > 0 for k in kinds]
    keys = [f for k, f in zip(kinds, fires, strict=True) if k != "tool_call" or tools is None]
    identity = np.zeros(n_features, dtype=bool)
    if tools is not None:
        tool_totals, support, _ = tools
        on_tool = fires[kinds.index("tool_call")]
        calls = np.asarray(support.T @ tool_totals[rows].sum(axis=0)).ravel()
        identity = on_tool & (np.asarray(data.counts["tool_call"][rows].sum(axis=0)).ravel() >= calls)
        keys += list(support.toarray().astype(bool) & on_tool[None, :])
    key_matrix = np.column_stack(keys) if keys else np.zeros((n_features, 0), dtype=bool)
    key_matrix[identity] = False
    patterns, code = np.unique(key_matrix, axis=0, return_inverse=True)
    plain = [k for k in kinds if k != "tool_call" or tools is None]
    columns = []
    for pattern in patterns:
        exposure = sum((data.totals[k][rows] for k, on in zip(plain, pattern, strict=False) if on), np.zeros(rows.size))
        if tools is not None:
            exposure = exposure + tools[0][rows] @ pattern[len(plain) :].astype(np.float64)
        if not pattern.any():
            exposure = data.lengths[rows]
        columns.append(exposure)
    return np.column_stack(columns)[:, code.ravel()] if columns else np.zeros((rows.size, n_features))


def expected_firing(data: DiscoveryCounts, rows: np.ndarray, design: CheckpointDesign) -> np.ndarray:
    """(rows, n_features) each rollout's expected chance that a feature fires anywhere in it, 1 - (1 - r)^E.

    E is the feature's exposure in the rollout (`_exposures`) and r its per-segment rate in the rollout's task:
    firing segments over exposure summed over the task's rollouts of both checkpoints. Pooled over checkpoints,
    the offset is the same under every within-task relabelling, so the within-task permutation test of
    (fires anywhere - offset), the 'any' rows' statistic, stays exact under exchangeability. Its coefficient is
    fixed at 1: a fitted slope would absorb any change that goes with length (measured in docs/statistics.md).
    """
    exposure = _exposures(data, rows)
    kinds = [k for k in KINDS if k in data.counts]
    fired = sum((data.counts[k][rows] for k in kinds), sp.csc_array((rows.size, exposure.shape[1])))
    onehot = task_onehot(design.task, design.n_tasks)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (onehot @ fired).toarray() / np.maximum(onehot @ exposure, 1.0)
    rate = np.clip(rate, 0.0, 1.0)
    return 1.0 - (1.0 - rate[design.task]) ** exposure


@dataclass(frozen=True)
class KindView:
    """One kind's design, rates and offsets over its rollouts (`rows` index the DiscoveryCounts's rollouts).

    Tool calls are rates stratified over tools (`engine.stats.strata`): the feature's rate among its
    calls to each tool it fires on, weighted by the tool's pooled calls, so a new tool (or any change in the tool
    mix) moves neither a feature's rate on the other tools nor their weights' meaning, whatever the feature's
    source (the pooled share beside it moves). `offsets` (for 'any' rows) holds each feature's expected chance
    of firing anywhere (`expected_firing`), subtracted from the rates that are tested; other kinds have none.
    `levels`: each checkpoint's rate per task (before any offset) with the task's weight in the contrast, whose
    difference is the effect."""

    kind: str
    rows: np.ndarray
    design: CheckpointDesign
    rates: sp.csc_array | np.ndarray
    counts: sp.csc_array
    totals: np.ndarray
    offsets: np.ndarray | None
    levels: TaskLevels

    @classmethod
    def of(cls, data: DiscoveryCounts, kind: str) -> KindView:
        rows, design = _rows_of_kind(data, kind)
        counts = sp.csc_array(data.counts[kind][rows])
        totals = _denominators(data, kind, rows)
        # Fires-anywhere rises with exposure alone: its rows test observed minus expected firing given exposure.
        offsets = expected_firing(data, rows, design) if kind == ANY else None
        tools = data.per_tool() if kind == "tool_call" else None
        if tools is not None:
            strata = _tool_strata(tools, rows)
            rates, levels = stratified_rates(*strata, design), stratified_levels(*strata, design)
        else:
            rates = rollout_rates(counts, totals, design)
            levels = task_levels(design, rates)
        return cls(kind, rows, design, rates, counts, totals, offsets, levels)

    def tested_rates(self, columns: np.ndarray) -> Matrix:
        """The values tested for `columns`: their rates, minus the offsets where there are some."""
        rates = self.rates[:, columns]
        if self.offsets is not None:  # observed minus expected firing: the offset's coefficient is fixed at 1
            rates = dense_columns(rates, 0, columns.size) - self.offsets[:, columns]
        return rates

    def effects(self, columns: np.ndarray) -> Effects:
        """The effect of `columns` (the difference of their standardised levels, less the offsets' for 'any'
        rows) with its robust standard error."""
        contrast = Contrast(self.design)
        rates = dense_columns(self.tested_rates(columns), 0, columns.size)
        scale = self.levels.effect_scale(contrast.xx)[columns]
        return effects(contrast, rates, by_task=not self.design.few_tasks, scale=scale)

    def blocks(self, columns: np.ndarray) -> list[tuple[np.ndarray, PermutationBlock]]:
        """(columns, block) pairs covering `columns`: one block over those columns' rates (and offsets)."""
        if columns.size == 0:
            return []
        return [(columns, PermutationBlock.of_rates(self.tested_rates(columns), self.design))]
