"""The read sieve (operators/read_sieve.py) watched by a test: every run it is asked for, with or
without a threshold, noted as kept (True) or given back (False)."""

from fpclass.operators import read_sieve as sieves


def spy_sieve(monkeypatch, small_bytes: int = 0) -> list:
    """Take every run larger than `small_bytes` through the sieve, and return the list that
    notes, for each read_all call, whether it kept the run."""
    monkeypatch.setattr(sieves, "SMALL_BYTES", small_bytes)
    kept = []
    read_all = sieves.ReadSieve.read_all
    monkeypatch.setattr(sieves.ReadSieve, "read_all",
                        lambda self, *a: kept.append(read_all(self, *a)) or kept[-1])
    return kept
