"""What each ONNX operator version admits, read from the installed onnx's own schemas.

Nothing here is hand-copied from the spec: the admitted input types and attribute defaults of
IsNaN-9/13/20 and IsInf-10/20 come from `onnx.defs`, so the dialect follows the installed onnx.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

import onnx
import onnx.defs

from .errors import NodeVersionError

#: The operators fpclass evaluates itself (default ONNX domain); every other one goes elsewhere.
OPERATORS = ("IsNaN", "IsInf")

#: Domains that name the default ONNX operator set: "" is canonical, "ai.onnx" its spelled-out
#: name, which onnx's checker and onnxruntime accept in opset imports and onnxruntime in nodes.
DEFAULT_DOMAINS = ("", "ai.onnx")

#: 'float8e4m3fn' -> TensorProto.FLOAT8E4M3FN: the schema's type strings are the lower-cased
#: TensorProto.DataType names.
_ELEMENT_TYPE_BY_NAME = {name.lower(): value for name, value in onnx.TensorProto.DataType.items()}


class Attribute(NamedTuple):
    """One attribute of an operator version: its AttributeProto type and default (None: required)."""

    name: str
    type: int
    default: object


class OpVersion(NamedTuple):
    """One (operator, since_version) of the default domain: what its single input admits and which
    attributes it takes."""

    op_type: str
    since_version: int
    admitted: tuple[int, ...]            # TensorProto element types of input 0, in schema order
    attributes: dict[str, Attribute]

    @property
    def label(self) -> str:
        """'IsNaN-13'."""
        return f"{self.op_type}-{self.since_version}"

    def admitted_names(self) -> str:
        """'tensor(bfloat16), tensor(double), ...' sorted, for error messages."""
        return ", ".join(sorted(type_name(t) for t in self.admitted))


def type_name(element_type: int) -> str:
    """'tensor(float16)' for TensorProto.FLOAT16, as the spec writes types."""
    try:
        return f"tensor({onnx.TensorProto.DataType.Name(element_type).lower()})"
    except ValueError:
        return f"tensor(<unknown element type {element_type}>)"


def _element_type(type_str: str) -> int:
    inner = type_str[len("tensor("):-1] if type_str.startswith("tensor(") else type_str
    return _ELEMENT_TYPE_BY_NAME[inner]


@functools.lru_cache(maxsize=None)
def since_versions(op_type: str) -> tuple[int, ...]:
    """Every since_version of `op_type` in the default domain known to the installed onnx."""
    return tuple(sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history()
                        if s.name == op_type and s.domain == ""))


@functools.lru_cache(maxsize=None)
def op_version(op_type: str, opset: int) -> OpVersion:
    """The version of `op_type` in force at default-domain `opset`. NodeVersionError if `op_type`
    is not one of OPERATORS or did not exist yet at that opset."""
    if op_type not in OPERATORS:
        raise NodeVersionError(f"fpclass.onnx evaluates {', '.join(OPERATORS)}, not {op_type!r}")
    if not isinstance(opset, int) or isinstance(opset, bool) or opset < 1:
        raise NodeVersionError(f"the opset version must be a positive int, got {opset!r}")
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        raise NodeVersionError(
            f"{op_type} does not exist in opset {opset}; its versions are "
            f"{', '.join(map(str, since_versions(op_type)))}") from None
    input_param = schema.inputs[0].type_str
    (constraint,) = [c for c in schema.type_constraints if c.type_param_str == input_param]
    attributes = {
        name: Attribute(name, int(a.type),
                        onnx.helper.get_attribute_value(a.default_value) if a.default_value.name else None)
        for name, a in schema.attributes.items()
    }
    admitted = tuple(_element_type(t) for t in constraint.allowed_type_strs)
    return OpVersion(op_type, schema.since_version, admitted, attributes)


# -- the default domain, however a model spells it -------------------------------------------------

def default_opset(opsets: Mapping[str, int]) -> int | None:
    """The default domain's version in `opsets` (domain -> version), imported as "" or "ai.onnx"."""
    return opsets.get("", opsets.get("ai.onnx"))


def canonical_domains(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with the default domain spelled "" everywhere: the opset imports of the model and of
    its functions, and the domain of every node (subgraphs and functions included). onnx's checker
    and ReferenceEvaluator know only "" in some of these places. `model` itself when it never says
    "ai.onnx", otherwise a copy. NodeVersionError where one import list names the default domain
    twice with different versions (onnxruntime then takes the last, the checker says nothing)."""
    lists = [model.opset_import, *(f.opset_import for f in model.functions)]
    if not any(o.domain == "ai.onnx" for imports in lists for o in imports) \
            and not any(n.domain == "ai.onnx" for n in _every_node(model)):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for imports in [copy.opset_import, *(f.opset_import for f in copy.functions)]:
        _merge_default_imports(imports)
    for node in _every_node(copy):
        if node.domain == "ai.onnx":
            node.domain = ""
    return copy


def canonical_node(node: onnx.NodeProto) -> onnx.NodeProto:
    """`node`, or a copy of it in domain "" if it names the default domain "ai.onnx"."""
    if node.domain != "ai.onnx":
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.domain = ""
    return copy


def _merge_default_imports(imports) -> None:
    versions = {o.domain: o.version for o in imports if o.domain in DEFAULT_DOMAINS}
    if len(set(versions.values())) > 1:
        raise NodeVersionError(
            f"the default ONNX domain is imported twice with different versions, as '' (opset "
            f"{versions['']}) and 'ai.onnx' (opset {versions['ai.onnx']}); import it once")
    others = [o for o in imports if o.domain not in DEFAULT_DOMAINS]
    del imports[:]
    if versions:
        imports.add(domain="", version=next(iter(versions.values())))
    imports.extend(others)


def _every_node(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from _nodes(model.graph.node)
    for function in model.functions:
        yield from _nodes(function.node)


def _nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """`nodes` and the nodes of their subgraphs (If, Loop, Scan bodies), depth first."""
    for node in nodes:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attribute.g.node)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for graph in attribute.graphs:
                    yield from _nodes(graph.node)
