"""The Helm chart agrees with weir: every flag its container command uses exists in
``weir serve --help``, every environment variable is a real setting, the rendered weir.toml
loads as a configuration file, and the values derived from others (memory budget, grace
period) are right. Renders with the helm ``make helm-tools`` installs in ``.tools/``."""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from cdc.bootstrap.cli import add_arguments as bootstrap_arguments
from proxy.cli import _parser
from proxy.config import CONFIG_ENV, env_name, load_file, resolve
from proxy.settings import Settings
from tools.chartcheck import documents, render, scenarios

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "weir"
HELM = ROOT / ".tools" / "node_modules" / ".bin" / "helm"
SCENARIOS = scenarios(CHART)


@pytest.fixture(scope="module")
def helm() -> str:
    assert HELM.exists(), f"{HELM} is missing: run `make helm-tools` (make test does)"
    return str(HELM)


def _serve_options() -> set[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    serve = sub.choices["serve"]  # type: ignore[index]
    return {opt for action in serve._actions for opt in action.option_strings}


def _workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (workload,) = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    return workload


def _toml(docs: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    path = tmp_path / "weir.toml"
    path.write_text(config["data"]["weir.toml"])
    return load_file(str(path))


def test_there_are_scenarios() -> None:
    assert {p.name for p in SCENARIOS} >= {"default-values.yaml", "statefulset-values.yaml",
                                           "full-values.yaml", "minimal-values.yaml"}


@pytest.mark.parametrize("values", SCENARIOS, ids=lambda p: p.name)
def test_container_flags_and_environment_are_weirs(helm: str, values: Path,
                                                   tmp_path: Path) -> None:
    docs = documents(render(helm, CHART, values))
    pod = _workload(docs)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "serve"
    options = _serve_options()
    used = [a for a in args if a.startswith("--")]
    assert used and set(used) <= options, set(used) - options
    settings = {env_name(f.name) for f in fields(Settings)} | {CONFIG_ENV}
    names = [e["name"] for e in container.get("env", [])]
    assert "WEIR_UPSTREAM" in names
    assert set(names) <= settings, set(names) - settings
    # the ConfigMap is a valid configuration file, and with the flags a valid configuration
    file = _toml(docs, tmp_path)
    flags = {args[i].removeprefix("--").replace("-", "_"): args[i + 1]
             for i in range(1, len(args) - 1, 2) if args[i] != "--config"}
    resolved, _ = resolve({**flags, "upstream": "postgresql://weir@db/app"}, {}, file)
    grace = pod["terminationGracePeriodSeconds"]
    assert grace > resolved.drain_seconds
    probes = {container["livenessProbe"]["httpGet"]["path"],
              container["readinessProbe"]["httpGet"]["path"]}
    assert probes == {"/healthz", "/readyz"}
    assert resolved.metrics_listen is not None
    metrics_port = int(resolved.metrics_listen.rpartition(":")[2])
    assert {"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"} \
        in container["ports"]


def test_memory_budget_follows_the_memory_limit(helm: str, tmp_path: Path) -> None:
    default = _toml(documents(render(helm, CHART, CHART / "ci" / "default-values.yaml")),
                    tmp_path)
    assert default["memory_budget"] == 1024**3 * 60 // 100  # 60% of 1Gi
    minimal = _toml(documents(render(helm, CHART, CHART / "ci" / "minimal-values.yaml")),
                    tmp_path)
    assert minimal["memory_budget"] == 1536 * 1024**2 // 2
    full = _toml(documents(render(helm, CHART, CHART / "ci" / "full-values.yaml")), tmp_path)
    assert full["memory_budget"] == 268435456  # given explicitly


def test_statefulset_mode_keeps_state_on_a_volume(helm: str, tmp_path: Path) -> None:
    docs = documents(render(helm, CHART, CHART / "ci" / "statefulset-values.yaml"))
    workload = _workload(docs)
    assert workload["kind"] == "StatefulSet"
    assert _toml(docs, tmp_path)["state_dir"] == "/var/lib/weir"
    (claim,) = workload["spec"]["volumeClaimTemplates"]
    mounts = workload["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": claim["metadata"]["name"], "mountPath": "/var/lib/weir"} in mounts
    assert "Secret" not in {d["kind"] for d in docs}  # (an existing secret is used)
    # each pod keeps a persistent replication slot named after it
    env = {e["name"]: e for e in workload["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WEIR_REPLICATION_SLOT"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.name"}}
    deployment = _workload(documents(render(helm, CHART, CHART / "ci" / "default-values.yaml")))
    assert "WEIR_REPLICATION_SLOT" not in {
        e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_bootstrap_job_runs_weir_bootstrap(helm: str) -> None:
    docs = documents(render(helm, CHART, CHART / "ci" / "full-values.yaml"))
    (job,) = [d for d in docs if d["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "bootstrap"
    # the Job's command line is one the real subcommand accepts, with a writable --out
    parser = argparse.ArgumentParser()
    bootstrap_arguments(parser)
    args = parser.parse_args(container["args"][1:])
    assert "public.orders" in args.tables
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert args.out in mounts
    settings = {env_name(f.name) for f in fields(Settings)}
    assert {e["name"] for e in container["env"]} <= settings
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert any(p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
               for p in policies)


def test_a_missing_upstream_fails_the_render(helm: str, tmp_path: Path) -> None:
    empty = tmp_path / "values.yaml"
    empty.write_text("{}\n")
    with pytest.raises(subprocess.CalledProcessError) as exc:
        render(helm, CHART, empty)
    assert "set upstream.url" in exc.value.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("upstream: {url: postgresql://x@y/z}\nresources: {limits: {memory: 1.5Gi}}\n")
    with pytest.raises(subprocess.CalledProcessError) as exc:
        render(helm, CHART, bad)
    assert "whole number with a unit" in exc.value.stderr
    bad.write_text("upstream: {url: postgresql://x@y/z}\nweir: {caching: sometimes}\n")
    with pytest.raises(subprocess.CalledProcessError) as exc:
        render(helm, CHART, bad)
    assert "weir.caching must be one of" in exc.value.stderr  # (values.schema.json)


def test_every_value_is_documented() -> None:
    import yaml  # type: ignore[import-untyped]

    def keys(tree: dict[str, Any], prefix: str = "") -> list[str]:
        out = []
        for key, value in tree.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                out.extend(keys(value, name + "."))
            else:
                out.append(name)
        return out

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    missing = [k for k in keys(values) if f"`{k}`" not in readme]
    assert not missing, missing
