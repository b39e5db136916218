"""The exit codes of `fpclass scan`, one meaning each."""

import enum


class ExitCode(enum.IntEnum):
    """0 clean; 1 a value of a `--fail-on` class was found; 2 something could not be checked (a
    named path that is not there among them); 4 the command line was wrong (an unknown option, a
    bad value: nothing was scanned); 130 interrupted. Found and inconclusive together give 1: a
    definite finding wins."""

    CLEAN = 0
    FOUND = 1
    INCONCLUSIVE = 2
    USAGE = 4
    INTERRUPTED = 130
