"""Text order under a libc collation, exactly as PostgreSQL compares it.

Owns: ``CollationInfo`` (what the upstream catalog says about one collation: provider, locale,
actual version), ``refusal`` (why weir cannot reproduce a collation's order, or None when it
can) and ``collated`` (the sort key of one string under a usable collation: a ``CollKey``).

How PostgreSQL compares text under a deterministic libc collation (varstr_cmp): byte-equal
strings are equal; otherwise ``strcoll_l`` under the collation's ``locale_t``, and when that
says 0 the tie is broken by ``strcmp`` of the bytes. ``CollKey`` calls the same glibc function
on the same UTF-8 bytes through a ``locale_t`` from ``newlocale`` (no ``setlocale``: nothing
process-global is touched, so any thread may compare), then breaks ties by byte order. The
order is therefore PostgreSQL's exactly when glibc and its locale data are the same release on
both sides: PostgreSQL records that release as the libc collation's version
(``pg_collation_actual_version`` / ``pg_database_collation_actual_version`` are
``gnu_get_libc_version()``), which ``refusal`` compares with weir's own glibc.

Invariants: ICU and nondeterministic collations are refused (weir has no proof its ICU equals
the server's); a locale weir cannot load is refused; equality of two ``CollKey`` is byte
equality (deterministic collations only), so hashing by the string is sound.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import locale
import os
from dataclasses import dataclass
from typing import Any

import cython_ext

#: ``LC_COLLATE_MASK`` of glibc's ``newlocale``.
_LC_COLLATE_MASK = 1 << locale.LC_COLLATE


@dataclass(frozen=True, slots=True)
class CollationInfo:
    """One collation as the upstream catalog describes it: ``provider`` is
    ``pg_collation.collprovider`` ('c' libc, 'i' ICU, 'd' default resolved to the database's
    provider), ``locale`` the libc locale name (``collcollate`` / ``datcollate``) and
    ``version`` the provider's actual version on the server (None when it has none)."""

    name: str
    provider: str
    locale: str | None
    version: str | None
    deterministic: bool = True


def local_glibc() -> str | None:
    """weir's glibc release (``2.36``), or None off glibc."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None
    if not found or not found.startswith("glibc "):
        return None
    return found.split(" ", 1)[1]


class _Libc:
    """``newlocale`` / ``strcoll_l`` through ctypes, one ``locale_t`` per locale name."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("c")
        self.lib: Any = ctypes.CDLL(name) if name else None
        #: (two threads asking at once may each make a handle: both are valid, one is kept)
        self.handles: dict[str, int | None] = {}
        if self.lib is not None:
            self.lib.newlocale.restype = ctypes.c_void_p
            self.lib.newlocale.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
            self.lib.strcoll_l.restype = ctypes.c_int
            self.lib.strcoll_l.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)

    def handle(self, name: str) -> int | None:
        """The ``locale_t`` of ``name`` (kept for the process's life), None if unavailable."""
        if name not in self.handles:
            found = None
            if self.lib is not None:
                found = self.lib.newlocale(_LC_COLLATE_MASK, name.encode(), None) or None
            self.handles.setdefault(name, found)
        return self.handles[name]


_LIBC = _Libc()


def refusal(info: CollationInfo | None, name: str) -> str | None:
    """Why weir cannot order text under collation ``name`` exactly (None: it can)."""
    if info is None:
        return f"collation {name} (not described by the catalog)"
    if not info.deterministic:
        return f"nondeterministic collation {name}"
    if info.provider != "c":
        return f"ICU collation {name} (weir cannot prove its ICU equals the server's)"
    mine = local_glibc()
    if mine is None:
        return f"collation {name}: weir does not run on glibc"
    if info.version != mine:
        return (f"collation {name}: the server's glibc is {info.version or 'unknown'}, "
                f"weir's is {mine}")
    if info.locale is None or _LIBC.handle(info.locale) is None:
        return f"collation {name}: locale {info.locale} is not installed where weir runs"
    return None


class CollKey:
    """A string's place in a collation's order: ``strcoll_l``, ties broken by bytes."""

    __slots__ = ("handle", "raw", "text")

    def __init__(self, text: str, handle: int) -> None:
        self.text = text
        self.raw = text.encode()
        self.handle = handle

    def _cmp(self, other: CollKey) -> int:
        if self.raw == other.raw:
            return 0
        found: int = _LIBC.lib.strcoll_l(self.raw, other.raw, self.handle)
        if found:
            return found
        return -1 if self.raw < other.raw else 1

    def __lt__(self, other: CollKey) -> bool:
        return self._cmp(other) < 0

    def __le__(self, other: CollKey) -> bool:
        return self._cmp(other) <= 0

    def __gt__(self, other: CollKey) -> bool:
        return self._cmp(other) > 0

    def __ge__(self, other: CollKey) -> bool:
        return self._cmp(other) >= 0

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.raw == other.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"CollKey({self.text!r})"


#: the pure reference of the compiled twin (``cython_ext/collation.pyx``)
CollKey_python = CollKey
_fast = cython_ext.load("collation")
if _fast is not None:
    CollKey = _fast.CollKey  # type: ignore[misc]


def collated(text: str, locale_name: str) -> CollKey:
    """The sort key of ``text`` under libc locale ``locale_name`` (which ``refusal`` accepted)."""
    handle = _LIBC.handle(locale_name)
    if handle is None:
        raise LookupError(f"locale {locale_name} is not available")
    return CollKey(text, handle)


def key_function(locale_name: str) -> Any:
    """``collated`` bound to one locale (looked up once)."""
    handle = _LIBC.handle(locale_name)
    if handle is None:
        raise LookupError(f"locale {locale_name} is not available")
    return lambda text: CollKey(text, handle)
