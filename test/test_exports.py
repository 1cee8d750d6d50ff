"""``__all__`` of the package and its subpackages: sorted, complete, resolvable (httpx style)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import torchrl_agentic
import torchrl_agentic.parsers
import torchrl_agentic.tools

# modules whose public classes users build on or catch; helpers modules (dispatch, loop, schema,
# compose_checks, testing, _history) are reached by their full path instead
USER_MODULES = ("types", "errors", "tool", "compose", "ratelimit", "sessions")
SUBPACKAGES = (torchrl_agentic.parsers, torchrl_agentic.tools)


def submodules(package: ModuleType) -> list[ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]


def public_classes(module: ModuleType) -> set[str]:
    """Classes defined (not imported) in ``module`` whose names do not start with ``_``."""
    return {
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    }


def user_modules() -> list[ModuleType]:
    modules = [importlib.import_module(f"torchrl_agentic.{name}") for name in USER_MODULES]
    for package in SUBPACKAGES:
        modules += submodules(package)
    return modules


ALL_PACKAGES = (torchrl_agentic, *SUBPACKAGES)


@pytest.mark.parametrize("package", ALL_PACKAGES, ids=lambda p: p.__name__)
class TestAll:
    def test_sorted_without_duplicates(self, package):
        names = list(package.__all__)
        assert names == sorted(names)
        assert len(names) == len(set(names))

    def test_every_name_resolves(self, package):
        for name in package.__all__:
            assert getattr(package, name, None) is not None, f"{package.__name__}.{name} is missing"

    def test_star_import_gives_exactly_all(self, package):
        namespace: dict[str, object] = {}
        exec(f"from {package.__name__} import *", namespace)
        namespace.pop("__builtins__")
        assert set(namespace) == set(package.__all__)

    def test_no_private_names(self, package):
        assert [n for n in package.__all__ if n.startswith("_")] == []


class TestCompleteness:
    @pytest.mark.parametrize("module", user_modules(), ids=lambda m: m.__name__)
    def test_public_classes_are_exported_at_the_top(self, module):
        missing = public_classes(module) - set(torchrl_agentic.__all__)
        assert not missing, f"{module.__name__} defines {sorted(missing)} but __all__ lacks them"

    @pytest.mark.parametrize("package", SUBPACKAGES, ids=lambda p: p.__name__)
    def test_subpackage_exports_its_classes(self, package):
        defined = set().union(*(public_classes(m) for m in submodules(package)))
        assert defined, "no classes found: the scan is broken"
        assert defined == set(package.__all__)

    def test_top_level_reexports_subpackages(self):
        for package in SUBPACKAGES:
            assert set(package.__all__) <= set(torchrl_agentic.__all__)
            for name in package.__all__:
                assert getattr(torchrl_agentic, name) is getattr(package, name)

    def test_exported_objects_come_from_the_package(self):
        for name in torchrl_agentic.__all__:
            value = getattr(torchrl_agentic, name)
            module = getattr(value, "__module__", "")
            assert module.startswith("torchrl_agentic."), f"{name} comes from {module}"

    def test_scan_finds_the_core_classes(self):
        found = set().union(*(public_classes(m) for m in user_modules()))
        assert {"Tool", "ToolError", "ToolResult", "RateLimiter", "Session", "StopTool"} <= found
        assert {"HermesParser", "ToolCompose", "ParsedCall", "ConfigError"} <= found

    def test_version(self):
        assert isinstance(torchrl_agentic.__version__, str) and torchrl_agentic.__version__
