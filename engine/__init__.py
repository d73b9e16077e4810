"""The dataflow engine: pure (no asyncio, sockets or wall clock)."""
