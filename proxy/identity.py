"""Who a session is, for authorization: its effective role and search_path (pure).

Owns: the rules by which a session's identity becomes *unknown* to weir, and what weir's
own SQL commands require of it:

- :func:`startup_taint`: startup parameters that may set the role or search_path (``role``,
  ``session_authorization``, ``search_path`` given directly, or anything in ``options``);
- :func:`statement_taint`: a statement (simple Query or Parse text) that may change them:
  SET/RESET of ``role``, ``session authorization`` or ``search_path`` in any form,
  ``set_config(...)`` anywhere, ``DO`` blocks, ``CALL``, ``EXECUTE`` (a prepared statement
  whose text weir may not have seen), ``DISCARD ALL``/``RESET ALL`` and the call of a user
  function that may change them (:data:`IDENTITY_FUNCTIONS_QUERY`);
- :func:`default_taint`: role or database defaults (``ALTER ROLE ... SET role = ...``) that
  change the role the session starts with;
- :func:`is_admin`: whether a session may run weir's SQL commands.

A session whose identity is unknown reads upstream for the rest of its life
(``SessionContext.tainted``, with ``role_unknown`` set when the role itself is in doubt):
PostgreSQL then decides. Tracking is conservative: a false positive costs cache hits,
never a wrong answer. The bytes of a plain simple Query that weir forwards without a look
never contain ``set_config`` (``proxy.rules.query_head`` refuses them) and never start with
DO, CALL or EXECUTE (``proxy.rules.WATCHED_WORDS``).
"""

from __future__ import annotations

import re
from typing import Any

#: settings whose change changes who the session is, or which relations its names resolve to
IDENTITY_SETTINGS = frozenset({"role", "session_authorization", "search_path"})
#: settings of the role side only (``SessionContext.role_unknown``)
ROLE_SETTINGS = frozenset({"role", "session_authorization"})
#: first words of statements that run code weir does not see
OPAQUE_FIRST_WORDS = ("do", "call", "execute")
#: the words of set_config as the rules kernel looks for them (any case)
SET_CONFIG = "set_config"

#: user functions whose body may change the role or search_path (they call set_config or
#: run SET/dynamic SQL, or are written in a language weir cannot read); functions with a SET
#: clause restore the setting when they return and change nothing for the session
IDENTITY_FUNCTIONS_QUERY = """
    SELECT DISTINCT lower(p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
    WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
      AND (l.lanname NOT IN ('sql', 'plpgsql', 'internal')
           OR p.prosrc ~* '(set_config|\\mrole\\M|search_path|session\\s+authorization|execute)')
    ORDER BY 1"""

ADMIN_DENIED = ("permission denied to run weir's commands: the role is not one of weir's "
                "admin roles (--admin-roles) nor a superuser")

UNREAD = "the session sent a message weir could not read"

_WORDS = re.compile(r"[a-z_][a-z0-9_$]*")
_ALL = "the session ran a statement that may change its role or search_path"


def startup_taint(parameters: dict[str, str]) -> tuple[str | None, bool]:
    """(why the session's identity is unknown from the start, whether its role is)."""
    if parameters.get("options", "").strip():
        return "the session set options at startup, which weir does not follow yet", True
    names = {name.lower() for name in parameters}
    if names & ROLE_SETTINGS:
        return "the session set its role at startup, which weir does not follow yet", True
    if "search_path" in names:
        return "the session set search_path at startup, which weir does not follow yet", False
    return None, False


def _setting_name(words: list[str]) -> str | None:
    """The setting a SET/RESET statement's words (lower case, the verb first) name."""
    rest = words[1:]
    if rest and rest[0] in ("session", "local"):
        if rest[0] == "session" and rest[1:2] == ["authorization"]:
            return "session_authorization"
        rest = rest[1:]
    if not rest:
        return None
    if rest[0] == "session" and rest[1:2] == ["authorization"]:
        return "session_authorization"
    return rest[0].strip('"')


def statement_taint(text: str, functions: tuple[str, ...] = ()) -> tuple[str | None, bool]:
    """(why a statement makes the session's identity unknown, or None; whether its role is
    in doubt). ``functions``: user functions that may change the identity (lower case)."""
    lowered = text.lower()
    words = _WORDS.findall(lowered[:200])
    if not words:
        return None, False
    first = words[0]
    if first in ("set", "reset"):
        name = _setting_name(words)
        if name == "all":  # RESET ALL: search_path back to its default (role is kept)
            return _ALL, False
        if name in IDENTITY_SETTINGS:
            return (f"the session changed {name.replace('_', ' ')}, which weir does not "
                    "follow yet"), name in ROLE_SETTINGS
        return None, False
    if first == "discard" and words[1:2] == ["all"]:
        return _ALL, True
    if first in OPAQUE_FIRST_WORDS:
        return _ALL, True
    if SET_CONFIG in lowered:
        return _ALL, True
    if functions:
        found = set(_WORDS.findall(lowered))
        if not found.isdisjoint(functions):
            return _ALL, True
    return None, False


def default_taint(values: dict[str, str]) -> tuple[str | None, bool]:
    """For the role's and database's default settings: why the session's role is not its
    login role (``ALTER ROLE app SET role = bob``)."""
    for name in ROLE_SETTINGS:
        if values.get(name, "").strip() not in ("", "none"):
            return f"the role's or database's default {name} is {values[name]}", True
    return None, False


def observe(ctx: Any, msg: object, functions: tuple[str, ...]) -> None:
    """A Query or Parse (any message: others are ignored) seen by a session with context
    ``ctx``: its identity becomes unknown if the statement may change it."""
    text = getattr(msg, "query", None)
    if ctx is None or ctx.role_unknown or not isinstance(text, str):
        return
    taint(ctx, statement_taint(text, functions))


def taint(ctx: Any, found: tuple[str | None, bool]) -> None:
    """Record a taint on a ``SessionContext`` (the first reason is kept)."""
    reason, role = found
    if reason is None or ctx is None:
        return
    if ctx.tainted is None:
        ctx.tainted = reason
    if role:
        ctx.role_unknown = True


def admin_roles(setting: str | None, upstream_user: str | None) -> frozenset[str]:
    """The roles ``--admin-roles`` names (default: the upstream URL's role)."""
    if setting is None:
        return frozenset({upstream_user} if upstream_user else ())
    return frozenset(part.strip() for part in setting.split(",") if part.strip())


def is_admin(ctx: Any, roles: frozenset[str]) -> bool:
    """Whether a session may run weir's SQL commands: its current role is a superuser
    (PostgreSQL reports ``is_superuser`` for the current role, also after SET ROLE), or it
    logged in as one of ``roles`` and its role cannot have changed since."""
    parameters = ctx.parameters or {}
    if parameters.get("is_superuser") == "on":
        return True
    return not ctx.role_unknown and ctx.user in roles
