"""The format table as documentation: the README's table is this function's output (a test checks)."""

from __future__ import annotations

from .table import FORMATS, Kind


def markdown_table() -> str:
    """A markdown table of every floating-point format: bits, layout and special values."""
    rows = ["| format | bits | sign/exp/mantissa | NaN | ±Inf | −0 | subnormals |",
            "|---|---|---|---|---|---|---|"]
    yes = lambda b: "yes" if b else "no"
    for f in FORMATS.values():
        if f.kind is Kind.FLOAT:
            layout = f"{int(f.signed)}/{f.exponent_bits}/{f.mantissa_bits}"
            rows.append(f"| {f.name} | {f.bits} | {layout} | {f.nan.value} | {yes(f.inf)} | "
                        f"{yes(f.signed and f.negative_zero)} | {yes(f.has_subnormals)} |")
        else:
            rows.append(f"| {f.name} | {8 * f.itemsize} | two {f.component} parts | either part | "
                        f"either part | — | — |")
    return "\n".join(rows)
