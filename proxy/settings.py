"""weir's settings: one frozen dataclass, filled from flags, ``WEIR_*`` environment variables,
a TOML configuration file and defaults, in that order of precedence (``proxy.config`` reads
the sources).

Owns: the names, types, defaults and validation of every setting, and parsing of the upstream
URL into what the relay needs (host, port, TLS mode). A bad value is a ``SettingsError`` whose
message names the flag (``proxy.config`` adds where the value came from), so the operator can
fix it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from proxy.fillqueue import ADMISSIONS

SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


#: the smallest fixed client receive buffer (its quarter, the segment size, stays sane)
MIN_RECEIVE_BYTES = 4096


class SettingsError(ValueError):
    """A setting is missing or malformed."""


@dataclass(frozen=True, slots=True)
class UpstreamAddress:
    """Where the upstream PostgreSQL is and how to reach it (from the upstream URL)."""

    host: str
    port: int
    user: str | None
    password: str | None
    dbname: str | None
    sslmode: str
    sslrootcert: str | None

    @classmethod
    def parse(cls, url: str) -> UpstreamAddress:
        parts = urlsplit(url)
        if parts.scheme not in ("postgres", "postgresql"):
            raise SettingsError(f"upstream URL must start with postgresql://, got {url!r}")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        sslmode = query.get("sslmode", "prefer")
        if sslmode not in SSLMODES:
            raise SettingsError(f"sslmode must be one of {', '.join(SSLMODES)}, got {sslmode!r}")
        try:
            port = parts.port or 5432
        except ValueError as exc:
            raise SettingsError(f"bad port in upstream URL: {exc}") from exc
        return cls(
            host=parts.hostname or query.get("host", "localhost"),
            port=port,
            user=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            dbname=unquote(parts.path.lstrip("/")) or None,
            sslmode=sslmode,
            sslrootcert=query.get("sslrootcert"),
        )


def parse_listen(value: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (or ``[v6]:PORT``) into a pair."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise SettingsError(f"{flag} must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``weir serve`` is told. Field metadata carries the flag help."""

    upstream: str = field(metadata={"help": "upstream PostgreSQL URL (weir's own credentials)"})
    listen: str = field(
        default="127.0.0.1:5433", metadata={"help": "HOST:PORT to accept clients on"}
    )
    tls_cert: str | None = field(default=None, metadata={"help": "PEM certificate for client TLS"})
    tls_key: str | None = field(default=None, metadata={"help": "PEM private key for client TLS"})
    max_message_bytes: int = field(
        default=64 * 1024 * 1024, metadata={"help": "largest message accepted from a client"}
    )
    write_buffer_bytes: int = field(
        default=256 * 1024,
        metadata={"help": "per-connection output buffered before reading from the peer pauses"},
    )
    client_receive_bytes: int = field(
        default=32 * 1024,
        metadata={"help": "the client sockets' receive buffer (SO_RCVBUF), which bounds how "
                          "far a client writes ahead of a server that is not reading; their "
                          "segments are at most a quarter of it; 0: the kernel's autotuning "
                          "(megabytes of read-ahead; faster bulk writes over long round trips)"},
    )
    connect_timeout: float = field(
        default=10.0, metadata={"help": "seconds to wait for the upstream to accept a connection"}
    )
    log_level: str = field(default="info", metadata={"help": "debug, info, warning or error"})
    log_format: str = field(
        default="json", metadata={"help": "json (one object per line) or text"}
    )
    log_parameters: str = field(
        default="off",
        metadata={"help": "on: log lines about one read (a parameter that cannot be a cache "
                          "key, a key a cache cannot answer, a failed fill) show its parameter "
                          "values; off: they never do"},
    )
    replication_slot: str | None = field(
        default=None,
        metadata={"help": "keep a persistent replication slot (and publication) of this name "
                          "across restarts and reconnects, e.g. one per StatefulSet pod; "
                          "characters other than a-z, 0-9 and _ become _ and the slot is named "
                          "weir_<name> (default: a temporary slot each time caching starts)"},
    )
    local_bases: str | None = field(
        default=None,
        metadata={"help": "directory of local replica bases (LMDB) that fills of their tables "
                          "read instead of the upstream, kept exact by weir's one replication "
                          "stream through their persistent slot: a store made by weir "
                          "bootstrap + weir bases load, or loaded by weir from one snapshot of "
                          "--local-tables when the directory holds none; 'memory': bases in "
                          "memory (tmpfs, no fsync), loaded from one snapshot of "
                          "--local-tables at every start (default: off)"},
    )
    local_tables: str | None = field(
        default=None,
        metadata={"help": "with --local-bases: comma-separated tables (as in SQL) weir loads "
                          "from one snapshot when the directory holds no bases yet (small "
                          "tables; larger ones: weir bootstrap)"},
    )
    upstream_password_file: str | None = field(
        default=None,
        metadata={"help": "file holding the upstream password (e.g. a mounted secret), used "
                          "when the upstream URL carries none", "secret_path": True},
    )
    metrics_listen: str | None = field(
        default=None,
        metadata={"help": "HOST:PORT serving /metrics (Prometheus), /healthz and /readyz "
                          "(default: off)"},
    )
    drain_seconds: float = field(
        default=30.0,
        metadata={"help": "on SIGTERM: seconds sessions may take to finish their transaction "
                          "before they are closed"},
    )
    caching: str = field(
        default="explicit",
        metadata={"help": "off (pure proxy), explicit (CREATE CACHE) or auto (frequent "
                          "supported queries become caches)"},
    )
    auto_after: int = field(
        default=3, metadata={"help": "with --caching auto: executions before a query is cached"}
    )
    state_dir: str | None = field(
        default=None, metadata={"help": "directory for the persisted cache catalog"}
    )
    memory_budget: int | None = field(
        default=None,
        metadata={"help": "bytes of cached state and hit-path answers before eviction "
                          "(default: a quarter of the machine's or the cgroup's memory; "
                          "0 or none: no budget)",
                  "default_text": "(a quarter of memory)"},
    )
    read_timeout: float = field(
        default=2.0,
        metadata={"help": "seconds a cached read waits (for a barrier after the session's "
                          "last upstream answer; with --misses wait, for a fill) before "
                          "upstream"},
    )
    misses: str = field(
        default="upstream",
        metadata={"help": "upstream: a read whose key is missing is answered upstream at "
                          "once and the key filled in the background; wait: it waits for "
                          "the fill (up to --read-timeout)"},
    )
    admission: str = field(
        default="auto",
        metadata={"help": "which missed keys are filled: auto (on a key's first read while "
                          "the keys read once come back, as a cold cache's do, else as "
                          "second), second (on a key's second read within the recent "
                          "one-off keys, a later one while fills yield fewer hits than "
                          "fills) or always"},
    )
    fill_queue: int = field(
        default=4096,
        metadata={"help": "fills waiting for an upstream transaction; misses beyond it are "
                          "not filled"},
    )
    staleness_bound: float = field(
        default=5.0,
        metadata={"help": "replication lag in seconds past which cached reads go upstream"},
    )
    read_your_writes: str = field(
        default="on",
        metadata={"help": "on: a session is never answered from a cache state older than "
                          "what it saw upstream (its writes, forwarded reads, misses)"},
    )
    miss_position: str = field(
        default="auto",
        metadata={"help": "session: a forwarded miss of a held statement reads the upstream's "
                          "WAL position for seen(s) on the session's own connection, in the "
                          "same round trip (an extra statement server-side observers see), "
                          "unless the session's reads are mostly misses lately; probe: on "
                          "weir's own connection once the answer came; auto (the default): "
                          "session unless the upstream loads pg_stat_statements or logs every "
                          "statement"},
    )
    hit_lanes: int | None = field(
        default=None,
        metadata={"help": "threads answering quiet sessions' memoized reads, and relaying "
                          "quiet pass-through sessions, outside the event loop (0: the event "
                          "loop does everything; default: one per CPU weir may run on, or per "
                          "CPU of its cgroup's CPU limit, when the compiled lanes are built)"},
    )
    lane_cpus: str = field(
        default="auto",
        metadata={"help": "auto: with one lane per CPU weir may run on, each lane runs on "
                          "its own CPU and serves the sessions whose packets arrive there; "
                          "none: lanes run anywhere and sessions are spread over them; or a "
                          "comma-separated list of CPUs, one lane pinned to each"},
    )

    lane_misses: str = field(
        default="on",
        metadata={"help": "on: after a miss, a session's pass lane also forwards upstream "
                          "the reads of its held statements it has no cached answer for "
                          "(misses at pass-through cost; the event loop counts them); "
                          "off: such misses go through the event loop"},
    )

    admin_roles: str | None = field(
        default=None,
        metadata={"help": "comma-separated roles that may run weir's SQL commands (CREATE/"
                          "DROP CACHE, SHOW ...) besides superusers (default: the upstream "
                          "URL's role)"},
    )

    login_timeout: float = field(
        default=60.0,
        metadata={"help": "seconds a client may take from connecting to being authenticated "
                          "(PostgreSQL's authentication_timeout); then FATAL 57014"},
    )
    max_client_connections: int = field(
        default=5000,
        metadata={"help": "client connections at once; one more gets FATAL 53300 (sorry, "
                          "too many clients already)"},
    )

    def __post_init__(self) -> None:
        UpstreamAddress.parse(self.upstream)
        parse_listen(self.listen)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SettingsError("--tls-cert and --tls-key go together")
        if self.max_message_bytes < 1024:
            raise SettingsError("--max-message-bytes must be at least 1024")
        if self.client_receive_bytes and self.client_receive_bytes < MIN_RECEIVE_BYTES:
            raise SettingsError(f"--client-receive-bytes must be 0 or at least "
                                f"{MIN_RECEIVE_BYTES}")
        if self.caching not in ("off", "explicit", "auto"):
            raise SettingsError(f"--caching must be off, explicit or auto, not {self.caching!r}")
        if self.lane_misses not in ("on", "off"):
            raise SettingsError("--lane-misses must be on or off")
        if self.read_your_writes not in ("on", "off"):
            raise SettingsError("--read-your-writes must be on or off")
        if self.miss_position not in ("auto", "session", "probe"):
            raise SettingsError("--miss-position must be auto, session or probe")
        if self.misses not in ("upstream", "wait"):
            raise SettingsError(f"--misses must be upstream or wait, not {self.misses!r}")
        if self.admission not in ADMISSIONS:
            raise SettingsError(f"--admission must be second or always, not {self.admission!r}")
        if self.fill_queue < 1:
            raise SettingsError("--fill-queue must be at least 1")
        if self.hit_lanes is not None and not 0 <= self.hit_lanes <= 64:
            raise SettingsError("--hit-lanes must be between 0 and 64")
        cpus = self.pinned_cpus
        if cpus and self.hit_lanes is not None and self.hit_lanes != len(cpus):
            raise SettingsError(f"--lane-cpus names {len(cpus)} CPU(s) but --hit-lanes is "
                                f"{self.hit_lanes}: one lane is pinned to each CPU named")
        if self.log_format not in ("json", "text"):
            raise SettingsError(f"--log-format must be json or text, not {self.log_format!r}")
        if self.log_parameters not in ("on", "off"):
            raise SettingsError("--log-parameters must be on or off")
        if self.replication_slot is not None and not 1 <= len(self.replication_slot) <= 40:
            raise SettingsError("--replication-slot must have 1 to 40 characters")
        if self.local_tables is not None and self.local_bases is None:
            raise SettingsError("--local-tables needs --local-bases DIR")
        if self.metrics_listen is not None:
            parse_listen(self.metrics_listen, "--metrics-listen")
        for name in ("connect_timeout", "read_timeout", "staleness_bound", "drain_seconds"):
            if not getattr(self, name) >= 0:
                raise SettingsError(f"--{name.replace('_', '-')} must not be negative")
        if self.max_client_connections < 1:
            raise SettingsError("--max-client-connections must be at least 1")
        if not self.login_timeout > 0:
            raise SettingsError("--login-timeout must be positive")
        if self.auto_after < 1:
            raise SettingsError("--auto-after must be at least 1")
        if self.memory_budget is not None and self.memory_budget < 0:
            raise SettingsError("--memory-budget must not be negative")
        if self.log_level not in ("debug", "info", "warning", "error"):
            raise SettingsError(
                f"--log-level must be debug, info, warning or error, not {self.log_level!r}"
            )

    @property
    def local_table_names(self) -> tuple[str, ...]:
        """``--local-tables`` as a tuple of SQL names."""
        return tuple(t.strip() for t in (self.local_tables or "").split(",") if t.strip())

    @property
    def pinned_cpus(self) -> tuple[int, ...]:
        """The CPUs ``--lane-cpus`` names (empty for ``auto`` and ``none``)."""
        value = self.lane_cpus.strip().lower()
        if value in ("auto", "none"):
            return ()
        try:
            cpus = tuple(int(part) for part in value.split(","))
        except ValueError:
            raise SettingsError(
                f"--lane-cpus must be auto, none or a comma-separated list of CPU numbers, "
                f"not {self.lane_cpus!r}") from None
        allowed = os.sched_getaffinity(0)
        if len(set(cpus)) != len(cpus) or not set(cpus) <= allowed or len(cpus) > 64:
            raise SettingsError(
                f"--lane-cpus {self.lane_cpus}: each CPU once, at most 64, among those weir "
                f"may run on ({','.join(map(str, sorted(allowed)))})")
        return cpus

    @property
    def upstream_address(self) -> UpstreamAddress:
        return UpstreamAddress.parse(self.upstream)

    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_listen(self.listen)
