"""Spec dialects: each translates one runtime's operator interface into fpclass core calls.

- `onnx`: IsNaN-9/13/20 and IsInf-10/20 nodes, an onnx backend, ReferenceEvaluator ops.
- `openvino`: IR v10/v11 models with IsInf-10 / IsFinite-10 / IsNaN-10 layers.
- `directml`: DML_ELEMENT_WISE_IS_INFINITY / IS_NAN operator descriptors over raw buffers.

No dialect decides what a NaN is: they validate their spec's interface and call fpclass.
"""
