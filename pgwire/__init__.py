"""Sans-I/O PostgreSQL v3 wire protocol: framing, messages, encode/decode.

Layout (nothing here imports asyncio, socket, ssl or a clock):

- ``framing``      byte stream -> message boundaries (``scan_messages``, ``Framer``), limits,
                   ``ProtocolViolation`` (every error of this package; ``sqlstate`` 08P01).
- ``codec``        payload ``Reader`` and writer helpers shared by the message modules.
- ``frontend``     every client -> server message (frozen dataclasses), ``decode_frontend``,
                   ``decode_startup``, the 'p' decoders.
- ``backend``      every server -> client message, ``decode_backend``, the hot encoders
                   (``encode_data_row``, ``encode_row_description``, ``encode_command_complete``).
- ``authmsg``      the Authentication* ('R') messages; ``errors`` ErrorResponse/NoticeResponse and
                   ``error_response``; ``common`` CopyData/CopyDone (both re-exported above).
- ``events``       NEED_DATA / CONNECTION_CLOSED, SSLResponse / GSSENCResponse, ``Phase`` (the
                   one enum of a connection's life, a relayed session's too), State.
- ``auth``         md5 / SCRAM-SHA-256 client authentication for weir's own connections.

Cython twins: ``cython_ext/framing.pyx`` (scan_messages), ``cython_ext/wire_codec.pyx``
(the three encoders); ``*_python`` names keep the pure references for parity tests.
The connection state machines the tests hold everything to live in ``tests/oracle``.
"""
