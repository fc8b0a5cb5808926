# Two entry points for a new user (README): `make demo` and `make test`. Both set up everything they need
# (a virtualenv in .venv, the Debian package victoria-metrics for the tests) and are safe to run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps demo test lint bench proto reproduce clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# VictoriaMetrics stands in for InfluxDB 2 in tests (it accepts the InfluxDB v2 write API).
system-deps:
	@command -v victoria-metrics >/dev/null 2>&1 || { \
	  echo "installing victoria-metrics (Debian package)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq victoria-metrics; }

# The main job on the embedded default. Until `flowtracer demo` exists: generate the FlowTracer-like
# 16-node fabric and validate it.
demo: setup
	$(BIN)/flowtracer topology generate --hosts 16 --nics-per-host 1 --leaves 4 --spines 2 -o .ft-fabric16.yaml
	$(BIN)/flowtracer topology check .ft-fabric16.yaml

lint: setup
	$(BIN)/ruff check .

test: setup system-deps lint
	$(BIN)/pytest

# FlowTracer's ECMP-vs-static experiment on the simulator, recorded through the real pipeline:
# regenerates docs/reproduction.md and docs/figures/.
reproduce: setup
	$(BIN)/flowtracer whatif --experiment flowtracer-16

proto: setup
	$(BIN)/python -m flowtracer.schemas.codegen

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info .ft-*
