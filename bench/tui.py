"""TUI responsiveness on a large store, against a bare Textual app doing the same kind of work in this process.

    .venv/bin/python bench/tui.py [--store /tmp/rldiff-bench-tui.duckdb] [--samples 60]

The synthetic store (built once, then reused) has ~100k segments, 1M segment-feature rows, 5k features and
200 hypotheses. Measured, with the app headless at 120x40:
- start-up: `import tui.app` in a fresh interpreter, and process start to the overview's data on screen;
- p95 time from a keypress to the updated screen (every query finished, every message handled, the screen
  re-rendered) for scrolling the deltas, opening a feature, opening a rollout and switching screens.
The baselines: a bare Textual app (one Static) started the same way, and a DataTable of 200 rows scrolled with
the same key. Headless Textual composes every frame as on a terminal but skips writing the escape codes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from textual.app import App, ComposeResult  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.widgets import DataTable  # noqa: E402

from tests.factories_tui import BENCH_SIZE, build_store, settle  # noqa: E402
from tui.app import RldiffApp  # noqa: E402
from tui.screens.feature import FeatureScreen  # noqa: E402
from tui.screens.rollouts import RolloutViewerScreen  # noqa: E402

SIZE = (120, 40)
BUDGET_MS = 100.0


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] if len(samples) >= 20 else max(samples)


async def timed(pilot: Pilot, action: Callable[[], Awaitable[None]], done: Callable[[], bool]) -> float:
    """Milliseconds from `action` (a keypress) until `done()` holds and the app is idle with a fresh frame."""
    start = time.perf_counter()
    await action()
    for _ in range(200):
        await settle(pilot)
        if done():
            break
    else:
        raise RuntimeError("the screen never showed the result")
    return (time.perf_counter() - start) * 1000


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


class BareTable(App[None]):
    def compose(self) -> ComposeResult:
        table: DataTable = DataTable(cursor_type="row")
        table.add_columns("a", "b", "c")
        for i in range(200):
            table.add_row(f"row {i}", str(i), str(i * 2))
        yield table


async def baseline_scroll(samples: int) -> list[float]:
    app = BareTable()
    out = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for _ in range(samples):
            out.append(await timed(pilot, lambda: pilot.press("down"), lambda: True))
    return out


async def measure_app(store: Path, samples: int) -> dict[str, list[float]]:
    app = RldiffApp(store)
    results: dict[str, list[float]] = {"scroll deltas": [], "open feature": [], "open rollout": [], "switch screen": []}
    async with app.run_test(size=SIZE) as pilot:
        while not hasattr(app.screen, "_summary"):
            await settle(pilot)
        # switching screens: the first visit to each loads its data
        for i in range(samples):
            key = "12345"[i % 5]
            mode = ("overview", "deltas", "clusters", "hypotheses", "rollouts")[i % 5]
            results["switch screen"].append(
                await timed(pilot, lambda k=key: pilot.press(k), lambda m=mode: app.current_mode == m)
            )
        await pilot.press("2")
        await settle(pilot)
        table = app.screen.query_one("DataTable")
        # scrolling the deltas, across page boundaries (the next page loads as the cursor nears the end)
        for _ in range(max(samples, 400)):
            row = table.cursor_row
            results["scroll deltas"].append(
                await timed(pilot, lambda: pilot.press("down"), lambda r=row: table.cursor_row == r + 1)
            )
        assert table.row_count > 200, "scrolling never loaded a second page"
        for _ in range(samples):
            results["open feature"].append(
                await timed(
                    pilot,
                    lambda: pilot.press("enter"),
                    lambda: isinstance(app.screen, FeatureScreen) and app.screen.detail is not None,
                )
            )
            await pilot.press("escape", "down")
            await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
        for _ in range(samples):
            results["open rollout"].append(
                await timed(
                    pilot,
                    lambda: pilot.press("enter"),
                    lambda: (
                        isinstance(app.screen, RolloutViewerScreen)
                        and app.screen.query_one("#main-transcript").data is not None
                    ),
                )
            )
            await pilot.press("escape", "down")
            await settle(pilot)
    return results


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
    args = parser.parse_args()
    if not args.store.exists():
        start = time.perf_counter()
        build_store(args.store, BENCH_SIZE)
        print(f"built {args.store} in {time.perf_counter() - start:.0f} s")
    print("store:", ", ".join(f"{k} {v:,}" for k, v in store_counts(args.store).items()))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")

    boot = startup(args.store)
    print("\nstart-up (median of 3 fresh processes)")
    print(f"  import tui.app            {boot['import_ms']:7.0f} ms")
    print(
        f"  process start -> data     {boot['to_data_ms']:7.0f} ms   "
        f"bare Textual app to first frame {boot['bare_textual_ms']:.0f} ms "
        f"(ratio {boot['to_data_ms'] / boot['bare_textual_ms']:.1f}x)"
    )

    floor = p95(asyncio.run(baseline_scroll(args.samples)))
    results = asyncio.run(measure_app(args.store, args.samples))
    print(
        f"\nkeypress -> updated screen, p95 (budget {BUDGET_MS:.0f} ms); baseline: DataTable of 200 rows, "
        f"'down' p95 {floor:.1f} ms"
    )
    print(f"  {'action':16} {'n':>4} {'median':>8} {'p95':>8} {'max':>8} {'p95/budget':>11} {'p95/baseline':>13}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for name, samples in results.items():
        q = p95(samples)
        print(
            f"  {name:16} {len(samples):4d} {statistics.median(samples):7.1f}ms {q:7.1f}ms {max(samples):7.1f}ms "
            f"{q / BUDGET_MS:10.2f}x {q / floor:12.1f}x"
        )


if __name__ == "__main__":
    main()
