"""SQL front end: text -> parse tree, shape and literals; the catalog; the cacheability screen.

- ``text``: ``parse_query`` / ``QueryTextCache`` (pglast JSON tree, normalized shape,
  fingerprint, literals in text order; errors as data).
- ``catalog``: ``Catalog`` / ``Relation`` / ``Column``, ``CATALOG_QUERY`` + ``from_rows``,
  ``resolve`` under a search_path, ``effective_search_path``.
- ``cacheable``: ``check_statement`` -> ``Supported`` | ``Unsupported(reason)``.
- ``rewrite``: equivalent forms made plannable before the screen (``x IN (VALUES ...)`` of
  constants as an IN list), applied by ``parse_query``.

Planning proper lives in ``engine.plan`` (entry point ``engine.plan.queries.QueryPlanner``).
"""
