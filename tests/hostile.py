"""Hostile text planted in a copy of the analysed study: terminal escapes, Rich markup and OSC titles in one
assistant reply, one tool result, one tool call's arguments and one feature label, to check that no surface
(terminal, TUI, MCP, reports) lets them act. The rest of the store stays what the real stages made."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.store import Store

HOSTILE = (
    "[bold red]ALERT[/] click [link=https://evil.example]here[/link] [/]\x1b[31mred\x1b[0m "
    "\x1b]0;pwned title\x07bell\x07 \x9b2J csi8 \x1b[2J\x1bPdcs\x1b\\ end"
)
HOSTILE_LABEL = "[bold red]sorry[/] · \x1b[31mpolicy"


@dataclass(frozen=True)
class Planted:
    rollout_key: int  # the first rollout of the before checkpoint: its first reply, a result and a call
    text_segment: int  # the reply's text segment, whose text is HOSTILE
    call_segment: int  # the tool call whose arguments carry HOSTILE
    feature_id: int  # the SAE feature labelled HOSTILE_LABEL


def plant_hostile(path: Path) -> Planted:
    """Write the hostile strings into the study at `path` (a copy: this changes it) and say where they went."""
    with Store(path) as store, store.transaction():
        key, text_segment, message = store.execute(
            "SELECT s.rollout_key, s.segment_id, s.message_index FROM segments s JOIN rollouts r USING (rollout_key) "
            "JOIN checkpoints c USING (checkpoint) WHERE s.kind = 'text' AND EXISTS (SELECT 1 FROM segments t "
            "WHERE t.rollout_key = s.rollout_key AND t.kind = 'tool_call') "
            "ORDER BY c.ordinal, s.rollout_key, s.segment_id LIMIT 1"
        ).fetchone()
        store.execute("UPDATE segments SET text = ? WHERE segment_id = ?", [HOSTILE, text_segment])
        store.execute(
            "UPDATE messages SET content = ? WHERE rollout_key = ? AND message_index = ?", [HOSTILE, key, message]
        )
        call_segment, call_message, part, tool = store.execute(
            "SELECT segment_id, message_index, part_index, tool_name FROM segments WHERE rollout_key = ? "
            "AND kind = 'tool_call' ORDER BY segment_id LIMIT 1",
            [key],
        ).fetchone()
        arguments = json.dumps({"user_id": HOSTILE})
        store.execute(
            "UPDATE segments SET tool_args = ?, text = ? WHERE segment_id = ?",
            [arguments, f"{tool} {arguments}", call_segment],
        )
        calls = json.loads(
            store.scalar(
                "SELECT tool_calls FROM messages WHERE rollout_key = ? AND message_index = ?", [key, call_message]
            )
        )
        calls[part]["arguments"] = {"user_id": HOSTILE}
        store.execute(
            "UPDATE messages SET tool_calls = ? WHERE rollout_key = ? AND message_index = ?",
            [json.dumps(calls), key, call_message],
        )
        store.execute(
            "UPDATE messages SET content = ? WHERE rollout_key = ? AND message_index = "
            "(SELECT min(message_index) FROM messages WHERE rollout_key = ? AND role = 'tool')",
            [HOSTILE, key, key],
        )
        feature_id = int(store.scalar("SELECT min(feature_id) FROM features WHERE source = 'sae'"))
        store.execute("UPDATE features SET label = ? WHERE feature_id = ?", [HOSTILE_LABEL, feature_id])
    return Planted(int(key), int(text_segment), int(call_segment), feature_id)
