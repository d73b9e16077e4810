"""Who a session is, for authorization: its effective role and search_path (pure).

Owns: the rules by which a session's identity becomes *unknown* to weir, and what weir's
own SQL commands require of it:

- :func:`startup_taint`: startup parameters that may set the role or search_path (``role``,
  ``session_authorization``, ``search_path`` given directly, or anything in ``options``);
- :func:`statement_taint`: a statement (simple Query or Parse text) that may change them:
  SET/RESET of ``role``, ``session authorization`` or ``search_path`` in any form,
  ``set_config(...)`` anywhere (and any FunctionCall message), ``DO`` blocks, ``CALL``,
  ``EXECUTE`` (a prepared statement whose text weir may not have seen), ``DISCARD
  ALL``/``RESET ALL`` and the call of a user function that may change them
  (:data:`IDENTITY_FUNCTIONS_QUERY`);
- :func:`default_taint`: role or database defaults (``ALTER ROLE ... SET role = ...``) that
  change the role the session starts with;
- :func:`statement_reset`: a statement that brings parts of the identity back to the
  login's (``RESET ROLE``, ``RESET SESSION AUTHORIZATION``, ``RESET search_path``,
  ``RESET ALL``, ``DISCARD ALL`` and their ``SET ... NONE/DEFAULT`` forms), and
  :func:`forwarded`/:func:`relearn`: the session learns its identity again when such a
  statement, sent alone as a simple Query while nothing else was outstanding and no
  transaction block was open, succeeds (its own implicit transaction committed), and no
  statement that may change the identity was seen since;
- :class:`Block`: inside a transaction block, what weir knew before the first change seen
  in it, given back when the block rolls back (:func:`_arm_end`) or ends after ``SET
  LOCAL`` changes and resets only (:func:`_block_ended`); a FunctionCall message is a change;
- :func:`is_admin`: whether a session may run weir's SQL commands.

A session whose identity is unknown reads upstream (``SessionContext.tainted``, with
``role_unknown`` set when the role itself is in doubt) until it is known again: PostgreSQL
then decides. :class:`Who` (``SessionContext.who``) keeps which parts may differ from the
login's (``role``, ``auth`` — the session authorization — and ``path``), and whether the
login identity itself is unknown (startup parameters, role or database defaults: then it is
never learnt again). Tracking is conservative: a false positive costs cache hits,
never a wrong answer. The bytes of a plain simple Query that weir forwards without a look
never contain ``set_config`` (``proxy.rules.query_head`` refuses them) and never start with
DO, CALL or EXECUTE (``proxy.rules.WATCHED_WORDS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from pgwire import frontend as fe
from proxy.router import HARMLESS_SETTINGS, SQL_COMMENTS

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
#: the protocol's FunctionCall runs any function by its oid (``set_config`` too)
FUNCTION_CALL = "the session called a function by its oid (FunctionCall)"

_WORDS = re.compile(r"[a-z_][a-z0-9_$]*")
#: a set_config call whose setting is a plain literal: its name
_SET_CONFIG_LITERAL = re.compile(r"set_config\s*\(\s*'([a-z_][a-z0-9_.]*)'\s*,")
#: settings a set_config call may change without making the session's identity (or any
#: answer weir gives it) depend on it: asyncpg turns ``jit`` off this way before it reads
#: types, on every connection. The SET statements' harmless settings (``proxy.router``)
#: less the output settings PostgreSQL reports (weir reads them from ParameterStatus, not
#: here) and the default isolation, which decides whether a block may be served.
SET_CONFIG_HARMLESS = HARMLESS_SETTINGS - {
    "datestyle", "timezone", "intervalstyle", "default_transaction_isolation"}
_ALL = "the session ran a statement that may change its role or search_path"

#: the parts of a session's identity weir follows: its role (SET ROLE), its session
#: authorization and its search_path
ROLE, AUTH, PATH = "role", "auth", "path"
EVERYTHING = frozenset({ROLE, AUTH, PATH})
#: setting -> the part of the identity it is
_PART = {"role": ROLE, "session_authorization": AUTH, "search_path": PATH}


@dataclass(slots=True)
class Who:
    """What weir knows of a session's identity beyond its login (``SessionContext.who``)."""

    #: the login identity itself is unknown (startup parameters, role or database defaults)
    for_life: bool = False
    #: parts that may differ from the login's (``ROLE``, ``AUTH``, ``PATH``)
    changed: set[str] = field(default_factory=set)
    #: what ``identity.taint`` set ``ctx.tainted`` to (cleared with it when learnt again)
    reason: str | None = None
    generation: int = 0  # bumped whenever a statement that may change the identity is seen
    #: (the Query, the parts it restores, ``generation`` after it) of a reset just observed
    armed: tuple[object, frozenset[str], int] | None = None
    #: the identity at the start of the transaction block the session is in, once a change
    #: was seen in it (:class:`Block`)
    block: Block | None = None


