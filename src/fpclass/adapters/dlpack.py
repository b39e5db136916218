"""JAX arrays and any other DLPack producer, read in place through the DLPack capsule.

numpy.from_dlpack refuses bfloat16 and the float8 codes; this reads the DLTensor itself (ctypes,
DLPack 0.x and 1.x capsules) and views the memory with the ml_dtypes type. The capsule is never
marked consumed: it stays referenced by the view, and when both are gone the producer's own
capsule destructor releases the tensor. Memory off the host is refused, never copied.
JAX input gets JAX arrays back; other producers get NumPy.
"""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

from ..operators import queries
from . import arrays


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):          # DLManagedTensor, capsule "dltensor"
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):  # DLManagedTensorVersioned, "dltensor_versioned"
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                         ctypes.c_char_p]

#: DLDeviceType codes whose memory the host reads in place: CPU, CUDA and ROCm pinned host memory.
_HOST = {1, 3, 11}
_DEVICES = {2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
            11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu",
            16: "hexagon", 17: "maia", 18: "trn"}

#: (DLDataTypeCode, bits) -> NumPy dtype, for one lane.
_DTYPES = {(0, b): np.dtype(f"i{b // 8}") for b in (8, 16, 32, 64)}
_DTYPES.update({(1, b): np.dtype(f"u{b // 8}") for b in (8, 16, 32, 64)})
_DTYPES.update({(2, 16): np.dtype(np.float16), (2, 32): np.dtype(np.float32),
                (2, 64): np.dtype(np.float64), (4, 16): np.dtype(ml_dtypes.bfloat16),
                (5, 32): np.dtype(ml_dtypes.complex32), (5, 64): np.dtype(np.complex64),
                (5, 128): np.dtype(np.complex128), (6, 8): np.dtype(bool)})
_DTYPES.update({(code, 8): np.dtype(getattr(ml_dtypes, name)) for code, name in (
    (7, "float8_e3m4"), (8, "float8_e4m3"), (9, "float8_e4m3b11fnuz"), (10, "float8_e4m3fn"),
    (11, "float8_e4m3fnuz"), (12, "float8_e5m2"), (13, "float8_e5m2fnuz"),
    (14, "float8_e8m0fnu"))})
#: Sub-byte codes, packed in memory: neither format can be NaN or Inf.
_PACKED = {15: "float6_e2m3fn", 16: "float6_e3m2fn", 17: "float4_e2m1fn"}


class _Memory:
    """The array interface over a DLTensor's memory; holds the capsule (and so the tensor)."""

    def __init__(self, capsule, interface: dict):
        self.capsule = capsule
        self.__array_interface__ = interface


def view(x) -> arrays.View:
    """A read-only NumPy view of the DLPack producer `x`'s memory; TypeError for memory off the
    host, traced JAX values, and dtypes fpclass does not classify."""
    _refuse_traced(x)
    _refuse_jax(x)
    if _framework(x) in ("jax", "jaxlib") and str(getattr(x, "dtype", "")) in _JAX_SUB_BYTE_INT:
        # XLA exports no sub-byte integer through DLPack; integers hold no NaN or Inf, so there is
        # nothing to read (answered as for the packed float formats)
        return arrays.View(np.broadcast_to(np.zeros((), np.int8), x.shape), packed=str(x.dtype))
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"{_type_name(x)} exposes CUDA device memory (__cuda_array_interface__); "
                        "fpclass reads host memory and never copies from a device: copy it to "
                        "the host yourself (cupy: x.get()) or classify it on the device")
    device = getattr(x, "__dlpack_device__", None)
    if device is not None:
        _refuse_device(x, *device())
    try:
        capsule = x.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0 takes no max_version
        capsule = x.__dlpack__()
    name = _capsule_name(capsule)
    address = _capsule_pointer(capsule, name)
    if name == b"dltensor_versioned":
        managed = _ManagedVersioned.from_address(address)
        if managed.version.major != 1:
            raise TypeError(f"{_type_name(x)} exports DLPack {managed.version.major}."
                            f"{managed.version.minor}; fpclass reads DLPack 0.x and 1.x")
        tensor = managed.dl_tensor
    elif name == b"dltensor":
        tensor = _Managed.from_address(address).dl_tensor
    else:
        raise TypeError(f"{_type_name(x)}.__dlpack__() gave a capsule named {name!r}, "
                        "not 'dltensor' or 'dltensor_versioned'")
    _refuse_device(x, tensor.device.device_type, tensor.device.device_id)
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if code in _PACKED:
        # nothing to read: no value of these formats is NaN or Inf
        name = _PACKED[code] + (f"_x{lanes}" if lanes > 1 else "")
        blank = np.zeros((), getattr(ml_dtypes, _PACKED[code]))
        return arrays.View(np.broadcast_to(blank, shape), packed=name)
    dtype = _DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise TypeError(f"{_type_name(x)} holds DLPack dtype code {code}, {bits} bits, {lanes} "
                        "lanes, which fpclass does not classify")
    if 0 in shape:
        return arrays.View(np.empty(shape, dtype))
    strides = None if not tensor.strides else tuple(
        tensor.strides[i] * dtype.itemsize for i in range(tensor.ndim))
    # the array interface knows NumPy's own type strings only: ml_dtypes types are viewed after
    stored = dtype if dtype.type.__module__ == "numpy" else np.dtype(f"u{dtype.itemsize}")
    interface = {"shape": shape, "typestr": stored.str, "strides": strides, "version": 3,
                 "data": (tensor.data + tensor.byte_offset, True)}
    a = np.asarray(_Memory(capsule, interface))
    return arrays.View(a if stored is dtype else a.view(dtype))


