"""The walk of a URL (a remote file, folder or prefix): listed once through fsspec, then filtered
and sorted into files to read, unreadable and skipped files exactly as a local directory is."""

from __future__ import annotations

import fnmatch

from .storage.reads import SourceError


def expand_url(walk, url: str, include: tuple, exclude: tuple) -> None:
    """Add what to do with every file at `url` to `walk` (a paths.Walk)."""
    from .paths import _file
    from .storage import remote
    try:
        entries = remote.listing(url)
    except FileNotFoundError:
        walk.problems.append((url, "no such file or directory"))
        return
    except (SourceError, OSError, ValueError) as e:
        walk.problems.append((url, str(e) if isinstance(e, SourceError)
                              else f"cannot list: {remote.describe(e)}"))
        return
    if not entries:
        _file(walk, url, named=True)
        return
    root = url.rstrip("/")
    tree: dict = {}
    for child, _ in entries:
        rel = child[len(root) + 1:] if child.startswith(root + "/") else child.rsplit("/", 1)[-1]
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
    _RemoteWalker(walk, root, include, exclude).folder(root, tree)


class _RemoteWalker:
    def __init__(self, walk, root: str, include: tuple, exclude: tuple):
        self.walk, self.root, self.include, self.exclude = walk, root, include, exclude

    def _matches(self, pattern: str, url: str, name: str) -> bool:
        rel = url[len(self.root) + 1:]
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)

    def folder(self, url: str, tree: dict) -> None:
        from .paths import VCS_DIRECTORIES, _file
        from .readers.registry import store_kind
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
                if name in VCS_DIRECTORIES:
                    walk.skipped.append((child, "version-control metadata directory"))
                else:
                    self.folder(child, tree[name])
            elif self.include and not any(self._matches(p, child, name) for p in self.include):
                walk.skipped.append((child, "not matched by --include"))
            else:
                _file(walk, child, named=False)
