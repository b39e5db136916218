"""The layers of fpclass, read from the import statements of its source files (ast; nothing is
imported to find them): the core imports nothing above it, the dialects use the core's public
functions only, and fpclass.dask is made from the one table of public functions."""

import ast
import inspect
from pathlib import Path

import pytest

import fpclass

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "fpclass"

#: The core: formats -> kernels -> operators, with the plain-NumPy twin and the ClassCounts type
#: beside them.
CORE = ("fpclass.formats", "fpclass.kernels", "fpclass.operators", "fpclass.twin", "fpclass.counts")
#: The core's own order: each may import only those before it.
CORE_ORDER = ("fpclass.formats", "fpclass.kernels", "fpclass.operators")
#: What the core must never import: the layers built on it.
ABOVE_THE_CORE = ("fpclass.dask", "fpclass.adapters", "fpclass.facade", "fpclass.dialects",
                  "fpclass.scan")
#: Modules of fpclass the dialects may import besides their own package and the public API.
DIALECT_INFRASTRUCTURE = {
    "fpclass._optional": "require(): the ImportError that names the extra (fpclass[onnx])",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(name: str) -> bool:
    return (SRC / name.replace(".", "/") / "__init__.py").exists()


def sources(*packages):
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name.startswith(tuple(p + "." for p in packages)) or name in packages:
            yield name, path


def imports(name: str, path: Path):
    """(line, imported module, imported name or None) for every import in the file, anywhere in
    it (function-level imports too), relative ones resolved. `from pkg import sub` of a
    submodule yields the submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = _typing_only(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if is_package(sub) or (SRC / (sub.replace(".", "/") + ".py")).exists():
                    yield node.lineno, sub, None
                else:
                    yield node.lineno, module, alias.name


def _typing_only(tree) -> set:
    """ids of the import nodes under `if TYPE_CHECKING:`: read by type checkers, never run, so
    not an edge of the import graph (fpclass/__init__ names its lazy subpackages this way)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                   "typing.TYPE_CHECKING"):
            out |= {id(n) for child in node.body for n in ast.walk(child)
                    if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def within(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_source_tree_is_where_the_test_looks():
    assert Path(fpclass.__file__).resolve().parent == PACKAGE
    assert len(list(sources(*CORE))) > 10 and len(list(sources("fpclass.dialects"))) > 20


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_nothing_above_it(core):
    upward = [f"{path.relative_to(SRC)}:{line} imports {module}"
              for name, path in sources(core) for line, module, _ in imports(name, path)
              if within(module, ABOVE_THE_CORE) or module == "fpclass"]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("layer", CORE_ORDER)
def test_each_core_layer_imports_only_those_below_it(layer):
    later = CORE_ORDER[CORE_ORDER.index(layer) + 1:]
    upward = [f"{path.relative_to(SRC)}:{line} imports {module}"
              for name, path in sources(layer) for line, module, _ in imports(name, path)
              if within(module, later)]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("dialect", ["onnx", "openvino", "directml"])
def test_dialects_use_public_core_functions_only(dialect):
    own = f"fpclass.dialects.{dialect}"
    public = set(fpclass.__all__)
    bad = []
    for name, path in sources(own):
        where = path.relative_to(SRC)
        for line, module, imported in imports(name, path):
            if not within(module, ("fpclass",)) or within(module, (own,)):
                continue
            if module in DIALECT_INFRASTRUCTURE:
                continue
            if module == "fpclass" and (imported is None or imported in public):
                continue
            if module == "fpclass.formats" and imported is not None and not imported.startswith("_"):
                continue
            bad.append(f"{where}:{line} imports {module}" + (f".{imported}" if imported else ""))
        # `import fpclass` then fpclass.<private or internal module>: the same reach, spelled later
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "fpclass" and node.attr not in public:
                bad.append(f"{where}:{node.lineno} uses fpclass.{node.attr}")
    assert not bad, "\n".join(bad)


def test_dask_entry_points_are_made_from_the_public_table():
    import fpclass.dask as fd
    from fpclass import facade
    # no function of the table is written out in fpclass.dask: each is made from the table
    tree = ast.parse((PACKAGE / "dask" / "__init__.py").read_text(encoding="utf-8"))
    written = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not written & set(facade.KIND), written & set(facade.KIND)
    for name in facade.KIND:
        entry, numpy = getattr(fd, name), getattr(fpclass, name)
        assert entry.__name__ == name and entry.__module__ == "fpclass.dask"
        numpy_params = list(inspect.signature(numpy).parameters.values())
        dask_params = list(inspect.signature(entry).parameters.values())
        extra = [] if name in facade.ELEMENTWISE else ["split_every"]
        assert dask_params[:len(numpy_params)] == numpy_params
        assert [p.name for p in dask_params[len(numpy_params):]] == extra
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in dask_params[len(numpy_params):])
        assert f"fpclass.{name}" in entry.__doc__ and ("split_every" in entry.__doc__) == bool(extra)
    assert set(fd.__all__) == {"dispatch", "is_dask_collection", "scan", *facade.KIND}


@pytest.mark.parametrize("layer", ["fpclass.adapters", "fpclass.dask", "fpclass.catalogue"])
def test_the_facade_is_imported_by_no_layer_it_routes_to(layer):
    # the façade imports the adapters (to route to them); they read the catalogue, so the
    # import graph has no façade <-> adapters cycle
    upward = [f"{path.relative_to(SRC)}:{line} imports {module}"
              for name, path in sources(layer) for line, module, imported in imports(name, path)
              if within(module, ("fpclass.facade",))
              or (module == "fpclass" and imported in {"facade", *fpclass.__all__})]
    assert not upward, "\n".join(upward)


def _reach(package: str, forbidden) -> list:
    """`path:line imports module` for each import in `package` of a module within `forbidden`."""
    return [f"{path.relative_to(SRC)}:{line} imports {module}"
            for name, path in sources(package) for line, module, _ in imports(name, path)
            if within(module, forbidden)]


@pytest.mark.parametrize("module", ["fpclass.checking", "fpclass.check_walk"])
def test_check_imports_nothing_of_the_scan(module):
    # fpclass.check classifies in-memory values through the core and results.build, never
    # through the scan's engine or readers
    upward = _reach(module, ("fpclass.scan", "fpclass.dask"))
    assert not upward, "\n".join(upward)


def test_the_result_model_is_below_scan_check_dask_and_the_adapters():
    upward = _reach("fpclass.results", ("fpclass.scan", "fpclass.checking", "fpclass.check_walk",
                                        "fpclass.dask", "fpclass.adapters", "fpclass.cli"))
    upward += [f"{path.relative_to(SRC)}:{line} imports the package fpclass"
               for name, path in sources("fpclass.results")
               for line, module, _ in imports(name, path) if module == "fpclass"]
    assert not upward, "\n".join(upward)


def import_graph() -> dict:
    """module -> {(module it imports, line)} over src/fpclass, read from the ast: module-level
    and function-level imports alike, each edge to the module that defines what is imported
    (`from . import name` of a package's attribute: the package). The parent packages Python
    imports first are not edges."""
    modules = {name: path for name, path in sources("fpclass")}
    graph: dict = {name: set() for name in modules}
    for name, path in modules.items():
        for line, module, _ in imports(name, path):
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name:
                graph[name].add((module, line))
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


#: Import cycles known and accepted, each as the set of its modules, with the reason it stays.
#: Empty: none remains. A new cycle fails the test; break it (move the shared idea below both
#: modules) rather than listing it here.
ALLOWED_CYCLES: dict = {
    # frozenset({"fpclass.a", "fpclass.b"}): "why it cannot be broken yet",
}


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 100
    bad = []
    for component in cycles(graph):
        if frozenset(component) in ALLOWED_CYCLES:
            continue
        members = set(component)
        edges = [f"  {v} -> {w} (line {line})" for v in component
                 for w, line in sorted(graph[v]) if w in members]
        bad.append("cycle: " + ", ".join(component) + "\n" + "\n".join(edges))
    assert not bad, "\n".join(bad)
    stale = [sorted(c) for c in ALLOWED_CYCLES if not any(set(c) <= set(k) for k in cycles(graph))]
    assert not stale, f"allowed cycles that no longer exist: {stale}"


def test_the_cycle_finder_finds_a_function_level_cycle():
    # the graph read from the ast holds function-level imports: fpclass/__init__ imports
    # fpclass.checking inside its __getattr__ (the lazy fpclass.check)
    graph = import_graph()
    assert "fpclass.checking" in {w for w, _ in graph["fpclass"]}
    assert cycles({"a": {("b", 1)}, "b": {("c", 1)}, "c": {("a", 1)}, "d": {("a", 1)}}) \
        == [["a", "b", "c"]]
