"""Opening connections to the upstream PostgreSQL for relayed sessions and cancel requests.

Owns: the TCP connection, the SSLRequest negotiation and TLS handshake per ``sslmode``, and
handing the ready transport to a relay protocol. Authentication is *not* done here: for a
relayed session the client authenticates itself through the relay.
"""

from __future__ import annotations

import asyncio
import time

from pgwire.frontend import CancelRequest, SSLRequest
from proxy.metrics import UPSTREAM_CONNECT
from proxy.settings import UpstreamAddress
from proxy.tls import NEED_TLS, TRY_TLS, upstream_context


class UpstreamUnavailable(Exception):
    """The upstream could not be reached or refused TLS that the sslmode requires."""


async def open_stream(
    addr: UpstreamAddress, timeout: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connected stream to the upstream with TLS negotiated per sslmode (its time is
    observed in ``metrics.UPSTREAM_CONNECT``)."""
    started = time.monotonic()
    reader, writer = await _open_stream(addr, timeout)
    UPSTREAM_CONNECT.observe(time.monotonic() - started)
    return reader, writer


async def _open_stream(
    addr: UpstreamAddress, timeout: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(addr.host, addr.port), timeout
        )
    except (TimeoutError, OSError) as exc:
        raise UpstreamUnavailable(
            f"could not connect to upstream {addr.host}:{addr.port}: {exc or 'timeout'}"
        ) from exc
    if addr.sslmode not in TRY_TLS:
        return reader, writer
    try:
        writer.write(SSLRequest().encode())
        answer = await asyncio.wait_for(reader.readexactly(1), timeout)
        if answer == b"S":
            await writer.start_tls(upstream_context(addr), server_hostname=addr.host)
        elif answer != b"N" or addr.sslmode in NEED_TLS:
            raise UpstreamUnavailable(
                f"upstream {addr.host}:{addr.port} does not accept TLS (sslmode={addr.sslmode})"
            )
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
        writer.close()
        raise UpstreamUnavailable(f"TLS negotiation with the upstream failed: {exc}") from exc
    except UpstreamUnavailable:
        writer.close()
        raise
    return reader, writer


async def send_cancel(
    addr: UpstreamAddress, process_id: int, secret_key: int, timeout: float
) -> None:
    """Deliver a CancelRequest to the upstream (in clear text, as libpq does) and wait until
    the upstream closes the connection: PostgreSQL has then signalled the backend."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(addr.host, addr.port), timeout)
    except (TimeoutError, OSError):
        return
    try:
        writer.write(CancelRequest(process_id, secret_key).encode())
        await asyncio.wait_for(reader.read(), timeout)
    except (TimeoutError, OSError):
        pass
    finally:
        writer.close()