@dataclass(slots=True)
class Block:
    """What weir knew of a session's identity when a change was first seen inside its
    transaction block (exactly, or more in doubt: changes seen earlier in the block are
    included); restored when the block rolls back, or ends after SET LOCAL changes only."""

    changed: frozenset[str]
    tainted: str | None
    reason: str | None
    role_unknown: bool
    #: every change seen in the block was SET LOCAL (undone at its end, committed or not)
    local_only: bool = True


def who(ctx: Any) -> Who:
    """The session's :class:`Who` (made on first use)."""
    found = ctx.who
    if found is None:
        found = ctx.who = Who()
    return found  # type: ignore[no-any-return]


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
    reason, parts = statement_changes(text, functions)
    return reason, not parts.isdisjoint((ROLE, AUTH))


def statement_changes(text: str, functions: tuple[str, ...] = ()
                      ) -> tuple[str | None, frozenset[str]]:
    """(why a statement makes the session's identity unknown, or None; the parts of it that
    may change: ``ROLE``, ``AUTH``, ``PATH``). Every statement of a multi-statement text is
    looked at (the text is cut at each ``;``, also one inside a literal: more pieces only
    cost false positives), each after its comments (cut naively: a marker inside a literal
    only removes words of that piece)."""
    lowered = text.lower()
    reason: str | None = None
    parts: frozenset[str] = frozenset()
    for piece in lowered.split(";") if ";" in lowered else (lowered,):
        if "--" in piece or "/*" in piece:
            piece = SQL_COMMENTS.sub(" ", piece)
        found, more = _first_words(piece)
        if found is not None:
            reason, parts = reason or found, parts | more
    if SET_CONFIG in lowered and not _harmless_set_config(lowered):
        return reason or _ALL, EVERYTHING
    if functions:
        found_words = set(_WORDS.findall(lowered))
        if not found_words.isdisjoint(functions):
            return reason or _ALL, EVERYTHING
    return reason, parts


def _first_words(piece: str) -> tuple[str | None, frozenset[str]]:
    """:func:`statement_changes` for one statement (lower case, without comments)."""
    words = _WORDS.findall(piece[:200])
    if not words:
        return None, frozenset()
    first = words[0]
    if first in ("set", "reset"):
        name = _setting_name(words)
        if name == "all":  # RESET ALL: search_path back to its default (role is kept)
            return _ALL, frozenset({PATH})
        if name is not None and name in IDENTITY_SETTINGS:
            return (f"the session changed {name.replace('_', ' ')}, which weir does not "
                    "follow yet"), frozenset({_PART[name]})
        return None, frozenset()
    if first == "discard" and words[1:2] == ["all"]:
        return _ALL, EVERYTHING
    if first in OPAQUE_FIRST_WORDS:
        return _ALL, EVERYTHING
    return None, frozenset()


#: the exact word lists (lower case) of the statements that bring parts of the identity
#: back to the login's, when they run alone and commit: ``RESET ROLE`` and ``SET ROLE NONE``
#: give the role back (the login's own, as no startup parameter or default set another);
#: ``RESET SESSION AUTHORIZATION`` gives the authenticated user back and ends any SET ROLE
#: (PostgreSQL: SET SESSION AUTHORIZATION logically resets the role to NONE); ``RESET
#: search_path`` and ``RESET ALL`` give the search_path of the session's start back (the
#: login's, when no startup parameter or default changed it); ``DISCARD ALL`` does all that
_RESETS: dict[tuple[str, ...], frozenset[str]] = {}
for _forms, _parts in (
        ((("reset", "role"), ("set", "role", "none"), ("set", "role", "to", "default"),
          ("set", "role", "default"), ("set", "session", "role", "none")), {ROLE}),
        ((("reset", "session", "authorization"),
          ("set", "session", "authorization", "default")), {ROLE, AUTH}),
        ((("reset", "search_path"), ("set", "search_path", "to", "default"),
          ("set", "search_path", "default"), ("reset", "all")), {PATH}),
        ((("discard", "all"),), EVERYTHING)):
    for _form in _forms:
        _RESETS[_form] = frozenset(_parts)
