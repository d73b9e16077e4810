"""Regular expression matches and SIMILAR TO (``engine.plan.regex``) against PostgreSQL.

Two parts: random patterns from the cached subset's grammar (anchors, ``.``, brackets with
ranges and negation, escaped punctuation, groups with alternatives, greedy and non-greedy
quantifiers and bounds, optional groups) on random strings holding newlines, case variants,
non-ASCII letters and punctuation: every pattern the translation accepts must answer ``~``,
``!~``, ``~*`` and ``!~*`` under COLLATE "C" exactly as PostgreSQL does; and a differential run
through weir with random writes (``run_differential``) over caches filtering with regexes.
"""

from __future__ import annotations

import random
import re
from typing import Any

import psycopg

from engine.plan.regex import similar_regex, translate
from engine.plan.scope import PlanError
from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    a_grp,
    run_differential,
)

CHARS = ["a", "b", "c", "A", "B", "k", "K", "é", "É", ".", "\n", " ", "-", "1", "n"]
ATOMS = ["a", "b", "c", "A", "é", "n", ".", "\\.", "\\-", " ", "[a-c]", "[^b]", "[A-Z]",
         "[a-cé]", "[^a\n]", "1", "[0-9]", "[.]"]
QUANTS = ["", "", "", "*", "+", "?", "*?", "{2}", "{1,}", "{0,2}", "{1,3}?"]


def _pattern(rng: random.Random, depth: int = 0) -> str:
    branches = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        parts = []
        for _ in range(rng.randint(1, 4)):
            if depth < 2 and rng.random() < 0.15:
                parts.append("(" + ("?:" if rng.random() < 0.3 else "")
                             + _pattern(rng, depth + 1) + ")" + rng.choice(["", "", "?", "??"]))
            else:
                parts.append(rng.choice(ATOMS) + rng.choice(QUANTS))
        if rng.random() < 0.3:
            parts.insert(0, "^")
        if rng.random() < 0.3:
            parts.append("$")
        branches.append("".join(parts))
    return "|".join(branches)


def test_translated_patterns_match_as_postgres(pg: Any, dbname: str) -> None:
    rng = random.Random(20261128)
    strings = ["".join(rng.choice(CHARS) for _ in range(rng.randint(0, 9)))
               for _ in range(60)] + ["", "\n", "a\n", "K", "k"]
    checked = 0
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        for _ in range(400):
            pattern = _pattern(rng)
            try:
                plain, caseless = translate(pattern), translate(pattern, True)
            except PlanError:
                continue
            rows = conn.execute(
                'SELECT s, s ~ %(p)s, s !~ %(p)s, s ~* %(p)s, s !~* %(p)s '
                'FROM unnest(%(s)s::text[]) WITH ORDINALITY AS t(s, n) ORDER BY n',
                {"p": pattern, "s": strings}).fetchall()
            # (the column's collation is the database's: make it C explicitly)
            rows_c = conn.execute(
                'SELECT s COLLATE "C" ~* %(p)s FROM unnest(%(s)s::text[]) '
                'WITH ORDINALITY AS t(s, n) ORDER BY n', {"p": pattern, "s": strings}).fetchall()
            search = re.compile(plain, re.DOTALL).search
            fold = re.compile(caseless, re.DOTALL | re.IGNORECASE | re.ASCII).search
            for (s, match, nomatch, _ci, _nci), (ci_c,) in zip(rows, rows_c, strict=True):
                ours = search(s) is not None
                assert (ours, not ours) == (match, nomatch), (pattern, plain, s)
                assert (fold(s) is not None) == ci_c, (pattern, caseless, s)
            checked += 1
    assert checked > 200  # most random patterns are inside the subset


SIMILAR_TOKENS = ["a", "b", "A", "%", "_", ".", "(a|b)", "c*", "n+", "\\%", "\\_", "(ab)?",
                  "$", "^", "é", "\n", "a{2}", "(%|.)", "-"]


def test_similar_to_matches_as_postgres(pg: Any, dbname: str) -> None:
    """SIMILAR TO patterns (``regex.similar_regex``, then ``translate``) on random strings."""
    rng = random.Random(20261129)
    strings = ["".join(rng.choice([*CHARS, "%", "_", "$"]) for _ in range(rng.randint(0, 7)))
               for _ in range(60)] + ["", "a", "ab", "a.b"]
    checked = 0
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        for _ in range(200):
            pattern = "".join(rng.choice(SIMILAR_TOKENS) for _ in range(rng.randint(1, 5)))
            try:
                python = translate(similar_regex(pattern, "\\"))
            except PlanError:
                continue
            rows = conn.execute(
                "SELECT s SIMILAR TO %(p)s, s NOT SIMILAR TO %(p)s FROM unnest(%(s)s::text[]) "
                "WITH ORDINALITY AS t(s, n) ORDER BY n", {"p": pattern, "s": strings}).fetchall()
            search = re.compile(python, re.DOTALL).search
            for s, (match, nomatch) in zip(strings, rows, strict=True):
                ours = search(s) is not None
                assert (ours, not ours) == (match, nomatch), (pattern, python, s)
            checked += 1
    assert checked > 120


def test_refused_patterns_say_why() -> None:
    for pattern, why in [("\\d+", "escape \\d"), ("[[:alpha:]]", "'['"), ("(a+)+", "group"),
                         ("a**", "quantifier on a quantifier"), ("(?i)a", "embedded"),
                         ("", "empty"), ("a{300}", "bound"), ("[z-a]", "range"),
                         ("***=a", "director"), ("a\\", "backslash"), ("(a", "unclosed"),
                         ("a)", "unmatched")]:
        try:
            translate(pattern)
        except PlanError as exc:
            assert why in exc.reason, (pattern, exc.reason)
        else:
            raise AssertionError(f"{pattern!r} was accepted")
    try:
        translate("[Z-a]", True)  # a caseless range across letter cases: upstream
    except PlanError as exc:
        assert "range" in exc.reason
    else:
        raise AssertionError("[Z-a] under ~* was accepted")


REGEX_SHAPES = [
    Shape("SELECT id, name FROM things WHERE grp = $1 AND name ~ '^n(1|2)[0-9]?$'", a_grp),
    Shape("SELECT id, name, score FROM things WHERE grp = $1 AND name !~* 'N1.' ORDER BY id",
          a_grp, ordered=True),
    Shape("SELECT id, note FROM notes WHERE ref = $1 AND note ~ ' [1-3]+[0-9]?$|9$'",
          lambda r: (r.randint(0, 45),)),
    Shape("SELECT id, note FROM notes WHERE ref = $1 AND note NOT SIMILAR TO '%(1|2)_'",
          lambda r: (r.randint(0, 45),)),
]


def test_regex_filters_through_weir(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, REGEX_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
