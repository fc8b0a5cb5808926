"""The house rules that keep the layout livable: every package installed, data flowing one way, no import
circles, no private names reached across modules."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {folder: name for name, folder in
           tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()}
# What each stage may import from the project. The CLI wires everything; sim is for tests, bench and the demo.
# The what-if tool reads the processor's outputs and shares its pure analytics (FIM, flow ends): one copy of
# each rule.
ALLOWED = {
    "schemas": {"flowtracer.schemas"},
    "plumbing": {"flowtracer.schemas", "flowtracer.plumbing"},
    "fabric": {"flowtracer.schemas", "flowtracer.plumbing", "flowtracer.fabric"},
    "collectors": {"flowtracer.schemas", "flowtracer.plumbing", "flowtracer.fabric", "flowtracer.collectors"},
    "stream": {"flowtracer.schemas", "flowtracer.plumbing", "flowtracer.fabric", "flowtracer.stream"},
    "whatif": {"flowtracer.schemas", "flowtracer.plumbing", "flowtracer.fabric", "flowtracer.whatif",
               "flowtracer.stream.analytics"},
    "sim": {"flowtracer.schemas", "flowtracer.plumbing", "flowtracer.fabric", "flowtracer.sim"},
    "embedded": {"flowtracer.embedded"},
    "testbed": {"flowtracer.testbed", "flowtracer.embedded"},
}


def test_every_package_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    expected = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            expected.add(".".join([name, *rel.parts]))
    assert set(cfg["packages"]) == expected


def module_of(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([FOLDERS[folder], *parts])


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if not p.name.endswith("_pb2.py"))


def project_imports(path: Path, *, top_level_only: bool = False) -> set[tuple[str, str]]:
    """(module, name) pairs this file imports from the project ("" as name for ``import module``)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {(a.name, "") for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {(node.module, a.name) for a in node.names}
    return {(m, n) for m, n in found if m == "flowtracer" or m.startswith("flowtracer.")}


def test_stages_import_only_schemas_and_themselves() -> None:
    wrong = []
    for folder, allowed in ALLOWED.items():
        for py in (ROOT / folder).rglob("*.py"):
            for mod, _ in project_imports(py):
                if not any(mod == a or mod.startswith(a + ".") for a in allowed):
                    wrong.append(f"{py.relative_to(ROOT)} imports {mod}")
    assert not wrong, "\n".join(wrong)


def test_every_top_level_package_says_what_it_is_for() -> None:
    missing = [folder for folder in FOLDERS
               if not ast.get_docstring(ast.parse((ROOT / folder / "__init__.py").read_text()))]
    assert not missing, f"no docstring in {missing}"


def test_no_private_name_is_imported_across_modules() -> None:
    wrong = [f"{py.relative_to(ROOT)} imports {name} from {mod}"
             for py in sources() for mod, name in project_imports(py)
             if name.startswith("_") and not name.startswith("__")]
    assert not wrong, "\n".join(wrong)


def test_no_import_circles() -> None:
    """Module-level imports between the project's modules form no cycle (imports inside functions are
    deferred on purpose and not counted)."""
    known = {module_of(p) for p in sources()}
    graph: dict[str, set[str]] = {}
    for py in sources():
        edges = set()
        for mod, name in project_imports(py, top_level_only=True):
            target = f"{mod}.{name}" if f"{mod}.{name}" in known else mod
            if target in known and target != module_of(py):
                edges.add(target)
        graph[module_of(py)] = edges
    # A package's __init__ importing its own modules is the package's public face, not a circle.
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(cycles)


def test_test_file_names_are_unique() -> None:
    # tests/ has no __init__.py (rootdir imports): two test files of one name abort collection of the whole suite.
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        assert path.name not in seen, f"{path.relative_to(ROOT)} has the name of {seen[path.name].relative_to(ROOT)}"
        seen[path.name] = path


def test_schemas_hold_contracts_only() -> None:
    # A contract depends on nothing a consumer would not have: the standard library and protobuf. numpy is the one
    # exception, for wire.py alone: its vectorized varint encoders are the protobuf wire format, written in bulk.
    import sys
    wrong = []
    for py in (ROOT / "schemas").rglob("*.py"):
        if py.name.endswith("_pb2.py"):
            continue
        for node in ast.walk(ast.parse(py.read_text(), str(py))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            for name in names:
                top = name.split(".")[0]
                ok = (top in sys.stdlib_module_names or name.startswith(("google.protobuf", "flowtracer.schemas"))
                      or (top == "numpy" and py.name == "wire.py") or (top == "grpc_tools" and py.name == "codegen.py"))
                if not ok:
                    wrong.append(f"{py.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_source_file_over_500_lines_without_a_reason() -> None:
    """A file over 500 lines is one cohesive thing: its module docstring's first paragraph says why, with the
    words "over 500 lines" (generated protobuf code aside)."""
    wrong = []
    for py in [*sources(), *sorted((ROOT / "bench").rglob("*.py"))]:
        text = py.read_text()
        if text.count("\n") <= 500:
            continue
        first = (ast.get_docstring(ast.parse(text, str(py))) or "").split("\n\n")[0]
        if "over 500 lines" not in " ".join(first.split()):
            wrong.append(f"{py.relative_to(ROOT)}: {text.count(chr(10))} lines, no reason in its docstring's first "
                         "paragraph")
    assert not wrong, "\n".join(wrong)


def test_tests_mirror_the_source_tree() -> None:
    """Every folder of tests/ that holds tests names a source folder (tests/collectors/agent/peers/ tests
    collectors/agent/peers/), so a module's tests are found where the module is. e2e/ is the one exception: its
    tests run the whole pipeline, no one folder's."""
    wrong = []
    for folder in sorted({p.parent for p in (ROOT / "tests").rglob("test_*.py")}):
        rel = folder.relative_to(ROOT / "tests")
        if not rel.parts or rel.parts[0] == "e2e":
            continue
        if rel.parts[0] not in {*FOLDERS, "deploy"} or not (ROOT / rel).is_dir():
            wrong.append(f"tests/{rel.as_posix()}/ names no source folder")
    assert not wrong, "\n".join(wrong)
