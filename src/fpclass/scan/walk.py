"""From the paths a user names to the files to scan: directories recursively, symlink loops and
unreadable entries reported as problems, unknown files skipped inside directories only."""

from __future__ import annotations

import os
import stat

from .detect import ACCEPTED, detect


def expand(paths) -> tuple[list, list]:
    """([(path, kind)], [(path, reason)]) for `paths`. A file named directly must be of a known
    kind; inside directories, files of unknown kind are skipped silently."""
    found: list = []
    problems: list = []
    for path in paths:
        path = os.fspath(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            problems.append((path, "no such file or directory" if not os.path.islink(path)
                             else "broken symbolic link"))
            continue
        except OSError as e:
            problems.append((path, _oserror(e)))
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk(path, found, problems, {(st.st_dev, st.st_ino)})
        elif stat.S_ISREG(st.st_mode):
            _file(path, found, problems, named=True)
        else:
            problems.append((path, "not a regular file or directory"))
    return found, problems


def _walk(directory, found, problems, ancestors):
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as e:
        problems.append((directory, _oserror(e)))
        return
    for entry in entries:
        try:
            st = os.stat(entry.path)
        except FileNotFoundError:
            problems.append((entry.path, "broken symbolic link"))
            continue
        except OSError as e:
            problems.append((entry.path, _oserror(e)))
            continue
        if stat.S_ISDIR(st.st_mode):
            ident = (st.st_dev, st.st_ino)
            if ident in ancestors:
                problems.append((entry.path, "symbolic link loop (directory already being "
                                 "scanned); not followed"))
                continue
            _walk(entry.path, found, problems, ancestors | {ident})
        elif stat.S_ISREG(st.st_mode):
            _file(entry.path, found, problems, named=False)


def _file(path, found, problems, named):
    try:
        kind = detect(path)
    except OSError as e:
        problems.append((path, _oserror(e)))
        return
    if kind is not None:
        found.append((path, kind))
    elif named:
        problems.append((path, f"unrecognized file format; accepted: {ACCEPTED}"))


def _oserror(e: OSError) -> str:
    return f"cannot read: {e.strerror or e}"
