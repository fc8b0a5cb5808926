"""What the deploy tests share: paths, and three static scanners of the code and of Flux queries.

* :func:`metric_names`: every Prometheus metric the stages define, found in the source (AST), with
  the names Prometheus exposes (``_total`` for counters).
* :func:`env_reads`: every environment variable the stages read (``envvar=`` of click options,
  ``os.environ`` / ``os.getenv`` reads), found in the source, and the config fields that name one.
* :func:`check_flux`: the measurements, fields and tags a Flux query references, checked against
  ``stream/stages/outputs.py`` ``MEASUREMENTS``.

Nothing here is a hand-kept list of names: new code is picked up as it lands.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCS = ROOT / "docs"
# The installed packages (pyproject package-dir) and the deploy helpers that run in the image.
PACKAGES = {folder: name for name, folder in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()}


def source_files() -> list[Path]:
    """Every Python file of the installed packages and of deploy/ (the image's helper scripts)."""
    files = [p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")]
    files += sorted(DEPLOY.glob("*.py"))
    return sorted(f for f in files if not f.name.endswith(("_pb2.py", "_pb2.pyi")))


def module_file(module: str) -> Path | None:
    """``flowtracer.stream.sinks.influx`` -> stream/sink_influx.py (or a package's __init__.py)."""
    for folder, name in sorted(PACKAGES.items(), key=lambda kv: -len(kv[1])):
        if module == name or module.startswith(name + "."):
            rel = module[len(name):].lstrip(".").split(".") if module != name else []
            base = ROOT / folder / Path(*rel) if rel else ROOT / folder
            for cand in (base.with_suffix(".py"), base / "__init__.py"):
                if cand.is_file():
                    return cand
    return None


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return node
    return None


class Unresolved(Exception):
    """A name whose value the scanner cannot tell; the message says where."""


@dataclass
class _Resolver:
    """Strings an expression can evaluate to, following local assignments, loops, parameter
    defaults, module constants and ``from flowtracer... import`` (no code is run)."""

    path: Path
    tree: ast.Module

    @cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        return _parents(self.tree)

    def strings(self, expr: ast.AST, at: ast.AST, depth: int = 0) -> set[str]:
        if depth > 8:
            raise Unresolved(f"{self.path}:{getattr(at, 'lineno', '?')}: too deep")
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.Tuple | ast.List | ast.Set):
            return set().union(*(self.strings(e, at, depth + 1) for e in expr.elts)) if expr.elts else set()
        if isinstance(expr, ast.IfExp):
            return self.strings(expr.body, at, depth + 1) | self.strings(expr.orelse, at, depth + 1)
        if isinstance(expr, ast.Name):
            return self._name(expr.id, at, depth + 1)
        if isinstance(expr, ast.JoinedStr):
            out = {""}
            for part in expr.values:
                if isinstance(part, ast.Constant):
                    vals = {str(part.value)}
                elif isinstance(part, ast.FormattedValue):
                    vals = self.strings(part.value, at, depth + 1)
                else:
                    raise Unresolved(f"{self.path}:{expr.lineno}: cannot read {ast.unparse(part)}")
                out = {a + b for a in out for b in vals}
            return out
        raise Unresolved(f"{self.path}:{getattr(expr, 'lineno', '?')}: cannot tell the value of {ast.unparse(expr)}")

    def _name(self, name: str, at: ast.AST, depth: int) -> set[str]:
        fn = _enclosing_function(at, self.parents)
        while fn is not None:
            found = self._in_function(fn, name, at, depth)
            if found is not None:
                return found
            fn = _enclosing_function(fn, self.parents)
        return module_constant(self.path, self.tree, name, depth)

    def _in_function(self, fn: ast.AST, name: str, at: ast.AST, depth: int) -> set[str] | None:
        out: set[str] = set()
        hit = False
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                out |= self.strings(node.value, at, depth)
                hit = True
            elif isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name) \
                    and node.target.id == name:
                out |= self.strings(node.iter, at, depth)
                hit = True
        args = getattr(fn, "args", None)
        if args is not None and not hit:
            params = [*args.posonlyargs, *args.args]
            defaults = dict(zip([a.arg for a in params[len(params) - len(args.defaults):]], args.defaults,
                                strict=True))
            defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
            if name in defaults:
                out |= self.strings(defaults[name], at, depth)
                # the same parameter given as a keyword literal anywhere in this module
                for call in ast.walk(self.tree):
                    if isinstance(call, ast.Call):
                        for kw in call.keywords:
                            if kw.arg == name and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                                out.add(kw.value.value)
                hit = True
        return out if hit else None


