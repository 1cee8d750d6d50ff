"""The layers of shared/DESIGN.md hold: imports only point down, torchrl stays in the glue, and
optional extras stay lazy. Imports are read from the source (AST), so nothing is executed."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import torchrl_agentic

ROOT = Path(torchrl_agentic.__file__).parent
PACKAGE = "torchrl_agentic"

VALUES, CONTRACTS, MACHINERY, EXECUTION, GLUE, EDGES = range(6)
LAYER_NAMES = ("values", "contracts", "machinery", "execution", "TorchRL glue", "edges")

# first component of the module path below the package -> layer (shared/DESIGN.md "Layers").
# compose_checks is ToolCompose's construction-time validation: it imports only contracts (tool,
# parsers.base) but exists for the compose, so it sits with it in the glue.
LAYERS = {
    "types": VALUES,
    "errors": VALUES,
    "tool": CONTRACTS,
    "schema": CONTRACTS,
    "toolset": CONTRACTS,
    "parsers": CONTRACTS,
    "ratelimit": MACHINERY,
    "dispatch": MACHINERY,
    "sessions": MACHINERY,
    "loop": MACHINERY,
    "sandbox": EXECUTION,
    "tools": EXECUTION,
    "compose": GLUE,
    "compose_checks": GLUE,
    "_history": GLUE,
    "tokens": GLUE,
    "legacy": GLUE,
    "record": GLUE,
    "testing": GLUE,
    "config": EDGES,
    "distributed": EDGES,
    "cli": EDGES,
}
TORCH_FAMILY = frozenset({"torch", "torchrl", "tensordict"})
OPTIONAL_EXTRAS = frozenset({"ray", "mcp", "vllm", "textual"})
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


@dataclass(frozen=True)
class Import:
    module: str
    """Absolute name of the imported module."""
    line: int
    in_function: bool
    """Inside a function body (a lazy import)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _submodule_exists(name: str) -> bool:
    if not name.startswith(PACKAGE + ".") and name != PACKAGE:
        return False
    rel = Path(*name.split(".")[1:]) if name != PACKAGE else Path()
    base = ROOT / rel
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def runtime_imports(source: str, name: str, package: bool) -> list[Import]:
    """Every import that runs when the module (or one of its functions) runs; ``if TYPE_CHECKING:``
    blocks are skipped. ``from pkg import sub`` counts as importing ``pkg.sub`` when that is a
    module."""
    found: list[Import] = []
    own_package = name if package else name.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = own_package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            subs = [f"{base}.{a.name}" for a in node.names if _submodule_exists(f"{base}.{a.name}")]
            found.extend(Import(m, node.lineno, in_function) for m in subs)
            if len(subs) < len(node.names):
                found.append(Import(base, node.lineno, in_function))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source), False)
    return found


def layer_of(module: str) -> int | None:
    """Layer of a module of the package; the package root re-exports everything (glue and all)."""
    if module == PACKAGE:
        return GLUE
    return LAYERS.get(module.split(".")[1])


def violations(name: str, source: str, package: bool = False) -> list[str]:
    """What ``name``'s imports break of the layer rules."""
    own = layer_of(name)
    if own is None:
        return [f"{name} has no layer: add it to LAYERS (and to shared/DESIGN.md)"]
    problems = []
    for imp in runtime_imports(source, name, package):
        root = imp.module.split(".")[0]
        where = f"{name}:{imp.line} imports {imp.module}"
        if own == VALUES and root not in STDLIB:
            problems.append(f"{where}: the values layer imports only the standard library")
        if root in TORCH_FAMILY and own != GLUE:
            problems.append(f"{where}: only the TorchRL glue may import {root}")
        if root in OPTIONAL_EXTRAS and not imp.in_function:
            problems.append(f"{where}: optional extras are imported lazily, inside functions")
        if root == PACKAGE:
            target = layer_of(imp.module)
            if target is None:
                problems.append(f"{where}: the imported module has no layer")
            elif target > own:
                problems.append(
                    f"{where}: {LAYER_NAMES[own]} cannot depend on {LAYER_NAMES[target]}"
                )
    return problems


SOURCES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)
MODULES = [p for p in SOURCES if module_name(p) != PACKAGE]


