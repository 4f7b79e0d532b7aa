"""Full garbage collections while the user is idle, not between a keypress and the frame that answers it.

CPython's oldest-generation collection walks every tracked object: 25-80 ms for a TUI holding a few pages of
rows on a small machine, which lands on whichever keypress happens to trigger it. Here the app freezes what it
loaded at start-up (modules, classes: it lives as long as the process), stops automatic full collections, and
runs them once the keyboard has been quiet for a moment. Young generations are still collected automatically
(they are cheap and catch most cycles); a safety valve collects anyway when a long stretch of typing has
pushed many objects into the oldest generation.
"""

from __future__ import annotations

import gc
import time

IDLE_SECONDS = 0.5  # keyboard quiet this long: collect
VALVE = 200  # young collections since the last full one after which a full one runs regardless
OFF = 1 << 30  # a full-collection threshold that is never reached


class IdleCollector:
    """`start()` once the app has loaded its libraries; `input()` on every key; `tick()` from a timer;
    `stop()` when the app closes (restores the interpreter's settings)."""

    def __init__(self) -> None:
        self._last_input = time.monotonic()
        self._thresholds: tuple[int, int, int] | None = None

    def start(self) -> None:
        if self._thresholds is not None:
            return
        gc.collect()
        gc.freeze()
        self._thresholds = gc.get_threshold()
        gc.set_threshold(self._thresholds[0], self._thresholds[1], OFF)

    def input(self) -> None:
        self._last_input = time.monotonic()

    def tick(self) -> None:
        """Collect the oldest generation if anything reached it and the keyboard is quiet (or the valve)."""
        if self._thresholds is None:
            return
        pending = gc.get_count()[2]
        idle = time.monotonic() - self._last_input >= IDLE_SECONDS
        if (pending and idle) or pending >= VALVE:
            gc.collect()

    def stop(self) -> None:
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            gc.unfreeze()
            self._thresholds = None
