"""
The layout of the provider's code, read from its source with ``ast`` (nothing is imported).

The layers, lowest first: the journal core (``durable/core/``); its Airflow binding
(``durable/airflow/``) and the OpenAI Agents adapter (``durable/openai_agents/``), which know the
core and not each other; then the operator, the decorator and the plugins, which wire them
together. See docs/layout.rst.

Every import counts, at the top of a module or inside a function, but for those under
``if TYPE_CHECKING:``: they only name types for annotations and never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"
PACKAGE = "airflow.providers.common.ai"
DURABLE = f"{PACKAGE}.durable"
CORE = f"{DURABLE}.core"
AIRFLOW_BINDING = f"{DURABLE}.airflow"
OPENAI_AGENTS = f"{DURABLE}.openai_agents"

#: The old module paths kept for users, each a re-export of the new homes (``durable/*.py``), and
#: the package that installs the Airflow binding: they may import any layer of ``durable``.
FACADES = {
    f"{DURABLE}",
    *(
        f"{DURABLE}.{name}"
        for name in (
            "journal",
            "storage",
            "usage",
            "encryption",
            "fingerprint",
            "task_state_store",
            "object_storage",
            "approval_trigger",
        )
    ),
}
#: What each layer may import of the provider, besides its own layer.
ALLOWED_BELOW = {
    CORE: set(),
    AIRFLOW_BINDING: {CORE, f"{PACKAGE}.version_compat"},
    OPENAI_AGENTS: {CORE},
}
#: The largest module, in lines: one that passes it usually holds two concerns.
MAX_LINES = 500
#: Modules over MAX_LINES that are not the durable code this layout is about: the fake OpenAI
#: server of the testing package, to be split when it next changes.
TOO_LONG_FOR_NOW = {f"{PACKAGE}.testing.openai_server"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted((SRC / "airflow/providers/common/ai").rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(name: str, tree: ast.Module, *, is_package: bool) -> set[str]:
    """Every module ``tree`` imports, anywhere in it but under ``if TYPE_CHECKING:``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            # "from package import module" counts as importing the module alone: a package's
            # __init__ runs before any of its modules, so it is no edge of a circle.
            modules = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES}
            found.update(modules if len(modules) == len(node.names) else {base, *modules})
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


IMPORTS = {
    name: _imported(name, ast.parse(path.read_text()), is_package=path.name == "__init__.py")
    for name, path in MODULES.items()
}


def _provider_imports(name: str) -> set[str]:
    return {module for module in IMPORTS[name] if module in MODULES and module != name}


def _layer(name: str) -> str | None:
    for layer in ALLOWED_BELOW:
        if name == layer or name.startswith(f"{layer}."):
            return layer
    return None


def test_the_provider_modules_import_each_other_in_no_circle():
    # Depth-first search; a module met again while it is on the path closes a circle.
    done: set[str] = set()
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            circles.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for imported in sorted(_provider_imports(name)):
            visit(imported, [*path, name])
        done.add(name)

    for name in MODULES:
        visit(name, [])
    assert circles == []


def test_a_durable_module_imports_only_its_own_layer_and_those_below():
    wrong = {}
    for name in MODULES:
        layer = _layer(name)
        if layer is None:
            continue
        allowed = {layer, *ALLOWED_BELOW[layer]}
        above = sorted(
            module
            for module in _provider_imports(name)
            if not any(module == allowed_one or module.startswith(f"{allowed_one}.") for allowed_one in allowed)
        )
        if above:
            wrong[name] = above
    assert wrong == {}


def test_no_durable_module_imports_the_operator_the_decorator_or_the_plugins():
    upper = (f"{PACKAGE}.operators", f"{PACKAGE}.decorators", f"{PACKAGE}.plugins")
    wrong = {
        name: sorted(module for module in _provider_imports(name) if module.startswith(upper))
        for name in MODULES
        if name.startswith(DURABLE)
    }
    assert {name: modules for name, modules in wrong.items() if modules} == {}


def test_the_journal_core_imports_neither_the_agent_sdk_nor_airflow():
    # Not even version_compat: what the core needs of Airflow the binding installs
    # (durable/airflow/binding.py). cryptography and the standard library are fine.
    foreign = {
        name: sorted(
            module
            for module in IMPORTS[name]
            if module.split(".")[0] in {"agents", "openai", "mcp", "pydantic"}
            or (module.split(".")[0] == "airflow" and not (module == CORE or module.startswith(f"{CORE}.")))
        )
        for name in MODULES
        if _layer(name) == CORE
    }
    assert {name: modules for name, modules in foreign.items() if modules} == {}


def test_only_the_openai_agents_adapter_and_the_modules_above_it_import_the_sdk():
    sdk_users = sorted(
        name
        for name in MODULES
        if any(module.split(".")[0] == "agents" for module in IMPORTS[name]) and name.startswith(DURABLE)
    )
    assert [name for name in sdk_users if _layer(name) != OPENAI_AGENTS] == []


def test_the_facades_at_the_old_paths_only_re_export():
    for name in FACADES - {DURABLE}:
        tree = ast.parse(MODULES[name].read_text())
        kinds = {type(node).__name__ for node in tree.body[1:]}
        assert kinds <= {"ImportFrom", "Assign"}, f"{name} holds code; it should only re-export"


def test_no_module_is_longer_than_the_limit():
    lengths = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES and name not in TOO_LONG_FOR_NOW} == {}


def test_every_module_opens_with_a_docstring_of_what_it_is_for():
    missing = sorted(name for name, path in MODULES.items() if ast.get_docstring(ast.parse(path.read_text())) is None)
    assert missing == []
