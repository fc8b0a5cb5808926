"""The house rules that keep the layout livable: every package installed, data flowing one way."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"cli": "flowtracer", "schemas": "flowtracer.schemas", "collectors": "flowtracer.collectors",
           "stream": "flowtracer.stream", "sim": "flowtracer.sim"}
# What each stage may import from the project. The CLI wires everything; sim is for tests, bench and the demo.
ALLOWED = {
    "schemas": {"flowtracer.schemas"},
    "collectors": {"flowtracer.schemas", "flowtracer.collectors"},
    "stream": {"flowtracer.schemas", "flowtracer.stream"},
    "sim": {"flowtracer.schemas", "flowtracer.sim"},
}


def test_every_package_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"] == {v: k for k, v in FOLDERS.items()}
    expected = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            expected.add(".".join([name, *rel.parts]))
    assert set(cfg["packages"]) == expected


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "flowtracer" or m.startswith("flowtracer.")}


def test_stages_import_only_schemas_and_themselves() -> None:
    wrong = []
    for folder, allowed in ALLOWED.items():
        for py in (ROOT / folder).rglob("*.py"):
            for mod in _imports(py):
                if not any(mod == a or mod.startswith(a + ".") for a in allowed):
                    wrong.append(f"{py.relative_to(ROOT)} imports {mod}")
    assert not wrong, "\n".join(wrong)
