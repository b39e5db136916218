"""The nodes of a zarr store and their attributes: every folder holding zarr metadata at any
depth, found without zarr's own listing (which warns about, or fails on, every other entry, and
stops at a folder without group metadata), and the float values of each node's attributes."""

from __future__ import annotations

import os
import re
import zipfile

import numpy as np

from .reporting import values_task
from ..signatures import is_text
from ..storage.reads import is_url, open_binary, zip_file

#: Files that make a directory (or a zip folder) a zarr array or group.
MARKERS = (".zarray", ".zgroup", "zarr.json")
#: zarr's own files beside them: attributes (v2) and consolidated metadata.
METADATA = set(MARKERS) | {".zattrs", ".zmetadata"}
#: A chunk's (or shard's) key below its array: v2's "0.1" or "0/1", v3's "c/0/1" or "c.0.1",
#: "0" or "c" for a 0-d array.
CHUNK_KEY = re.compile(r"(c|\d+)([./]\d+)*")
#: Files known to hold no tensors that tools leave in any folder.
TENSOR_FREE = {".DS_Store", "Thumbs.db"}


def attribute_tasks(path: str, node: str, attributes: dict) -> list:
    """A values task ("node@attribute") for each attribute holding floats (JSON's NaN, Infinity
    and -Infinity among them, as zarr parses them), at any depth of lists and objects: its float
    values in document order. Attributes without floats (text, integers, booleans, null) hold no
    float data and give no task."""
    tasks = []
    for key, value in attributes.items():
        floats, stack = [], [value]
        while stack:  # no recursion: nesting is as deep as the JSON
            item = stack.pop()
            if isinstance(item, float):
                floats.append(item)
            elif isinstance(item, dict):
                stack.extend(reversed(list(item.values())))
            elif isinstance(item, (list, tuple)):
                stack.extend(reversed(item))
        if floats:
            tasks.append(values_task(path, f"{node}@{key}", np.array(floats, np.float64)))
    return tasks


class Listing:
    """Every node (a folder holding zarr metadata) of a store, at any depth, in sorted order,
    from the directory tree (an explicit stack, symbolic links followed once) or the zip's names:
    folders without metadata (v2 stores written without .zgroup) are looked through."""

    def __init__(self, path: str):
        self.loops: list = []
        self.files: list = []   # every file of the store, by its path inside it
        if is_url(path):
            self.nodes = self._remote(path)
            return
        if os.path.isdir(path):
            self.nodes = self._directory(path)
            return
        with zip_file(path) as z:
            names = z.namelist()
        self.files = [n for n in names if not n.endswith("/")]
        nodes = set()
        for name in names:
            node, _, base = name.rpartition("/")
            if base in MARKERS:
                nodes.add(node)
        self.nodes = sorted(nodes)

    def _remote(self, root: str) -> list:
        from ..storage import remote
        base = root.rstrip("/") + "/"
        # listed as a folder (a trailing /: an HTTP folder is a page of links)
        self.files = [u[len(base):] for u, _ in remote.listing(base) or ()
                      if u.startswith(base)]
        return sorted({f.rpartition("/")[0] for f in self.files
                       if f.rpartition("/")[2] in MARKERS})

    def _directory(self, root: str) -> list:
        nodes, seen = [], {_identity(root)}
        stack = [""]
        while stack:
            prefix = stack.pop()
            folder = os.path.join(root, *prefix.split("/")) if prefix else root
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                self.loops.append((prefix, f"cannot list this folder: {e.strerror or e}"))
                continue
            if any(e.name in MARKERS and e.is_file() for e in entries):
                nodes.append(prefix)
            for entry in reversed(entries):
                if not entry.is_dir():
                    self.files.append(f"{prefix}/{entry.name}" if prefix else entry.name)
                    continue
                name = f"{prefix}/{entry.name}" if prefix else entry.name
                try:
                    real = _identity(entry.path)
                except OSError:  # a broken link: zarr cannot read below it either
                    real = os.path.realpath(entry.path)
                if real in seen:
                    self.loops.append((name, "a folder already read through another path "
                                       "(symbolic link): not read twice"))
                    continue
                seen.add(real)
                stack.append(name)
        return sorted(nodes)


def _identity(folder: str) -> tuple:
    """The folder `folder` resolves to, as one stat (not realpath's one per path component)."""
    st = os.stat(folder)
    return st.st_dev, st.st_ino


def strays(files, nodes, arrays, covered, head) -> list:
    """The files of a store that are neither zarr metadata of a node nor a chunk of an array
    (`arrays`: the nodes that are arrays), nor text (`head(name)`: its first bytes) or a kind
    known to hold no tensors: what zarr never reads, so the scan must say it did not either.
    Files below a node in `covered` (reported unchecked already) are left out."""
    nodes = set(nodes)
    out = []
    for name in files:
        parts = name.split("/")
        if parts[-1] in TENSOR_FREE:
            continue
        if "/".join(parts[:-1]) in nodes and parts[-1] in METADATA:
            continue
        for k in range(len(parts) - 1, -1, -1):  # the deepest node holding the file
            node = "/".join(parts[:k])
            if node in nodes:
                chunk = node in arrays and CHUNK_KEY.fullmatch("/".join(parts[k:]))
                if not chunk and node not in covered and not is_text(head(name)):
                    out.append(name)
                break
        else:
            if not is_text(head(name)):
                out.append(name)
    return out


def head_reader(path: str):
    """head(name): the first 8 KiB of file `name` of the store at `path` (a directory or a zip),
    b"\0" where it cannot be read (so it is never taken for text)."""
    def head(name: str) -> bytes:
        try:
            if is_url(path) or os.path.isdir(path):
                with open_binary(f"{path.rstrip('/')}/{name}") as f:
                    return f.read(8192) or b""
            with zip_file(path) as z, z.open(name) as f:
                return f.read(8192)
        except (OSError, zipfile.BadZipFile, KeyError, RuntimeError):
            return b"\0"
    return head


def stored_files(path: str, node: str) -> int:
    """How many files the store at `path` holds below node `node` (its chunks, metadata
    included): a directory walk without following links, or the zip's names."""
    if is_url(path):
        from ..storage import remote
        prefix = f"{path.rstrip('/')}/{node}/" if node else path.rstrip("/") + "/"
        folder = path.rstrip("/") + "/"
        return sum(1 for u, _ in remote.listing(folder) or () if u.startswith(prefix))
    if os.path.isdir(path):
        folder = os.path.join(path, *node.split("/")) if node else path
        return sum(len(files) for _, _, files in os.walk(folder))
    prefix = f"{node}/" if node else ""
    with zip_file(path) as z:
        return sum(1 for n in z.namelist() if n.startswith(prefix))
