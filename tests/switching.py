"""Threads run all at once with the interpreter switching between them as often as it can: the
races a lock or an atomic step must prevent show up here."""

import sys
import threading


def run_switching(targets) -> None:
    """Run each of `targets` (callables) on a thread of its own, all at once, with the switch
    interval at 1 µs; back to the interval before when they have all ended."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
