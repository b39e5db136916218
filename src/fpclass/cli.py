"""The `fpclass` command line: `fpclass scan PATH...`. A thin layer over fpclass.scan; output
streams are injected so tests run it in process."""

from __future__ import annotations

import argparse
import functools
import json
import sys

from .scan.exitcodes import ExitCode


class _Exit(Exception):
    def __init__(self, code):
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse writing to injected streams and raising instead of calling sys.exit."""

    def __init__(self, *args, out=None, err=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._out, self._err = out, err

    def _print_message(self, message, file=None):
        if message:
            (self._out if file is sys.stdout else self._err).write(message)

    def exit(self, status=0, message=None):
        if message:
            self._err.write(message)
        raise _Exit(status)


def _parser(out, err) -> _Parser:
    parser = _Parser(prog="fpclass", out=out, err=err,
                     description="Exact NaN / Inf classification for every floating-point format.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    scan = sub.add_parser("scan", out=out, err=err,
                          help="check checkpoints and array files for NaN and Inf",
                          description="Check every tensor of safetensors, npy/npz, ONNX and GGUF "
                          "files (directories recursively) for NaN and Inf. Exit codes: 0 clean, "
                          "1 found, 2 inconclusive, 130 interrupted.")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    scan.add_argument("--json", action="store_true", help="print the report as JSON (schema "
                      "fpclass.scan/2, see docs/scan.md)")
    scan.add_argument("--fail-on", default="nan,inf", metavar="CLASSES",
                      help="comma-separated classes that make the exit code 1: nan, inf, posinf, "
                      "neginf, missing (NaN declared a blank by the format), any (default: "
                      "nan,inf)")
    scan.add_argument("--max-locations", type=int, default=5, metavar="N",
                      help="first bad locations listed per tensor (default: 5)")
    scan.add_argument("--threads", type=int, default=None, metavar="N",
                      help="worker threads (default: one per core)")
    scan.add_argument("--include", action="append", default=[], metavar="GLOB",
                      help="in directories, read only files whose name or path below the "
                      "directory matches GLOB (repeatable); the others are listed as skipped")
    scan.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                      help="in directories, skip files and directories whose name or path below "
                      "the directory matches GLOB (repeatable)")
    scan.add_argument("--quiet", action="store_true",
                      help="no progress bar and no summary line")
    scan.add_argument("--traceback", action="store_true",
                      help="show internal errors with their traceback")
    scan.add_argument("--scheduler", metavar="ADDRESS", default=None,
                      help="run the scan on a dask.distributed cluster (e.g. tcp://host:8786); "
                           "workers read the files from a shared filesystem. Needs fpclass[dask].")
    scan.add_argument("--no-workers-timeout", type=float, default=None, metavar="SECONDS",
                      help="with --scheduler: give up (exit 2, unfinished tensors unchecked) after "
                           "the cluster has had no worker for SECONDS (default: 120)")
    return parser


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def main(argv=None, *, stdout=None, stderr=None) -> int:
    """Run the command line with `argv` (default sys.argv[1:]); returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = _parser(out, err)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except _Exit as e:
        return e.code
    if args.command != "scan":
        parser.print_help(out)
        return ExitCode.INCONCLUSIVE
    try:
        return _scan(args, out, err)
    except KeyboardInterrupt:
        err.write("fpclass: interrupted\n")
        return ExitCode.INTERRUPTED
    except Exception as e:
        if args.traceback:
            raise
        err.write(f"fpclass: error: {type(e).__name__}: {e} (run with --traceback for details)\n")
        return ExitCode.INCONCLUSIVE


def _scan(args, out, err) -> int:
    from .scan import engine
    from .scan.report import parse_fail_on

    try:
        fail_on = parse_fail_on(args.fail_on)
        if args.max_locations < 0:
            raise ValueError(f"--max-locations must be >= 0, got {args.max_locations}")
        if args.threads is not None and args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
    except ValueError as e:
        err.write(f"fpclass scan: error: {e}\n")
        return ExitCode.INCONCLUSIVE
    execute_on = None
    if args.scheduler:
        try:
            from .dask import distributed
        except ImportError as e:
            err.write(f"fpclass scan: error: {e}\n")
            return ExitCode.INCONCLUSIVE
        timeout = {} if args.no_workers_timeout is None else {
            "no_workers_timeout": args.no_workers_timeout}
        execute_on = functools.partial(distributed.execute, scheduler=args.scheduler, **timeout)
    bar = None
    if _is_terminal(err) and not args.quiet and not args.json:
        from .scan.render import Progress
        bar = Progress(err)
    try:
        report = engine.scan(args.paths, fail_on=fail_on, max_locations=args.max_locations,
                             threads=args.threads, include=args.include, exclude=args.exclude,
                             debug=args.traceback, execute_on=execute_on,
                             progress=bar.advance if bar else None,
                             on_planned=bar.start if bar else None)
    except (ConnectionError, OSError) as e:
        if args.traceback:
            raise
        err.write(f"fpclass scan: error: cannot reach scheduler {args.scheduler}: {e}\n")
        return ExitCode.INCONCLUSIVE
    finally:
        if bar is not None:
            bar.stop()
    return _print(report, args, out)


def _print(report, args, out) -> int:
    """Write `report` as JSON, a rich table (terminal) or plain lines; return its exit code."""
    if args.json:
        report.write_json(out)
    elif _is_terminal(out):
        from .scan.render import rich_table
        rich_table(report, out)
    else:
        from .scan.render import plain_lines
        lines = list(plain_lines(report))
        for line in lines[:-1] if args.quiet else lines:
            out.write(line + "\n")
    return report.exit_code
