"""Prompts live in `prompts/*.txt` with `$named` slots, filled by `render`."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def _template(name: str) -> Template:
    return Template(resources.files("engine.llm").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8"))


def render(name: str, **slots: object) -> str:
    """Fill prompt `name`'s slots; a missing slot raises KeyError (a bug, not a user error)."""
    return _template(name).substitute({k: str(v) for k, v in slots.items()})
