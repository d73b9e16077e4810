"""Accelerated twins of pure-Python kernels, and the one loader that picks between them.

Every ``cython_ext/<name>.pyx`` mirrors functions that live, in pure Python, in the module
that owns them (for example ``pgwire.framing``). Those modules end with::

    _fast = cython_ext.load("framing")
    if _fast is not None:
        split_messages = _fast.split_messages

Each owner keeps its pure reference under one name, ``<name>_python`` (the function or class
``<name>`` is rebound to the twin's; parity tests hold the twin to ``<name>_python``, and
:func:`python_twins` collects them by ``<name>``).

``WEIR_IMPL`` chooses: ``python`` never loads a twin, ``cython`` requires every twin
(a missing build is an error, so a CI run "under Cython" cannot silently test Python),
``auto`` (the default) uses a twin when it is built. This package imports nothing from
the project.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

IMPLS = ("python", "cython", "auto")


def impl() -> str:
    """The implementation selected by ``WEIR_IMPL`` (validated)."""
    value = os.environ.get("WEIR_IMPL", "auto").strip().lower() or "auto"
    if value not in IMPLS:
        raise RuntimeError(f"WEIR_IMPL must be one of {', '.join(IMPLS)}, not {value!r}")
    return value


def load(name: str) -> ModuleType | None:
    """Return the compiled twin ``cython_ext.<name>`` or None when Python is selected."""
    selected = impl()
    if selected == "python":
        return None
    try:
        return importlib.import_module(f"cython_ext.{name}")
    except ImportError as exc:
        if selected == "cython":
            raise RuntimeError(
                f"WEIR_IMPL=cython but cython_ext.{name} is not built ({exc}); run `make compile`"
            ) from exc
        return None


def load_pair(name: str) -> ModuleType | None:
    """The compiled twin regardless of ``WEIR_IMPL`` (for parity tests); None if not built."""
    try:
        return importlib.import_module(f"cython_ext.{name}")
    except ImportError:
        return None


def python_twins(module: ModuleType) -> dict[str, Any]:
    """The pure references ``module`` keeps for its twin: each ``<name>_python`` by ``<name>``."""
    return {name[: -len("_python")]: value for name, value in vars(module).items()
            if name.endswith("_python") and not name.startswith("__")}
