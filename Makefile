# Two entry points for a new user (README): `make demo` and `make test`. Both set up everything they need
# (a virtualenv in .venv, Debian packages for the tests: victoria-metrics, prometheus, ...) and are safe to run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps demo test test-loaded lint bench soak proto reproduce clean

setup: $(VENV)/.installed

# setup.py and native.pyx: an editable install compiles the extension once; edits need a rebuild.
$(VENV)/.installed: pyproject.toml setup.py collectors/gnmi/counters/native.pyx
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# VictoriaMetrics stands in for InfluxDB 2 in tests (it accepts the InfluxDB v2 write API); headless
# Chromium and its driver run the dashboard's browser test; stunnel4 terminates TLS in front of the
# embedded Kafka broker for the Kafka TLS test (tests/e2e/test_kafka_tls_e2e.py); stress-ng keeps a core busy
# for `make test-loaded`; tmux is the 120x40 terminal the live view's screenshot test reads (capture-pane).
# Prometheus (with promtool) and Alertmanager unit-test and fire the alert rules
# (tests/deploy/test_deploy_alert_rules.py, tests/e2e/test_alerts_e2e.py); without their recommends, which would
# add node-exporter and SNMP tools the tests do not use.
SYSTEM_PKGS := victoria-metrics chromium chromium-driver stunnel4 stress-ng tmux
ALERT_PKGS  := prometheus prometheus-alertmanager
system-deps:
	@command -v victoria-metrics >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 && \
	 command -v chromedriver >/dev/null 2>&1 && command -v stunnel4 >/dev/null 2>&1 && \
	 command -v stress-ng >/dev/null 2>&1 && command -v tmux >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && \
	 command -v promtool >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1 || \
	 { echo "installing $(SYSTEM_PKGS) $(ALERT_PKGS) (Debian packages)"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PKGS) && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(ALERT_PKGS); }

# The main job on the embedded default: the whole pipeline on a simulated 16-node fabric for 60 s, with the
# live dashboard at http://127.0.0.1:6066/dashboard/ and a summary checked against ground truth.
demo: setup
	$(BIN)/flowtracer demo --duration 60 --summary-json .ft-demo/summary.json

# Every benchmark of bench/, one table, regenerates docs/benchmarks.md (about 7 minutes).
bench: setup system-deps
	$(BIN)/python bench/run_all.py

# The long run (not in CI; issue 27): the whole pipeline on the kernel data plane with the trace resolver for
# DURATION seconds (30 minutes), then per-process RSS slopes (MB/min from minute 5), traced share and placement
# accuracy per 5-minute slice, and the incidents (flowtracer.demo.soak; report in .ft-soak/soak.json). Root.
DURATION ?= 1800
soak: setup
	$(BIN)/python -m flowtracer.demo.soak --duration $(DURATION) --run-dir .ft-soak

lint: setup
	$(BIN)/ruff check .

# Two workers, a whole module each at a time (module fixtures run once), the long end-to-end runs first: most of
# them wait on a simulator running in real time, so two at once nearly halve the wall time on two cores.
PYTEST_ARGS := -n 2 --dist loadfile --no-loadscope-reorder --durations=20
test: setup system-deps lint
	$(BIN)/pytest $(PYTEST_ARGS)

# The same suite on a busy machine, as users' machines are: LOAD_CPUS cores kept busy by stress-ng (one by
# default; LOAD_CPUS=2 LOAD_NICE=19 keeps both busy at low priority). Run it before you stop. The load is ended
# (by its process id) however the suite ends.
LOAD_CPUS ?= 1
LOAD_NICE ?= 0
test-loaded: setup system-deps lint
	@nice -n $(LOAD_NICE) stress-ng --cpu $(LOAD_CPUS) --timeout 3600s --quiet & load=$$!; \
	 trap 'kill $$load 2>/dev/null; wait $$load 2>/dev/null' EXIT INT TERM; \
	 echo "test-loaded: stress-ng --cpu $(LOAD_CPUS) (nice $(LOAD_NICE)) as process $$load"; \
	 $(BIN)/pytest $(PYTEST_ARGS)

# FlowTracer's ECMP-vs-static experiment on the simulator, recorded through the real pipeline:
# regenerates docs/reproduction.md and docs/figures/; then PRIME's scenarios on the packet-level spraying
# model: regenerates docs/prime-spray.md and docs/prime-spray.json (seconds).
reproduce: setup
	$(BIN)/flowtracer whatif --experiment flowtracer-16
	$(BIN)/flowtracer whatif --experiment prime-spray --out docs > /dev/null

proto: setup
	$(BIN)/python -m flowtracer.schemas.codegen

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info .ft-*
