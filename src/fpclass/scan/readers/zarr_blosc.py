"""Blosc-compressed zarr chunks checked before numcodecs decodes them: a frame whose header does
not give its exact length is refused (numcodecs' blosc decoder trusts the header and reads past
the end of a truncated chunk, returning garbage: numcodecs#228)."""

from __future__ import annotations

import functools

import numpy as np

from . import ReaderError
from .zarr_nodes import MARKERS


def blosc_frames(md: dict) -> bool:
    """Whether each stored chunk is one blosc frame (blosc is the last codec, no sharding)."""
    if md.get("zarr_format") == 2:
        return (md.get("compressor") or {}).get("id") == "blosc"
    codecs = md.get("codecs") or ()
    return bool(codecs) and codecs[-1].get("name") in ("blosc", "numcodecs.blosc")


@functools.cache
def blosc_checked(zarr):
    """A store wrapper refusing, for the chunk keys under its `prefix` (None: no check), a
    blosc frame whose header does not give its exact length: numcodecs' blosc decoder trusts
    the header and reads past the end of a truncated chunk, returning garbage (numcodecs#228)."""

    class BloscChecked(zarr.storage.WrapperStore):
        prefix = None

        def _with_store(self, store):
            copy = type(self)(store)
            copy.prefix = self.prefix
            return copy

        async def get(self, key, prototype, byte_range=None):
            buf = await self._store.get(key, prototype, byte_range)
            if (buf is not None and byte_range is None and self.prefix is not None
                    and key.startswith(self.prefix) and key.rpartition("/")[2] not in MARKERS
                    and key.rpartition("/")[2] != ".zattrs"):
                check_blosc_frame(buf.as_numpy_array(), key[len(self.prefix):])
            return buf

    return BloscChecked


def check_blosc_frame(frame: np.ndarray, key: str) -> None:
    # The blosc header: version, versionlz, flags, typesize, then little-endian uint32s nbytes,
    # blocksize and cbytes, the frame's length header included.
    if frame.size < 16:
        raise ReaderError(f"chunk {key!r} holds {frame.size} bytes, less than a blosc header")
    cbytes = int(frame[12:16].view("<u4")[0])
    if cbytes != frame.size:
        raise ReaderError(f"chunk {key!r} holds {frame.size} bytes but its blosc header gives "
                          f"{cbytes} (truncated or corrupt)")
