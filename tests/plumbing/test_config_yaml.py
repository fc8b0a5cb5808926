"""The shared located-YAML helpers: read, parse once with line numbers, one-line pydantic errors."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from flowtracer.plumbing.config_yaml import (
    LineIndex,
    fmt_loc,
    format_validation_error,
    located,
    parse_yaml,
    read_text,
)


class Boom(ValueError):
    """The caller's own error type."""


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    colour: Colour = Colour.RED
    size: int = 1

    @field_validator("size")
    @classmethod
    def _size(cls, v: int) -> int:
        if v > 9:
            raise ValueError("too big")
        return v


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[Item] = []


TEXT = "items:\n  - name: a\n  - name: b\n    size: 10\n"


def _error(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as err:
        Doc.model_validate(data)
    return err.value


def test_read_text_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("a: 1\n")
    assert read_text(f, Boom) == "a: 1\n"
    with pytest.raises(Boom, match=r"^.*nope\.yaml: no such file$"):
        read_text(tmp_path / "nope.yaml", Boom)
    with pytest.raises(Boom, match=r": cannot read: "):
        read_text(tmp_path, Boom)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(Boom, match=r"bin\.yaml: cannot read: .*codec"):
        read_text(tmp_path / "bin.yaml", Boom)


def test_parse_yaml_keeps_lines() -> None:
    data, lines = parse_yaml(TEXT, "c.yaml", Boom)
    assert data == {"items": [{"name": "a"}, {"name": "b", "size": 10}]}
    assert lines.where("c.yaml", ("items", 1, "size")) == "c.yaml:4"
    assert lines.where("c.yaml", ("items", 1)) == "c.yaml:3"
    assert lines.where("c.yaml", ("items", 5, "size")) == "c.yaml:2"  # the list: the deepest node that exists
    assert lines.where("c.yaml", ()) == "c.yaml"
    assert parse_yaml("", "c.yaml", Boom)[0] is None
    assert LineIndex(None).where("c.yaml", ("items",)) == "c.yaml"


@pytest.mark.parametrize(("text", "column", "message"), [
    ("items: [\n", True, r"^c\.yaml:2:1: YAML syntax error: "),
    ("items: [\n", False, r"^c\.yaml:2: YAML syntax error: "),
    ("a: 1\n---\nb: 2\n", True, r"^c\.yaml:2:1: YAML syntax error: "),
    ("x: \x01\n", True, r"^c\.yaml: YAML error: "),
])
def test_parse_yaml_errors_are_the_callers(text: str, column: bool, message: str) -> None:
    with pytest.raises(Boom, match=message):
        parse_yaml(text, "c.yaml", Boom, column=column)


def test_fmt_loc_and_located() -> None:
    assert fmt_loc(("links", 2, "a")) == "links[2].a"
    assert fmt_loc(()) == ""
    assert located("src", ("a", 0), "bad") == "src: a[0]: bad"
    assert located("src", (), "bad", root="doc") == "src: doc: bad"


def test_validation_error_wording() -> None:
    _, lines = parse_yaml(TEXT, "c.yaml", Boom)
    assert format_validation_error(_error({"items": [{"name": "a"}, {"name": "b", "size": 10}]}), "c.yaml",
                                   lines) == "c.yaml:4: items[1].size: too big"
    assert format_validation_error(_error({"items": [{"name": "a", "nme": "a"}]}), "s") == (
        "s: items[0].nme: unknown field 'nme'")
    assert format_validation_error(_error({"items": [{}]}), "s") == "s: items[0].name: missing required field 'name'"
    bad_enum = _error({"items": [{"name": "a", "colour": "green"}]})
    assert format_validation_error(bad_enum, "s") == "s: items[0].colour: 'green' is not one of: 'red' or 'blue'"
    assert format_validation_error(bad_enum, "s", enum_choices=False) == (
        "s: items[0].colour: Input should be 'red' or 'blue'")
    assert format_validation_error(_error([1]), "s", root="doc").startswith("s: doc: Input should be")
