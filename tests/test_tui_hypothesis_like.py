"""The new-hypothesis form's exemplar labeler: sentences like the behaviour become `--like` options."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.widgets import Input, Select, Static

from tui.hypothesis_runner import NewHypothesis, add_command
from tui.screens.hypothesis_forms import HypothesisForm


class FormApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.result: list[NewHypothesis | None] = []

    def on_mount(self) -> None:
        self.push_screen(HypothesisForm(), self.result.append)


async def fill(app: FormApp, pilot, like: str, cosine: str) -> HypothesisForm:  # noqa: ANN001
    form = app.screen
    assert isinstance(form, HypothesisForm)
    form.query_one("#statement", Input).value = "more grader awareness"
    form.query_one("#labeler", Select).value = "like"
    await pilot.pause()
    assert form.query_one("#like-row").display and not form.query_one("#pattern").display
    form.query_one("#like", Input).value = like
    form.query_one("#min-similarity", Input).value = cosine
    await pilot.press("ctrl+s")
    await pilot.pause()
    return form


async def test_sentences_and_cosine_become_like_options() -> None:
    app = FormApp()
    async with app.run_test() as pilot:
        await pilot.pause()
        await fill(app, pilot, "the grader may check this | this could be a trap ", "0.65")
    [new] = app.result
    assert new is not None and new.like == ("the grader may check this", "this could be a trap")
    assert add_command(Path("s.duckdb"), new)[-6:] == [
        "--like", "the grader may check this", "--like", "this could be a trap", "--min-similarity", "0.65",
    ]  # fmt: skip


async def test_a_bad_cosine_or_no_sentence_is_refused_in_the_form() -> None:
    for like, cosine, problem in (("a sentence", "1.5", "min cosine"), ("  ", "", "at least one sentence")):
        app = FormApp()
        async with app.run_test() as pilot:
            await pilot.pause()
            form = await fill(app, pilot, like, cosine)
            assert problem in str(form.query_one("#form-error", Static).render())
        assert app.result == []
