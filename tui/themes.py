"""Themes from TOML files, validated into Textual themes; rldiff's own colour variables with defaults.

A theme file holds Textual's theme fields (`name`, `primary`, `background`, `dark`, ...) and a `[variables]`
table. rldiff reads five variables; a theme that leaves them out (or a built-in Textual theme) gets defaults
derived from its success/error/accent colours:

- `more-in-after`, `less-in-after`: a feature more / less common in the *after* checkpoint;
- `checkpoint-before`, `checkpoint-after`: each checkpoint's colour;
- `token-highlight`: the background of strongly activating tokens.

A bad file is reported (as a string) and skipped; it never stops the app.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from tui.keymap import config_dir

APP_VARIABLES = ("more-in-after", "less-in-after", "checkpoint-before", "checkpoint-after", "token-highlight")
_COLOUR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_OTHER_FIELDS = {"name": str, "dark": bool, "luminosity_spread": float, "text_alpha": float, "variables": dict}
DEFAULT_THEME = "rldiff-dark"


def theme_dirs() -> list[Path]:
    """Where theme files are looked for: the shipped `themes/` (source tree or installed), then the user's."""
    here = Path(__file__).resolve().parent.parent / "themes"
    installed = Path(sys.prefix) / "share" / "rldiff" / "themes"
    return [d for d in (here, installed, config_dir() / "themes") if d.is_dir()]


def parse_theme(text: str, origin: str) -> Theme:
    """One theme file's content as a Textual Theme; ValueError with a readable message when invalid."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{origin}: not valid TOML: {exc}") from exc
    unknown = set(data) - set(_COLOUR_FIELDS) - set(_OTHER_FIELDS)
    if unknown:
        raise ValueError(f"{origin}: unknown field(s): {', '.join(sorted(unknown))}")
    for field in ("name", "primary"):
        if not isinstance(data.get(field), str) or not data[field].strip():
            raise ValueError(f"{origin}: `{field}` is required")
    for field, kind in _OTHER_FIELDS.items():
        if field in data and not isinstance(data[field], kind | int if kind is float else kind):
            raise ValueError(f"{origin}: `{field}` must be a {kind.__name__}")
    variables = data.get("variables", {})
    for key, value in [*((f, data[f]) for f in _COLOUR_FIELDS if f in data), *variables.items()]:
        if not isinstance(value, str):
            raise ValueError(f"{origin}: `{key}` must be a colour string")
        if key in _COLOUR_FIELDS or key in APP_VARIABLES:
            try:
                Color.parse(value)
            except ColorParseError as exc:
                raise ValueError(f"{origin}: `{key}`: {value!r} is not a colour") from exc
    return Theme(**{**data, "variables": dict(variables)})


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every valid theme in `dirs` (later files override earlier ones of the same name) and the problems."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for directory in theme_dirs() if dirs is None else dirs:
        for path in sorted(directory.glob("*.toml")):
            try:
                theme = parse_theme(path.read_text(encoding="utf-8"), str(path))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def variable_defaults(theme: Theme) -> dict[str, str]:
    """Values for rldiff's variables that `theme` does not set."""
    return {
        "more-in-after": theme.success or "#4EBF71",
        "less-in-after": theme.error or "#BA3C5B",
        "checkpoint-before": theme.secondary or theme.primary,
        "checkpoint-after": theme.accent or "#FFA62B",
        "token-highlight": theme.warning or theme.accent or "#FFA62B",
    }


@dataclass(frozen=True)
class Palette:
    """The colours widgets use to style Rich text (resolved hex strings)."""

    more: str
    less: str
    before: str
    after: str
    highlight: str
    background: str
    muted: str

    @classmethod
    def from_variables(cls, variables: dict[str, str]) -> Palette:
        def parse(name: str, fallback: str) -> Color:
            try:
                return Color.parse(variables.get(name, fallback))
            except ColorParseError:
                return Color.parse(fallback)

        background = parse("background", "#121212").with_alpha(1.0)

        def hex_of(name: str, fallback: str) -> str:
            return (background + parse(name, fallback)).hex  # translucent colours over the background

        return cls(
            more=hex_of("more-in-after", "#4EBF71"),
            less=hex_of("less-in-after", "#BA3C5B"),
            before=hex_of("checkpoint-before", "#0178D4"),
            after=hex_of("checkpoint-after", "#FFA62B"),
            highlight=hex_of("token-highlight", "#FFA62B"),
            background=background.hex,
            muted=hex_of("foreground-muted", "#808080"),
        )

    def highlight_style(self, strength: float) -> str:
        """A background for a token whose activation is `strength` (0..1) of the example's maximum."""
        strength = max(0.0, min(1.0, strength))
        colour = Color.parse(self.background).blend(Color.parse(self.highlight), 0.15 + 0.85 * strength)
        text = "#000000" if colour.brightness > 0.5 else "#ffffff"
        return f"{text} on {colour.hex}"
