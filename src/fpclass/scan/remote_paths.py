"""The walk of a URL (a remote file, folder or prefix): listed once through fsspec, then filtered
and sorted into files to read, unreadable and skipped files exactly as a local directory is."""

from __future__ import annotations

import fnmatch
import urllib.parse

from .readers.registry import store_kind
from .storage.errors import SourceError


def expand_url(walk, url: str, include: tuple, exclude: tuple, add_file, skip_folders) -> None:
    """Add what to do with every file at `url` to `walk` (a paths.Walk): `add_file(walk, url,
    named)` sorts one file; folders named in `skip_folders` are skipped whole."""
    from .storage import remote
    if urllib.parse.urlsplit(url).password is not None:
        walk.problems.append((_redacted(url), "a password in the URL is not accepted (reports "
                              "name files by URL); give credentials as storage options"))
        return
    try:
        entries = remote.listing(url)
    except FileNotFoundError:
        walk.problems.append((url, "no such file or directory"))
        return
    except (SourceError, OSError, ValueError) as e:
        walk.problems.append((url, str(e) if isinstance(e, SourceError)
                              else f"cannot list: {remote.describe(e)}"))
        return
    if entries is None:  # a file
        add_file(walk, url, named=True)
        return
    root = url.rstrip("/")
    tree: dict = {}
    for child, _ in entries:
        if not child.startswith(root + "/"):
            continue  # an HTTP page's link out of the folder
        rel = child[len(root) + 1:]
        if not rel or rel.endswith("/"):
            continue  # a folder marker object
        node = tree
        parts = rel.split("/")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(parts[-1], None)
    _RemoteWalker(walk, root, include, exclude, add_file, skip_folders).folder(root, tree)


def _redacted(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


class _RemoteWalker:
    def __init__(self, walk, root: str, include: tuple, exclude: tuple, add_file, skip_folders):
        self.walk, self.root, self.include, self.exclude = walk, root, include, exclude
        self.add_file, self.skip_folders = add_file, skip_folders

    def _matches(self, pattern: str, url: str, name: str) -> bool:
        rel = url[len(self.root) + 1:]
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)

    def folder(self, url: str, tree: dict) -> None:
        walk = self.walk
        store = store_kind(url.rsplit("/", 1)[-1], set(tree))
        if store:
            walk.found.append((url, store))  # a store is read as one unit
            return
        for name in sorted(tree):
            child = f"{url}/{name}"
            excluded = next((f"excluded by --exclude {p}" for p in self.exclude
                             if self._matches(p, child, name)), "")
            if excluded:
                walk.skipped.append((child, excluded))
            elif tree[name] is not None:
                if name in self.skip_folders:
                    walk.skipped.append((child, "version-control metadata directory"))
                else:
                    self.folder(child, tree[name])
            elif self.include and not any(self._matches(p, child, name) for p in self.include):
                walk.skipped.append((child, "not matched by --include"))
            else:
                self.add_file(walk, child, named=False)
