"""The official ONNX backend conformance suite (onnx.backend.test) run through fpclass.onnx.Backend.

Every node test shipped with the installed onnx runs, IsNaN / IsInf ones included (on fpclass), the
rest through onnx's ReferenceEvaluator; plus the small "simple" and PyTorch model suites. Only CPU
variants are collected (fpclass has no other device). Each exclusion below carries its reason; all
of them fail the same way with onnx's ReferenceEvaluator alone, without fpclass.
"""

import re
import warnings

import pytest

onnx_backend_test = pytest.importorskip("onnx.backend.test")
import fpclass.onnx  # noqa: E402

# onnx's pure-numpy operators (Softmax, Log, Div, ...) warn on the infinities and NaNs that the
# conformance data feeds them on purpose; only warnings raised inside onnx.reference are silenced.
# The reference MaxPool pads uint8 input with -inf through numpy.pad, which warns on that cast.
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning:onnx.reference"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning:numpy.lib._arraypad_impl"),
]

# Only the CPU variant of each test: fpclass.onnx.Backend.supports_device("CUDA") is False.
INCLUDE = [r"_cpu$"]

EXCLUDE = {
    # Real ONNX model zoo networks: ~35 s of convolutions in the pure-numpy ReferenceEvaluator, no
    # IsNaN/IsInf among them, and two (densenet121, squeezenet) miss its tolerance.
    r"^test_(bvlc_alexnet|densenet121|inception_v1|inception_v2|resnet50|shufflenet|squeezenet|vgg19|zfnet512)_":
        "slow real models, not about IsNaN/IsInf",
    # Random output: Bernoulli draws with numpy's generator, not the one the expected data came from.
    r"^test_bernoulli": "random output",
    # The reference ImageDecoder needs Pillow, which is not a dependency of fpclass.
    r"^test_image_decoder_": "needs Pillow",
    # ReferenceEvaluator gaps with optional / sequence values and Loop-expanded functions.
    r"^test_if_opt_": "ReferenceEvaluator: optional output of If",
    r"^test_loop16_seq_none_": "ReferenceEvaluator: None in a sequence Loop state",
    r"^test_scan_sum_": "ReferenceEvaluator: Scan-8 with a batch axis",
    r"^test_range_.*_expanded_": "ReferenceEvaluator: Range's Loop-based function body",
    # Scatter (deprecated since opset 11) has no ReferenceEvaluator implementation.
    r"^test_scatter_(with|without)_axis_": "ReferenceEvaluator: no Scatter",
    # The Gradient operator (ai.onnx.preview.training) has no ReferenceEvaluator implementation.
    r"^test_gradient_of_": "ReferenceEvaluator: no Gradient",
}

# Building the suite imports onnx's test-case generators, which compute their expected values with
# numpy on purpose-made overflows and warn while doing so; that is onnx's code, not under test.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _backend_test = onnx_backend_test.BackendTest(fpclass.onnx.Backend, __name__)
for _pattern in INCLUDE:
    _backend_test.include(_pattern)
for _pattern in EXCLUDE:
    _backend_test.exclude(_pattern)

_cases = _backend_test.test_cases
for _case in _cases.values():
    # Tests that match no include pattern would show up as thousands of skips: leave them out.
    for _name in [n for n in vars(_case) if n.startswith("test_")]:
        if not any(re.search(p, _name) for p in INCLUDE):
            delattr(_case, _name)
globals().update(_cases)


def test_every_isnan_isinf_node_test_is_collected():
    """Every IsNaN / IsInf node test of the installed onnx runs here, none excluded."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shipped = {t.name for t in load_model_tests(kind="node")
                   if t.model is not None and any(n.op_type in ("IsNaN", "IsInf") for n in t.model.graph.node)}
    collected = {n[: -len("_cpu")] for n in vars(_cases["OnnxBackendNodeModelTest"]) if n.startswith("test_")}
    excluded = {n for n in shipped if any(re.search(p, n + "_cpu") for p in EXCLUDE)}
    assert {"test_isnan", "test_isinf"} <= shipped
    assert shipped <= collected
    assert not excluded
