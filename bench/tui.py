"""TUI responsiveness on a large store, against a bare Textual app doing the same kind of work in this process.

    .venv/bin/python bench/tui.py [--store /tmp/rldiff-bench-tui.duckdb] [--samples 60]

The synthetic store (built once, then reused) has ~100k segments, 1M segment-feature rows, 5k features and
200 hypotheses. Measured, with the app headless at 120x40:
- start-up: `import tui.app` in a fresh interpreter, and process start to the overview's data on screen;
- p95 time from a keypress to the updated screen (every query finished, every message handled, the screen
  re-rendered) for scrolling the deltas, opening a feature, opening a rollout and switching screens.
The baselines: a bare Textual app (one Static) started the same way, and a bare Textual app doing the same kinds
of work: scrolling a DataTable of 200 rows x 7 columns, switching between two screens holding one, pushing a
screen of 40 paragraphs. Latency is measured from posting the key event to the first frame Textual composes with the
result in the widgets (a hook on `App._display` checks, as each frame is composed, that the screen shows the item
asked for; headless Textual composes every frame as on a terminal but skips writing the escape codes). Textual
composes at most 60 frames a second, so ~17 ms is the floor of any sample.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.text import Text  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.binding import Binding  # noqa: E402
from textual.containers import VerticalScroll  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.screen import Screen  # noqa: E402
from textual.widgets import DataTable, Static  # noqa: E402

from tests.factories_tui import BENCH_SIZE, build_store, settle  # noqa: E402
from tui.app import WARM_UP_AFTER_S, RldiffApp  # noqa: E402
from tui.screens.feature import FeatureScreen  # noqa: E402
from tui.screens.rollouts import RolloutViewerScreen  # noqa: E402
from tui.widgets.paged_table import PagedTable  # noqa: E402
from tui.widgets.transcript import Transcript  # noqa: E402

SIZE = (120, 40)
BUDGET_MS = 100.0


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] if len(samples) >= 20 else max(samples)


class FrameClock:
    """A clock on an app's frames: `_display` receives every composed frame (in headless mode too, where it
    then skips writing escape codes). While a probe is set, the first frame composed when it holds is stamped:
    that frame shows the result. A measurement hook for this benchmark only."""

    probe: Callable[[], bool] | None = None
    shown_at = 0.0

    def _display(self, screen, renderable) -> None:  # noqa: ANN001
        if renderable is not None and self.probe is not None and not self.shown_at and self.probe():
            self.shown_at = time.perf_counter()
        super()._display(screen, renderable)  # type: ignore[misc]


class TimedApp(FrameClock, RldiffApp):
    """The app, with the frame clock."""


async def timed(app: FrameClock, key: str, done: Callable[[], bool]) -> float:
    """Milliseconds from a keypress to the first frame composed while `done()` holds."""
    app.probe, app.shown_at = done, 0.0
    start = time.perf_counter()
    app.simulate_key(key)  # type: ignore[attr-defined]
    while not app.shown_at:
        await asyncio.sleep(0.0005)
        if time.perf_counter() - start > 30:
            raise RuntimeError(f"{key!r}: the screen never showed the result")
    app.probe = None
    return (app.shown_at - start) * 1000


def startup(store: Path) -> dict[str, float]:
    """Fresh interpreters: import time, and process start to data on the overview (median of 3)."""
    probe = "import time; t0 = time.perf_counter(); import tui.app; print(time.perf_counter() - t0)"
    to_data = f"""
import asyncio, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {str(REPO)!r})
from tui.app import RldiffApp
from tests.factories_tui import settle
async def main():
    app = RldiffApp({str(store)!r})
    async with app.run_test(size={SIZE!r}) as pilot:
        while not hasattr(app.screen, "_summary"):
            await settle(pilot)
        print(time.perf_counter() - t0)
asyncio.run(main())
"""
    bare = """
import time; t0 = time.perf_counter()
import asyncio
from textual.app import App
from textual.widgets import Static
class Bare(App):
    def compose(self):
        yield Static("hello")
async def main():
    async with Bare().run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        print(time.perf_counter() - t0)
