"""NetCDF classic files: CDF-1 (classic), CDF-2 (64-bit offset) and CDF-5 (64-bit data), read
without a library.

Layout (big-endian; docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html):
magic "CDF" + version, numrecs, then the lists of dimensions, global attributes and variables
(name, dimension ids, attributes, type, vsize, begin). A non-record variable's values are
contiguous at `begin`. Record variables (first dimension the unlimited one) are interleaved:
record r holds every record variable's slab, in variable order, at begin_rec + r * recsize; each
slab is padded to 4 bytes unless there is a single record variable. The header's vsize is not
trusted (netCDF-C recomputes it from the shape too).

Every count and length of the header is checked against the bytes left in the file before it is
used, so a hostile header is refused after a few reads.

CF attributes (scan/missing/cf.py) make a variable's values those netCDF4 returns: packed
variables are read in bands of rows (storage.bands) and decoded by `decode_bands`; float attributes
are checked as "variable@attribute" ("@attribute" for the file's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import ReaderError
from .bounds import Ranges
from .reporting import float_task, marker, not_applicable, unchecked, values_task
from ..missing import cf
from ..storage.bands import Bands
from ..storage.ranges import Range
from ..storage.strided import Strided
from ..tasks import Task, problem
from ..storage.reads import file_size, open_binary

NC_DIMENSION, NC_VARIABLE, NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
#: nc_type -> (name, bytes per value, NumPy element of the floats or None).
TYPES = {1: ("byte", 1, None), 2: ("char", 1, None), 3: ("short", 2, None), 4: ("int", 4, None),
         5: ("float", 4, ">f4"), 6: ("double", 8, ">f8"),
         7: ("ubyte", 1, None), 8: ("ushort", 2, None), 9: ("uint", 4, None),
         10: ("int64", 8, None), 11: ("uint64", 8, None)}
#: CDF-1 and CDF-2 know only the first six types.
CLASSIC_TYPES = range(1, 7)
#: nc_type -> NumPy dtype of its stored values (char: bytes).
DTYPES = {1: ">i1", 2: "S1", 3: ">i2", 4: ">i4", 5: ">f4", 6: ">f8", 7: ">u1", 8: ">u2",
          9: ">u4", 10: ">i8", 11: ">u8"}
STREAMING = {4: 0xFFFFFFFF, 8: 0xFFFFFFFFFFFFFFFF}
#: Most attributes one header may declare: each costs about 4 us to parse, so a 64 MB header of
#: three million tiny ones took 11-13 s; real files declare hundreds.
MAX_ATTRIBUTES = 250_000


@dataclass
class Variable:
    name: str
    dimids: tuple
    nc_type: int
    begin: int
    attrs: dict     # its CF and float attributes: name -> values (CF text as str)


class _Header:
    """Reads a header front to back, every read checked against the file's size."""

    def __init__(self, f, size: int, version: int):
        self.f, self.size, self.pos = f, size, 0
        self.wide = 8 if version == 5 else 4     # NON_NEG counts and lengths
        self.offset = 4 if version == 1 else 8   # `begin`
        self.version = version
        self.floats = self.dropped = 0  # float attributes kept, and beyond the limit
        self.attributes_declared = 0

    def take(self, n: int, what: str) -> bytes:
        if n > self.size - self.pos:
            raise ReaderError(f"{what} at byte {self.pos} needs {n} bytes, the file ends at "
                              f"{self.size} (truncated or not NetCDF)")
        data = self.f.read(n)
        if len(data) != n:
            raise ReaderError(f"{what} at byte {self.pos}: the file ended early while read")
        self.pos += n
        return data

    def int(self, width: int, what: str) -> int:
        return int.from_bytes(self.take(width, what), "big", signed=False)

    def count(self, what: str, least: int) -> int:
        """A NON_NEG count of items taking at least `least` bytes each, refused when they
        cannot fit in the rest of the file."""
        n = self.int(self.wide, what)
        if self.wide == 4 and n >= 1 << 31:
            raise ReaderError(f"{what} {n} is negative as a signed 32-bit count")
        if n * least > self.size - self.pos:
            raise ReaderError(f"{what} {n} at byte {self.pos - self.wide} cannot fit in the "
                              f"{self.size - self.pos} bytes left in the file")
        return n

    def name(self, what: str) -> str:
        n = self.count(f"{what} name length", 1)
        if n == 0:
            raise ReaderError(f"{what} at byte {self.pos} has an empty name")
        raw = self.take(n + (-n) % 4, f"{what} name")[:n]
        # netCDF-C reads names as C strings: a NUL inside the counted bytes ends the name.
        raw = raw.split(b"\0", 1)[0]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ReaderError(f"{what} name {raw!r} at byte {self.pos - n - (-n) % 4} is not "
                              "UTF-8, as NetCDF names are") from None

    def list_tag(self, expected: int, what: str) -> int:
        """The item count of a list (0 for ABSENT)."""
        tag = self.int(4, f"{what} list tag")
        if tag not in (0, expected):
            raise ReaderError(f"{what} list at byte {self.pos - 4} has tag {tag:#x}, expected "
                              f"{expected:#x} or 0 (absent)")
        least = {NC_DIMENSION: 8, NC_ATTRIBUTE: 12, NC_VARIABLE: 24}[expected]
        n = self.count(f"{what} count", least)
        if tag == 0 and n:
            raise ReaderError(f"{what} list at byte {self.pos} is absent but counts {n} items")
        return n

    def attributes(self, what: str) -> dict:
        """Reads an attribute list: {name: values} of its CF attributes (char attributes as
        text) and of its float attributes, the first cf.ATTRIBUTE_LIMIT of the file (`dropped`
        counts the others); a name given twice keeps its last values."""
        attrs = {}
        count = self.list_tag(NC_ATTRIBUTE, f"{what} attribute")
        self.attributes_declared += count
        if self.attributes_declared > MAX_ATTRIBUTES:
            raise ReaderError(f"the header declares more than {MAX_ATTRIBUTES} attributes, over "
                              "the limit")
        for _ in range(count):
            name = self.name(f"{what} attribute")
            nc_type = self.nc_type(f"{what} attribute {name!r}")
            size = TYPES[nc_type][1]
            n = self.count(f"{what} attribute {name!r} value count", size)
            raw = self.take(n * size + (-(n * size)) % 4, f"{what} attribute {name!r} values")
            is_float = nc_type in (5, 6)
            if is_float and name not in attrs:
                if self.floats >= cf.ATTRIBUTE_LIMIT:
                    self.dropped += 1
                    continue
                self.floats += 1
            if nc_type == 2 and name in cf.RESERVED:
                attrs[name] = raw[:n].split(b"\0", 1)[0].decode("utf-8", "replace")
            elif is_float or (nc_type != 2 and name in cf.RESERVED):
                attrs[name] = np.frombuffer(raw[:n * size], DTYPES[nc_type])
        return attrs

    def nc_type(self, what: str) -> int:
        t = self.int(4, f"{what} type")
        if t not in TYPES or (self.version != 5 and t not in CLASSIC_TYPES):
            raise ReaderError(f"{what} has type {t}, not a NetCDF CDF-{self.version} type")
        return t


