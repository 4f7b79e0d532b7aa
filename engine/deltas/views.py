"""Per-kind views of discovery data: each kind's design and rollout rates (tool calls stratified over tools) and,
for rollout-level ('any') rows, the exposure covariates of the length adjustment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.deltas.data import KINDS, Discovery
from engine.kinds import ANY
from engine.stats.design import CheckpointDesign
from engine.stats.permutation import PermutationBlock
from engine.stats.rates import rollout_rates


def _rows_of_kind(data: Discovery, kind: str) -> tuple[np.ndarray, CheckpointDesign]:
    """(rollout indices, design) of the rollouts with segments of `kind` in tasks both checkpoints share."""
    rows = np.flatnonzero(data.totals[kind] > 0)
    design = CheckpointDesign.from_labels(data.is_after[rows], data.task[rows])
    return rows[design.keep], design


def _denominators(data: Discovery, kind: str, rows: np.ndarray) -> np.ndarray:
    """Segments behind each pooled share: the kind's segments; for tool calls, per feature, the calls to the
    tools the feature fires on anywhere in discovery."""
    if kind == "tool_call" and data.tool_totals is not None:
        return np.asarray(data.tool_support.T @ data.tool_totals[rows].T, dtype=np.float64).T
    return data.totals[kind][rows]


def _tool_weights(data: Discovery, rows: np.ndarray) -> np.ndarray:
    """(n_tools, n_features) each tool's weight in a feature's stratified tool-call rate: the pooled calls to the
    tool over both checkpoints (label-free), among the tools the feature fires on, summing to 1 per feature."""
    calls = data.tool_totals[rows].sum(axis=0)
    weight = data.tool_support.toarray() * calls[:, None]
    total = weight.sum(axis=0)
    return np.divide(weight, total, out=np.zeros_like(weight), where=total > 0)


def _tool_stratified_rates(data: Discovery, rows: np.ndarray, design: CheckpointDesign) -> np.ndarray:
    """(rows, n_features) each rollout's tool-call rate stratified over tools: sum over tools t of w_t x (rate
    among its calls to t), with `_tool_weights`.

    A rollout without calls to t gets the feature's task mean rate on t (rollout_rates' label-free imputation),
    so it adds nothing to t's within-task contrast. A new tool (or any change in the tool mix) moves neither a
    feature's rate on the other tools nor their weights' meaning: the rate is composition-proof whatever the
    feature's source, while the pooled share beside it is not.
    """
    weight = _tool_weights(data, rows)
    tool_totals = data.tool_totals[rows]
    out = np.zeros((rows.size, weight.shape[1]))
    for t, counts in enumerate(data.tool_counts):
        columns = np.flatnonzero(weight[t] > 0)
        if columns.size == 0:
            continue
        totals = np.broadcast_to(tool_totals[:, t : t + 1], (rows.size, columns.size))
        rates = rollout_rates(counts[rows][:, columns], totals, design)
        out[:, columns] += weight[t, columns] * rates
    return out


def _exposure_covariates(data: Discovery, rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """(pattern code per feature, within-rollout log-exposure covariates per pattern) for 'any' rows.

    A feature's exposure in a rollout is the number of segments it could fire on: those of every kind it fires
    on anywhere in discovery (both checkpoints pooled, so label-free), counting for tool calls only the calls
    to the tools it fires on. A feature that fires on every call to its tools (a tool's identity, `tool:X`)
    is about the choice of tool, not about the calls (adjusting for calls to X would explain "calls X anywhere"
    away entirely), and so is a feature that never fires: their exposure is the rollout's length. Features
    with the same pattern share one residualised label. Covariates: log(1 + E) and its square.
    """
    kinds = [k for k in KINDS if k in data.counts]
    n_features = data.features.height
    fires = [np.asarray(data.counts[k][rows].sum(axis=0)).ravel() > 0 for k in kinds]
    keys = [f for k, f in zip(kinds, fires, strict=True) if k != "tool_call" or data.tool_support is None]
    identity = np.zeros(n_features, dtype=bool)
    if "tool_call" in kinds and data.tool_support is not None:
        on_tool = fires[kinds.index("tool_call")]
        calls = np.asarray(data.tool_support.T @ data.tool_totals[rows].sum(axis=0)).ravel()
        identity = on_tool & (np.asarray(data.counts["tool_call"][rows].sum(axis=0)).ravel() >= calls)
        keys += list(data.tool_support.toarray().astype(bool) & on_tool[None, :])
    key_matrix = np.column_stack(keys) if keys else np.zeros((n_features, 0), dtype=bool)
    key_matrix[identity] = False
    patterns, code = np.unique(key_matrix, axis=0, return_inverse=True)
    plain = [k for k in kinds if k != "tool_call" or data.tool_support is None]
    covariates = []
    for pattern in patterns:
        exposure = sum((data.totals[k][rows] for k, on in zip(plain, pattern, strict=False) if on), np.zeros(rows.size))
        if data.tool_support is not None and "tool_call" in kinds:
            exposure = exposure + data.tool_totals[rows] @ pattern[len(plain) :].astype(np.float64)
        if not pattern.any():
            exposure = data.lengths[rows]
        log_exposure = np.log1p(exposure)
        covariates.append(np.column_stack([log_exposure, log_exposure**2]))
    return code.ravel(), covariates


@dataclass(frozen=True)
class KindView:
    """One kind's design, rates and covariates over its rollouts (`rows` index the Discovery's rollouts).

    `pattern` gives each feature's covariate set in `covariates` (for 'any' rows, its exposure pattern;
    otherwise one set, None)."""

    kind: str
    rows: np.ndarray
    design: CheckpointDesign
    rates: sp.csc_array | np.ndarray
    counts: sp.csc_array
    totals: np.ndarray
    pattern: np.ndarray
    covariates: list[np.ndarray | None]

    @classmethod
    def of(cls, data: Discovery, kind: str) -> KindView:
        rows, design = _rows_of_kind(data, kind)
        counts = sp.csc_array(data.counts[kind][rows])
        totals = _denominators(data, kind, rows)
        pattern, covariates = np.zeros(data.features.height, dtype=np.int64), [None]
        if kind == ANY:  # fires-anywhere rises with exposure alone: adjust for log-exposure (Freedman-Lane)
            pattern, covariates = _exposure_covariates(data, rows)
        if kind == "tool_call" and data.tool_counts is not None:
            rates = _tool_stratified_rates(data, rows, design)
        else:
            rates = rollout_rates(counts, totals, design)
        return cls(kind, rows, design, rates, counts, totals, pattern, covariates)

    def blocks(self, columns: np.ndarray) -> list[tuple[np.ndarray, PermutationBlock]]:
        """(columns, block) per covariate set among `columns`, each block over those columns' rates."""
        out = []
        for code in np.unique(self.pattern[columns]):
            part = columns[self.pattern[columns] == code]
            out.append((part, PermutationBlock.of_rates(self.rates[:, part], self.design, self.covariates[code])))
        return out
