"""The TUI stays light: importing it loads none of the GPU or LLM stack."""

from __future__ import annotations

import subprocess
import sys

BANNED = ("torch", "transformers", "sae_lens", "hdbscan", "anthropic")


def test_importing_the_tui_loads_no_heavy_dependencies() -> None:
    code = (
        "import sys, tui.app; "
        f"print('heavy:' + ','.join(m for m in {BANNED!r} if m in sys.modules)); "
        "print('engine.store.store' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, store_loaded = result.stdout.strip().splitlines()
    assert heavy == "heavy:"
    assert store_loaded == "False"  # the store (duckdb, polars, pyarrow) is imported by the worker that opens it
