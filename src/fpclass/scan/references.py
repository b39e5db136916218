"""What a file's bytes should hash to, for `fpclass scan --verify`: the Hugging Face cache's blob
name, the Git LFS pointer staged for it in its git work tree, and SHA256SUMS-style files in its
directory or the directories above it up to the scanned path. Nothing found: no reference."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from .storage.source import is_url

#: Sums files larger than this are not read (a hostile or unrelated file).
MAX_SUMS_BYTES = 16 << 20
#: Names of sums files listing many files (compared case-insensitively).
SUMS_NAMES = ("sha256sums", "sha256sums.txt", "sha256sum.txt", "checksums.sha256",
              "sha256.txt", "checksums.txt")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_HEX40 = re.compile(r"[0-9a-f]{40}\Z")
_GNU_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)\Z")
_BSD_LINE = re.compile(r"SHA256 ?\((.+)\) ?= ?([0-9a-fA-F]{64})\Z")
_LFS_POINTER = re.compile(rb"version https://git-lfs\.github\.com/spec/v1\n"
                          rb"oid sha256:([0-9a-f]{64})\nsize (\d+)\n")
#: Git run so that nothing configured in a scanned repository executes (fsmonitor, hooks).
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


@dataclass(frozen=True, slots=True)
class Reference:
    """An expected digest of a file: `algorithm` "sha256" or "git-sha1" (a git blob id), the
    lower-case hex `digest`, and where it was found (`source`, said in messages)."""

    source: str
    algorithm: str
    digest: str


def find_references(files, roots) -> dict:
    """{path: [Reference, ...]} for each of `files` (paths as the scan names them) that has any;
    `roots` are the paths the scan was given (sums files are looked for up to them)."""
    files = [p for p in files if not is_url(p)]  # references are local files and git
    found: dict = {}
    for path in files:
        ref = hugging_face_blob(path)
        if ref is not None:
            found.setdefault(path, []).append(ref)
    for path, ref in lfs_pointers(files).items():
        found.setdefault(path, []).append(ref)
    sums = _SumsFiles()
    for path in files:
        for ref in sums.references(path, _root_of(path, roots)):
            found.setdefault(path, []).append(ref)
    return found


def hugging_face_blob(path: str) -> Reference | None:
    """The Hugging Face cache names each blob by its content: the SHA-256 of an LFS file, the
    git blob id of a small one (snapshots/<rev>/<name> links to blobs/<digest>)."""
    real = os.path.realpath(path)
    blobs, digest = os.path.split(real)
    repo = os.path.basename(os.path.dirname(blobs))
    if os.path.basename(blobs) != "blobs" or not repo.startswith(
            ("models--", "datasets--", "spaces--")):
        return None
    if _HEX64.match(digest):
        return Reference("the Hugging Face cache's blob name", "sha256", digest)
    if _HEX40.match(digest):
        return Reference("the Hugging Face cache's blob name (a git blob id)", "git-sha1",
                         digest)
    return None


def lfs_pointers(files) -> dict:
    """{path: Reference} for files whose git work tree stages a Git LFS pointer for them (the
    pointer's oid). Needs git; without it, or outside a work tree, none."""
    git = shutil.which("git")
    if git is None:
        return {}
    by_top: dict = {}
    for path in files:
        top = _work_tree(os.path.dirname(os.path.abspath(path)))
        if top is not None:
            by_top.setdefault(top, []).append(path)
    found = {}
    for top, paths in by_top.items():
        found.update(_staged_pointers(git, top, paths))
    return found


def _work_tree(directory: str) -> str | None:
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _run_git(git: str, top: str, args: list, data: bytes = b"") -> bytes | None:
    try:
        done = subprocess.run([git, *_GIT_SAFE, "-C", top, *args], input=data,
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _staged_pointers(git: str, top: str, paths: list) -> dict:
    rel = {os.path.relpath(os.path.abspath(p), top).replace(os.sep, "/"): p for p in paths}
    listing = _run_git(git, top, ["ls-files", "-s", "-z", "--", *rel])
    if not listing:
        return {}
    blobs = {}
    for entry in listing.split(b"\0"):
        head, _, name = entry.partition(b"\t")
        fields = head.split()
        if len(fields) == 3 and fields[2] == b"0":
            blobs[name.decode("utf-8", "surrogateescape")] = fields[1].decode()
    # Only small blobs can be pointers: ask for sizes first, then read those.
    checked = _run_git(git, top, ["cat-file", "--batch-check"],
                       "".join(f"{b}\n" for b in blobs.values()).encode()) or b""
    small = [line.split()[0].decode() for line in checked.splitlines()
             if len(line.split()) == 3 and line.split()[2].isdigit()
             and int(line.split()[2]) <= 1024]
    contents = _read_blobs(git, top, small)
    found = {}
    for name, blob in blobs.items():
        m = _LFS_POINTER.match(contents.get(blob, b""))
        if m and name in rel:
            found[rel[name]] = Reference("the Git LFS pointer staged in git", "sha256",
                                         m.group(1).decode())
    return found


def _read_blobs(git: str, top: str, blobs: list) -> dict:
    out = _run_git(git, top, ["cat-file", "--batch"], "".join(f"{b}\n" for b in blobs).encode())
    contents, pos = {}, 0
    while out and pos < len(out):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3:
            break
        size = int(header[2])
        contents[header[0].decode()] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return contents


def _root_of(path: str, roots) -> str:
    """The scanned path that `path` was found under (itself when it was named directly)."""
    absolute = os.path.abspath(path)
    for root in roots:
        r = os.path.abspath(root)
        if absolute == r or absolute.startswith(r.rstrip(os.sep) + os.sep):
            return r if os.path.isdir(r) else os.path.dirname(r)
    return os.path.dirname(absolute)


class _SumsFiles:
    """SHA256SUMS-style files, each parsed once: `<hex>  name` / `<hex> *name` (GNU) or
    `SHA256 (name) = <hex>` (BSD), names relative to the sums file; `<file>.sha256` holding one
    digest (and optionally the name) for <file>."""

    def __init__(self):
        self.parsed: dict = {}

    def references(self, path: str, root: str):
        absolute = os.path.abspath(path)
        single = absolute + ".sha256"
        if os.path.isfile(single):
            digest = self._single(single, os.path.basename(absolute))
            if digest:
                yield Reference(f"{single}", "sha256", digest)
        directory = os.path.dirname(absolute)
        while True:
            for sums in self._sums_in(directory):
                digest = self._table(sums).get(os.path.relpath(absolute, directory))
                if digest:
                    yield Reference(sums, "sha256", digest)
            if directory == root or os.path.dirname(directory) == directory \
                    or not directory.startswith(root):
                return
            directory = os.path.dirname(directory)

    def _sums_in(self, directory: str) -> list:
        key = ("dir", directory)
        if key not in self.parsed:
            try:
                names = os.listdir(directory)
            except OSError:
                names = []
            self.parsed[key] = sorted(os.path.join(directory, n) for n in names
                                      if n.lower() in SUMS_NAMES)
        return self.parsed[key]

    def _table(self, sums: str) -> dict:
        if sums not in self.parsed:
            table = {}
            for line in _lines(sums):
                m = _GNU_LINE.match(line)
                name, digest = (m.group(2), m.group(1)) if m else (None, None)
                if m is None:
                    b = _BSD_LINE.match(line)
                    name, digest = (b.group(1), b.group(2)) if b else (None, None)
                if name:
                    table[os.path.normpath(name.removeprefix("./"))] = digest.lower()
            self.parsed[sums] = table
        return self.parsed[sums]

    def _single(self, sums: str, name: str) -> str | None:
        for line in _lines(sums):
            digest, _, rest = line.partition(" ")
            if _HEX64.match(digest.lower()) and rest.strip(" *") in ("", name):
                return digest.lower()
        return None


def _lines(path: str) -> list:
    try:
        if os.path.getsize(path) > MAX_SUMS_BYTES:
            return []
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]