class TestLayers:
    @pytest.mark.parametrize("path", MODULES, ids=module_name)
    def test_imports_point_down(self, path):
        source = path.read_text(encoding="utf-8")
        assert violations(module_name(path), source, is_package(path)) == []

    def test_root_imports_no_optional_extra_eagerly(self):
        source = (ROOT / "__init__.py").read_text(encoding="utf-8")
        eager = [
            i.module for i in runtime_imports(source, PACKAGE, True)
            if i.module.split(".")[0] in OPTIONAL_EXTRAS and not i.in_function
        ]
        assert eager == []

    def test_every_module_is_scanned(self):
        names = {module_name(p) for p in MODULES}
        assert {f"{PACKAGE}.types", f"{PACKAGE}.dispatch", f"{PACKAGE}.compose"} <= names
        assert "torchrl_agentic.parsers.hermes" in names and "torchrl_agentic.tools.stop" in names


class TestScanner:
    """The checker itself catches what it is meant to catch."""

    def check(self, name: str, source: str) -> list[str]:
        return violations(name, textwrap.dedent(source))

    def test_reads_real_imports(self):
        source = (ROOT / "compose.py").read_text(encoding="utf-8")
        compose = runtime_imports(source, "torchrl_agentic.compose", False)
        modules = {i.module for i in compose}
        assert {"torchrl.envs.transforms", "torchrl_agentic.dispatch", "tensordict"} <= modules

    def test_torch_in_machinery(self):
        (problem,) = self.check("torchrl_agentic.dispatch", "import tensordict\n")
        assert "only the TorchRL glue may import tensordict" in problem

    def test_lazy_torch_is_still_a_dependency(self):
        source = """
            def f():
                from torchrl.data.llm import History
        """
        assert self.check("torchrl_agentic.parsers.hermes", source) != []

    def test_upward_import(self):
        (problem,) = self.check("torchrl_agentic.sessions", "from torchrl_agentic import compose\n")
        assert "machinery cannot depend on TorchRL glue" in problem

    def test_relative_upward_import(self):
        (problem,) = self.check(f"{PACKAGE}.parsers.xml", "from ..dispatch import Dispatcher\n")
        assert f"{PACKAGE}.dispatch" in problem
        assert "contracts cannot depend on machinery" in problem

    def test_root_package_import_is_glue(self):
        (problem,) = self.check("torchrl_agentic.tool", "from torchrl_agentic import ToolError\n")
        assert "contracts cannot depend on TorchRL glue" in problem

    def test_values_take_only_stdlib(self):
        problems = self.check("torchrl_agentic.types", "import json\nimport numpy\n")
        assert len(problems) == 1 and "numpy" in problems[0]
        assert self.check("torchrl_agentic.errors", "from torchrl_agentic import types\n") != []

    def test_type_checking_imports_are_allowed(self):
        source = """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from tensordict import TensorDictBase
                from torchrl_agentic.sessions import Session
            else:
                import json
        """
        assert self.check("torchrl_agentic.types", source) == []

    def test_eager_optional_extra(self):
        source = """
            try:
                import ray
            except ImportError:
                ray = None

            def connect():
                import mcp
        """
        (problem,) = self.check("torchrl_agentic.tools.stop", source)
        assert "imports ray: optional extras are imported lazily" in problem

    def test_unplaced_module(self):
        (problem,) = self.check("torchrl_agentic.mystery", "")
        assert "has no layer" in problem


# Records every attempt by the package to import an optional extra, installed or not (TorchRL's own
# ``find_spec("ray")`` probes are not the package's doing).
PROBE = """
import importlib.abc, json, os, sys
EXTRAS = {extras!r}
ROOT = {root!r}
tried = []
class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRAS:
            frame = sys._getframe(1)
            while frame and (frame.f_code.co_filename.startswith("<frozen")
                             or "importlib" in frame.f_code.co_filename):
                frame = frame.f_back
            if frame and frame.f_code.co_filename.startswith(ROOT + os.sep):
                tried.append(name)
        return None
sys.meta_path.insert(0, Recorder())
import torchrl_agentic
loaded = sorted(m for m in sys.modules if m.split(".")[0] in EXTRAS)
print(json.dumps({{"tried": tried, "loaded": loaded}}))
"""


class TestImportCost:
    def test_import_does_not_touch_optional_extras(self):
        code = PROBE.format(extras=sorted(OPTIONAL_EXTRAS), root=str(ROOT))
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report == {"tried": [], "loaded": []}
