"""The part both documentation generators share: a generated block between two markers.

Owns: replacing what stands between a Markdown file's begin and end markers with a freshly
generated body, and the generators' command line (rewrite the file, or ``--check``: exit 1
when it is stale).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def splice(text: str, begin: str, end: str, body: str, doc: Path) -> str:
    """``text`` with the block between ``begin`` and ``end`` replaced by ``body``."""
    head, sep, rest = text.partition(begin)
    if not sep or end not in rest:
        raise SystemExit(f"{doc}: markers {begin!r} ... {end!r} not found")
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def run(argv: Sequence[str], doc: Path, render: Callable[[str], str], script: str) -> int:
    """Rewrite ``doc`` with ``render``; with ``--check`` only say whether it is current."""
    current = doc.read_text()
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print(f"{doc} is stale: run python {script}", file=sys.stderr)
            return 1
        return 0
    doc.write_text(wanted)
    return 0