asyncio.run(main())
"""

    def run(code: str) -> float:
        walls = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
            walls.append(float(out.stdout.strip().splitlines()[-1]))
        return statistics.median(walls) * 1000

    return {"import_ms": run(probe), "to_data_ms": run(to_data), "bare_textual_ms": run(bare)}


class TableScreen(Screen[None]):
    """A bare screen with a DataTable the size of the deltas table: 200 rows of 7 columns."""

    BINDINGS = [Binding("p", "app.push_screen('text')", "push"), Binding("escape", "app.pop_screen", "pop")]

    def compose(self) -> ComposeResult:
        table: DataTable = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns("feature", "kind", "src", "before", "after", "delta", "q")
        for i in range(200):
            table.add_row(*(Text(f"{c}{i}") for c in ("feature label ", "text", "sae", "12.", "45.", "+3", "0.0")))
        yield table


class TextScreen(Screen[None]):
    """A bare screen of 40 paragraphs of text, the size of a transcript or a feature's examples."""

    BINDINGS = [Binding("escape", "app.pop_screen", "pop")]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            for i in range(40):
                yield Static(Text(f"paragraph {i}: " + "lorem ipsum dolor sit amet " * 6))


class Bare(FrameClock, App[None]):
    """The baseline: Textual alone doing the same kinds of work (scroll a table, switch between two screens
    with a table, push a screen of text), timed with the same clock."""

    MODES = {"a": TableScreen, "b": TableScreen}
    SCREENS = {"text": TextScreen}
    BINDINGS = [Binding("1", "switch_mode('a')", "a"), Binding("2", "switch_mode('b')", "b")]

    def on_mount(self) -> None:
        self.switch_mode("a")


async def idle(pilot: Pilot) -> None:
    """Between samples (not timed): let background work finish."""
    await settle(pilot)


async def measure_bare(samples: int) -> dict[str, list[float]]:
    app = Bare()
    out: dict[str, list[float]] = {"scroll": [], "switch": [], "open": []}
    async with app.run_test(size=SIZE) as pilot:
        await idle(pilot)
        await pilot.press("2", "1")
        await idle(pilot)
        for i in range(samples):
            table = app.screen.query_one(DataTable)
            row = table.cursor_row
            out["scroll"].append(await timed(app, "down", lambda t=table, r=row: t.cursor_row == r + 1))
            await idle(pilot)
            mode = "ab"[(i + 1) % 2]
            out["switch"].append(await timed(app, str((i + 1) % 2 + 1), lambda m=mode: app.current_mode == m))
            await idle(pilot)
            out["open"].append(await timed(app, "p", lambda: isinstance(app.screen, TextScreen)))
            await pilot.press("escape")
            await idle(pilot)
    return out


MODES = ("overview", "deltas", "clusters", "hypotheses", "rollouts")


def has_data(app: RldiffApp) -> bool:
    """Whether the current screen shows its data (not only its frame)."""
    screen = app.screen
    return bool(
        getattr(screen, "_summary", None)
        or getattr(screen, "_rows", None)
        or getattr(screen, "_clusters", None)
        or getattr(screen, "rows", None)
    )


async def time_opens(
    app: TimedApp, pilot: Pilot, table: PagedTable, samples: int, shows: Callable[[str], bool]
) -> list[float]:
    """`samples` times: Enter on the row under the cursor, timed until `shows(its key)` holds; Esc, down."""
    times = []
    for _ in range(samples):
        key = table.row_keys[table.cursor_row]
        times.append(await timed(app, "enter", lambda k=key: shows(k)))
        await pilot.press("escape", "down")
        await idle(pilot)
    return times


async def measure_app(store: Path, samples: int, no_pause: bool = False) -> dict[str, list[float]]:
    app = TimedApp(store)
    results: dict[str, list[float]] = {
        "first visit": [],
        "switch screen": [],
        "scroll deltas": [],
        "open feature": [],
        "open rollout": [],
    }
    async with app.run_test(size=SIZE) as pilot:
        while not has_data(app):
            await idle(pilot)
        # a person reads the overview before pressing a key; by then the app has warmed the other screens'
        # queries (WARM_UP_AFTER_S after the store opened). `--no-pause` measures first visits at once.
        await asyncio.sleep(0 if no_pause else WARM_UP_AFTER_S + 1)
        for i in range(1, samples + 5):  # 2, 3, 4, 5, 1, 2, ...: the first visit to a screen loads its data
            mode = MODES[i % 5]
            sample = await timed(app, str(i % 5 + 1), lambda m=mode: app.current_mode == m and has_data(app))
            results["first visit" if i < 5 else "switch screen"].append(sample)
            await idle(pilot)
        await pilot.press("2")
        await idle(pilot)
        table = app.screen.query_one(PagedTable)
        for _ in range(max(samples, 400)):  # across page boundaries: the next page loads as the cursor nears the end
            row = table.cursor_row
            results["scroll deltas"].append(await timed(app, "down", lambda r=row: table.cursor_row == r + 1))
            await idle(pilot)
        assert table.row_count > 200, "scrolling never loaded a second page"
        results["open feature"] = await time_opens(
            app,
            pilot,
            table,
            samples,
            lambda key: (
                isinstance(app.screen, FeatureScreen)
                and app.screen.detail is not None
                and app.screen.detail.feature_id == int(key.split(":")[0])
            ),
        )
        await pilot.press("5")
        await idle(pilot)
        results["open rollout"] = await time_opens(
            app,
            pilot,
            app.screen.query_one(PagedTable),
            samples,
            lambda key: (
                isinstance(app.screen, RolloutViewerScreen)
                and (data := app.screen.query_one("#main-transcript", Transcript).data) is not None
                and data.rollout.rollout_key == int(key)
            ),
        )
    return results