def _refuse_traced(x) -> None:
    if any(c.__name__.endswith("Tracer") for c in type(x).__mro__):
        raise TypeError("fpclass reads concrete arrays; this is a value traced by jax.jit (or "
                        "vmap / grad), which holds no data yet. Call fpclass outside the "
                        "transformation, or use jnp.isnan / jnp.isfinite inside it")


#: JAX's sub-byte integer dtypes: no DLPack code, no NaN, no Inf.
_JAX_SUB_BYTE_INT = ("int2", "uint2", "int4", "uint4")


def _refuse_jax(x) -> None:
    """TypeError for the JAX arrays that hold no numbers to read: deleted (or donated) arrays and
    PRNG key arrays."""
    if _framework(x) not in ("jax", "jaxlib"):
        return
    deleted = getattr(x, "is_deleted", None)
    if callable(deleted) and deleted():
        raise TypeError("this JAX array has been deleted (x.delete(), or donated to a jitted "
                        "function): its memory is gone, there is nothing to classify")
    dtype = str(getattr(x, "dtype", ""))
    if dtype.startswith("key<"):
        raise TypeError(f"this is a JAX PRNG key array (dtype {dtype}): random-number generator "
                        "state, not numbers. fpclass classifies numeric arrays; "
                        "jax.random.key_data(key) gives the key's raw uint32 words")


def _refuse_device(x, device_type: int, device_id: int) -> None:
    if device_type in _HOST:
        return
    where = f"{_DEVICES.get(device_type, f'device type {device_type}')}:{device_id}"
    copy = "jax.device_get(x)" if _framework(x) in ("jax", "jaxlib") else \
        "x.get()" if _framework(x) == "cupy" else "your framework's copy to host memory"
    raise TypeError(f"fpclass reads host memory and never copies from a device: this array is on "
                    f"{where}. Copy it yourself with {copy}, or classify it on the device")


def _framework(x) -> str:
    return type(x).__module__.partition(".")[0]


def _type_name(x) -> str:
    return f"{type(x).__module__}.{type(x).__qualname__}"


def _container(x):
    """How answers go back to `x`'s framework: JAX arrays for JAX (0-d for a full reduction, as
    jnp.isnan(x).sum() gives), NumPy for the rest (a full reduction as fpclass answers NumPy)."""
    if _framework(x) in ("jax", "jaxlib"):
        import jax.numpy as jnp
        return jnp.asarray
    return lambda a: a if a.ndim else queries.scalar(a)


def _new_mask(wrap):
    def make(a: np.ndarray):
        mask = np.empty(a.shape, bool)
        return mask, lambda: wrap(mask)  # JAX arrays are immutable: a copy of the written mask
    return make


def dispatch(name: str, x, *args, **kwargs):
    """fpclass.`name` of the DLPack producer `x`: element-wise and per-axis answers as JAX arrays
    for JAX input (NumPy for other producers), the rest as for NumPy input."""
    wrap = _container(x)
    v = view(x)

    def as_out(out):
        if _framework(x) in ("jax", "jaxlib"):
            raise TypeError("out= is not supported for JAX arrays (they are immutable); use the "
                            "returned array")
        return arrays.check_out(out, v.array.shape), lambda: out

    return arrays.run(name, v, args, kwargs, new_mask=_new_mask(wrap), as_out=as_out,
                      per_axis=wrap)
