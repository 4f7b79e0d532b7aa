"""Theme files and the keymap file: valid ones load, bad ones are reported with a reason, never fatal."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.theme import BUILTIN_THEMES

from tui.keymap import BINDING_IDS, GROUPS, keys_for, load_keymap
from tui.themes import APP_VARIABLES, Palette, load_themes, parse_theme, theme_dirs, variable_defaults


def test_shipped_themes_load_with_every_app_variable() -> None:
    themes, problems = load_themes(theme_dirs()[:1])
    assert not problems
    assert {t.name for t in themes} == {"rldiff-dark", "rldiff-light", "rldiff-high-contrast"}
    for theme in themes:
        assert set(APP_VARIABLES) <= set(theme.variables)
    assert {t.name: t.dark for t in themes}["rldiff-light"] is False


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("name = 'x'\nprimary = ", "not valid TOML"),
        ("primary = '#ffffff'", "`name` is required"),
        ("name = 'x'", "`primary` is required"),
        ("name = 'x'\nprimary = 'nope'", "`primary`: 'nope' is not a colour"),
        ("name = 'x'\nprimary = '#fff'\nshiny = true", "unknown field(s): shiny"),
        ("name = 'x'\nprimary = '#fff'\ndark = 'yes'", "`dark` must be a bool"),
        ("name = 'x'\nprimary = '#fff'\n[variables]\nmore-in-after = 'chartreuse-ish'", "`more-in-after`"),
    ],
)
def test_bad_theme_files_are_reported(tmp_path: Path, content: str, problem: str) -> None:
    (tmp_path / "good.toml").write_text("name = 'good'\nprimary = '#336699'\n")
    (tmp_path / "bad.toml").write_text(content)
    themes, problems = load_themes([tmp_path])
    assert [t.name for t in themes] == ["good"]
    assert len(problems) == 1 and problems[0].startswith(str(tmp_path / "bad.toml")) and problem in problems[0]


def test_builtin_themes_get_defaults_for_the_app_variables() -> None:
    theme = BUILTIN_THEMES["textual-light"]
    defaults = variable_defaults(theme)
    assert set(defaults) == set(APP_VARIABLES)
    assert defaults["more-in-after"] == theme.success and defaults["less-in-after"] == theme.error


def test_palette_resolves_translucent_colours_over_the_background() -> None:
    theme = parse_theme("name = 't'\nprimary = '#336699'\nbackground = '#000000'", "t")
    palette = Palette.from_variables({**theme.to_color_system().generate(), **variable_defaults(theme)})
    assert palette.background == "#000000" and len(palette.muted) == 7  # no alpha left for Rich
    strong, weak = palette.highlight_style(1.0), palette.highlight_style(0.0)
    assert strong != weak and " on #" in strong


def test_keymap_file(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text('[keymap]\n"hypotheses.accept" = "y, ctrl+y"\n"nope" = "x"\n"deltas.kind" = 3\n')
    keymap, problems = load_keymap(path)
    assert keymap == {"hypotheses.accept": "y,ctrl+y"}
    assert any("unknown binding id 'nope'" in p for p in problems)
    assert any("deltas.kind: keys must be a non-empty string" in p for p in problems)
    accept = next(b for b in GROUPS["Hypotheses"] if b.id == "hypotheses.accept")
    assert keys_for(accept, keymap) == "y,ctrl+y" and keys_for(accept, {}) == "a"
    (tmp_path / "broken.toml").write_text("[keymap\n")
    assert load_keymap(tmp_path / "broken.toml")[1][0].startswith(f"{tmp_path / 'broken.toml'}: not read")
    assert load_keymap(tmp_path / "absent.toml") == ({}, [])


def test_binding_ids_are_unique() -> None:
    ids = [b.id for group in GROUPS.values() for b in group]
    assert len(ids) == len(set(ids)) == len(BINDING_IDS) and all(ids)
