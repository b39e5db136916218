"""The format table of README.md and docs/scan.md, made from the reader registry:
`python -m fpclass.scan.readers.registry_table` prints it, `--write [ROOT]` rewrites it between
the markers in both files (tests/test_reader_registry.py fails when they differ)."""

from __future__ import annotations

from .contract import Reader
from .registry import READERS


def _magic(magic: bytes) -> str:
    text = "".join(chr(b) if 0x20 < b < 0x7F and b != 0x60 else f"\\x{b:02x}" for b in magic)
    return f"`{text}`"


def _detection(reader: Reader) -> str:
    how = [_magic(m) for m in reader.magic if len(m) <= 10]
    if reader.markers:
        how.append("a directory holding " + ", ".join(f"`{m}`" for m in reader.markers))
    how += [f"a directory named `*{d}`" for d in reader.directories]
    if reader.detected:
        how.append(reader.detected)
    return "; ".join(how) or "its name"


def markdown() -> str:
    """The format table of README.md and docs/scan.md."""
    rows = ["| format | kind | names | detected by | extra |", "|---|---|---|---|---|"]
    for r in READERS:
        names = " ".join([f"`{n}`" for n in r.extensions] + [f"_`{n}`_" for n in r.known_names]
                         + [f"`*{d}/`" for d in r.directories])
        extra = f"`fpclass[{r.extra}]`" if r.extra else ""
        rows.append(f"| {r.format} | `{r.kind}` | {names} | {_detection(r)} | {extra} |")
    return "\n".join(rows) + "\n"


BEGIN = "<!-- reader table: made by `python -m fpclass.scan.readers.registry_table --write` -->\n"
END = "<!-- end of reader table -->\n"
#: The files holding the table, relative to the repository's root.
DOCUMENTS = ("README.md", "docs/scan.md")


def with_table(text: str) -> str:
    """`text` with the table between BEGIN and END replaced by markdown()."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + markdown() + text[end:]


def main(argv=None) -> int:
    import argparse
    import os
    parser = argparse.ArgumentParser(prog="python -m fpclass.scan.readers.registry_table",
                                     description="Print or write the table of formats read.")
    parser.add_argument("--write", metavar="ROOT", nargs="?", const=".", default=None,
                        help="rewrite the table in README.md and docs/scan.md under ROOT")
    args = parser.parse_args(argv)
    if args.write is None:
        print(markdown(), end="")
        return 0
    for doc in DOCUMENTS:
        path = os.path.join(args.write, doc)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = with_table(text)
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
