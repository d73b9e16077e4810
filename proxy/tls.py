"""TLS contexts: towards clients (weir terminates TLS when given a certificate and key) and
towards the upstream (per the libpq ``sslmode`` of the upstream URL).

Owns: building ``ssl.SSLContext`` objects with the verification each sslmode promises:
``require`` encrypts without verifying, ``verify-ca`` checks the chain against
``sslrootcert``, ``verify-full`` also checks the host name. ``allow`` and ``disable`` do not
use TLS; ``prefer`` tries it and continues in clear text when the upstream declines.
"""

from __future__ import annotations

import os
import ssl

from proxy.settings import UpstreamAddress

#: sslmodes that send an SSLRequest to the upstream.
TRY_TLS = frozenset({"prefer", "require", "verify-ca", "verify-full"})
#: sslmodes that refuse to continue without TLS.
NEED_TLS = frozenset({"require", "verify-ca", "verify-full"})


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """The context for TLS connections from clients."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def upstream_context(addr: UpstreamAddress) -> ssl.SSLContext:
    """The context for TLS towards the upstream, per ``addr.sslmode``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if addr.sslmode in ("verify-ca", "verify-full"):
        root = addr.sslrootcert or os.path.expanduser("~/.postgresql/root.crt")
        ctx.load_verify_locations(root)
        ctx.check_hostname = addr.sslmode == "verify-full"
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