def module_constant(path: Path, tree: ast.Module, name: str, depth: int = 0) -> set[str]:
    """Values of a module-level name: an assignment, or an import from another flowtracer module."""
    res = _Resolver(path, tree)
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return res.strings(node.value, node, depth + 1)
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    mod = node.module if node.level == 0 else _relative(path, node.module, node.level)
                    other = module_file(mod)
                    if other is None:
                        raise Unresolved(f"{path}: {name} comes from {mod}, outside flowtracer")
                    return module_constant(other, _parse(other), alias.name, depth + 1)
    raise Unresolved(f"{path}: cannot find the value of {name}")


def _relative(path: Path, module: str, level: int) -> str:
    folder = path.parent
    for _ in range(level - 1):
        folder = folder.parent
    rel = folder.relative_to(ROOT)
    base = PACKAGES[rel.parts[0]] + "".join(f".{p}" for p in rel.parts[1:])
    return f"{base}.{module}" if module else base


# -- metrics ------------------------------------------------------------------------------------

# constructor -> suffix Prometheus exposes the metric under (what docs and queries must use)
_METRIC_KINDS = {"Counter": "_total", "CounterMetricFamily": "_total", "Gauge": "", "GaugeMetricFamily": "",
                 "Histogram": "", "HistogramMetricFamily": "", "Summary": "", "SummaryMetricFamily": "",
                 "Info": "_info", "InfoMetricFamily": "_info", "Enum": "", "StateSetMetricFamily": ""}
# extra series names a metric of that kind exposes (queries may use them)
_SERIES = {"Histogram": ("_bucket", "_sum", "_count"), "HistogramMetricFamily": ("_bucket", "_sum", "_count"),
           "Summary": ("_sum", "_count"), "SummaryMetricFamily": ("_sum", "_count"),
           "Counter": ("_created",), "CounterMetricFamily": ("_created",)}


@dataclass(frozen=True)
class Metric:
    name: str          # as exposed: flowtracer_agent_windows_total
    kind: str          # the constructor: Counter, GaugeMetricFamily, ...
    where: str         # file:line

    @property
    def series(self) -> set[str]:
        base = self.name.removesuffix("_total") if self.kind in ("Counter", "CounterMetricFamily") else self.name
        return {self.name, *(base + s for s in _SERIES.get(self.kind, ()))}