def read_header(path: str) -> tuple:
    """(version, numrecs or None when streaming, [(dim name, length)], [Variable], file size,
    header end, global attributes, float attributes beyond cf.ATTRIBUTE_LIMIT); ReaderError for
    a malformed header."""
    with open_binary(path) as f:
        size = file_size(f)
        magic = f.read(4)
        if len(magic) < 4 or magic[:3] != b"CDF" or magic[3] not in (1, 2, 5):
            raise ReaderError(f"not a NetCDF classic file: magic {magic!r}, expected CDF\\x01, "
                              "CDF\\x02 or CDF\\x05")
        h = _Header(f, size, magic[3])
        h.pos = 4
        numrecs = h.int(h.wide, "numrecs")
        if numrecs == STREAMING[h.wide]:
            numrecs = None
        elif h.wide == 4 and numrecs >= 1 << 31:
            raise ReaderError(f"numrecs {numrecs} is negative as a signed 32-bit count")
        dims = []
        for _ in range(h.list_tag(NC_DIMENSION, "dimension")):
            name = h.name("dimension")
            dims.append((name, h.int(h.wide, f"dimension {name!r} length")))
        globals_ = h.attributes("global")
        variables = []
        for _ in range(h.list_tag(NC_VARIABLE, "variable")):
            name = h.name("variable")
            ndims = h.count(f"variable {name!r} dimension count", h.wide)
            dimids = tuple(h.int(h.wide, f"variable {name!r} dimension id")
                           for _ in range(ndims))
            attrs = h.attributes(f"variable {name!r}")
            nc_type = h.nc_type(f"variable {name!r}")
            h.int(h.wide, f"variable {name!r} vsize")  # recomputed from the shape
            begin = h.int(h.offset, f"variable {name!r} begin")
            if begin >= 1 << (8 * h.offset - 1):
                raise ReaderError(f"variable {name!r} begins at a negative offset "
                                  f"({begin - (1 << 8 * h.offset)}; netCDF refuses the file)")
            variables.append(Variable(name, dimids, nc_type, begin, attrs))
        return h.version, numrecs, dims, variables, size, h.pos, globals_, h.dropped


