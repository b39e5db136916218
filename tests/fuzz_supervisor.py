"""Runs fuzz cases in child processes under time and memory limits: both sides of the protocol.

The parent: `run_cases(cases, workdir, warmup, worker=PATH)` starts `python PATH worker BATCH`
in `workers` children, reads their JSON lines and names the case a child crashed, hung or ran
out of memory on; it returns ({case id: Outcome}, stats).

A fuzzer plugs in with a worker script (the oracles' module) that ends with

    if __name__ == "__main__":
        serve(sys.argv[2], oracle, FORMATS)   # after checking sys.argv[1] == "worker"

where `oracle(fmt, path)` returns {"ok": True, "tensors": {name: [(nan, +inf, -inf), ...]},
"unverified": [names]} or {"ok": False, "reason": ...} (fuzz_oracles_core.py,
zarr_fits_oracles.py); fuzz_judge.judge then holds each Outcome to the scan's promise. A worker
may instead speak the protocol itself with the memory probes below (torch_fuzz_reference.py)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field


#: Limits per case: a scan that runs longer is a hang, one whose peak RSS passes MEMORY_MB fails.
SCAN_SECONDS = 10.0
ORACLE_SECONDS = 3.0
MEMORY_MB = 512
#: Address-space cap on the worker above what it maps once warm (numba reserves address space).
ADDRESS_SLACK = 1 << 30


# ---------------------------------------------------------------------------------------------
# The worker: a child process that scans a batch of cases, then reads each with its oracle.
# It reports on stdout, one JSON line per event, so the parent can name the case that crashed,
# hung or ran out of memory.

def serve(batch_file: str, oracle, formats) -> None:
    """The worker's loop, for a worker script's `__main__` (`python SCRIPT worker BATCH`): scans
    each case of the batch, then reads it with `oracle(fmt, path)` (fmt: the format the scan
    detected if it is one of `formats`, else the case's), reporting each step to the parent."""
    import resource
    import signal
    import warnings

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr

    def say(**msg):
        proto.write(json.dumps(msg) + "\n")

    with open(batch_file) as f:
        batch = json.load(f)
    from fpclass.scan import scan
    for path in batch["warmup"]:
        scan([path])
    for fmt in formats:  # import the oracles' packages before the clock starts
        oracle(fmt, batch["warmup"][0])
    vms = vm_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (vms + ADDRESS_SLACK, vms + ADDRESS_SLACK))
    warm = status_mb("VmRSS")
    say(ready=True, vms_mb=vms / 2 ** 20, rss_mb=warm)
    resets = reset_peak()

    class OracleTimeout(Exception):
        pass

    def alarm(*_):
        raise OracleTimeout

    signal.signal(signal.SIGALRM, alarm)
    for case_id, path, fmt in batch["cases"]:
        say(id=case_id, phase="scan")
        reset_peak()
        before = status_mb("VmRSS")
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # as pytest -W error would
            try:
                report = scan([path])
                scan_out = {"exit": int(report.exit_code),
                            "files": [[p, f] for p, f in report.files],
                            "tensors": [[r.name, r.status, r.nan, r.posinf, r.neginf, r.reason,
                                         r.dtype] for r in report.tensors],
                            "problems": [p.reason for p in report.problems]}
            except BaseException as e:
                scan_out = {"raised": f"{type(e).__name__}: {e}"}
        # What a fresh, warm worker would have peaked at: its RSS when ready plus this scan's
        # growth (the heap left by earlier cases is not charged to this one).
        rss = warm + peak_rss_mb() - before if resets else peak_rss_mb()
        scan_out.update(seconds=time.perf_counter() - t, maxrss_mb=rss)
        say(id=case_id, scan=scan_out)
        if rss > MEMORY_MB and not resets:
            say(restart=f"{case_id}: scan peak RSS {rss:.0f} MB")  # else charged to later cases
            return
        detected = scan_out.get("files", [[None, fmt]])
        ofmt = detected[0][1] if detected else fmt
        ofmt = ofmt if ofmt in formats else fmt
        say(id=case_id, phase="oracle")
        signal.setitimer(signal.ITIMER_REAL, ORACLE_SECONDS)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = oracle(ofmt, path)
        except OracleTimeout:
            out = {"ok": None, "reason": f"oracle ran past {ORACLE_SECONDS} s"}
        except MemoryError:
            out = {"ok": None, "reason": "oracle ran out of memory"}
        except BaseException as e:
            out = {"ok": None, "reason": f"oracle raised {type(e).__name__}: {e}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out["format"] = ofmt
        say(id=case_id, oracle=out)
        rss = peak_rss_mb()
        if rss > MEMORY_MB * 0.8 and not resets:
            say(restart=f"{case_id}: oracle peak RSS {rss:.0f} MB")
            return


def status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) / 1024


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries that over from the parent
    across fork and exec, so a child of a large process would report the parent's peak."""
    try:
        return status_mb("VmHWM")
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux 4.0+), so each case's peak is its own; False where
    that is not possible (the worker then restarts after a large peak instead)."""
    try:
        status_mb("VmRSS")
    except (OSError, StopIteration):
        return False
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Outcome:
    scan: dict = field(default_factory=dict)
    oracle: dict = field(default_factory=dict)
    failure: str = ""       # crash / hang of the scan, named by the supervisor


def run_cases(cases: list, workdir: str, warmup: list, worker: str, workers: int = 2,
              start_seconds: float = 180.0) -> tuple[dict, dict]:
    """({case id: Outcome}, stats) for cases [(id, path, fmt)], run in `workers` child processes
    in parallel, each `python WORKER worker BATCH` (`worker`: the path of the worker script, e.g.
    `fuzz_oracles_core.__file__`). A child that dies or hangs is replaced and the case it was on
    is named."""
    outcomes: dict = {}
    stats = {"restarts": [], "ready_vms_mb": [], "ready_rss_mb": []}
    lock = threading.Lock()
    errors: list = []

    def body(k, batch):
        try:
            _supervise(k, batch, workdir, warmup, outcomes, stats, lock, start_seconds,
                       os.path.abspath(worker))
        except BaseException as e:  # raised again after join
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k, cases[k::workers]))
               for k in range(workers) if cases[k::workers]]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return outcomes, stats


def _supervise(k, batch, workdir, warmup, outcomes, stats, lock, start_seconds, worker):
    pending = list(batch)
    spawn = 0
    while pending:
        spawn += 1
        bfile = os.path.join(workdir, f"batch{k}.{spawn}.json")
        with open(bfile, "w") as f:
            json.dump({"cases": pending, "warmup": warmup}, f)
        errpath = os.path.join(workdir, f"worker{k}.{spawn}.stderr")
        with open(errpath, "w") as err:
            proc = subprocess.Popen([sys.executable, worker, "worker", bfile],
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        lines: queue.Queue = queue.Queue()

        def pump(proc=proc, lines=lines):
            for x in proc.stdout:
                lines.put(x)
            lines.put(None)

        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        current, phase, limit, failed, restart = None, "start", start_seconds, None, None
        while True:
            try:
                line = lines.get(timeout=limit)
            except queue.Empty:
                proc.kill()
                proc.wait()
                failed = f"no progress in {limit:.0f} s (hang)"
                break
            if line is None:
                proc.wait()
                if proc.returncode:
                    failed = (f"worker killed by signal {-proc.returncode}" if proc.returncode < 0
                              else f"worker exited with {proc.returncode}")
                break
            msg = json.loads(line)
            if msg.get("ready"):
                with lock:
                    stats["ready_vms_mb"].append(round(msg["vms_mb"]))
                    stats["ready_rss_mb"].append(round(msg["rss_mb"]))
                limit = SCAN_SECONDS
            elif "phase" in msg:
                current, phase = msg["id"], msg["phase"]
                limit = SCAN_SECONDS if phase == "scan" else ORACLE_SECONDS + 5
            elif "scan" in msg:
                outcomes.setdefault(msg["id"], Outcome()).scan = msg["scan"]
            elif "oracle" in msg:
                outcomes.setdefault(msg["id"], Outcome()).oracle = msg["oracle"]
                pending = [c for c in pending if c[0] != msg["id"]]
                current = None
            elif msg.get("restart"):
                restart = msg["restart"]
                proc.wait()
                break
        pumping.join(5)
        proc.stdout.close()
        if failed:
            if current is None:
                with open(errpath) as err:
                    raise RuntimeError(f"fuzz worker {k}: {failed} outside a case:\n"
                                       + err.read()[-3000:])
            o = outcomes.setdefault(current, Outcome())
            if phase == "scan":
                o.failure = failed
            else:
                o.oracle = {"ok": None, "reason": f"oracle: {failed}"}
        if current is not None:  # crashed, hung, or its scan's memory was reported: not rerun
            pending = [c for c in pending if c[0] != current]
        if pending:
            with lock:
                stats["restarts"].append(restart or failed or "worker ended early")
