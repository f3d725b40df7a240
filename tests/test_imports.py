"""Imports point one way (docs/architecture.md §7), read from the source with :mod:`ast`.

- ``dynamics`` and ``protocol`` import nothing of the project but ``errors``;
- ``services`` and ``hil`` never import each other, and a service module (one that builds a
  service, ``def build``) never imports another service module, nor is imported by any module of
  ``services``;
- ``services`` holds service modules only, and the encodings a service shares with the exports
  (:data:`SHARED`: the live viewer shows what the Foxglove export writes, with its code);
- ``tools`` (the offline tools: report, sweep, envelope, dispersion, resim, analysis, the exports)
  is imported by none of ``services``, ``protocol``, ``dynamics``, ``hil``; its modules may import
  each other and :data:`SHARED`, and reach a service kind only through the registry of kinds
  (:func:`protocol.config.service_module`), never by importing a service module;
- nothing outside ``tests/`` imports ``tests`` (nor names it as a service ``kind``);
- no import cycle between the project's modules (imports inside functions count);
- a module named by a string (``importlib.import_module``) only where :data:`STRING_IMPORTS` says why:
  a service kind only in :mod:`protocol.registry`;
- only ``protocol.bus`` (the bus backends) and ``protocol.security`` (CurveZMQ, part of the ZeroMQ
  backend) import ``zmq``: everything else, tests and bench included, uses the bus interface.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dynamics", "protocol", "services", "tools", "hil", "testkit", "tests")
TOP_MODULES = ("launch", "errors")


def module_name(path: Path, root: Path = ROOT) -> str:
    """``dynamics/chain.py`` -> ``dynamics.chain``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the project (packages, top-level modules, bench)."""
    files = [root / f"{m}.py" for m in TOP_MODULES]
    for pkg in (*PACKAGES, "bench"):
        files += sorted((root / pkg).rglob("*.py"))
    return [f for f in files if f.is_file() and "__pycache__" not in f.parts]


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports (anywhere in the file), resolved to modules where they are."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in (*PACKAGES, *TOP_MODULES):
                continue
            while name and name not in modules:  # "pkg.module.attr" -> "pkg.module"
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (packages' ``__init__`` left out as targets)."""
    files = project_files(root)
    modules = {module_name(f, root) for f in files}
    graph = {}
    for f in files:
        me = module_name(f, root)
        graph[me] = {m for m in imports_of(f, modules) if m != me and m not in PACKAGES}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def package(module: str) -> str:
    return module.split(".")[0]


GRAPH = import_graph()


def service_modules(root: Path = ROOT, packages: tuple[str, ...] = ("services",)) -> set[str]:
    """The modules of ``packages`` that build a service (a top-level ``def build``)."""
    out = set()
    for pkg in packages:
        for f in sorted((root / pkg).glob("*.py")):
            tree = ast.parse(f.read_text(encoding="utf-8"))
            if any(isinstance(n, ast.FunctionDef) and n.name == "build" for n in tree.body):
                out.add(module_name(f, root))
    return out


SERVICES = service_modules()
ALL_SERVICES = service_modules(packages=("services", "hil", "testkit"))
"""Every module that builds a service: the ``services`` kinds and the dotted ones (``hil.bridge``)."""

SHARED = frozenset({"services.export_scene", "services.export_foxglove", "services.ros2_encoding", "services.commands"})
"""The modules of ``services`` that build no service: the scene, the Foxglove encoding and the ROS 2
message definitions and CDR encoding, which the live viewer (``services.viewer``) shares with the
exports (``tools.export``, ``tools.export_ros2``) — a service does not import ``tools``, so they stay
here — and the operator's command vocabulary (``services.commands``), which the operator, arm and
contact services share (application vocabulary: it left ``protocol``, which keeps the runtime)."""

NO_TOOLS = ("services", "protocol", "dynamics", "hil")
"""The packages that never import ``tools``."""


