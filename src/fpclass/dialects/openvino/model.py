"""A validated IR model and its inference on the fpclass core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .shapes import PartialShape
from .types import ElementType
from .validate import Node, Program


@dataclass(frozen=True)
class Input:
    """One model input: the Parameter's name, tensor names, element type and partial shape."""

    name: str
    names: tuple[str, ...]
    element_type: ElementType
    shape: PartialShape


class InferResults(Mapping):
    """The outputs of one inference, in Result order: by index (`r[0]`), by Result name or by
    any tensor name of the Result's input. Iterating yields the Result names."""

    def __init__(self, arrays: list[np.ndarray], names: list[str], aliases: dict[str, int]):
        self._arrays, self._names, self._aliases = arrays, names, aliases

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -len(self._arrays) <= key < len(self._arrays):
                raise KeyError(f"output index {key} out of range; the model has "
                               f"{len(self._arrays)} output(s)")
            return self._arrays[key]
        if isinstance(key, str) and key in self._aliases:
            return self._arrays[self._aliases[key]]
        raise KeyError(f"no output {key!r}; outputs: {self._names} or indices 0..{len(self) - 1}")

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"InferResults({dict(zip(self._names, self._arrays))!r})"


class Model:
    """An IR model of Parameter, Result and IsInf / IsFinite / IsNaN layers, run by fpclass."""

    def __init__(self, program: Program):
        self._program = program
        self.name = program.graph.name
        self.inputs = [Input(n.layer.name, tuple(next(iter(n.layer.outputs.values())).names),
                             n.element_type, n.shape) for n in program.parameters]
        self._input_keys: dict = {}
        for i, (inp, node) in enumerate(zip(self.inputs, program.parameters)):
            for key in (i, inp.name, *inp.names):
                self._input_keys.setdefault(key, node)
        self.outputs = [n.layer.name for n in program.results]
        self._output_aliases: dict[str, int] = {}
        for i, node in enumerate(program.results):
            self._output_aliases.setdefault(node.layer.name, i)
        for i, node in enumerate(program.results):
            producer = program.graph.layers[node.source[0]]
            names = producer.outputs[node.source[1]].names
            if program.graph.version == 10:  # v10 tensors are also known by their layer's name
                names = (*names, producer.name)
            for name in names:
                self._output_aliases.setdefault(name, i)
        self._needed = self._needed_layers()
        self._computed = {(n.layer.id, *n.layer.outputs) for n in program.nodes
                          if n.kind.evaluate is not None}

    def _needed_layers(self) -> set[int]:
        by_id = {n.layer.id: n for n in self._program.nodes}
        needed, todo = set(), [n.layer.id for n in self._program.results]
        while todo:
            lid = todo.pop()
            if lid not in needed:
                needed.add(lid)
                if by_id[lid].source is not None:
                    todo.append(by_id[lid].source[0])
        return needed

    def _bind(self, inputs) -> dict[int, np.ndarray]:
        if not isinstance(inputs, Mapping):
            if isinstance(inputs, np.ndarray) or not hasattr(inputs, "__len__"):
                inputs = [inputs]
            inputs = dict(enumerate(inputs))
        bound: dict[int, np.ndarray] = {}
        for key, value in inputs.items():
            node = self._input_keys.get(key) if isinstance(key, (int, str)) else None
            if node is None:
                accepted = [k for k in self._input_keys]
                raise InputError(f"no model input {key!r}; accepted: {accepted}")
            if node.layer.id in bound:
                raise InputError(f"input {node.layer.name!r} is given twice (as {key!r})")
            bound[node.layer.id] = _check_input(node, value)
        missing = [n.layer.name for n in self._program.parameters
                   if n.layer.id not in bound and n.layer.id in self._needed]
        if missing:
            raise InputError(f"missing value for input(s) {missing}")
        return bound

    def infer(self, inputs=None) -> InferResults:
        """Run the model: `inputs` maps Parameter index, name or tensor name to an array (a list
        in Parameter order is accepted too). Returns the outputs by Result name and index."""
        values: dict[tuple[int, int], np.ndarray] = {}
        for lid, array in self._bind({} if inputs is None else inputs).items():
            values[(lid, *self._program.graph.layers[lid].outputs)] = array
        for node in self._program.nodes:
            if node.kind.evaluate is None or node.layer.id not in self._needed:
                continue
            x = values[node.source]
            # OpenVINO's output tensors are dense C-order. For C-order x, no out=: fpclass then
            # answers a large mask from recycled memory (a fresh 64 MiB one would spend a third
            # of the call in page faults, measured); other layouts get a C-order out=.
            out = None if x.flags.c_contiguous else np.empty(x.shape, bool)
            y = np.asarray(node.kind.evaluate(x, out, node.options))  # 0-d x: a NumPy scalar
            values[(node.layer.id, *node.layer.outputs)] = y
        results, handed_out = [], set(values) - self._computed
        for node in self._program.results:
            # every Result owns its array, as OpenVINO's output tensors do
            array = values[node.source]
            results.append(np.array(array, copy=True) if node.source in handed_out else array)
            handed_out.add(node.source)
        return InferResults(results, self.outputs, self._output_aliases)

    def __call__(self, inputs=None) -> InferResults:
        return self.infer(inputs)

    def to_xml(self) -> str:
        """This model as IR v11 XML text that OpenVINO's `Core().read_model` loads."""
        from .writer import to_xml
        return to_xml(self._program)

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.element_type}[{i.shape}]" for i in self.inputs)
        return f"<fpclass.openvino.Model {self.name!r} ({ins}) -> {self.outputs}>"


def _check_input(node: Node, value) -> np.ndarray:
    expected = node.element_type.dtype
    where = f"input {node.layer.name!r} ({node.element_type.name}[{node.shape}])"
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.newbyteorder("=") != expected:
            hint = (" (it must be a floating point number)" if array.dtype.kind in "biuUSOV"
                    else "")
            raise InputError(f"{where}: got dtype {array.dtype}{hint}; expected {expected} "
                             f"(any byte order)")
    else:
        try:
            array = np.asarray(value, dtype=expected)
        except (TypeError, ValueError) as e:
            raise InputError(f"{where}: cannot convert {type(value).__name__} to {expected}: {e}") \
                from None
    if not node.shape.accepts(array.shape):
        raise InputError(f"{where}: got shape {list(array.shape)}, which the Parameter's partial "
                         f"shape {str(node.shape)!r} does not allow")
    return array
