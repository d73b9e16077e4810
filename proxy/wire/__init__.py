"""Sans-I/O PostgreSQL v3 wire protocol: framing, messages, encode/decode, state machines."""