@cache
def metric_names(files: tuple[Path, ...] | None = None) -> tuple[list[Metric], list[str]]:
    """(metrics defined in ``files`` [default: :func:`source_files`], constructor calls whose name
    could not be resolved)."""
    metrics, problems = [], []
    for path in files if files is not None else source_files():
        tree = _parse(path)
        res = _Resolver(path, tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            kind = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if kind not in _METRIC_KINDS or not _is_prometheus(tree, kind):
                continue
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if arg is None:
                problems.append(f"{where}: {kind}(...) without a name")
                continue
            try:
                names = res.strings(arg, node)
            except Unresolved as e:
                problems.append(f"{where}: {kind} name: {e}")
                continue
            for n in names:
                suffix = _METRIC_KINDS[kind]
                exposed = n if not suffix or n.endswith(suffix) else n + suffix
                metrics.append(Metric(exposed, kind, where))
    return metrics, problems


def _is_prometheus(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` in this module is prometheus_client's (not e.g. collections.Counter)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client") \
                and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


# -- environment variables ----------------------------------------------------------------------

@dataclass
class EnvReads:
    names: dict[str, list[str]] = field(default_factory=dict)          # VAR -> [file:line]
    config_fields: dict[str, list[str]] = field(default_factory=dict)  # username_env -> [file:line]
    problems: list[str] = field(default_factory=list)


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def _env_arg(node: ast.AST) -> ast.AST | None:
    """The variable-name expression of an environment read, or None when ``node`` is not one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        if f.attr in ("get", "pop", "setdefault") and _is_environ(f.value) and node.args:
            return node.args[0]
        if f.attr == "getenv" and getattr(f.value, "id", None) == "os" and node.args:
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
        return node.slice
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn) \
            and _is_environ(node.comparators[0]):
        return node.left
    return None


@cache
def env_reads(files: tuple[Path, ...] | None = None) -> EnvReads:
    """Every environment variable the code reads in ``files`` [default: :func:`source_files`], and
    the config fields (``*_env``) that name one."""
    out = EnvReads()
    for path in files if files is not None else source_files():
        tree = _parse(path)
        res = _Resolver(path, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "envvar":
                where = f"{path.relative_to(ROOT)}:{node.value.lineno}"
                try:
                    for n in res.strings(node.value, node):
                        out.names.setdefault(n, []).append(where)
                except Unresolved as e:
                    out.problems.append(f"{where}: envvar: {e}")
                continue
            arg = _env_arg(node)
            if arg is None:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"  # type: ignore[attr-defined]
            for leaf in _leaves(arg, res, node, out, where):
                out.names.setdefault(leaf, []).append(where)
    return out


def _leaves(arg: ast.AST, res: _Resolver, at: ast.AST, out: EnvReads, where: str) -> Iterator[str]:
    """Names an env read can read; attributes (``self.password_env``) are config fields naming one."""
    if isinstance(arg, ast.Attribute):
        out.config_fields.setdefault(arg.attr, []).append(where)
        return
    if isinstance(arg, ast.Name):
        # follow the name, but treat attributes met on the way as config fields
        for sub in _name_sources(arg.id, res, at):
            yield from _leaves(sub, res, at, out, where)
        return
    if isinstance(arg, ast.Tuple | ast.List | ast.Set):
        for e in arg.elts:
            yield from _leaves(e, res, at, out, where)
        return
    if isinstance(arg, ast.IfExp):
        yield from _leaves(arg.body, res, at, out, where)
        yield from _leaves(arg.orelse, res, at, out, where)
        return
    try:
        yield from res.strings(arg, at)
    except Unresolved as e:
        out.problems.append(f"{where}: {e}")


def _name_sources(name: str, res: _Resolver, at: ast.AST) -> list[ast.AST]:
    """Expressions ``name`` is bound to in the enclosing functions (assignments, loop iterables),
    else a synthetic constant tuple of its module-level value."""
    fn = _enclosing_function(at, res.parents)
    while fn is not None:
        found: list[ast.AST] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                found.append(node.value)
            elif isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name) \
                    and node.target.id == name:
                found.append(node.iter)
        if found:
            return found
        fn = _enclosing_function(fn, res.parents)
    values = module_constant(res.path, res.tree, name)
    return [ast.Tuple(elts=[ast.Constant(v) for v in sorted(values)], ctx=ast.Load())]


# -- Flux ---------------------------------------------------------------------------------------

FLUX_BUILTIN_COLUMNS = frozenset({"_time", "_value", "_field", "_measurement", "_start", "_stop"})
_COMPARE = r'\s*(?:==|!=)\s*"([^"]*)"'


def _strip_flux(query: str) -> str:
    """The query without ``//`` comments."""
    return "\n".join(line.split("//", 1)[0] for line in query.splitlines())


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    return [*parts, cur]


def _computed_columns(q: str) -> set[str]:
    """Columns a query creates: ``map(fn: (r) => ({r with name: ..., other: ...}))``, ``set(key: ...)``,
    ``duplicate(as: ...)``, ``rename(columns: {a: "b"})``."""
    out: set[str] = set()
    for m in re.finditer(r"\{\s*r\s+with\s+", q):
        depth, i = 0, m.end()
        while i < len(q) and not (q[i] == "}" and depth == 0):
            depth += q[i] in "([{"
            depth -= q[i] in ")]}"
            i += 1
        for part in _split_top(q[m.end():i]):
            key = part.split(":", 1)[0].strip()
            if re.fullmatch(r"[A-Za-z_]\w*", key):
                out.add(key)
    out |= set(re.findall(r'\bset\(\s*key\s*:\s*"([^"]+)"', q))
    out |= set(re.findall(r'\bduplicate\([^)]*\bas\s*:\s*"([^"]+)"', q))
    for body in re.findall(r"\brename\(\s*columns\s*:\s*\{([^}]*)\}", q):
        out |= set(re.findall(r':\s*"([^"]+)"', body))
    return out


def check_flux(query: str, measurements: Mapping[str, object], tag_values: Mapping[str, set[str]] | None = None
               ) -> list[str]:
    """Problems with one Flux query: measurements, fields and tags it references that the processor
    does not write. ``measurements`` maps names to :class:`flowtracer.stream.sinks.measurements.Measurement`;
    ``tag_values`` optionally gives the only literal values some tags can take."""
    q = _strip_flux(query)
    problems: list[str] = []
    names = re.findall(r'r\._measurement' + _COMPARE, q) + re.findall(r'r\["_measurement"\]' + _COMPARE, q)
    if not names:
        return ["names no measurement (filter on r._measurement == \"...\")"]
    known = [measurements[n] for n in names if n in measurements]
    problems += [f"measurement {n!r} is not written by the processor" for n in names if n not in measurements]
    tags = {t for m in known for t in m.tags}  # type: ignore[attr-defined]
    fields: dict[str, str] = {f: k for m in known for f, k in m.fields.items()}  # type: ignore[attr-defined]
    computed = _computed_columns(q)
    pivoted = bool(re.search(r'pivot\([^)]*columnKey\s*:\s*\[\s*"_field"\s*\]', q)) or "fieldsAsCols(" in q
    for f in re.findall(r'r\._field' + _COMPARE, q) + re.findall(r'r\["_field"\]' + _COMPARE, q):
        if f not in fields:
            problems.append(f"field {f!r} is not a field of {', '.join(sorted(set(names)))}")
    string_fields = {f for f in re.findall(r'r\._field' + _COMPARE, q) if fields.get(f) == "string"}
    if string_fields and re.search(r"\b(aggregateWindow|mean|sum|median|integral|derivative)\(", q):
        problems.append(f"numeric aggregate over string field(s) {sorted(string_fields)}")

    def column(name: str, how: str) -> None:
        if name in FLUX_BUILTIN_COLUMNS or name in tags or name in computed:
            return
        if name in fields:
            if not pivoted:
                problems.append(f"{how} {name!r} is a field: pivot _field into columns before using it as one")
            return
        problems.append(f"{how} {name!r} is neither a tag nor a field of {', '.join(sorted(set(names)))}")

    for name in re.findall(r"\br\.([A-Za-z_]\w*)", q) + re.findall(r'\br\["([^"]+)"\]', q):
        column(name, "column")
    for lst in re.findall(r"\b(?:columns|rowKey|columnKey)\s*:\s*\[([^\]]*)\]", q):
        for name in re.findall(r'"([^"]*)"', lst):
            column(name, "column list entry")
    for name in re.findall(r'\b(?:valueColumn|column|timeColumn|tag)\s*:\s*"([^"]*)"', q):
        column(name, "column argument")
    for tag, allowed in (tag_values or {}).items():
        for v in re.findall(rf"r\.{tag}" + _COMPARE, q):
            if "$" not in v and v not in allowed:
                problems.append(f"tag {tag} is never {v!r} (it is one of {sorted(allowed)})")
    return problems
