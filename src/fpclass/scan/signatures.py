"""The first bytes of the formats fpclass reads: magic numbers and the few header tests that need
more than a prefix. Pure functions of a file's head, no imports: the reader registry declares
them, detect.py applies them, and the readers check their own headers with them again."""

from __future__ import annotations

import struct

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
IDL_COMPRESSED = b"SR\x00\x06"   # an IDL save file whose records are zlib-compressed
ZIP_MAGIC = b"PK\x03\x04"       # a zip's local file header (readers/zipmembers.py reads them)
NPY_MAGIC = b"\x93NUMPY"        # the .npy format's magic string (readers/npy.py checks it too)
GGUF_MAGIC = b"GGUF"
FITS_MAGIC = b"SIMPLE  ="       # a FITS primary header's first card
#: torch.save's legacy (pre-1.6) magic number, the file's first pickle (torch_checkpoint too).
TORCH_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
#: torch.save's legacy format starts with its magic number, pickled.
TORCH_LEGACY = b"\x80\x02\x8a\x0a" + TORCH_LEGACY_MAGIC.to_bytes(10, "little")
#: Compressed streams read through (readers/compressed.py), by magic number.
COMPRESSIONS = (
    (b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x1f\x9d", "compress"),
)
_BZIP2_LEVELS = [bytes([c]) for c in b"123456789"]
_PRINTABLE = bytes(range(0x20, 0x7F))


def is_torch_legacy(head: bytes, size: int = 0) -> bool:
    """Whether `head` starts like torch.save's legacy (pre-1.6) format: its pickled magic
    number."""
    return head.startswith(TORCH_LEGACY)


def is_safetensors(head: bytes, size: int) -> bool:
    """An 8-byte little-endian header length that fits the file, then the header's `{`."""
    return len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= size - 8


def is_fits(head: bytes, size: int = 0) -> bool:
    """A FITS primary header: it starts with `SIMPLE  =` and its first block (2880 bytes, 36
    cards) holds only printable ASCII: a header dump written as text lines (`.hdr`) has line ends,
    and is text, not FITS."""
    block = head[:2880]
    return block.startswith(FITS_MAGIC) and len(block) >= 80 and \
        not block.translate(None, _PRINTABLE)


def matlab5_order(head: bytes) -> str:
    """The byte order ("<" or ">") of a MATLAB v5 (v6, v7) file's header: 116 bytes of text,
    then at byte 124 version 0x0100 and the endian indicator "IM" or "MI"; "" for anything else
    (v7.3, version 0x0200, is HDF5 behind a 512-byte user block; v4 has no header)."""
    if 0 in head[:4]:
        return ""
    return {b"\x00\x01IM": "<", b"\x01\x00MI": ">"}.get(head[124:128], "")


def is_matlab5(head: bytes, size: int = 0) -> bool:
    """Version 0x0100 and the endian indicator "IM" or "MI" at byte 124, after a text header."""
    return bool(matlab5_order(head))


def compression(head: bytes) -> str:
    """The compression ("gzip", "bzip2", "xz", "compress") whose stream `head` starts, or ""."""
    for magic, what in COMPRESSIONS:
        if head.startswith(magic) and (what != "bzip2" or head[3:4] in _BZIP2_LEVELS):
            return what
    return ""


def is_compressed(head: bytes, size: int = 0) -> bool:
    """A gzip, bzip2, xz or compress (.Z) stream's magic number."""
    return bool(compression(head))


_TEXT_BYTES = bytes([7, 8, 9, 10, 11, 12, 13, 27, *range(0x20, 0x7F), *range(0x80, 0x100)])
_ASCII = bytes(range(0x80))


def is_text(head: bytes) -> bool:
    """UTF-8 without NUL bytes (a character cut at the end of `head` allowed), UTF-16 with a byte
    order mark, or 8-bit text (Latin-1, ...): no control byte but tab, line ends, form feed and
    escape, and at most a quarter of the bytes above 0x7F."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) and len(head) % 2 == 0:
        try:
            return "\0" not in head.decode("utf-16")
        except UnicodeDecodeError:
            return False
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as e:
        if e.start >= len(head) - 3 and e.reason == "unexpected end of data":
            return True
    # 8-bit text: no control bytes, and mostly ASCII (Latin-1 prose is; binary data is not)
    return not head.translate(None, _TEXT_BYTES) and \
        4 * len(head.translate(None, _ASCII)) <= len(head)


#: First lines of the pointer files version-control tools leave where a large file's content is
#: not fetched, and the command that fetches it. Git LFS pointers (https://git-lfs.com/spec/v1,
#: also what a Hugging Face clone without git-lfs holds, Xet-backed repositories included:
#: their git trees store LFS pointers), the spec's pre-release URL, and git-annex's unlocked
#: pointer files (a locked git-annex file is a symbolic link into .git/annex/objects).
_STANDINS = (
    (b"version https://git-lfs.github.com/spec/", "Git LFS pointer", "git lfs pull"),
    (b"version https://hawser.github.com/spec/", "Git LFS pointer", "git lfs pull"),
    (b"/annex/objects/", "git-annex pointer", "git annex get"),
)
#: A pointer is small (Git LFS: under 1024 bytes; git-annex: one line).
STANDIN_BYTES = 1024


def standin(head: bytes, size: int) -> tuple:
    """(what, command) when a file of `size` bytes starting with `head` is a version-control
    pointer standing for a file whose content is not here (Git LFS, git-annex), else ()."""
    if size > STANDIN_BYTES:
        return ()
    for prefix, what, command in _STANDINS:
        if head.startswith(prefix):
            return what, command
    return ()


def annex_link(target: str) -> bool:
    """Whether a symbolic link's `target` is git-annex's: a path into .git/annex/objects."""
    return "/annex/objects/" in target.replace("\\", "/")
