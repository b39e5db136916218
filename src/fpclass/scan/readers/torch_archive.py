"""Where a PyTorch checkpoint keeps its pickles and storages, found as torch finds them.

Zip (torch.save, torch.jit.save): torch's reader (PyTorchStreamReader, over miniz) takes the
archive's folder from its first member's name, up to the first '/', and looks every record up in
that folder without regard to case. Each top-level `<name>.pkl` keeps its storages in `<name>/`:
`data.pkl` in `data/` (all torch.load reads), and a TorchScript archive's `constants.pkl` in
`constants/` (torch.jit.load reads both, and others such as `traced_inputs.pkl`).

Legacy (torch.save(_use_new_zipfile_serialization=False)): after the pickles, each storage of the
key list, in order, as an int64 element count then its bytes, read little-endian whatever the
file's `little_endian` flag says (torch reads them so).
"""

from __future__ import annotations

import struct
import zipfile
import zlib

from . import ReaderError
from .torch_pickle import ELEMENTS, INTEGERS


def element_bytes(dtype: str) -> int:
    """Bytes per element of a storage of torch dtype `dtype` ("": untyped, bytes)."""
    if dtype in ELEMENTS:
        return ELEMENTS[dtype][1]
    return INTEGERS.get(dtype, 1)


class ZipRecords:
    """The records of a torch zip archive: its folder and the members in it, by name as torch
    looks them up (case-insensitive)."""

    def __init__(self, infos: list):
        if not infos:
            raise ReaderError("the archive holds no member")
        first = infos[0].filename
        if "/" not in first:
            raise ReaderError(f"the archive's first member {first!r} is not in a folder (torch "
                              "takes the archive's folder from it)")
        self.prefix = first.split("/", 1)[0] + "/"
        self.by_name: dict = {}
        self.outside = []
        for info in infos:
            if info.filename.startswith(self.prefix):
                rel = info.filename[len(self.prefix):]
                self.by_name.setdefault(rel.lower(), []).append(info)
            else:
                self.outside.append(info.filename)

    def find(self, name: str):
        """(the member holding record `name`, "") or (None, why not): missing, or more than one
        member whose name differs from it only by case (which one torch reads depends on how
        miniz sorts them)."""
        found = self.by_name.get(name.lower(), [])
        if len(found) == 1:
            return found[0], ""
        if not found:
            return None, f"record {name} is missing from the archive"
        names = ", ".join(sorted({i.filename for i in found}))
        return None, f"record {name} is held by {len(found)} members ({names}): ambiguous"

    def pickles(self) -> list:
        """Names of the top-level pickles (`data.pkl` first), whatever the case of their names."""
        top = sorted(infos[0].filename[len(self.prefix):] for rel, infos in self.by_name.items()
                     if rel.endswith(".pkl") and "/" not in rel)
        return sorted(top, key=lambda n: n.lower() != "data.pkl")

    def torchscript(self) -> bool:
        """Whether torch takes the archive for TorchScript: a member named exactly
        `constants.pkl` in the folder (torch.load then hands it to torch.jit.load, which reads
        every pickle; otherwise it reads data.pkl alone)."""
        return any(i.filename == self.prefix + "constants.pkl"
                   for i in self.by_name.get("constants.pkl", []))

    def members(self) -> list:
        """Every member in the folder (relative name, info)."""
        return [(i.filename[len(self.prefix):], i) for infos in self.by_name.values()
                for i in infos]


def byte_order(z: zipfile.ZipFile, records: ZipRecords) -> str:
    """"<" or ">" as the `byteorder` record says (torch accepts exactly b"little" or b"big");
    little-endian when there is none, as torch reads it."""
    info, why = records.find("byteorder")
    if info is None:
        if "ambiguous" in why:
            raise ReaderError(why)
        return "<"
    try:
        text = z.read(info)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, zlib.error) as e:
        raise ReaderError(f"byteorder record cannot be read: {e}") from None
    if text not in (b"little", b"big"):
        raise ReaderError(f"byteorder record says {text[:20]!r}; b'little' or b'big' expected "
                          "(torch refuses the file)")
    return "<" if text == b"little" else ">"


def legacy_places(f, pos: int, size: int, keys: list, element: dict) -> dict:
    """{key: (byte offset, bytes)} of the legacy storages listed in `keys`, which
    start at byte `pos` of the open file `f` of `size` bytes: each an int64 count and its bytes.
    `element`: {key: (bytes per element, element count) as the pickle's first reference to
    the storage declares them}."""
    places = {}
    for key in keys:
        f.seek(pos)
        head = f.read(8)
        if len(head) < 8:
            raise ReaderError(f"legacy PyTorch checkpoint: storage {key} lies past the end of "
                              f"the file ({size} bytes; truncated?)")
        (numel,) = struct.unpack("<q", head)
        if key not in element:
            raise ReaderError(f"legacy PyTorch checkpoint: storage {key} is listed but the "
                              "pickle never refers to it (torch refuses the file)")
        item, declared = element[key]
        if numel != declared:
            raise ReaderError(f"legacy PyTorch checkpoint: storage {key} holds {numel} elements, "
                              f"its references say {declared} (torch refuses the file)")
        end = pos + 8 + numel * item
        if end > size:
            raise ReaderError(f"legacy PyTorch checkpoint: storage {key} ends at byte {end}, the "
                              f"file has {size} bytes (truncated?)")
        places[key] = (pos + 8, numel * item)
        pos = end
    return places


__all__ = ["ZipRecords", "byte_order", "element_bytes", "legacy_places"]
