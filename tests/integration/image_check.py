"""Run by an image's own Python (tests/integration/test_images.py): what a start of the image relies on.

Prints one JSON object: whether thrift's C codec (``fastbinary``) and ``gssapi`` import, and which modules a start
imports (``python image_check.py MODULE...``) or waggle holds have no bytecode matching their source, and would be
compiled again at every start (the images run with PYTHONDONTWRITEBYTECODE on a read-only root).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path


def imports(name: str) -> str:
    try:
        importlib.import_module(name)
    except Exception as exc:  # reported, not raised: the test names what failed
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def stale(source: str) -> bool:
    """Whether ``source`` has no bytecode its import would use: missing, another Python's, or of another source."""
    try:
        header = Path(importlib.util.cache_from_source(source)).read_bytes()[:16]
    except (OSError, NotImplementedError):
        return True
    if header[:4] != importlib.util.MAGIC_NUMBER:
        return True
    if int.from_bytes(header[4:8], "little") != 0:  # hash-based bytecode: valid whatever the timestamp
        return False
    st = os.stat(source)
    return (int.from_bytes(header[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(header[12:16], "little") != st.st_size & 0xFFFFFFFF)


def main() -> None:
    report = {"fastbinary": imports("thrift.protocol.fastbinary"), "gssapi": imports("gssapi")}
    for name in sys.argv[1:]:
        report[name] = imports(name)
    # the modules imported from source files (a frozen module's spec names no file: it needs no bytecode)
    origins = (getattr(getattr(m, "__spec__", None), "origin", None) or "" for m in list(sys.modules.values()))
    sources = {origin for origin in origins if origin.endswith(".py")}
    import waggle

    sources.update(str(p) for p in Path(waggle.__file__).parent.rglob("*.py"))
    report["modules"] = len(sources)
    report["without_bytecode"] = sorted(s for s in sources if stale(s))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
