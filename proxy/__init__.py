"""weir: the deployable proxy (PG server to apps, PG client to upstream, routing, admin, CLI)."""
