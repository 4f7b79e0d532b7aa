"""The comparison design: rollouts of two checkpoints nested in the tasks both checkpoints share.

Only tasks with rollouts from both checkpoints inform a within-task comparison: in a task seen by one
checkpoint, every relabelling of rollouts leaves the labels unchanged, and its rollouts would only mix task
composition into the delta. `CheckpointDesign` drops them and holds what the permutation test, the intervals
and the power calculation share: the within-task permutations of rollout-level values and task means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

# Fewer shared tasks than this and intervals are heteroscedasticity-robust within task ("these tasks") instead of
# cluster-robust over tasks (the split stage likewise needs this many tasks on each side to split by task): a
# cluster-robust t on G-1 degrees of freedom covers 95.2% at 10 tasks in bench/calibration.py, but below that the
# t quantile grows fast and the sign-flip floor 2 / 2^G passes the level at 5 tasks.
MIN_TASKS = 10


@dataclass(frozen=True)
class CheckpointDesign:
    """Rollouts of tasks that both checkpoints share, with their labels and task codes.

    `keep` selects those rollouts from the caller's arrays; every other array is over kept rollouts.
    `groups` bundles tasks of the same shape (rollouts, after-rollouts) so permutations are drawn in bulk:
    each entry is (index matrix of shape (n_tasks_in_group, n_rollouts_per_task), n_after_per_task).
    """

    keep: np.ndarray
    is_after: np.ndarray
    task: np.ndarray
    n_tasks: int
    groups: tuple[tuple[np.ndarray, int], ...]

    @classmethod
    def from_labels(cls, is_after: np.ndarray, task: np.ndarray) -> CheckpointDesign:
        is_after = np.asarray(is_after, dtype=bool)
        task = np.asarray(task)
        if is_after.shape != task.shape or is_after.ndim != 1:
            raise ValueError(f"is_after {is_after.shape} and task {task.shape} must be equal 1-d shapes")
        codes, task_code = np.unique(task, return_inverse=True)
        n_after = np.bincount(task_code, weights=is_after, minlength=codes.size)
        n_all = np.bincount(task_code, minlength=codes.size)
        shared = (n_after > 0) & (n_after < n_all)
        keep = shared[task_code]
        # Renumber shared tasks 0..n_tasks-1 over the kept rollouts.
        kept_code = np.cumsum(shared)[task_code[keep]] - 1
        kept_after = is_after[keep]
        order = np.argsort(kept_code, kind="stable")
        sizes = np.bincount(kept_code, minlength=int(shared.sum()))
        afters = np.bincount(kept_code, weights=kept_after, minlength=sizes.size).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        groups = []
        for n, m in sorted({(int(s), int(a)) for s, a in zip(sizes, afters, strict=True)}):
            members = np.flatnonzero((sizes == n) & (afters == m))
            index = order[starts[members][:, None] + np.arange(n)[None, :]]
            groups.append((index, m))
        return cls(keep, kept_after, kept_code, int(sizes.size), tuple(groups))

    @property
    def n_rollouts(self) -> int:
        return int(self.is_after.size)

    @property
    def few_tasks(self) -> bool:
        """Too few shared tasks for intervals over tasks: intervals speak for these tasks instead."""
        return self.n_tasks < MIN_TASKS

    def expected_after(self) -> np.ndarray:
        """(n_rollouts,) each rollout's chance of being labelled after under within-task permutation."""
        share = np.bincount(self.task, weights=self.is_after, minlength=self.n_tasks).astype(np.float64)
        share /= np.bincount(self.task, minlength=self.n_tasks)
        return share[self.task]

    def permuted_labels(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, n_rollouts) float32 after-labels, each row a permutation of the labels within every task."""
        return self.permuted(self.is_after, n, rng)

    def permuted(self, values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, n_rollouts) float32 copies of the rollout-level `values`, each row permuted within every task."""
        values = as_float32(values)
        out = np.zeros((n, self.n_rollouts), dtype=np.float32)
        for index, _ in self.groups:
            shuffled = rng.permuted(np.broadcast_to(values[index], (n, *index.shape)), axis=2)
            out[:, index.ravel()] = shuffled.reshape(n, -1)
        return out

    def task_means(self, values: np.ndarray) -> np.ndarray:
        """Task means of rollout-level `values` ((n_rollouts,) or (n_rollouts, k)), one row per rollout."""
        values = np.asarray(values, dtype=np.float64)
        sizes = np.bincount(self.task, minlength=self.n_tasks).astype(np.float64)
        onehot = task_onehot(self.task, self.n_tasks)
        sums = onehot @ values
        means = sums / (sizes if values.ndim == 1 else sizes[:, None])
        return means[self.task]


def task_onehot(code: np.ndarray, n_tasks: int) -> sp.csr_array:
    """(n_tasks, n_rollouts) sparse indicator: row g sums a rollout-level quantity over task g."""
    n = code.size
    return sp.csr_array((np.ones(n), (code, np.arange(n))), shape=(n_tasks, n))


def as_float32(a: np.ndarray) -> np.ndarray:
    """A dense float32 C-contiguous view or copy (the dtype every matrix product here runs in)."""
    return np.ascontiguousarray(a, dtype=np.float32)
