"""The nodes of a zarr store and their attributes: every folder holding zarr metadata at any
depth, found without zarr's own listing (which warns about, or fails on, every other entry, and
stops at a folder without group metadata), and the float values of each node's attributes."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from .reporting import values_task

#: Files that make a directory (or a zip folder) a zarr array or group.
MARKERS = (".zarray", ".zgroup", "zarr.json")


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
        if os.path.isdir(path):
            self.nodes = self._directory(path)
            return
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        nodes = set()
        for name in names:
            node, _, base = name.rpartition("/")
            if base in MARKERS:
                nodes.add(node)
        self.nodes = sorted(nodes)

    def _directory(self, root: str) -> list:
        nodes, seen = [], {os.path.realpath(root)}
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
                    continue
                name = f"{prefix}/{entry.name}" if prefix else entry.name
                real = os.path.realpath(entry.path)
                if real in seen:
                    self.loops.append((name, "a folder already read through another path "
                                       "(symbolic link): not read twice"))
                    continue
                seen.add(real)
                stack.append(name)
        return sorted(nodes)


def stored_files(path: str, node: str) -> int:
    """How many files the store at `path` holds below node `node` (its chunks, metadata
    included): a directory walk without following links, or the zip's names."""
    if os.path.isdir(path):
        folder = os.path.join(path, *node.split("/")) if node else path
        return sum(len(files) for _, _, files in os.walk(folder))
    prefix = f"{node}/" if node else ""
    with zipfile.ZipFile(path) as z:
        return sum(1 for n in z.namelist() if n.startswith(prefix))
