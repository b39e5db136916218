"""The file names the pre-commit hook (.pre-commit-hooks.yaml at the repository's root) passes to
`fpclass scan`, made from the reader registry: every name a reader claims, and those names
compressed. `python -m fpclass.scan.readers.registry_hook` prints the pattern;
tests/test_precommit_hook.py fails when the hook's `files:` differs from it.

Left out: stores that are directories (`*.zarr/`), whose files pre-commit would pass one by one
(a chunk alone is not a tensor file), and bare compressed names (`data.csv.gz`), which hold no
tensors far more often than not."""

from __future__ import annotations

import re

from .registry import READERS

#: The reader whose names wrap the others' (`x.npy.gz`).
COMPRESSED = "compressed"


def _escape(suffix: str) -> str:
    return re.escape(suffix.lstrip("*").lstrip(".").lower())


def files_pattern() -> str:
    """The regular expression (Python, as pre-commit matches `files:`) of the names the hook
    checks: case-insensitive, anchored at the end of the path."""
    wrappers, suffixes, whole = [], [], []
    for reader in READERS:
        for name in reader.extensions + reader.known_names:
            if reader.kind == COMPRESSED:
                wrappers.append(_escape(name))
            elif name.startswith("*"):
                whole.append(_escape(name))    # a whole name's ending: *.safetensors.index.json
            else:
                suffixes.append(_escape(name))
    suffixes = list(dict.fromkeys(suffixes))
    return (rf"(?i)\.(({'|'.join(suffixes)})(\.({'|'.join(dict.fromkeys(wrappers))}))?"
            rf"|{'|'.join(whole)})$")


if __name__ == "__main__":
    print(files_pattern())
