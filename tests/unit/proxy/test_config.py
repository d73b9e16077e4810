"""Settings sources (``proxy.config``): precedence, the TOML file, errors naming the key,
the password file, masking; the metrics endpoint's pure parts (``proxy.health``,
``proxy.metrics``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proxy.config import load_file, mask_url, resolve, show
from proxy.health import MetricsEndpoint, parse_request
from proxy.metrics import Buckets, forward_label
from proxy.settings import SettingsError

UP = "postgresql://weir@db:5432/app"


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "weir.toml"
    path.write_text(text)
    return str(path)


def test_flags_over_environment_over_file_over_defaults(tmp_path: Path) -> None:
    file = load_file(_write(tmp_path, f'upstream = "{UP}"\nhit-lanes = 3\nlog_level = "debug"\n'
                                      'read_timeout = 1\nlisten = "0.0.0.0:7000"\n'))
    env = {"WEIR_HIT_LANES": "2", "WEIR_LISTEN": ""}
    settings, sources = resolve({"log_level": "warning"}, env, file)
    assert settings.log_level == "warning" and sources["log_level"] == "flag"
    assert settings.hit_lanes == 2 and sources["hit_lanes"] == "env WEIR_HIT_LANES"
    assert settings.read_timeout == 1.0 and sources["read_timeout"] == "config file"
    assert settings.listen == "0.0.0.0:7000"  # (an empty variable is unset)
    assert settings.caching == "explicit" and "caching" not in sources


@pytest.mark.parametrize(("text", "message"), [
    ('upstream = "x"\nhit_lane = 2\n', "unknown key 'hit_lane'"),
    (f'upstream = "{UP}"\nhit_lanes = "two"\n', "key 'hit_lanes': expected an integer"),
    (f'upstream = "{UP}"\nhit_lanes = true\n', "key 'hit_lanes': expected an integer"),
    (f'upstream = "{UP}"\nlisten = 5433\n', "key 'listen': expected a string"),
    ("upstream = ", "not valid TOML"),
])
def test_bad_file_values_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_file(_write(tmp_path, text))


def test_invalid_values_name_their_source(tmp_path: Path) -> None:
    file = load_file(_write(tmp_path, f'upstream = "{UP}"\ncaching = "sometimes"\n'))
    with pytest.raises(SettingsError, match=r"--caching .*from config file"):
        resolve({}, {}, file)
    with pytest.raises(SettingsError, match=r"--log-format .*from env WEIR_LOG_FORMAT"):
        resolve({}, {"WEIR_LOG_FORMAT": "xml"}, file | {"caching": "off"})
    with pytest.raises(SettingsError, match="WEIR_DRAIN_SECONDS: 'soon' is not a number"):
        resolve({"upstream": UP}, {"WEIR_DRAIN_SECONDS": "soon"}, {})
    with pytest.raises(SettingsError, match="--metrics-listen must be HOST:PORT"):
        resolve({"upstream": UP, "metrics_listen": "9090"}, {}, {})
    with pytest.raises(SettingsError, match="--drain-seconds must not be negative"):
        resolve({"upstream": UP, "drain_seconds": "-1"}, {}, {})
    with pytest.raises(SettingsError, match=r"config file .*cannot read it"):
        load_file(str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsError, match="upstream is required"):
        resolve({}, {}, {})


def test_password_file(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("p@ss:w/rd\n")
    settings, _ = resolve({"upstream": UP, "upstream_password_file": str(secret)}, {}, {})
    assert settings.upstream_address.password == "p@ss:w/rd"
    assert settings.upstream_address.user == "weir" and settings.upstream_address.host == "db"
    own, _ = resolve({"upstream": "postgresql://weir:mine@db/app",
                      "upstream_password_file": str(secret)}, {}, {})
    assert own.upstream_address.password == "mine"
    secret.write_text("")
    with pytest.raises(SettingsError, match="is empty"):
        resolve({"upstream": UP, "upstream_password_file": str(secret)}, {}, {})
    with pytest.raises(SettingsError, match="cannot read it"):
        resolve({"upstream": UP, "upstream_password_file": str(tmp_path / "no")}, {}, {})


def test_show_masks_secrets_and_round_trips(tmp_path: Path) -> None:
    assert mask_url("postgresql://u:secret@h:5/d?sslmode=require") == \
        "postgresql://u:****@h:5/d?sslmode=require"
    assert mask_url(UP) == UP
    settings, sources = resolve({"upstream": "postgresql://u:hunter2@h/d", "hit_lanes": "1"},
                                {}, {})
    text = show(settings, sources)
    assert "hunter2" not in text and "u:****@h" in text
    assert "hit_lanes = 1  # flag" in text and "# memory_budget is not set" in text
    again = load_file(_write(tmp_path, text))
    assert again["hit_lanes"] == 1 and again["listen"] == settings.listen


def test_request_parsing_and_buckets() -> None:
    assert parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n") == ("GET", "/metrics")
    assert parse_request(b"garbage\r\n\r\n") is None
    assert parse_request(b"GET metrics HTTP/1.1\r\n\r\n") is None
    b = Buckets((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 3.0):
        b.observe(v)
    family = b.family("x_seconds", "doc")
    values = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    assert values[("x_seconds_bucket", "0.1")] == 2  # (le: the bound itself counts)
    assert values[("x_seconds_bucket", "1.0")] == 3
    assert values[("x_seconds_bucket", "+Inf")] == 4
    assert values[("x_seconds_count", None)] == 4
    assert values[("x_seconds_sum", None)] == pytest.approx(3.65)
    both = b.plus((1, 0, 2), 0.5)  # (another's counts in the same bounds: the lanes')
    assert both.counts == [3, 1, 3] and both.count == 7 and both.total == pytest.approx(4.15)
    assert b.count == 4  # (unchanged)
    with pytest.raises(ValueError):
        b.plus((1, 2), 0.0)


@pytest.mark.parametrize(("reason", "label"), [
    ("inside a REPEATABLE READ transaction (one snapshot for the whole block)",
     "transaction"),
    ("the transaction wrote (its reads go upstream until it ends)", "transaction"),
    ("unsupported: window functions", "unsupported"),
    ("no cache for this query", "no_cache"),
    ("the session changed setting work_mem, which weir does not follow yet",
     "session_setting"),
    ("replication lag of up to 9.0s exceeds the staleness bound", "stale"),
    ("something new", "other"),
])
def test_forward_labels(reason: str, label: str) -> None:
    assert forward_label(reason) == label


def test_endpoint_dispatch_without_a_server() -> None:
    endpoint = MetricsEndpoint.__new__(MetricsEndpoint)
    endpoint._routes = {}

    async def ask(head: bytes) -> int:
        answer, _ = await endpoint.answer(head)
        return answer.status

    assert asyncio.run(ask(b"POST /metrics HTTP/1.1\r\n\r\n")) == 405
    assert asyncio.run(ask(b"GET /x HTTP/1.1\r\n\r\n")) == 404
    assert asyncio.run(ask(b"nonsense\r\n\r\n")) == 400


def test_log_parameters_switch() -> None:
    from proxy import logparams

    settings, _ = resolve({"upstream": UP}, {}, {})
    assert settings.log_parameters == "off"
    with pytest.raises(SettingsError, match="--log-parameters must be on or off"):
        resolve({"upstream": UP, "log_parameters": "yes"}, {}, {})
    try:
        logparams.configure(False)
        hidden = logparams.shown((42, "alice-password"))
        assert "alice" not in hidden and "42" not in hidden and "2 value(s)" in hidden
        logparams.configure(True)
        assert logparams.shown((42, "alice-password")) == "(42, 'alice-password')"
    finally:
        logparams.configure(False)


def test_own_errors_are_counted_by_class() -> None:
    from proxy.metrics import OWN_ERRORS, own_error

    before = OWN_ERRORS.get("53", 0)
    data = own_error("53300", "sorry, too many clients already", "FATAL")
    assert data[:1] == b"E" and b"53300" in data and b"FATAL" in data
    assert OWN_ERRORS["53"] == before + 1
