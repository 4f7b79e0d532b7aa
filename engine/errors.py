"""Errors the CLI turns into exit codes: 2 for bad input or usage, 1 for everything else."""

from __future__ import annotations


class RldiffError(Exception):
    """An error with a message meant for the user."""

    exit_code = 1


class InputError(RldiffError):
    """Bad input or usage (exit code 2)."""

    exit_code = 2


class RecordError(InputError):
    """A bad record in an input file, located as FILE:LINE: field: what is wrong."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        super().__init__(f"{path}:{line}: {field}: {problem}")


class StoreLockedError(RldiffError):
    """Another process holds the store's write lock."""