def _pad4(n: int) -> int:
    return n + (-n) % 4


def plan(path: str) -> list:
    """Tasks for every variable of a NetCDF classic / 64-bit offset / 64-bit data file."""
    version, numrecs, dims, variables, size, header_end, globals_, dropped = read_header(path)
    tasks = [marker(path, "netcdf3")]
    records = [i for i, (_, n) in enumerate(dims) if n == 0]
    if len(records) > 1:
        raise ReaderError(f"{len(records)} dimensions have length 0 (unlimited); a NetCDF "
                          "classic file has at most one")
    record_dim = records[0] if records else None
    # Per-record slab sizes, for the record size (netCDF-C's NC_computeshapes).
    shaped = []
    for v in variables:
        bad = [d for d in v.dimids if d >= len(dims)]
        if bad:
            shaped.append((v, None, f"dimension id {bad[0]} is not one of the file's "
                           f"{len(dims)} dimensions"))
        elif record_dim in v.dimids[1:]:
            shaped.append((v, None, "the unlimited dimension is not its first dimension"))
        else:
            shaped.append((v, tuple(dims[d][1] for d in v.dimids), ""))
    rec_vars = [(v, s) for v, s, why in shaped if not why and v.dimids[:1] == (record_dim,)
                and record_dim is not None]
    slabs = {v.name: math.prod(s[1:]) * TYPES[v.nc_type][1] for v, s in rec_vars}
    recsize = sum(_pad4(b) for b in slabs.values())
    if rec_vars and recsize == _pad4(slabs[rec_vars[0][0].name]):
        recsize = slabs[rec_vars[0][0].name]  # a single record variable is not padded
    begin_rec = min((v.begin for v, _ in rec_vars), default=size)
    if numrecs is None:  # streaming: as many whole records as the file holds
        numrecs = (size - begin_rec) // recsize if recsize and size > begin_rec else 0
    ranges = Ranges(size)
    for v, dshape, why in shaped:
        label, item, element = TYPES[v.nc_type]
        if why:
            tasks.append(unchecked(path, v.name, label, (), why))
            continue
        is_rec = record_dim is not None and v.dimids[:1] == (record_dim,)
        shape = ((numrecs,) + dshape[1:]) if is_rec else dshape
        task, rng = _variable(path, v, shape, is_rec, label, item, element, recsize, size,
                              header_end)
        tasks += cf.with_declared_range([task], v.attrs)
        if rng and not is_rec:
            ranges.add(v.name, *rng)
    if rec_vars and numrecs:
        ranges.add("(the record variables)", begin_rec, begin_rec + numrecs * recsize)
    for name, other in ranges.overlaps():
        tasks.append(problem(path, f"data of variable {name!r} overlaps {other!r}"))
    if dropped:
        tasks.append(problem(path, cf.too_many_attributes(dropped)))
    tasks += attribute_tasks(path, "", globals_)
    for v in variables:
        tasks += attribute_tasks(path, v.name, v.attrs)
    return tasks


