"""The one error DirectML's validation raises, carrying its HRESULT name."""

from __future__ import annotations

#: HRESULT names and their values, as DirectML returns them.
HRESULTS = {"E_INVALIDARG": 0x80070057}


class DirectMLError(ValueError):
    """A descriptor, feature level or buffer that DirectML would refuse (`hresult` names the
    HRESULT, `hresult_code` is its value); the message names the field and the rule."""

    def __init__(self, message: str, hresult: str = "E_INVALIDARG"):
        super().__init__(f"{hresult}: {message}")
        self.hresult = hresult
        self.hresult_code = HRESULTS[hresult]