_WORDS_ONLY = re.compile(r"[a-z_]+|[^\sa-z_;]")


def statement_reset(text: str) -> frozenset[str]:
    """The parts of the identity a statement gives back to the login's if it runs alone and
    commits (see :data:`_RESETS`); empty for anything else (several statements, comments,
    quoted names: nothing is given back, which only costs cache hits)."""
    body = text.strip().rstrip(";").rstrip()
    if len(body) > 64 or ";" in body:
        return frozenset()
    words = tuple(_WORDS_ONLY.findall(body.lower().replace("=", " to ")))
    return _RESETS.get(words, frozenset())


def _harmless_set_config(lowered: str) -> bool:
    """Whether every ``set_config`` in ``lowered`` names, as a literal, a setting of
    :data:`SET_CONFIG_HARMLESS` (anything else — a parameter, an expression, an identity
    setting, an unknown one — is not)."""
    names = _SET_CONFIG_LITERAL.findall(lowered)
    return len(names) == lowered.count(SET_CONFIG) and all(
        name in SET_CONFIG_HARMLESS for name in names)


def default_taint(values: dict[str, str]) -> tuple[str | None, bool]:
    """For the role's and database's default settings: why the session's role is not its
    login role (``ALTER ROLE app SET role = bob``)."""
    for name in ROLE_SETTINGS:
        if values.get(name, "").strip() not in ("", "none"):
            return f"the role's or database's default {name} is {values[name]}", True
    return None, False


def observe(ctx: Any, msg: object, functions: tuple[str, ...], state: Any = None) -> None:
    """A Query or Parse (any message: others are ignored) seen by a session with context
    ``ctx`` (and ledger ``state``, before the message enters it): its identity becomes
    unknown if the statement may change it (inside a transaction block, what was known
    before is kept: :func:`_enter_block`); a Query that may give it back is remembered
    (:func:`forwarded` decides whether it may)."""
    if state is not None and ctx is not None and ctx.who is not None:
        _block_ended(ctx, state)
    text = getattr(msg, "query", None)
    if ctx is None or not isinstance(text, str):
        if ctx is not None and type(msg) is fe.FunctionCall:
            _taint(ctx, FUNCTION_CALL, EVERYTHING)
        return
    reason, parts = statement_changes(text, functions)
    if reason is not None:
        if state is not None:
            _enter_block(ctx, state)
        # (a reset inside a block counts as SET LOCAL: if the block commits, the identity
        # is more known than at its start, so restoring the start stays on the safe side)
        _taint(ctx, reason, parts, _set_local(text) or bool(statement_reset(text)))
    if type(msg) is fe.Query and (ctx.tainted is not None or ctx.role_unknown):
        gives = statement_reset(text)
        if gives:
            found = who(ctx)
            found.armed = (msg, gives, found.generation)


#: a key no client portal can have (names are NUL-terminated on the wire) that weir puts in
#: the ledger's portal table when it notes a :class:`Block`: the ledger empties that table at
#: every ReadyForQuery saying idle, so while the key is there the block has not ended
BLOCK_MARK = "\0weir: transaction block"
#: the statements that end a transaction block, alone: (word, optional word)
_BLOCK_END = re.compile(r"\s*(rollback|abort|commit|end)(\s+(work|transaction))?\s*;?\s*",
                        re.IGNORECASE)


def _set_local(text: str) -> bool:
    """Whether ``text`` is one ``SET LOCAL`` of an identity setting (undone at the end of
    its transaction, committed or not)."""
    body = text.strip().rstrip(";")
    if ";" in body:
        return False
    words = _WORDS.findall(body[:200].lower())
    return words[1:2] == ["local"] and words[0] == "set" \
        and _setting_name(words) in IDENTITY_SETTINGS