def imports_of_tools(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, tool) for every import of ``tools`` by a module of :data:`NO_TOOLS`."""
    return sorted((m, t) for m, ts in graph.items() for t in ts if package(t) == "tools" and package(m) in NO_TOOLS)


def tools_importing_services(graph: dict[str, set[str]], services: set[str]) -> list[tuple[str, str]]:
    """(tool, module) for every import by ``tools`` of a service module, or of ``services`` beyond :data:`SHARED`."""
    return sorted((m, t) for m, ts in graph.items() for t in ts if package(m) == "tools"
                  and (t in services or (package(t) == "services" and t not in SHARED)))


@pytest.mark.parametrize("pkg", ["dynamics", "protocol"])
def test_core_packages_import_nothing_of_the_project_but_errors(pkg):
    bad = {m: sorted(t for t in ts if package(t) not in (pkg, "errors"))
           for m, ts in GRAPH.items() if package(m) == pkg}
    assert not {m: t for m, t in bad.items() if t}, f"{pkg} imports more than errors: {bad}"


def test_services_and_hil_do_not_import_each_other():
    bad = [(m, t) for m, ts in GRAPH.items() for t in ts
           if {package(m), package(t)} == {"services", "hil"}]
    assert not bad


def test_services_do_not_import_services():
    bad = [(m, t) for m, ts in GRAPH.items() for t in ts
           if package(m) == package(t) == "services" and t in SERVICES]
    assert not bad, bad


def test_services_hold_only_services_and_what_the_viewer_shares():
    assert {"services.orbiter", "services.arm", "services.contact", "services.logger", "services.viewer"} <= SERVICES
    others = {module_name(f) for f in (ROOT / "services").glob("*.py") if f.name != "__init__.py"} - SERVICES
    assert others == SHARED, f"modules of services that build no service (tools/ is their place): {sorted(others)}"
    bad = [(m, t) for m, ts in GRAPH.items() for t in ts if m in SHARED and t in SERVICES]
    assert not bad, bad


@pytest.mark.parametrize("pkg", NO_TOOLS)
def test_no_layer_below_imports_tools(pkg):
    assert any(package(m) == pkg for m in GRAPH), f"no module of {pkg} in the graph"
    bad = [(m, t) for m, t in imports_of_tools(GRAPH) if package(m) == pkg]
    assert not bad, bad


def test_tools_reach_services_only_through_the_registry_of_kinds():
    assert {"tools.report", "tools.sweep", "tools.export", "tools.fmu_export"} <= set(GRAPH)
    assert "hil.bridge" in ALL_SERVICES and not {m for m in ALL_SERVICES if package(m) == "tools"}
    assert service_modules(packages=("tools",)) == set()
    bad = tools_importing_services(GRAPH, ALL_SERVICES)
    assert not bad, f"tools import these modules (a service kind is reached by protocol.config.service_module): {bad}"


def test_nothing_outside_tests_imports_tests():
    bad = [(m, t) for m, ts in GRAPH.items() for t in ts if package(t) == "tests" and package(m) != "tests"]
    assert not bad, bad


def test_no_config_names_a_service_kind_in_tests():
    bad = []
    for path in sorted((ROOT / "configs").rglob("*.toml")):
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
        for name, svc in cfg.get("services", {}).items():
            if str(svc.get("kind", "")).split(".")[0] == "tests":
                bad.append(f"{path.relative_to(ROOT)}: services.{name}.kind = {svc['kind']!r}")
    assert not bad, bad


STRING_IMPORTS = {
    "protocol/registry.py": "a service kind's module (the one place that turns a kind into code)",
    "protocol/realtime.py": "preload: the physics' lazy imports, a fixed list, before a realtime start",
    "dynamics/__init__.py": "the package's submodules on first use (PEP 562)",
    "dynamics/chain.py": "the deprecated alias chain_from_urdf, from dynamics.urdf",
    "launch.py": "a subcommand's module, when the subcommand runs",
    "tools/export.py": "an export format's module (foxglove, ros2), when asked for",
}
"""Files that import a module named by a string, and why; nowhere else (a kind only through the registry)."""


def test_only_the_registry_imports_a_service_kind_by_its_name():
    found = set()
    for path in project_files():
        rel = str(path.relative_to(ROOT))
        if rel.startswith("tests/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in ("import_module", "__import__"):
                    found.add(rel)
    extra = sorted(found - set(STRING_IMPORTS))
    assert not extra, f"imports by a string outside the listed places: {extra}"
    assert "protocol/registry.py" in found  # the check sees the registry's own import


def test_no_import_cycles():
    assert cycles(GRAPH) == []


ZMQ_MODULES = ("protocol.bus", "protocol.security")
"""The modules allowed to import ``zmq`` (the bus's ZeroMQ backend)."""


def zmq_importers(root: Path = ROOT) -> list[str]:
    """The project modules that import ``zmq`` (or a submodule of it) anywhere in the file."""
    out = []
    for f in project_files(root):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), filename=str(f))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            if any(n == "zmq" or n.startswith("zmq.") for n in names):
                out.append(module_name(f, root))
                break
    return out


def test_only_the_bus_backend_imports_zmq():
    assert "protocol.bus" in zmq_importers()  # (the check reads imports: it sees the one that must be there)
    bad = [m for m in zmq_importers() if m not in ZMQ_MODULES]
    assert not bad, f"modules that import zmq outside the bus backend {ZMQ_MODULES}: {bad}"


def test_the_checks_see_a_cycle_and_a_wrong_import(tmp_path):
    """The graph is read from source: a planted cycle, a planted core → services import and planted
    imports across ``tools`` (a service → a tool, a tool → a service module) are found."""
    for pkg in ("dynamics", "services", "tools"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "dynamics" / "a.py").write_text("from dynamics.b import f\n")
    (tmp_path / "dynamics" / "b.py").write_text("def f():\n    from dynamics import a\n    import services.x\n")
    (tmp_path / "services" / "x.py").write_text("import numpy\n\ndef f():\n    from zmq.auth import Authenticator\n")
    (tmp_path / "services" / "svc.py").write_text("def build():\n    from tools.t import g\n")
    (tmp_path / "services" / "export_scene.py").write_text("")
    (tmp_path / "tools" / "t.py").write_text("from services import svc\nfrom services.export_scene import s\n"
                                             "from services.x import y\n\ndef g(): ...\n")
    (tmp_path / "tools" / "u.py").write_text("from protocol.config import service_module\nfrom tools import t\n")
    g = import_graph(tmp_path)
    assert g["dynamics.a"] == {"dynamics.b"} and g["dynamics.b"] == {"dynamics.a", "services.x"}
    assert cycles(g) == [["dynamics.a", "dynamics.b"], ["services.svc", "tools.t"]]
    assert zmq_importers(tmp_path) == ["services.x"]
    assert service_modules(tmp_path) == {"services.svc"}
    assert imports_of_tools(g) == [("services.svc", "tools.t")]
    assert tools_importing_services(g, service_modules(tmp_path)) == [("tools.t", "services.svc"),
                                                                      ("tools.t", "services.x")]
