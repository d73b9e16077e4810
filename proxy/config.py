"""Where weir's settings come from: flags over ``WEIR_*`` environment variables over a TOML
configuration file (``--config`` / ``WEIR_CONFIG``) over defaults.

Owns: reading the configuration file (unknown keys and values of the wrong type are errors
naming the key), coercing text from flags and the environment, the upstream password file,
naming the source of a bad value in its error, and ``weir config show`` (the effective
configuration as TOML, each value's source beside it, secrets masked). What a setting means
and which values are valid is ``proxy.settings``'s.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import Field, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from proxy.settings import Settings, SettingsError

#: the environment variable naming the configuration file
CONFIG_ENV = "WEIR_CONFIG"
MASK = "****"


def _kind(f: Field[Any]) -> str:
    return str(f.type).replace(" | None", "")


def env_name(name: str) -> str:
    return f"WEIR_{name.upper()}"


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def load_file(path: str) -> dict[str, Any]:
    """The settings a TOML file gives (keys are setting names; ``-`` and ``_`` alike)."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise SettingsError(f"config file {path}: cannot read it: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path}: not valid TOML: {exc}") from exc
    by_name = {f.name: f for f in fields(Settings)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        f = by_name.get(name)
        if f is None:
            raise SettingsError(f"config file {path}: unknown key {key!r} (known keys: "
                                f"{', '.join(sorted(by_name))})")
        values[name] = _typed(f, value, f"config file {path}: key {key!r}")
    return values


def _typed(f: Field[Any], value: Any, where: str) -> Any:
    """A TOML value checked against the setting's type."""
    kind = _kind(f)
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }.get(kind, False)
    if not ok:
        want = {"int": "an integer", "float": "a number", "str": "a string"}.get(kind, kind)
        raise SettingsError(f"{where}: expected {want}, got {value!r}")
    return float(value) if kind == "float" else value


def _coerce(f: Field[Any], value: str, where: str) -> Any:
    """Text from a flag or the environment as the setting's type."""
    kind = _kind(f)
    if f.name == "memory_budget" and value.strip().lower() == "none":
        return 0  # no budget
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError as exc:
        raise SettingsError(f"{where}: {value!r} is not a number") from exc
    return value


def resolve(flags: Mapping[str, Any], environ: Mapping[str, str], file: Mapping[str, Any]
            ) -> tuple[Settings, dict[str, str]]:
    """The settings and where each one given came from (``flag``, ``env WEIR_X``,
    ``config file``); a bad value's error names its source."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for f in fields(Settings):
        given = flags.get(f.name)
        if given is not None:
            values[f.name] = _coerce(f, given, flag_name(f.name))
            sources[f.name] = "flag"
            continue
        text = environ.get(env_name(f.name)) or None  # empty means unset
        if text is not None:
            values[f.name] = _coerce(f, text, env_name(f.name))
            sources[f.name] = f"env {env_name(f.name)}"
        elif f.name in file:
            values[f.name] = file[f.name]
            sources[f.name] = "config file"
    if "upstream" not in values:
        raise SettingsError("the upstream is required: --upstream URL, WEIR_UPSTREAM or "
                            "upstream = in the config file")
    if values.get("upstream_password_file"):
        values["upstream"] = _with_password(values["upstream"], values["upstream_password_file"])
    try:
        return Settings(**values), sources
    except SettingsError as exc:
        raise SettingsError(_name_sources(str(exc), sources)) from None


def _with_password(url: str, path: str) -> str:
    """The upstream URL with the password read from ``path`` (one line; the URL's own
    password, if any, wins)."""
    parts = urlsplit(url)
    if parts.password:
        return url
    try:
        password = Path(path).read_text().rstrip("\r\n")
    except OSError as exc:
        raise SettingsError(f"--upstream-password-file {path}: cannot read it: "
                            f"{exc.strerror}") from exc
    if not password:
        raise SettingsError(f"--upstream-password-file {path} is empty")
    user = parts.username or ""
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


def _name_sources(message: str, sources: Mapping[str, str]) -> str:
    """``message`` with the source of each setting it names (by flag) appended."""
    named = [f"{flag_name(n)} from {src}" for n, src in sources.items()
             if flag_name(n) in message and src != "flag"]
    return f"{message} ({'; '.join(named)})" if named else message


def mask_url(url: str) -> str:
    """A PostgreSQL URL with its password replaced by ``****``."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{MASK}@{host}"))


def show(settings: Settings, sources: Mapping[str, str]) -> str:
    """The effective configuration as a TOML document (usable as ``--config``), secrets
    masked, each value's source in a comment."""
    lines = ["# weir's effective configuration (secrets masked)"]
    for f in fields(Settings):
        value = getattr(settings, f.name)
        if f.name == "upstream":
            value = mask_url(value)
        source = sources.get(f.name, "default")
        if value is None:
            lines.append(f"# {f.name} is not set")
            continue
        lines.append(f"{f.name} = {json.dumps(value)}  # {source}")
    return "\n".join(lines) + "\n"
