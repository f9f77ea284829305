"""``python -m epabi``: the epabi command line (see :mod:`epabi.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
