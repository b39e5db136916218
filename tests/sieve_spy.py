"""The read sieve (operators/read_sieve.py) watched by a test: every run it is asked for, with or
without a threshold, noted as kept (True) or given back (False)."""

from fpclass.operators import read_sieve as sieves


def spy_sieve(monkeypatch, small_bytes: int = 0) -> list:
    """Take every run larger than `small_bytes` through the sieve, and return the list that
    notes, for each run a read_all or read_runs call read, whether it kept the run (read_runs
    reads its runs up to the first it gives back; read_all is one run of read_runs)."""
    monkeypatch.setattr(sieves, "SMALL_BYTES", small_bytes)
    kept = []
    read_runs = sieves.ReadSieve.read_runs  # (read_all reads one run through it)

    def runs(self, fd, buf, positions, lengths):
        n = read_runs(self, fd, buf, positions, lengths)
        kept.extend([True] * n + [False] * (n < len(positions)))
        return n
    monkeypatch.setattr(sieves.ReadSieve, "read_runs", runs)
    return kept