def _enter_block(ctx: Any, state: Any) -> None:
    """A statement that may change the identity is about to enter the ledger ``state``: if
    the session is known to be inside a transaction block (nothing outstanding, the last
    ReadyForQuery said so), note what weir knows of its identity now (:class:`Block`),
    unless noted already in this block."""
    found = who(ctx)
    portals = state.portals
    if found.block is not None and BLOCK_MARK in portals:
        return
    found.block = None
    if state.pending or state.transaction_status not in ("T", "E"):
        return
    found.block = Block(frozenset(found.changed), ctx.tainted, found.reason, ctx.role_unknown)
    portals[BLOCK_MARK] = ""


def _restore(ctx: Any, block: Block) -> bool:
    """The block ``block`` was noted in ended undoing its changes: the identity is what weir
    knew before them; True when it is known again (statements prepared meanwhile may then
    be adopted: ``Extended.adopt``)."""
    found: Who = ctx.who
    found.block = None
    found.generation += 1
    found.changed = set(block.changed)
    ctx.role_unknown = block.role_unknown
    if block.tainted is not None:
        return False
    if ctx.tainted is not None and ctx.tainted is found.reason:
        ctx.tainted = None
    found.reason = None
    return ctx.tainted is None


def unsettled(ctx: Any) -> bool:
    """Whether a transaction block was noted for the session with context ``ctx``
    (:class:`Block`) and not settled yet: :func:`_block_ended` settles it when weir next
    looks at a client message, so the paths that forward quiet messages without a look (the
    relay's quiet loops, the pass lanes) step aside until then."""
    return ctx is not None and ctx.who is not None and ctx.who.block is not None


def _block_ended(ctx: Any, state: Any) -> None:
    """Before weir looks at a client message: when the block noted has ended (a
    ReadyForQuery said idle since: the mark is gone) and every change seen in it was ``SET
    LOCAL``, those changes are undone whether it committed or not, and so is anything seen
    since (all of it was seen: none was a change, or the block would not be SET LOCAL only)."""
    found: Who | None = ctx.who
    block = found.block if found is not None else None
    if block is None or BLOCK_MARK in state.portals:
        return
    found.block = None  # type: ignore[union-attr]
    if block.local_only:
        _restore(ctx, block)


def _arm_end(session: Any, found: Who, commit: bool) -> None:
    """A Query ending a transaction block (``ROLLBACK``, or ``COMMIT`` when ``commit``) was
    just handed to the ledger: when it is the only request outstanding, its item restores
    the identity of the block's start when it succeeds inside the block noted (the mark
    still there, status in a block) and nothing that may change the identity was seen since
    it was sent — always for a rollback (also a COMMIT of a failed block), for a commit when
    the block's changes were all ``SET LOCAL``."""
    state = session.state
    pending = state.pending
    if len(pending) != 1 or state.skipping:
        return
    item = pending.pop()
    effect = item.apply
    generation = found.generation

    def succeeded() -> None:
        if effect is not None:
            effect()
        block, status = found.block, state.transaction_status
        if block is not None and found.generation == generation \
                and BLOCK_MARK in state.portals and status in ("T", "E") \
                and (not commit or status == "E" or block.local_only) \
                and _restore(session.ctx, block):
            session.extended.adopt()

    pending.append(replace(item, apply=succeeded))


def taint(ctx: Any, found: tuple[str | None, bool]) -> None:
    """Record a taint on a ``SessionContext`` (the first reason is kept): the whole identity
    when the role is in doubt, else the search_path."""
    reason, role = found
    if reason is not None and ctx is not None:
        _taint(ctx, reason, EVERYTHING if role else frozenset({PATH}))


def taint_for_life(ctx: Any, found: tuple[str | None, bool]) -> None:
    """Record that the session's login identity itself is unknown (startup parameters, role
    or database defaults): it is never learnt again."""
    reason, role = found
    if reason is None or ctx is None:
        return
    who(ctx).for_life = True
    if ctx.tainted is None:
        ctx.tainted = reason
    if role:
        ctx.role_unknown = True


def _taint(ctx: Any, reason: str, parts: frozenset[str], local: bool = False) -> None:
    found = who(ctx)
    found.generation += 1
    if found.block is not None and not local:
        found.block.local_only = False
    found.changed |= parts
    if ctx.tainted is None:
        ctx.tainted = found.reason = reason
    if not parts.isdisjoint((ROLE, AUTH)):
        ctx.role_unknown = True


