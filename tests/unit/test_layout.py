"""
The layout of the provider's code, read from its source with ``ast`` (nothing is imported).

The layers, lowest first: the journal core (``durable/core/``); its Airflow binding
(``durable/airflow/``) and the framework adapters (every other package ``durable/<adapter>/``:
``openai_agents``, ...), which know the core and not each other; then the operator, the
decorator and the plugins, which wire them together. See docs/layout.rst.

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
PYDANTIC_AI = f"{DURABLE}.pydantic_ai"
#: The framework adapters: every package under durable/ but the core and the binding.
ADAPTERS = sorted(
    f"{DURABLE}.{path.parent.name}"
    for path in (SRC / "airflow/providers/common/ai/durable").glob("*/__init__.py")
    if path.parent.name not in ("core", "airflow")
)
#: Modules of agent frameworks and their instrumentations, which only an adapter (and the
#: operator, the decorator and the hook above it) imports: the core and the binding are neutral.
FRAMEWORK_MODULES = ("agents", "openai", "mcp", "pydantic_ai", "opentelemetry.instrumentation.openai_agents")

#: The package, which installs the Airflow binding, and the one module kept at a path from before
#: the layout: the alias a trigger stored under that path resumes through. They may import any
#: layer of ``durable``; nothing else is left at an old path.
FACADES = {DURABLE, f"{DURABLE}.approval_trigger"}
#: What each layer may import of the provider, besides its own layer.
ALLOWED_BELOW = {
    CORE: set(),
    # The binding is the layer that talks to Airflow: it may read the provider's version flags and
    # the one module of Airflow's private names.
    AIRFLOW_BINDING: {CORE, f"{PACKAGE}.version_compat", f"{PACKAGE}._airflow_private"},
    # An adapter knows the core alone: not the binding, not another adapter.
    **{adapter: {CORE} for adapter in ADAPTERS},
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


def _outside_its_layer(name: str, imported: set[str]) -> list[str]:
    """The provider modules of ``imported`` that ``name``'s layer may not import."""
    layer = _layer(name)
    if layer is None:
        return []
    allowed = {layer, *ALLOWED_BELOW[layer]}
    return sorted(
        module
        for module in imported
        if not any(module == allowed_one or module.startswith(f"{allowed_one}.") for allowed_one in allowed)
    )


def test_a_durable_module_imports_only_its_own_layer_and_those_below():
    wrong = {name: _outside_its_layer(name, _provider_imports(name)) for name in MODULES}
    assert {name: modules for name, modules in wrong.items() if modules} == {}


def test_every_package_under_durable_but_the_core_and_the_binding_is_an_adapter_of_its_own_layer():
    assert OPENAI_AGENTS in ADAPTERS and PYDANTIC_AI in ADAPTERS
    assert CORE not in ADAPTERS and AIRFLOW_BINDING not in ADAPTERS
    assert all(_layer(f"{adapter}._anything") == adapter for adapter in ADAPTERS)


def test_the_rule_refuses_an_adapter_importing_another_and_the_binding_importing_an_adapter():
    # The rule itself, on imports no module makes: it must be able to fail.
    other = f"{DURABLE}.other_framework"
    ALLOWED_BELOW[other] = {CORE}
    try:
        assert _outside_its_layer(f"{other}._run", {f"{OPENAI_AGENTS}._model", f"{CORE}.journal"}) == [
            f"{OPENAI_AGENTS}._model"
        ]
        assert _outside_its_layer(f"{OPENAI_AGENTS}._run", {f"{other}._run"}) == [f"{other}._run"]
    finally:
        del ALLOWED_BELOW[other]
    assert _outside_its_layer(f"{AIRFLOW_BINDING}.telemetry", {OPENAI_AGENTS, f"{CORE}.events"}) == [OPENAI_AGENTS]
    assert _outside_its_layer(f"{OPENAI_AGENTS}._run", {f"{AIRFLOW_BINDING}.binding"}) == [f"{AIRFLOW_BINDING}.binding"]


def test_neither_the_core_nor_the_binding_imports_an_agent_framework_or_its_instrumentation():
    # What an adapter adds to the SDK (its traces too) is the adapter's, or the operator's above it.
    users = {
        name: sorted(
            module
            for module in IMPORTS[name]
            if any(module == framework or module.startswith(f"{framework}.") for framework in FRAMEWORK_MODULES)
        )
        for name in MODULES
        if _layer(name) in (CORE, AIRFLOW_BINDING)
    }
    assert {name: modules for name, modules in users.items() if modules} == {}


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


def test_only_the_pydantic_ai_adapter_imports_pydantic_ai():
    users = sorted(name for name in MODULES if any(module.split(".")[0] == "pydantic_ai" for module in IMPORTS[name]))
    assert users and [name for name in users if _layer(name) != PYDANTIC_AI] == []


