"""deploy/compose: the compose file is valid Compose, pinned, ordered, and consistent with the code.

No Docker engine runs here, so everything is checked statically: the official compose-spec JSON
schema (as vendored by check-jsonschema), then the rules the schema cannot express.
"""

from __future__ import annotations

import json
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from deploy_helpers import DEPLOY, ROOT, env_reads

from flowtracer.collectors.gnmi.config import load_config
from flowtracer.fabric.topology import load_topology
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.kafka_security import load_kafka_security

COMPOSE_DIR = DEPLOY / "compose"
COMPOSE_FILE = COMPOSE_DIR / "compose.yaml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
FLOWTRACER_IMAGE = f"flowtracer:{VERSION}"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _argv(svc: dict[str, Any]) -> list[str]:
    """entrypoint + command as one list (strings are split like a shell would, roughly)."""
    out: list[str] = []
    for key in ("entrypoint", "command"):
        v = svc.get(key) or []
        out += v.split() if isinstance(v, str) else [str(x) for x in v]
    return out


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_compose_file_is_valid_against_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    schema = json.loads((resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(schema).iter_errors(compose)]
    assert not errors, "\n".join(errors)


def test_every_image_is_pinned_and_ours_is_the_project_version(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        image = svc.get("image")
        assert image, f"{name}: no image"
        assert re.fullmatch(r"[a-z0-9./_-]+:[A-Za-z0-9._-]*\d[A-Za-z0-9._-]*", image), \
            f"{name}: image {image!r} is not name:version"
        assert not image.endswith((":latest", ":stable", ":main")), f"{name}: {image} is not pinned"
        if image.startswith("flowtracer:"):
            assert image == FLOWTRACER_IMAGE, f"{name}: {image}, pyproject says {VERSION}"
            assert svc["build"] == {"context": "../..", "dockerfile": "deploy/Dockerfile"}, name
            assert (COMPOSE_DIR / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == \
                DEPLOY / "Dockerfile"


def test_long_running_services_have_healthchecks_and_one_shots_do_not_restart(
        services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        if svc.get("restart") == "no":
            assert "healthcheck" not in svc, f"{name}: a one-shot service needs no healthcheck"
            continue
        assert svc.get("restart") == "unless-stopped", f"{name}: long-running services restart"
        hc = svc.get("healthcheck")
        assert hc and hc["test"][0] == "CMD" and len(hc["test"]) > 1, f"{name}: no healthcheck"
        assert all(k in hc for k in ("interval", "timeout", "retries", "start_period")), name


def test_depends_on_names_existing_services_with_meaningful_conditions(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            cond = spec["condition"]
            if cond == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy; it has no healthcheck"
            elif cond == "service_completed_successfully":
                assert services[dep].get("restart") == "no", f"{name} waits for {dep} to exit; it restarts"
            else:
                assert cond == "service_started", cond
    # no cycles
    seen: dict[str, int] = {}

    def visit(n: str, stack: tuple[str, ...]) -> None:
        assert n not in stack, f"depends_on cycle: {' -> '.join((*stack, n))}"
        if seen.get(n):
            return
        for dep in services[n].get("depends_on") or {}:
            visit(dep, (*stack, n))
        seen[n] = 1

    for n in services:
        visit(n, ())


def test_volumes_configs_and_secrets_are_declared_used_and_present(compose: dict[str, Any]) -> None:
    services = compose["services"]
    used_volumes, used = set(), {"configs": set(), "secrets": set()}
    for name, svc in services.items():
        for v in svc.get("volumes", []):
            src = v.split(":", 1)[0] if isinstance(v, str) else v.get("source")
            if src and not src.startswith((".", "/")):
                assert src in (compose.get("volumes") or {}), f"{name}: volume {src} is not declared"
                used_volumes.add(src)
            elif src:
                assert (COMPOSE_DIR / src).exists(), f"{name}: bind mount {src} does not exist"
        for kind in ("configs", "secrets"):
            for item in svc.get(kind, []):
                ref = item if isinstance(item, str) else item["source"]
                assert ref in (compose.get(kind) or {}), f"{name}: {kind[:-1]} {ref} is not declared"
                used[kind].add(ref)
    assert used_volumes == set(compose["volumes"]), "declared but unused volumes"
    for kind in ("configs", "secrets"):
        assert used[kind] == set(compose[kind]), f"declared but unused {kind}"
        for ref, spec in compose[kind].items():
            assert (COMPOSE_DIR / spec["file"]).is_file(), f"{kind} {ref}: {spec['file']} is missing"


def test_only_loopback_ports_are_published(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for p in svc.get("ports", []):
            assert str(p).startswith("127.0.0.1:"), f"{name}: {p} would be reachable from the network"


def test_secrets_are_files_never_arguments(compose: dict[str, Any]) -> None:
    secret_values = {(COMPOSE_DIR / s["file"]).read_text().strip() for s in compose["secrets"].values()}
    for name, svc in compose["services"].items():
        text = json.dumps({k: v for k, v in svc.items() if k in ("command", "entrypoint", "environment")})
        for value in secret_values:
            assert value not in text, f"{name}: a secret value is in its command line or environment"
        argv = _argv(svc)
        for flag in ("--influx-token-file",):
            path = _flag(argv, flag)
            if path is not None:
                secret = path.removeprefix("/run/secrets/")
                assert path.startswith("/run/secrets/") and secret in svc.get("secrets", []), \
                    f"{name}: {flag} {path} is not a secret mounted into the service"
    for name in ("processor", "diagnose"):
        argv = _argv(compose["services"][name])
        assert "--influx-token-file" in argv and not any("token" in a and "=" in a for a in argv), name


def test_topics_are_created_first_with_the_processors_partitions_and_app_id(
        services: dict[str, dict[str, Any]]) -> None:
    init, proc = _argv(services["kafka-init"]), _argv(services["processor"])
    assert init[0] == "flowtracer-create-topics"
    assert _flag(init, "--partitions") == _flag(proc, "--partitions")
    assert _flag(init, "--app-id") == _flag(proc, "--app-id")
    assert services["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    for producer in ("collector", "agent", "processor", "diagnose"):
        assert services[producer]["depends_on"]["kafka-init"]["condition"] == "service_completed_successfully"


def test_the_demo_topology_is_the_generated_one_served_by_the_simulator(services: dict[str, dict[str, Any]]) -> None:
    text = (COMPOSE_DIR / "fabric.yaml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    cmd = next(line for line in header if "topology generate" in line).split("flowtracer", 1)[1].split()
    args = dict(zip(cmd[2::2], cmd[3::2], strict=True))
    spec = FabricSpec(hosts=int(args["--hosts"]), nics_per_host=int(args["--nics-per-host"]),
                      leaves=int(args["--leaves"]), spines=int(args["--spines"]), name=args["--name"],
                      gnmi_address=args["--gnmi-address"])
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"
    assert body == generate(spec).to_yaml(), "deploy/compose/fabric.yaml differs from what its header regenerates"
    topo = load_topology(COMPOSE_DIR / "fabric.yaml")
    assert {s.gnmi.address for s in topo.switches if s.gnmi} == {"sim"}, "collectors reach the switches at 'sim'"
    sim = " ".join(_argv(services["sim"]))
    assert "--gnmi-address 0.0.0.0" in sim and "--gnmi-ports topology" in sim and "--no-ground-truth" in sim
    # the agent reads the ready JSON the simulator writes, on the shared volume
    ready = re.search(r"> (\S+)", sim).group(1)  # type: ignore[union-attr]
    agent = _argv(services["agent"])
    assert _flag(agent, "--sim-endpoints") == ready
    assert "sim-views:" + str(Path(ready).parent) in services["sim"]["volumes"]
    assert "sim-views:" + str(Path(ready).parent) + ":ro" in services["agent"]["volumes"]


def test_the_collector_config_loads_with_the_collectors_own_loader() -> None:
    cfg = load_config(COMPOSE_DIR / "collector.yaml")
    assert cfg.metrics.port == 9464 and cfg.metrics.host == "0.0.0.0"


def test_metrics_ports_agree_between_stages_relays_healthchecks_and_prometheus(
        services: dict[str, dict[str, Any]]) -> None:
    prom = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    targets: dict[str, int] = {}
    for job in prom["scrape_configs"]:
        for sc in job.get("static_configs", []):
            for t in sc["targets"]:
                targets[t.split(":")[0]] = _port(t)
        for sd in job.get("dns_sd_configs", []):
            for n in sd["names"]:
                targets[n] = sd["port"]
    assert set(targets) == {"collector", "agent", "processor", "diagnose"}
    assert targets["collector"] == load_config(COMPOSE_DIR / "collector.yaml").metrics.port
    for name in ("agent", "processor", "diagnose"):
        argv = _argv(services[name])
        assert argv[0] == "flowtracer-metrics-relay", f"{name} serves metrics on loopback: it needs the relay"
        assert _port(_flag(argv, "--listen")) == targets[name]  # type: ignore[arg-type]
        assert _port(_flag(argv, "--upstream")) == int(_flag(argv, "--metrics-port"))  # type: ignore[arg-type]
    for name in ("collector", "agent", "processor", "diagnose"):
        hc = " ".join(services[name]["healthcheck"]["test"])
        port = int(re.search(r"127\.0\.0\.1:(\d+)", hc).group(1))  # type: ignore[union-attr]
        own = targets["collector"] if name == "collector" else int(_flag(_argv(services[name]), "--metrics-port"))  # type: ignore[arg-type]
        assert port == own, f"{name}: healthcheck asks port {port}, the stage serves {own}"
    rules = prom["rule_files"][0]
    mounted = {c["target"]: c["source"] for c in services["prometheus"]["configs"]}
    assert rules in mounted


def test_grafana_provisioning_matches_the_dashboards(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    ds = yaml.safe_load((COMPOSE_DIR / "grafana" / "datasources.yaml").read_text())["datasources"]
    uids = {d["uid"] for d in ds}
    influx = next(d for d in ds if d["type"] == "influxdb")
    assert influx["jsonData"]["version"] == "Flux"
    token = influx["secureJsonData"]["token"]
    assert token.startswith("$__file{/run/secrets/") and token[len("$__file{/run/secrets/"):-1] in grafana["secrets"]
    provider = yaml.safe_load((COMPOSE_DIR / "grafana" / "dashboards.yaml").read_text())["providers"][0]
    mount = next(v for v in grafana["volumes"] if v.startswith("../grafana/dashboards:"))
    assert mount.split(":")[1] == provider["options"]["path"]
    for path in (DEPLOY / "grafana" / "dashboards").glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            if "datasource" in panel:
                assert panel["datasource"]["uid"] in uids, f"{path.name}: {panel['title']}"


def test_flowtracer_services_set_only_variables_the_code_reads(compose: dict[str, Any]) -> None:
    read = set(env_reads().names)
    for name, svc in compose["services"].items():
        if svc["image"] != FLOWTRACER_IMAGE:
            continue
        for var in svc.get("environment") or {}:
            assert var in read, f"{name}: sets {var}, which no flowtracer code reads"


def test_every_file_a_flowtracer_service_is_given_is_mounted(compose: dict[str, Any]) -> None:
    """A service that lists its own configs replaces the anchor's (YAML merge): the topology must be listed again."""
    for name, svc in compose["services"].items():
        if svc["image"] != FLOWTRACER_IMAGE:
            continue
        mounted = {c["target"] for c in svc.get("configs", [])} | {f"/run/secrets/{s}" for s in svc.get("secrets", [])}
        files = [a for a in _argv(svc) if a.startswith(("/etc/flowtracer/", "/run/secrets/"))]
        assert set(files) <= mounted, f"{name}: {sorted(set(files) - mounted)} not mounted"


def test_every_kafka_client_gets_the_kafka_settings(compose: dict[str, Any]) -> None:
    """Each flowtracer service that talks to Kafka is given --kafka-config, mounted from the kafka config,
    which loads with the stages' own loader (PLAINTEXT on the compose network)."""
    assert load_kafka_security(COMPOSE_DIR / compose["configs"]["kafka"]["file"], env={}).security_protocol == "PLAINTEXT"
    clients = []
    for name, svc in compose["services"].items():
        argv = [*(svc.get("entrypoint") or []), *(svc.get("command") or [])]
        if "--kafka" not in argv and "FLOWTRACER_KAFKA" not in (svc.get("environment") or {}):
            continue
        clients.append(name)
        assert "--kafka-config" in argv, name
        targets = {c["target"]: c["source"] for c in svc.get("configs", [])}
        assert targets.get(argv[argv.index("--kafka-config") + 1]) == "kafka", name
    assert sorted(clients) == ["agent", "collector", "diagnose", "kafka-init", "processor"]
