"""deploy/k8s: manifests are schema-valid Kubernetes objects (JSON schemas bundled with
kubernetes-validate, strict: unknown fields fail) and consistent with each other and with the code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_helpers import DEPLOY, DOCS, ROOT, env_reads

from flowtracer.collectors.gnmi.config import load_config
from flowtracer.plumbing.kafka_security import KafkaSecurity, load_kafka_security

K8S = DEPLOY / "k8s"
# Oldest supported (the pod-index label the collectors' sharding uses is on by default from 1.28)
# and a current release.
K8S_VERSIONS = ("1.28.0", "1.33.0")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


def _docs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") != "Kustomization":
                out.append((path, doc))
    return out


DOCS_K8S = _docs()


def _by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in DOCS_K8S if d["kind"] == kind}


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _config() -> dict[str, str]:
    return _by_kind("ConfigMap")["flowtracer-config"]["data"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(("path", "doc"), DOCS_K8S, ids=[f"{p.name}:{d['kind']}/{d['metadata']['name']}"
                                                         for p, d in DOCS_K8S])
def test_manifest_is_valid_against_the_kubernetes_schema(path: Path, doc: dict[str, Any], version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        pytest.fail(f"{path.name}: {doc['kind']}/{doc['metadata']['name']} (Kubernetes {version}): "
                    f"{'.'.join(map(str, e.path))}: {e.message}")


def test_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files
    assert kust["images"] == [{"name": "flowtracer", "newName": "flowtracer", "newTag": VERSION}]


def test_images_are_pinned_to_the_project_version() -> None:
    for _, doc in DOCS_K8S:
        if doc["kind"] in POD_KINDS:
            for c in _containers(doc):
                assert c["image"] == f"flowtracer:{VERSION}", f"{doc['metadata']['name']}/{c['name']}"


def test_every_container_is_unprivileged() -> None:
    for _, doc in DOCS_K8S:
        if doc["kind"] not in POD_KINDS:
            continue
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        for c in _containers(doc):
            sc = c["securityContext"]
            where = f"{doc['metadata']['name']}/{c['name']}"
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, f"{where}: drops every capability, adds none"
            assert not sc.get("privileged"), where
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], where


def test_host_agents_get_host_network_and_pid_namespaces_and_nothing_else() -> None:
    agent = _by_kind("DaemonSet")["flowtracer-agent"]
    pod = agent["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["hostPID"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert not pod.get("hostIPC")
    assert all("hostPath" not in v for v in pod.get("volumes", [])), "no host directories by default"
    args = agent["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--source") + 1] == "linux"
    ops = (DOCS / "operations.md").read_text()
    for word in ("hostNetwork", "hostPID", "CAP_NET_ADMIN", "/sys/class/net", "pid namespace"):
        assert word in ops, f"docs/operations.md does not explain {word}"


def test_collector_shards_match_the_statefulset_replicas() -> None:
    sts = _by_kind("StatefulSet")["flowtracer-collector"]
    c = sts["spec"]["template"]["spec"]["containers"][0]
    shard = c["args"][c["args"].index("--shard") + 1]
    m = re.fullmatch(r"\$\(POD_INDEX\)/(\d+)", shard)
    assert m and int(m.group(1)) == sts["spec"]["replicas"], f"--shard {shard} vs replicas {sts['spec']['replicas']}"
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert sts["spec"]["serviceName"] in _by_kind("Service")


def test_processors_never_outnumber_the_partitions() -> None:
    dep = _by_kind("Deployment")["flowtracer-processor"]
    assert dep["spec"]["replicas"] <= int(_config()["PARTITIONS"])
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
    main = dep["spec"]["template"]["spec"]["containers"][0]
    assert main["command"][0] == "flowtracer-metrics-relay"
    args = main["args"]
    assert args[args.index("--partitions") + 1] == "$(PARTITIONS)" and args[args.index("--app-id") + 1] == "$(APP_ID)"
    assert "--influx-token-file" in args


def test_one_diagnosis_per_fabric_never_two() -> None:
    dep = _by_kind("Deployment")["flowtracer-diagnose"]  # no consumer group: two would publish every incident twice
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["flowtracer", "diagnose"] and "--influx-token-file" in args


def test_topics_are_created_before_producers_and_processors_start() -> None:
    for kind, name in (("StatefulSet", "flowtracer-collector"), ("Deployment", "flowtracer-processor"),
                       ("Deployment", "flowtracer-diagnose")):
        init = _by_kind(kind)[name]["spec"]["template"]["spec"]["initContainers"]
        assert [c["command"] for c in init] == [["flowtracer-create-topics"]], name


def test_variable_references_resolve_and_only_read_variables_are_set() -> None:
    config = _config()
    read = set(env_reads().names)
    for _, doc in DOCS_K8S:
        if doc["kind"] not in POD_KINDS:
            continue
        for c in _containers(doc):
            where = f"{doc['metadata']['name']}/{c['name']}"
            env = {e["name"]: e for e in c.get("env", [])}
            argv = " ".join([*c.get("command", []), *c.get("args", [])])
            refs = set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", argv))
            assert refs <= set(env), f"{where}: $({', '.join(sorted(refs - set(env)))}) is not in env"
            for name, e in env.items():
                assert name in refs or name in read, f"{where}: {name} is neither read by flowtracer nor used in args"
                ref = e.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    assert ref["name"] == "flowtracer-config" and ref["key"] in config, f"{where}: {name}"


def test_configmaps_and_secrets_are_defined_here_or_documented_for_the_operator() -> None:
    defined = set(_by_kind("ConfigMap"))
    ops = (DOCS / "operations.md").read_text()
    kust = (K8S / "kustomization.yaml").read_text()
    for _, doc in DOCS_K8S:
        if doc["kind"] not in POD_KINDS:
            continue
        for v in doc["spec"]["template"]["spec"].get("volumes", []):
            name = (v.get("configMap") or {}).get("name") or (v.get("secret") or {}).get("secretName")
            if name and name not in defined:
                assert name in ops and name in kust, f"{name}: created by the operator, so both say how"


def test_collector_config_loads_with_the_collectors_own_loader(tmp_path: Path) -> None:
    raw = yaml.safe_load(_config()["collector.yaml"])
    for section, key in (("tls", "ca_file"), ("credentials", "password_file")):  # files the Secrets provide
        stand_in = tmp_path / key
        stand_in.write_text("x")
        assert raw[section][key].startswith("/etc/flowtracer/")
        raw[section][key] = str(stand_in)
    path = tmp_path / "collector.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    assert cfg.tls is not None and cfg.tls.enabled and not cfg.tls.skip_verify
    assert cfg.metrics.host == "0.0.0.0"
    sts = _by_kind("StatefulSet")["flowtracer-collector"]["spec"]["template"]["spec"]
    mounts = {m["mountPath"] for m in sts["containers"][0]["volumeMounts"]}
    for original in (_config_path("tls", "ca_file"), _config_path("credentials", "password_file")):
        assert str(Path(original).parent) in mounts, f"{original} is not on a mounted Secret"


def _config_path(section: str, key: str) -> str:
    return yaml.safe_load(_config()["collector.yaml"])[section][key]


def test_metrics_are_scrapable_where_the_annotations_say() -> None:
    for _, doc in DOCS_K8S:
        if doc["kind"] not in POD_KINDS or doc["kind"] == "Job":
            continue
        tpl = doc["spec"]["template"]
        port = int(tpl["metadata"]["annotations"]["prometheus.io/port"])
        main = tpl["spec"]["containers"][0]
        assert port in {p["containerPort"] for p in main["ports"]}, doc["metadata"]["name"]
        argv = [*main.get("command", []), *main.get("args", [])]
        if argv[0] == "flowtracer-metrics-relay":
            listen = argv[argv.index("--listen") + 1]
            upstream = argv[argv.index("--upstream") + 1]
            assert int(listen.rsplit(":", 1)[1]) == port
            assert int(upstream.rsplit(":", 1)[1]) == int(argv[argv.index("--metrics-port") + 1])
    policy = _by_kind("NetworkPolicy")["flowtracer-metrics-only"]
    allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert allowed == {9464, 9475, 9477}


def _kafka_security_of(key: str, tmp_path: Path) -> tuple[KafkaSecurity, KafkaSecurity]:
    """The stage's Kafka settings as shipped (PLAINTEXT) and with its commented TLS + SCRAM lines."""
    text = _config()[key]
    plain = load_kafka_security(_write(tmp_path / f"plain-{key}", text), env={})
    commented = "\n".join(line.replace("# ", "", 1) for line in text.splitlines() if line.startswith("# "))
    return plain, load_kafka_security(_write(tmp_path / f"sasl-{key}", commented), env={})