def test_the_alias_at_the_old_path_only_re_exports_the_trigger():
    tree = ast.parse(MODULES[f"{DURABLE}.approval_trigger"].read_text())
    kinds = {type(node).__name__ for node in tree.body[1:]}
    assert kinds <= {"ImportFrom", "Assign"}, "durable/approval_trigger.py holds code; it should only re-export"
    assert _imported(f"{DURABLE}.approval_trigger", tree, is_package=False) == {
        "__future__",
        f"{AIRFLOW_BINDING}.approval_trigger",
    }


def test_no_module_of_durable_but_the_alias_only_re_exports_another():
    # A module whose body (after its docstring) is imports and __all__ alone is a facade.
    facades = []
    for name, path in MODULES.items():
        if not name.startswith(f"{DURABLE}.") or name in FACADES or path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text()).body[1:]
        if body and all(
            isinstance(node, ast.ImportFrom)
            or (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"])
            for node in body
        ):
            facades.append(name)
    assert facades == []


def test_no_logger_is_named_by_a_literal_string():
    # Logger names follow the module (__name__): a literal one pins a path the code may leave.
    pinned = sorted(
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getLogger"
        and any(isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in node.args)
    )
    assert pinned == []


def test_no_module_is_longer_than_the_limit():
    lengths = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES and name not in TOO_LONG_FOR_NOW} == {}


def test_every_module_opens_with_a_docstring_of_what_it_is_for():
    missing = sorted(name for name, path in MODULES.items() if ast.get_docstring(ast.parse(path.read_text())) is None)
    assert missing == []


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_names_defined(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes, variables and attributes it assigns."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    return {name for name in defined if _is_private(name)}


TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
PRIVATE_NAMES = {name: _private_names_defined(tree) for name, tree in TREES.items()}


def _private_reads(name: str, tree: ast.Module) -> set[str]:
    """The private names of other provider modules that ``tree`` reads: ``obj._name`` or ``from m import _name``."""
    elsewhere = {
        private for other, names in PRIVATE_NAMES.items() if other != name for private in names
    } - PRIVATE_NAMES[name]
    reads = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in elsewhere:
            reads.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES and node.module != name:
            # A private module of a package is imported by name: that is no member of another module.
            reads.update(
                alias.name
                for alias in node.names
                if _is_private(alias.name) and f"{node.module}.{alias.name}" not in MODULES
            )
    return reads


def test_no_module_reads_a_private_member_of_another():
    # A module that reads another's private member is the same object cut in two: draw the cut where
    # the responsibilities part, and give each part a public face the others use.
    reads = {(name, private) for name, tree in TREES.items() for private in _private_reads(name, tree)}
    assert sorted(reads) == []


def test_the_private_read_check_finds_an_attribute_and_an_import_of_another_modules_private_name():
    tree = ast.parse(
        "from airflow.providers.common.ai.durable.core.journal_io import _IDLE_SECONDS\n"
        "def f(run):\n    return run._positions, run._own\n"
        "class C:\n    def __init__(self):\n        self._own = 1\n"
    )
    PRIVATE_NAMES["probe"] = _private_names_defined(tree)
    try:
        assert _private_reads("probe", tree) == {"_IDLE_SECONDS", "_positions"}
    finally:
        del PRIVATE_NAMES["probe"]


#: Words of Airflow and of this provider's entry points that the core's messages must not name:
#: they come from the host's wording (``core/host.py``'s ``HostWording``).
HOST_WORDS = ("[core]", "[common.ai]", "AgentOperator", "run_durably", "durable_key", "airflow ")


def _message_strings(tree: ast.Module) -> list[str]:
    """The string constants of ``tree`` that are not docstrings (what the code says, not what it documents)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_the_cores_messages_name_no_setting_or_entry_point_of_airflow_or_an_adapter():
    named = {
        (name, text)
        for name, tree in TREES.items()
        if name.startswith(f"{CORE}.") and name != f"{CORE}.host"
        for text in _message_strings(tree)
        # A text with NULs is hashed (a stored format, runs.py's key), not read by a person.
        if any(word in text for word in HOST_WORDS) and "\0" not in text
    }
    assert sorted(named) == []


def test_the_message_check_finds_a_setting_named_in_a_message_but_not_in_a_docstring():
    tree = ast.parse(
        '"""Reads [core] fernet_key."""\ndef f():\n    """Also [core]."""\n    raise ValueError("set [core] fernet_key")\n'
    )
    assert [t for t in _message_strings(tree) if any(w in t for w in HOST_WORDS)] == ["set [core] fernet_key"]
