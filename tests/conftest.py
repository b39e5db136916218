import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


def pytest_collection_modifyitems(items):
    # Once the adapter tests have imported JAX, JAX warns at every os.fork() in this process (its
    # threads would not survive into the child); tests that fork a worker later say nothing
    # about fpclass by it, and -W error would fail them.
    if "jax" in sys.modules:
        ignore = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
        for item in items:
            item.add_marker(ignore)
