"""From the paths a user names to what the scan does with each file: read it, report it as holding
tensors fpclass cannot read (or as a binary file of no known kind), or skip it with a reason.
Nothing is passed over unsaid, and no binary file is skipped unless its kind is known."""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field

from .._oserrors import describe
from .detect import ACCEPTED, UNRECOGNIZED, claims_by_name, identify
from .readers.registry import READERS, store_kind
from .remote_paths import expand_url
from .signatures import annex_link
from .storage.reads import SourceError
from .storage.source import is_url

#: Directories of version-control metadata: skipped whole (git-lfs keeps a second copy of every
#: weight file there).
VCS_DIRECTORIES = {".git", ".hg", ".svn"}


@dataclass
class Walk:
    """The files to read, as (path, kind), and the paths not read, each as (path, reason):
    `problems` could not be walked or opened, `unreadable` hold tensors in a format fpclass does
    not read or are binary files of no known kind, `skipped` hold no tensors (text, or a kind
    known by its magic number) or were filtered out."""

    found: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    unreadable: list = field(default_factory=list)
    skipped: list = field(default_factory=list)


def expand(paths, include=(), exclude=(), force_exclude: bool = False) -> Walk:
    """What to do with every file under `paths`. Directories are walked recursively, symlinks
    followed; `include` / `exclude` (fnmatch patterns, matched against a file's base name and its
    path below the named directory) filter what the walk finds. A file named directly is read
    whatever the patterns say, and must be of a kind fpclass reads (else a problem); with
    `force_exclude`, the patterns filter named paths too (matched against the base name, the path
    as given and each directory in it) and a named file that holds no tensors is skipped, as a
    walk skips it."""
    walk = Walk()
    include, exclude = tuple(include), tuple(exclude)
    for path in paths:
        path = os.fspath(path)
        if is_url(path):
            expand_url(walk, path, tuple(include), tuple(exclude), _file, VCS_DIRECTORIES)
            continue
        if force_exclude:
            filtered = _filtered(path, include, exclude)
            if filtered:
                walk.skipped.append((path, filtered))
                continue
        try:
            st = os.stat(path)
        except FileNotFoundError:
            walk.problems.append((path, "no such file or directory" if not os.path.islink(path)
                                  else _broken_link(path)))
            continue
        except OSError as e:
            walk.problems.append((path, _oserror(e)))
            continue
        if stat.S_ISDIR(st.st_mode):
            _Walker(walk, path, include, exclude).directory(path, {(st.st_dev, st.st_ino)})
        elif stat.S_ISREG(st.st_mode):
            _file(walk, path, named=not force_exclude)
        else:
            walk.problems.append((path, f"not a regular file or directory ({_kind(st)})"))
    return walk


def _filtered(path: str, include: tuple, exclude: tuple) -> str:
    """Why --force-exclude skips the named `path`: an --exclude pattern matching its base name,
    the path as given or any directory in it, or no --include pattern matching its name or path
    (a directory is walked, and its files filtered by --include there); "" to read it."""
    rel = os.path.normpath(path).replace(os.sep, "/")
    parts = [p for p in rel.split("/") if p not in ("", ".", "..")]
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in exclude:
        if any(fnmatch.fnmatchcase(x, pattern) for x in [rel, *parts, *prefixes]):
            return f"excluded by --exclude {pattern}"
    if include and not os.path.isdir(path) and not any(
            fnmatch.fnmatchcase(x, p) for p in include for x in (rel, parts[-1] if parts else rel)):
        return "not matched by --include"
    return ""


def _file(walk: Walk, path: str, named: bool) -> None:
    """Read it, report it as unreadable, or skip it; a file named directly is never skipped."""
    try:
        ident = identify(path)
    except OSError as e:
        walk.problems.append((path, _oserror(e)))
        return
    except SourceError as e:  # a remote file that cannot be read
        walk.problems.append((path, str(e)))
        return
    if ident.kind:
        walk.found.append((path, ident.kind))
    elif ident.claims:
        walk.unreadable.append((path, ident.claims if ident.standin
                                else _unreadable(ident.claims, path)))
    elif named:
        walk.problems.append((path, f"not a tensor file ({ident.skip}); accepted: {ACCEPTED}"))
    else:
        walk.skipped.append((path, ident.skip))