def test_every_kafka_client_gets_its_stages_kafka_settings_and_they_load(tmp_path: Path) -> None:
    """Each stage's kafka-<stage>.yaml (PLAINTEXT, and the commented TLS + SCRAM settings with the stage's own
    user) loads with the stages' own loader; every container that talks to Kafka is given its stage's file and
    Secret, and the files it names are on a mounted volume: no pod holds another stage's Kafka password (a GPU
    node the processor's, issue 29)."""
    stages = set()
    for _, doc in DOCS_K8S:
        if doc["kind"] not in POD_KINDS:
            continue
        volumes = {v["name"]: v for v in doc["spec"]["template"]["spec"].get("volumes", [])}
        for c in _containers(doc):
            argv = [*c.get("command", []), *c.get("args", [])]
            if "--kafka" not in argv:
                continue
            where = f"{doc['metadata']['name']}/{c['name']}"
            assert "--kafka-config" in argv, where
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            config_dir = str(Path(argv[argv.index("--kafka-config") + 1]).parent)
            (item,) = volumes[mounts[config_dir]]["configMap"]["items"]
            stage = item["key"].removeprefix("kafka-").removesuffix(".yaml")
            stages.add(stage)
            plain, sec = _kafka_security_of(item["key"], tmp_path)
            assert plain.security_protocol == "PLAINTEXT", where
            assert (sec.security_protocol, sec.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512"), where
            assert sec.username == f"flowtracer-{stage}", where
            assert all(str(p.parent) in mounts for p in (sec.ca_file, sec.password_file) if p), where
            secrets = {v["secret"]["secretName"] for name, v in volumes.items() if "secret" in v and name in
                       mounts.values() and v["secret"]["secretName"].startswith("flowtracer-kafka")}
            assert secrets == {f"flowtracer-kafka-{stage}"}, where
    assert stages == {"collector", "agent", "processor", "diagnose"}
    assert not any(k == "kafka.yaml" for k in _config())  # no settings shared by every stage


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
