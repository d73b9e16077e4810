"""Plans: the relational IR, the SQL -> IR planner, its rules, EXPLAIN and fill SQL.

Entry point: ``queries.QueryPlanner(catalog).classify(text, search_path)`` -> ``Classified``
(``.query`` is a ``CachedQuery`` with identity, plan and explain text, or ``Unsupported``;
``.keys(params)`` gives the reader lookups, ``merge_lookups`` combines their rows).

- ``ir`` (IR dataclasses) and ``evaluate`` (reference evaluator) belong to the engine.
- ``planner``: one SELECT block at a time -> ``PlannedQuery``; helpers ``blocks`` (select
  list, key columns, LIMIT values, UNION operands), ``from_clause``
  (FROM, joins, views), ``subqueries`` (IN/EXISTS semi-joins, correlated aggregates),
  ``grouping`` (GROUP BY, aggregates), ``exprs`` (scalar expressions with PostgreSQL's
  typing and collation screen), ``scope``, ``names`` (output column names), ``pgtypes``,
  ``literals`` (literal text -> canonical values).
- ``rules``: key choice, outer-join reduction, predicate pushdown, column pruning,
  materialization placement (one pass per module).
- ``explain``: stable text of a plan; ``fill_sql``: the SQL a fill runs (sqlglot).
"""
