"""The one component-config loader: file < environment < flags, and every error named by where its value came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from flowtracer.plumbing.component_config import (
    ComponentConfigError,
    Override,
    env_name,
    env_overrides,
    load_component,
    merge,
    parse_component,
)
from flowtracer.plumbing.durations import Duration


class Kafka(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bootstrap: str = "127.0.0.1:9092"
    idempotence: bool | None = None


class Toy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    hop_s: Duration = Field(1.0, gt=0)
    partitions: int = Field(8, ge=1)
    command: list[str] = ["rdma"]
    kafka: Kafka = Kafka()


def load(tmp_path: Path, text: str | None, env: dict[str, str] | None = None,
         flags: list[Override] | None = None) -> Toy:
    path = None
    if text is not None:
        path = tmp_path / "toy.yaml"
        path.write_text(text)
    return load_component(Toy, "processor", path, flags or [], environ=env or {})


def errors(tmp_path: Path, text: str | None, env: dict[str, str] | None = None,
           flags: list[Override] | None = None) -> list[str]:
    with pytest.raises(ComponentConfigError) as e:
        load(tmp_path, text, env, flags)
    return str(e.value).splitlines()


def test_flags_override_the_environment_which_overrides_the_file(tmp_path: Path) -> None:
    text = "name: a\nhop_s: 2s\npartitions: 4\nkafka: {bootstrap: 'k:1', idempotence: true}\n"
    assert load(tmp_path, text) == Toy(name="a", hop_s=2.0, partitions=4, kafka=Kafka(bootstrap="k:1",
                                                                                       idempotence=True))
    env = {"FLOWTRACER_PROCESSOR_HOP_S": "500ms", "FLOWTRACER_PROCESSOR_PARTITIONS": "16",
           "FLOWTRACER_PROCESSOR_KAFKA__BOOTSTRAP": "env:2"}
    cfg = load(tmp_path, text, env)
    # nested: the variable replaces one key of kafka, the file's other key stays
    assert (cfg.hop_s, cfg.partitions, cfg.kafka) == (0.5, 16, Kafka(bootstrap="env:2", idempotence=True))
    cfg = load(tmp_path, text, env, [Override(("partitions",), 32, "--partitions")])
    assert (cfg.hop_s, cfg.partitions) == (0.5, 32)


def test_other_components_variables_and_unprefixed_ones_are_not_read(tmp_path: Path) -> None:
    env = {"FLOWTRACER_AGENT_PARTITIONS": "0", "FLOWTRACER_KAFKA": "x", "FLOWTRACER_PROCESSOR_": "y"}
    assert load(tmp_path, "name: a\n", env).partitions == 8


def test_list_values_from_the_environment_are_yaml_flow(tmp_path: Path) -> None:
    env = {"FLOWTRACER_PROCESSOR_COMMAND": '[nsenter, -t, "1", rdma]'}
    assert load(tmp_path, "name: a\n", env).command == ["nsenter", "-t", "1", "rdma"]
    assert errors(tmp_path, "name: a\n", {"FLOWTRACER_PROCESSOR_COMMAND": "[a, b"}) == [
        "FLOWTRACER_PROCESSOR_COMMAND: not a YAML list or mapping: expected ',' or ']', but got '<stream end>'"]


def test_every_error_names_its_origin_file_line_variable_or_flag(tmp_path: Path) -> None:
    text = "name: a\nhop_s: soon\npartitions: 0\nkafka:\n  idempotence: perhaps\n"
    assert errors(tmp_path, text) == [
        f"{tmp_path / 'toy.yaml'}:2: hop_s: 'soon' is not a duration (e.g. 250ms, 1s, 2m)",
        f"{tmp_path / 'toy.yaml'}:3: partitions: Input should be greater than or equal to 1",
        f"{tmp_path / 'toy.yaml'}:5: kafka.idempotence: Input should be a valid boolean, unable to interpret input",
    ]
    env = {"FLOWTRACER_PROCESSOR_KAFKA__IDEMPOTENCE": "nah", "FLOWTRACER_PROCESSOR_COLOUR": "blue"}
    assert errors(tmp_path, "name: a\nhop_s: 1s\n", env, [Override(("hop_s",), 0.0, "--hop")]) == [
        "--hop: hop_s: Input should be greater than 0",
        "FLOWTRACER_PROCESSOR_KAFKA__IDEMPOTENCE: kafka.idempotence: Input should be a valid boolean, "
        "unable to interpret input",
        "FLOWTRACER_PROCESSOR_COLOUR: colour: unknown field 'colour'",
    ]


def test_a_missing_field_says_where_it_may_be_given(tmp_path: Path) -> None:
    assert errors(tmp_path, None) == [
        "processor settings: name: missing required field 'name' (set it in the file, as "
        "FLOWTRACER_PROCESSOR_NAME or by its flag)"]
    assert load(tmp_path, None, {"FLOWTRACER_PROCESSOR_NAME": "n"}).name == "n"


@pytest.mark.parametrize(("text", "problem"), [
    ("component: agent\nname: a\n", "toy.yaml:1: component: this file configures the agent, not the processor"),
    ("component: router\n", "toy.yaml:1: component: 'router' is not one of: collector, agent, processor, diagnose"),
    ("- a\n", "toy.yaml: expected a mapping of settings"),
    ("name: [a\n", "toy.yaml:2: YAML syntax error"),
    ("name: a\nname: b\n", "toy.yaml:2: duplicate key 'name' (first at line 1)"),
])
def test_bad_files_are_one_line_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    (line,) = errors(tmp_path, text)
    assert problem in line


def test_the_component_key_is_accepted_and_a_missing_file_named(tmp_path: Path) -> None:
    assert load(tmp_path, "component: processor\nname: a\n").name == "a"
    with pytest.raises(ComponentConfigError, match=r"nope\.yaml: no such file"):
        load_component(Toy, "processor", tmp_path / "nope.yaml", environ={})
    assert parse_component(Toy, "processor", "name: b\n", "<text>", ComponentConfigError).name == "b"


def test_env_names_and_overrides_in_name_order() -> None:
    assert env_name("collector", ("kafka", "bootstrap")) == "FLOWTRACER_COLLECTOR_KAFKA__BOOTSTRAP"
    found = env_overrides("agent", {"FLOWTRACER_AGENT_Z": "1", "FLOWTRACER_AGENT_A__B": "2"}, ComponentConfigError)
    assert found == [Override(("a", "b"), "2", "FLOWTRACER_AGENT_A__B"), Override(("z",), "1", "FLOWTRACER_AGENT_Z")]
    with pytest.raises(ComponentConfigError, match="FLOWTRACER_AGENT_A____B: empty field name"):
        env_overrides("agent", {"FLOWTRACER_AGENT_A____B": "x"}, ComponentConfigError)


def test_an_override_replaces_a_scalar_where_a_mapping_goes_and_owns_what_is_under_it() -> None:
    data, origins = merge({"kafka": "oops", "name": "a"}, [Override(("kafka", "bootstrap"), "b:1", "--kafka")])
    assert data == {"kafka": {"bootstrap": "b:1"}, "name": "a"}
    assert origins == {("kafka",): "--kafka", ("kafka", "bootstrap"): "--kafka"}
    data, origins = merge({"kafka": {"bootstrap": "a:1"}}, [Override(("kafka", "bootstrap"), "e:1", "ENV"),
                                                            Override(("kafka",), {"bootstrap": "f:1"}, "--flag")])
    assert data == {"kafka": {"bootstrap": "f:1"}} and origins == {("kafka",): "--flag"}
