"""Every key binding of the TUI, each with an id, and the user's keymap file that remaps them by id.

The keymap file is TOML: a `[keymap]` table of `"binding.id" = "key"` (several keys separated by commas),
read from `$RLDIFF_CONFIG_DIR/keymap.toml`, else `$XDG_CONFIG_HOME/rldiff/keymap.toml`, else
`~/.config/rldiff/keymap.toml`. Unknown ids and malformed files are reported, never fatal.
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path

from textual.binding import Binding

log = logging.getLogger(__name__)


def _b(
    key: str, action: str, description: str, binding_id: str, *, show: bool = True, priority: bool = False
) -> Binding:
    return Binding(key, action, description, show=show, priority=priority, id=binding_id, tooltip=description)


APP = [
    _b("1", "app.switch_mode('overview')", "Overview", "app.overview", show=False),
    _b("2", "app.switch_mode('deltas')", "Deltas", "app.deltas", show=False),
    _b("3", "app.switch_mode('clusters')", "Clusters", "app.clusters", show=False),
    _b("4", "app.switch_mode('hypotheses')", "Hypotheses", "app.hypotheses", show=False),
    _b("5", "app.switch_mode('rollouts')", "Rollouts", "app.rollouts", show=False),
    _b("question_mark,f1", "app.help", "Help", "app.help"),
    _b("ctrl+t", "app.next_theme", "Theme", "app.theme", show=False),
    _b("ctrl+n", "app.check_null", "A/A check", "app.check_null", show=False),
    _b("q", "app.quit", "Quit", "app.quit"),
]
OVERVIEW = [
    _b("enter", "open_finding", "Open", "overview.open"),
    _b("r", "reload", "Reload", "overview.reload", show=False),
    _b("x", "exploratory", "Exploratory ranking", "overview.exploratory"),  # live in a small study only
]
DELTAS = [
    _b("enter", "open_feature", "Open", "deltas.open"),
    _b("slash", "search", "Search", "deltas.search"),
    _b("f", "cycle_kind", "Kind", "deltas.kind"),
    _b("d", "cycle_direction", "Direction", "deltas.direction"),
    _b("s", "cycle_source", "Source", "deltas.source"),
    _b("g", "cycle_q", "q filter", "deltas.q"),
    _b("o", "cycle_sort", "Sort", "deltas.sort"),
]
FEATURE = [
    _b("escape", "app.pop_screen", "Back", "feature.back"),
    _b("e", "show_tab('examples')", "Examples", "feature.examples"),
    _b("t", "show_tab('tasks')", "By task", "feature.tasks"),
    _b("w", "show_tab('reward')", "By reward", "feature.reward"),
]
CLUSTERS = [
    _b("enter", "open", "Members / open", "clusters.open"),
    _b("escape", "back_to_clusters", "Clusters", "clusters.back", show=False),
]
HYPOTHESES = [
    _b("a", "decide('accepted')", "Accept", "hypotheses.accept"),
    _b("r", "decide('rejected')", "Reject", "hypotheses.reject"),
    _b("u", "decide(None)", "Undecide", "hypotheses.undecide", show=False),
    _b("n", "note", "Note", "hypotheses.note"),
    _b("j", "move(1)", "Down", "hypotheses.down", show=False),
    _b("k", "move(-1)", "Up", "hypotheses.up", show=False),
    _b("f", "cycle_status", "Status", "hypotheses.status"),
    _b("d", "cycle_decision", "Decision", "hypotheses.decision"),
    _b("plus", "add", "Add", "hypotheses.add"),
    _b("T", "test", "Test", "hypotheses.test"),
    _b("l", "label", "Label", "hypotheses.label"),
    _b("e", "examples", "Held-out examples", "hypotheses.examples"),
]
ROLLOUTS = [
    _b("enter", "open_rollout", "Open", "rollouts.open"),
    _b("slash", "search", "Search", "rollouts.search"),
    _b("c", "cycle_checkpoint", "Checkpoint", "rollouts.checkpoint"),
]
VIEWER = [
    _b("escape", "app.pop_screen", "Back", "viewer.back"),
    _b("o", "other_checkpoint", "Other checkpoint", "viewer.other"),
    _b("s", "side_by_side", "Side by side", "viewer.side"),
    _b("e", "toggle_reasoning", "Reasoning", "viewer.reasoning"),
]
LABEL = [
    _b("y", "label(True)", "Yes", "label.yes"),
    _b("n", "label(False)", "No", "label.no"),
    _b("s", "skip", "Skip", "label.skip"),
    _b("escape", "done", "Done", "label.done"),
]

GROUPS: dict[str, list[Binding]] = {
    "Everywhere": APP,
    "Overview": OVERVIEW,
    "Deltas": DELTAS,
    "Feature": FEATURE,
    "Clusters": CLUSTERS,
    "Hypotheses": HYPOTHESES,
    "Rollouts": ROLLOUTS,
    "Rollout viewer": VIEWER,
    "Labelling": LABEL,
}
BINDING_IDS: frozenset[str] = frozenset(b.id for group in GROUPS.values() for b in group if b.id)


def config_dir() -> Path:
    if env := os.environ.get("RLDIFF_CONFIG_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rldiff"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The user's remapping (binding id -> keys) and a list of problems found in the file."""
    path = path or config_dir() / "keymap.toml"
    if not path.exists():
        return {}, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: not read: {exc}"]
    table = data.get("keymap", data)
    keymap, problems = {}, []
    if not isinstance(table, dict):
        return {}, [f'{path}: [keymap] must be a table of binding id = "key"']
    for binding_id, keys in table.items():
        if binding_id not in BINDING_IDS:
            problems.append(f"{path}: unknown binding id {binding_id!r}")
        elif not isinstance(keys, str) or not keys.strip():
            problems.append(f'{path}: {binding_id}: keys must be a non-empty string such as "ctrl+a"')
        else:
            keymap[binding_id] = keys.replace(" ", "")
    return keymap, problems


_SHORT = {"question_mark": "?", "slash": "/", "plus": "+", "escape": "esc", "enter": "⏎"}


def keys_for(binding: Binding, keymap: dict[str, str], *, first: bool = False) -> str:
    """The keys a binding answers to under `keymap`, as a user would type them (`first`: only the first)."""
    keys = keymap.get(binding.id or "", binding.key).split(",")
    return ",".join(_SHORT.get(k, k) for k in (keys[:1] if first else keys))


def keys_for_id(binding_id: str, keymap: dict[str, str]) -> str:
    """The first key the binding with id `binding_id` answers to under `keymap` (KeyError for an unknown id)."""
    for group in GROUPS.values():
        for binding in group:
            if binding.id == binding_id:
                return keys_for(binding, keymap, first=True)
    raise KeyError(binding_id)
