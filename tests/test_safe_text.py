"""Untrusted rollout text: terminal control sequences are stripped and markup shows literally."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text

from engine.safe_text import clean, one_line, safe, safe_spans
from tests.hostile import HOSTILE


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain\ttext\nline two", "plain\ttext\nline two"),
        ("\x1b[31mred\x1b[0m", "red"),  # CSI colour
        ("a\x1b[2J\x1b[Hb", "ab"),  # clear screen, cursor home
        ("\x1b]0;new title\x07after", "after"),  # OSC window title, BEL-terminated
        ("\x1b]52;c;aGVsbG8=\x1b\\after", "after"),  # OSC 52 clipboard write, ST-terminated
        ("\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink
        ("\x1bPq#0;2;0;0;0\x1b\\x", "x"),  # DCS (sixel)
        ("\x9b2Jz", "z"),  # 8-bit CSI
        ("\x9d0;title\x9cz", "z"),  # 8-bit OSC ended by 8-bit ST
        ("bell\x07 back\x08space\x7f nul\x00", "bell backspace nul"),
        ("\x1b(Bcharset\x1bc reset", "charset reset"),  # other ESC sequences
        ("windows\r\nline\rcr", "windows\nline\ncr"),
        ("unterminated \x1b]0;title", "unterminated "),
        ("trailing escape \x1b", "trailing escape "),
    ],
)
def test_clean_strips_control_sequences(raw: str, expected: str) -> None:
    assert clean(raw) == expected


def test_markup_is_shown_literally_and_nothing_reaches_the_terminal() -> None:
    text = safe(HOSTILE)
    assert isinstance(text, Text) and not text.spans
    assert "[bold red]ALERT[/]" in text.plain and "[link=https://evil.example]here[/link]" in text.plain
    console = Console(width=200, force_terminal=True, color_system="truecolor")
    with console.capture() as capture:
        console.print(text)
    out = capture.get()
    # The only escape sequences in the output are Rich's own SGR styling; none from the input survive.
    assert "\x07" not in out and "\x1b]" not in out and "\x9b" not in out and "\x1bP" not in out
    assert "pwned" not in out and "[bold red]ALERT[/]" in out


def test_one_line_and_truncation() -> None:
    assert one_line("a\n\tb  c", 10).plain == "a b c"
    assert safe("abcdefghij", max_chars=5).plain == "abcd…"


def test_spans_follow_their_tokens_through_stripping() -> None:
    raw = "\x1b[1mhello\x1b[0m world"
    start = raw.index("world")
    out = safe_spans(raw, [(start, start + 5, "reverse"), (4, 9, "bold")])
    assert out.plain == "hello world"
    spans = {(s.start, s.end, str(s.style)) for s in out.spans}
    assert (6, 11, "reverse") in spans and (0, 5, "bold") in spans
