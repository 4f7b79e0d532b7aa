"""The `rldiff` command line (DESIGN.md §2). Exit codes: 0 ok, 2 bad input or usage, 1 internal error.

One module per command group (`study`, `hypothesis`, `checks`), the parser that names them all (`parser`), and
the terminal they print to (`output`); `main` runs a command and turns its errors into exit codes."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from engine import safe_text
from engine.cli.parser import build_parser
from engine.errors import RldiffError

log = logging.getLogger("rldiff")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.handler(args)
    except RldiffError as exc:  # unwrapped: FILE:LINE: field: problem stays on one line; rollout text cleaned
        sys.stderr.write(f"rldiff: {safe_text.clean(str(exc))}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("rldiff: interrupted\n")
        return 130
    except Exception as exc:  # an internal error: say so, with the trace under -vv
        log.debug("internal error", exc_info=True)
        if isinstance(exc, OSError) and exc.filename is not None:  # a path that cannot be read or written
            sys.stderr.write(f"rldiff: {safe_text.clean(str(exc.filename))}: {exc.strerror or exc}\n")
            return 2
        sys.stderr.write(
            f"rldiff: internal error: {type(exc).__name__}: {safe_text.clean(str(exc))} (run with -vv for the trace)\n"
        )
        return 1