def attribute_tasks(path: str, owner: str, attrs: dict) -> list:
    """Tasks for the floating-point attributes in `attrs` of variable `owner` ("" for the file),
    named "owner@attribute" (cf.attribute_values: a NaN fill value is not counted). Attributes
    of other types hold no float and are not listed."""
    tasks = []
    for name, values in attrs.items():
        if isinstance(values, np.ndarray) and values.dtype.kind == "f":
            task = values_task(path, f"{owner}@{name}", cf.attribute_values(name, values),
                               values.dtype.newbyteorder("=").name)
            tasks.append(replace(task, stats=False) if cf.blank_attribute(name, values) else task)
    return tasks


def _variable(path, v, shape, is_rec, label, item, element, recsize, size, header_end):
    """(task, (begin, end) of its bytes or None) for one variable."""
    n = math.prod(shape)
    if v.begin < header_end and n:
        return unchecked(path, v.name, label, shape, f"begin {v.begin} lies inside the header "
                         f"(which ends at byte {header_end})"), None
    if is_rec and n:
        slab = n // shape[0] * item
        end = v.begin + (shape[0] - 1) * recsize + slab
    else:
        end = v.begin + n * item
    if n and end > size:
        return unchecked(path, v.name, label, shape, f"data ends at byte {end}, past the end of "
                         f"the file ({size} bytes; truncated?)"), None
    decode, missing, why = cf.policy(v.attrs, DTYPES[v.nc_type]) if v.nc_type != 2 \
        else (None, False, "")
    if why:
        return unchecked(path, v.name, label, shape, why), (v.begin, end)
    if decode is not None:
        return _decoded(path, v, shape, is_rec, decode, recsize, n, item), (None if is_rec else
                                                                     (v.begin, end))
    if element is None:
        return not_applicable(path, v.name, label, shape), (v.begin, end)
    if not is_rec or not n or shape[0] == 1 or recsize == n // shape[0] * item:  # contiguous
        return float_task(path, v.name, label, shape, element, Range(path, v.begin, n * item),
                          missing=missing), (v.begin, end)
    inner = []
    step = 1
    for d in reversed(shape[1:]):
        inner.insert(0, step)
        step *= d
    if recsize % item == 0:
        view = Strided(path, v.begin, n * item, (recsize // item, *inner))
        return float_task(path, v.name, label, shape, element, view, missing=missing), None
    # The records are not a whole number of values apart: read in bands of whole records.
    return float_task(path, v.name, label, shape, element, Bands(path, v.begin, n * item, recsize),
                      missing=missing), None


def _decoded(path, v, shape, is_rec, decode, recsize, n, item) -> Task:
    """A task of the stored values in bands of rows, decoded by the CF policy `decode`."""
    stored = np.dtype(DTYPES[v.nc_type])
    physical = decode.physical
    label = (decode.label(stored.newbyteorder("=").name) if decode.packed
             else TYPES[v.nc_type][0])
    if physical.kind not in "fc":
        return not_applicable(path, v.name, label, shape, f"packed integers unpack to "
                              f"{physical.name}")
    inner, step = [], item
    for d in reversed(shape[1:]):
        inner.insert(0, step)
        step *= d
    row = recsize if is_rec else step  # bytes from one row of the first axis to the next
    return Task(path, v.name, label, shape, element=physical.str, grid=shape,
                storage=Bands(path, v.begin, n * item, row, decode.stored, "netcdf3", decode))


def decode_bands(task: Task, bands, chunk_bytes: int):
    """The bands of rows of a variable whose values are decoded by its CF policy (the Bands
    storage's `decode`), decoded."""
    yield from cf.decode_blocks(bands, task.storage.decode, chunk_bytes)


__all__ = ["decode_bands", "plan", "read_header"]