def query_times(store: Path) -> dict[str, float]:
    """The queries behind the timed actions, alone: how much of each latency is the store."""
    import duckdb

    from engine.store import queries
    from tui.screens.feature import load_feature
    from tui.screens.rollouts import load_transcript

    def median_ms(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(20):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    with duckdb.connect(str(store), read_only=True) as con:
        return {
            "delta page": median_ms(lambda: queries.delta_page(con, queries.DeltaFilter(), 200, 200)),
            "open feature": median_ms(lambda: load_feature(17)(con)),
            "open rollout": median_ms(lambda: load_transcript(5000)(con)),
            "overview": median_ms(lambda: queries.study_summary(con)),
        }


def store_counts(store: Path) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(store), read_only=True) as con:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("rollouts", "segments", "segment_features", "features", "feature_deltas", "hypotheses")
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, default=Path("/tmp/rldiff-bench-tui.duckdb"))
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    parser.add_argument("--no-pause", action="store_true", help="visit the screens as soon as the overview shows")
    args = parser.parse_args()
    if not args.store.exists():
        start = time.perf_counter()
        build_store(args.store, BENCH_SIZE)
        print(f"built {args.store} in {time.perf_counter() - start:.0f} s")
    print("store:", ", ".join(f"{k} {v:,}" for k, v in store_counts(args.store).items()))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")

    if not args.no_startup:
        boot = startup(args.store)
        print("\nstart-up (median of 3 fresh processes)")
        print(f"  import tui.app            {boot['import_ms']:7.0f} ms")
        print(
            f"  process start -> data     {boot['to_data_ms']:7.0f} ms   "
            f"bare Textual app to first frame {boot['bare_textual_ms']:.0f} ms "
            f"(ratio {boot['to_data_ms'] / boot['bare_textual_ms']:.1f}x)"
        )

    bare_samples = asyncio.run(measure_bare(args.samples))
    bare = {name: p95(samples) for name, samples in bare_samples.items()}
    results = asyncio.run(measure_app(args.store, args.samples, args.no_pause))
    print(
        f"\nkeypress -> updated screen (budget {BUDGET_MS:.0f} ms). Baseline, bare Textual in this process, p95: "
        f"scroll a table {bare['scroll']:.1f} ms, switch screens {bare['switch']:.1f} ms, "
        f"push a screen of text {bare['open']:.1f} ms (medians "
        + ", ".join(f"{statistics.median(v):.1f}" for v in bare_samples.values())
        + " ms)"
    )
    print(f"  {'action':16} {'n':>4} {'median':>8} {'p95':>8} {'max':>8} {'p95/budget':>11} {'p95/baseline':>13}")
    baseline = {"scroll deltas": "scroll", "switch screen": "switch", "first visit": "switch"}
    for name, samples in results.items():
        q = p95(samples)
        floor = bare[baseline.get(name, "open")]
        print(
            f"  {name:16} {len(samples):4d} {statistics.median(samples):7.1f}ms {q:7.1f}ms {max(samples):7.1f}ms "
            f"{q / BUDGET_MS:10.2f}x {q / floor:12.1f}x"
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("\nof which the store queries (median of 20, on a worker thread's cursor):")
    for name, ms in query_times(args.store).items():
        print(f"  {name:16} {ms:7.1f} ms")


if __name__ == "__main__":
    main()