def forwarded(session: Any, msg: object) -> None:
    """``msg`` was just handed to ``session``'s core (``state.frontend``) on its way upstream:
    if it is a Query :func:`observe` found may give the identity back, and the only request
    outstanding that executes anything (:func:`_alone`), outside a transaction block (so it
    runs alone, in its own implicit transaction), its ledger item learns the identity again
    when it succeeds (an Execute: :func:`_execute_item`). Once learnt, the statements the
    session prepared upstream meanwhile may be served again (``Extended.adopt``)."""
    state, ctx = session.state, session.ctx
    if ctx is None or ctx.who is None:
        return
    if type(msg) is fe.Execute:
        if ctx.tainted is not None or ctx.role_unknown:
            _execute_item(session, msg.portal)
        return
    found: Who = ctx.who
    armed = found.armed
    if armed is None or armed[0] is not msg:
        if found.block is not None and type(msg) is fe.Query:
            end = _BLOCK_END.fullmatch(msg.query)
            if end is not None:
                _arm_end(session, found, end.group(1).lower() in ("commit", "end"))
        return
    found.armed = None
    pending = state.pending
    if not _alone(pending) or state.skipping or state.transaction_status != "I":
        return
    item = pending.pop()
    effect = item.apply
    gives, generation = armed[1], armed[2]

    def succeeded() -> None:
        if effect is not None:
            effect()
        if relearn(ctx, gives, generation):
            session.extended.adopt()

    pending.append(replace(item, apply=succeeded))


#: the kinds of ledger items that execute nothing (``proxy.session``)
_INERT = frozenset({"parse", "bind", "describe", "close"})


def _alone(pending: Any) -> bool:
    """Whether the ledger's last item is the only one outstanding that executes anything
    (before it, at most requests that execute nothing: a client's Parse or Bind, or the
    Close weir sends of its own for a statement it no longer needs, whose answer may still
    be on its way)."""
    return bool(pending) and all(pending[i].kind in _INERT for i in range(len(pending) - 1))
_EXECUTE = ord("E")


def executed(session: Any, mtype: int, raw: bytes, start: int, end: int) -> None:
    """A client message of ``session`` (``raw[start:end]``, type ``mtype``) just went into
    the ledger undecoded: for an Execute, :func:`_execute_item`."""
    ctx = session.ctx
    if mtype == _EXECUTE and ctx is not None and ctx.who is not None \
            and (ctx.tainted is not None or ctx.role_unknown):
        nul = raw.find(b"\0", start, end)
        if nul >= 0:
            _execute_item(session, raw[start:nul].decode("utf-8", "surrogateescape"))


def _execute_item(session: Any, portal: str) -> None:
    """An Execute of ``portal`` was just added to the ledger (extended protocol). If it is
    the first statement of a batch begun outside a transaction block, its item checks, when
    it succeeds, whether the statement it ran is a reset (the ledger's own statement and
    portal tables then hold what it ran) and the batch's Sync comes next (the reset then
    commits alone): the identity is learnt again (:func:`relearn`)."""
    state, ctx = session.state, session.ctx
    pending = state.pending
    if state.skipping or state.transaction_status != "I" or not _alone(pending) \
            or pending[-1].kind != "execute":
        return
    found: Who = ctx.who
    generation = found.generation
    item = pending.pop()

    def succeeded() -> None:
        name = state.portals.get(portal)
        statement = state.statements.get(name) if name is not None else None
        if statement is None or not pending or pending[0].kind != "sync":
            return
        gives = statement_reset(statement.query)
        if gives and relearn(ctx, gives, generation):
            session.extended.adopt()

    pending.append(replace(item, apply=succeeded))


def relearn(ctx: Any, gives: frozenset[str], generation: int) -> bool:
    """A reset that gives back ``gives`` committed: those parts are the login's again,
    unless a statement that may change the identity was seen since (``generation``); when
    none is left, the session's reads may be served again (True)."""
    found: Who = ctx.who
    if found.generation != generation:
        return False
    found.changed -= gives
    if found.for_life:
        return False
    if found.changed.isdisjoint((ROLE, AUTH)):
        ctx.role_unknown = False
    if found.changed:
        return False
    learnt = ctx.tainted is not None and ctx.tainted is found.reason
    if learnt:
        ctx.tainted = None
    found.reason = None
    return learnt


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
