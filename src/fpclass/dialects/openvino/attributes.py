"""Reading IR layer attributes: booleans (strict, or exactly as OpenVINO reads them) and names.

OpenVINO 2026.4's IR reader takes "false" and "0" (any case) as false and *every* other string, even
"no", "off" or "", as true. fpclass reads true/false/1/0 in any case the same way and, unless asked
to be OpenVINO-compatible, refuses every other spelling, because "no" silently meaning true is a trap.
"""

from __future__ import annotations

from .errors import IRError

TRUE_SPELLINGS = ("true", "1")
FALSE_SPELLINGS = ("false", "0")


def read_bool(value: str | None, *, default: bool, where: str, attribute: str,
              openvino_compatible: bool = False) -> bool:
    """The boolean an IR attribute spells; `default` when absent. Strict: true/false/1/0 in any
    case, else IRError naming `where` and `attribute`. Compatible: OpenVINO's reading exactly."""
    if value is None:
        return default
    spelled = value.lower()
    if spelled in FALSE_SPELLINGS:
        return False
    if spelled in TRUE_SPELLINGS or openvino_compatible:
        return True
    raise IRError(
        f"{where}: attribute {attribute}={value!r} is not a boolean; accepted (any case): "
        f"{', '.join(TRUE_SPELLINGS + FALSE_SPELLINGS)}. OpenVINO would read it as true; pass "
        f"openvino_compatible=True to read it that way"
    )


def write_bool(value: bool) -> str:
    return "true" if value else "false"


def check_known(attrs: dict, known: tuple[str, ...], *, where: str, openvino_compatible: bool):
    """Refuse attribute names the layer does not define (OpenVINO ignores them; a misspelt
    `detect_negtive` silently keeping its default is another trap). Compatible mode ignores them."""
    unknown = sorted(set(attrs) - set(known))
    if unknown and not openvino_compatible:
        accepted = ", ".join(known) if known else "none"
        raise IRError(f"{where}: unknown attribute(s) {', '.join(unknown)}; accepted: {accepted} "
                      f"(openvino_compatible=True ignores unknown attributes, as OpenVINO does)")
