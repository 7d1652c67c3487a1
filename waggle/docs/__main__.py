"""``python -m waggle.docs [--check]``: write every generated page, or say which are stale."""

from __future__ import annotations

import argparse
import sys

from waggle.docs import COMMAND
from waggle.docs.pages import PAGES, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write the docs site's generated pages: "
                                     + ", ".join(page.path for page in PAGES) + ".")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a committed page differs")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"{path} is stale: run {COMMAND}", file=sys.stderr)
        return 1 if old else 0
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
