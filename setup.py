"""Build the Cython twins in cython_ext/ (every ``*.pyx`` there is an extension).

Metadata lives in pyproject.toml; this file exists only because the extension list is
computed. ``WEIR_NO_CYTHON=1`` skips the build (the pure-Python twins then serve).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup


def _extensions() -> list[object]:
    if os.environ.get("WEIR_NO_CYTHON") == "1":
        return []
    from Cython.Build import cythonize
    from setuptools import Extension

    here = Path(__file__).parent
    sources = sorted((here / "cython_ext").glob("*.pyx"))
    exts = [
        Extension(f"cython_ext.{src.stem}", [str(src.relative_to(here))], extra_compile_args=["-O2"])
        for src in sources
    ]
    return cythonize(
        exts,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
        quiet=True,
    )


setup(ext_modules=_extensions())
