"""`import fpclass.directml`: DirectML's IS_INFINITY / IS_NAN operators (see fpclass.dialects.directml)."""

from .dialects.directml import *  # noqa: F401,F403
from .dialects.directml import __all__  # noqa: F401
