"""The ONNX formats at the wire level: TensorProto data types (which can hold NaN or Inf, how
they are stored) and the message schema that protobuf checks when it parses a model."""

from __future__ import annotations

from .protobuf import (I32, I64, LEN, PACKED_FIXED32 as F32, PACKED_FIXED64 as F64,
                       PACKED_VARINT as INTS, VARINT as WIRE_VARINT)

#: ONNX data_type → (element dtype for the core, bits, typed field number); None: not a float.
FLOATS = {
    1: ("<f4", 32, 4), 10: ("<f2", 16, 5), 11: ("<f8", 64, 10), 14: ("<c8", 64, 4),
    15: ("<c16", 128, 10), 16: ("bfloat16", 16, 5), 17: ("float8_e4m3fn", 8, 5),
    18: ("float8_e4m3fnuz", 8, 5), 19: ("float8_e5m2", 8, 5), 20: ("float8_e5m2fnuz", 8, 5),
    23: ("float4_e2m1fn", 4, 5), 24: ("float8_e8m0fnu", 8, 5), 27: ("float6_e2m3fn", 6, 5),
    28: ("float6_e3m2fn", 6, 5),
}
#: ONNX data_type → (bits, typed field number) of the types that cannot hold NaN or Inf.
OTHERS = {2: (8, 5), 3: (8, 5), 4: (16, 5), 5: (16, 5), 6: (32, 5), 7: (64, 7), 9: (8, 5),
          12: (32, 11), 13: (64, 11), 21: (4, 5), 22: (4, 5), 25: (2, 5), 26: (2, 5)}
STRING = 8
NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
         8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
         14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN",
         18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
         23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2", 27: "FLOAT6E2M3",
         28: "FLOAT6E3M2"}
#: TensorProto typed fields by number; the fixed-size ones with their bytes per value (the others
#: are varints).
TYPED = {4: "float_data", 5: "int32_data", 6: "string_data", 7: "int64_data", 10: "double_data",
         11: "uint64_data"}
FIXED_SIZE = {4: 4, 10: 8}
#: The wire type of one value of each typed field; one of another wire type is an unknown field.
TYPED_WIRE = {4: I32, 5: WIRE_VARINT, 6: LEN, 7: WIRE_VARINT, 10: I64, 11: WIRE_VARINT}

#: The ONNX schema at the wire level, from onnx 1.23's onnx-ml.proto (a test compares it with
#: the installed onnx): each message's sub-message fields (by message name) and repeated scalar
#: fields (by how a packed run of them is encoded). protobuf rejects a model where any of these
#: fails to parse, so the walker checks them all, also where no tensor can be (value_info,
#: metadata, shardings).
SCHEMA = {
    "ModelProto": {7: "GraphProto", 8: "OperatorSetIdProto", 14: "StringStringEntryProto",
                   20: "TrainingInfoProto", 25: "FunctionProto", 26: "DeviceConfigurationProto"},
    "GraphProto": {1: "NodeProto", 5: "TensorProto", 15: "SparseTensorProto",
                   11: "ValueInfoProto", 12: "ValueInfoProto", 13: "ValueInfoProto",
                   14: "TensorAnnotation", 16: "StringStringEntryProto"},
    "NodeProto": {5: "AttributeProto", 9: "StringStringEntryProto",
                  10: "NodeDeviceConfigurationProto"},
    "AttributeProto": {5: "TensorProto", 6: "GraphProto", 22: "SparseTensorProto",
                       14: "TypeProto", 10: "TensorProto", 11: "GraphProto",
                       23: "SparseTensorProto", 15: "TypeProto", 7: F32, 8: INTS},
    "ValueInfoProto": {2: "TypeProto", 4: "StringStringEntryProto"},
    "IntIntListEntryProto": {2: INTS},
    "NodeDeviceConfigurationProto": {2: "ShardingSpecProto"},
    "ShardingSpecProto": {2: INTS, 3: "IntIntListEntryProto", 4: "ShardedDimProto"},
    "ShardedDimProto": {2: "SimpleShardedDimProto"},
    "SimpleShardedDimProto": {},
    "TrainingInfoProto": {1: "GraphProto", 2: "GraphProto", 3: "StringStringEntryProto",
                          4: "StringStringEntryProto"},
    "DeviceConfigurationProto": {},
    "StringStringEntryProto": {},
    "TensorAnnotation": {2: "StringStringEntryProto"},
    "TensorProto": {1: INTS, 3: "TensorProto.Segment", 4: F32, 5: INTS, 7: INTS, 10: F64,
                    11: INTS, 13: "StringStringEntryProto", 16: "StringStringEntryProto"},
    "TensorProto.Segment": {},
    "SparseTensorProto": {1: "TensorProto", 2: "TensorProto", 3: INTS},
    "TensorShapeProto": {1: "TensorShapeProto.Dimension"},
    "TensorShapeProto.Dimension": {},
    "TypeProto": {1: "TypeProto.Tensor", 4: "TypeProto.Sequence", 5: "TypeProto.Map",
                  9: "TypeProto.Optional", 8: "TypeProto.SparseTensor", 7: "TypeProto.Opaque"},
    "TypeProto.Tensor": {2: "TensorShapeProto"},
    "TypeProto.Sequence": {1: "TypeProto"},
    "TypeProto.Map": {2: "TypeProto"},
    "TypeProto.Optional": {1: "TypeProto"},
    "TypeProto.SparseTensor": {2: "TensorShapeProto"},
    "TypeProto.Opaque": {},
    "OperatorSetIdProto": {},
    "FunctionProto": {11: "AttributeProto", 7: "NodeProto", 9: "OperatorSetIdProto",
                      12: "ValueInfoProto", 14: "StringStringEntryProto"},
}
#: The wire types protobuf accepts for each TensorProto field (repeated scalars packed or not): a
#: file with any other field or wire type at its top level is no TensorProto (strict detection).
TENSOR_WIRES = {1: (WIRE_VARINT, LEN), 2: (WIRE_VARINT,), 3: (LEN,), 4: (I32, LEN),
                5: (WIRE_VARINT, LEN), 6: (LEN,), 7: (WIRE_VARINT, LEN), 8: (LEN,), 9: (LEN,),
                10: (I64, LEN), 11: (WIRE_VARINT, LEN), 12: (LEN,), 13: (LEN,),
                14: (WIRE_VARINT,), 16: (LEN,)}