class _Walker:
    def __init__(self, walk: Walk, root: str, include: tuple, exclude: tuple):
        self.walk, self.root, self.include, self.exclude = walk, root, include, exclude

    def _matches(self, pattern: str, path: str, name: str) -> bool:
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)

    def _excluded(self, path: str, name: str) -> str:
        for pattern in self.exclude:
            if self._matches(pattern, path, name):
                return f"excluded by --exclude {pattern}"
        return ""

    def _not_included(self, path: str, name: str) -> bool:
        return bool(self.include) and not any(
            self._matches(p, path, name) for p in self.include)

    def directory(self, directory: str, ancestors: set) -> None:
        walk = self.walk
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as e:
            walk.problems.append((directory, _oserror(e)))
            return
        base = os.path.basename(os.path.normpath(directory))
        store = store_kind(base, {e.name for e in entries})
        if store:
            walk.found.append((directory, store))  # a store is read as one unit
            return
        for entry in entries:
            try:
                st = os.stat(entry.path)
            except FileNotFoundError:
                walk.problems.append((entry.path, _broken_link(entry.path)))
                continue
            except OSError as e:
                walk.problems.append((entry.path, _oserror(e)))
                continue
            excluded = self._excluded(entry.path, entry.name)
            if excluded:
                walk.skipped.append((entry.path, excluded))
            elif stat.S_ISDIR(st.st_mode):
                self._subdirectory(entry, st, ancestors)
            elif not stat.S_ISREG(st.st_mode):
                claimed = claims_by_name(entry.name)
                what = f"not a regular file ({_kind(st)})"
                if claimed:
                    walk.problems.append((entry.path, f"{what}, though named as a {claimed}"))
                else:
                    walk.skipped.append((entry.path, what))
            elif self._not_included(entry.path, entry.name):
                walk.skipped.append((entry.path, "not matched by --include"))
            else:
                _file(walk, entry.path, named=False)

    def _subdirectory(self, entry, st, ancestors) -> None:
        if entry.name in VCS_DIRECTORIES:
            self.walk.skipped.append((entry.path, "version-control metadata directory"))
            return
        ident = (st.st_dev, st.st_ino)
        if ident in ancestors:
            self.walk.problems.append((entry.path, "symbolic link loop (directory already being "
                                       "scanned); not followed"))
            return
        self.directory(entry.path, ancestors | {ident})


def _unreadable(claims: str, path: str) -> str:
    """The problem of a file no reader takes: what it claims to be, and what is read instead
    (for a name some reader takes on content, such as `.bin`, what that reader reads)."""
    if claims == UNRECOGNIZED:
        return f"{UNRECOGNIZED}: neither a format fpclass reads nor a kind known to hold no " \
               f"tensors, so not checked (read: {ACCEPTED})"
    lower = os.path.basename(path).lower()
    readers = [r for r in READERS if any(lower.endswith(n.lstrip("*").lower()) for n in
                                         r.extensions + r.known_names)]
    if readers:
        ext = os.path.splitext(lower)[1]
        read = "; or ".join(f"{r.format} ({r.detected or 'its magic number'})" for r in readers)
        return f"{claims}: its content is not one fpclass reads, so not checked (fpclass reads " \
               f"a {ext} file that is: {read})"
    return f"{claims}: holds tensors in a format fpclass does not read, so not checked " \
           f"(read: {ACCEPTED})"


def _broken_link(path: str) -> str:
    """Why a symbolic link leads nowhere: git-annex's links into .git/annex/objects point at
    content not fetched yet."""
    try:
        target = os.readlink(path)
    except OSError:
        target = ""
    if annex_link(target):
        return "git-annex link whose content is not here: it was never fetched (run " \
               "`git annex get`), so not checked"
    return "broken symbolic link"


def _kind(st) -> str:
    mode = st.st_mode
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def _oserror(e: OSError) -> str:
    return f"cannot read: {describe(e)}"
