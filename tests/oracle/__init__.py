"""A sans-I/O oracle of the v3 protocol's two connection roles, used by the tests only.

- ``conversation`` the state of one connection fed with both directions (transition tables):
  which responses are owed, in which phase and state the connection is;
- ``endpoint``     what the two roles share (the conversation, the framer, end of input);
- ``client_conn``  ``ClientConnection``: a client facing a server (the integration tests drive
  PostgreSQL and weir with it);
- ``server_conn``  ``ServerConnection``: a server facing a client.

The proxy keeps its own request ledger (``proxy.session.SessionState`` over the session core,
``proxy.session_core``); these tables are the independent reference the wire tests hold
PostgreSQL, weir and the codec to.
"""
