"""`python -m engine.cli`: what the `rldiff` script runs (the TUI starts its jobs this way)."""

import sys

from engine.cli import main

sys.exit(main())
