"""The `fpclass` command line: `fpclass scan PATH...` and `fpclass warmup`. A thin layer over
fpclass.scan and the kernels; output streams and the environment are injected so tests run it in
process."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from ._oserrors import describe
from . import __version__
from .results.exitcodes import ExitCode
from .results.render import TABLE_ROWS, printable

#: The options accepted both before and after the subcommand, and their defaults.
GLOBAL_DEFAULTS = {"quiet": False, "color": "auto", "output": None, "traceback": False}
COLOR_MODES = ("auto", "always", "never")
OUTPUT_FORMATS = ("text", "json", "sarif")


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
            # argparse names sys.stdout (help, --version) or sys.stderr (usage errors)
            (self._err if file is sys.stderr or file is self._err else self._out).write(message)

    def format_help(self):
        if callable(self.description):   # made when asked for: the scan's list of formats
            self.description = self.description()
        return super().format_help()

    def error(self, message):
        """A usage error: the usage and the message on stderr, then ExitCode.USAGE (argparse's
        own is 2, which fpclass keeps for "inconclusive")."""
        self.print_usage(self._err)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")

    def exit(self, status=0, message=None):
        if message:
            # the message quotes what was typed: escaped, so it cannot move the cursor or recolor
            self._err.write("\n".join(map(printable, message.split("\n"))))
        raise _Exit(status)


def _scan_description() -> str:
    from .scan.readers.registry import accepted
    return ("Check every tensor of every file (directories recursively) for NaN and Inf. Read: "
            f"{accepted()}. Exit codes: 0 clean, 1 found, 2 inconclusive (something, a missing "
            "path too, was not checked), 4 usage error, 130 interrupted.")


def _global_options(scan: bool = True) -> argparse.ArgumentParser:
    """The parent parser of the options that go before or after the subcommand (those of `scan`,
    or only those `warmup` uses). Their defaults are SUPPRESS, so a side where an option is absent
    does not overwrite the other side's value (the subcommand's side wins when both give it);
    main() fills in GLOBAL_DEFAULTS."""
    options = argparse.ArgumentParser(add_help=False)
    suppress = argparse.SUPPRESS
    options.add_argument("-q", "--quiet", action="store_true", default=suppress,
                         help="no progress bar and no summary line" if scan else "no message")
    options.add_argument("--traceback", action="store_true", default=suppress,
                         help="show internal errors with their traceback")
    if not scan:
        return options
    options.add_argument("--color", choices=COLOR_MODES, default=suppress,
                         help="color the output: auto (the default: on a terminal, unless the "
                         "NO_COLOR environment variable is set and not empty), always, never")
    options.add_argument("--output", metavar="FILE", default=suppress,
                         help="also write the JSON report to FILE (stdout keeps the table or the "
                         "plain lines)")
    return options


def _parser(out, err) -> _Parser:
    common = _global_options()
    parser = _Parser(prog="fpclass", out=out, err=err, parents=[common],
                     description="Exact NaN / Inf classification for every floating-point format.")
    parser.add_argument("--version", action="version", version=f"fpclass {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    scan = sub.add_parser("scan", out=out, err=err, parents=[common],
                          help="check checkpoints and array files for NaN and Inf",
                          description=_scan_description)
    warmup = sub.add_parser(
        "warmup", out=out, err=err, parents=[_global_options(scan=False)],
        help="compile every kernel into numba's on-disk cache (for images and CI)",
        description="Compile (or load) every numba kernel fpclass uses, so that no later process "
        "on this machine compiles: run it once when building an image, or cache NUMBA_CACHE_DIR "
        "between CI runs. Small inputs never need it; until it has run, large inputs are "
        "answered by NumPy while it runs once in the background (FPCLASS_COMPILE, see "
        "docs/startup.md). Prints a line as each part is done (-q: only errors).")
    warmup.add_argument("--workers", type=int, default=None, metavar="N",
                        help="compile in N processes (default: the cores, at most 4)")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    scan.add_argument("--json", action="store_true", help="print the report as JSON (schema "
                      "fpclass.scan/3, see docs/scan.md); the same as --format json")
    scan.add_argument("--format", choices=OUTPUT_FORMATS, default=None, dest="output_format",
                      help="the report on stdout: text (a table on a terminal, plain lines "
                      "otherwise; the default), json, or sarif (SARIF 2.1.0, for code scanning; "
                      "see docs/ci.md)")
    scan.add_argument("--fail-on", default=None, metavar="CLASSES",
                      help="comma-separated classes that make the exit code 1: nan, inf, posinf, "
                      "neginf, missing (NaN declared a blank by the format), out-of-range (outside "
                      "a CF valid range), any; and gates: absmax>X, absmax>=X, all-zero, "
                      "subnormal (default: nan,inf)")
    scan.add_argument("--no-stats", dest="stats", action="store_false",
                      help="leave out each tensor's statistics (zero, subnormal and normal "
                      "counts, finite min, max and absmax, gathered in the same pass by "
                      "default; JSON `stats` null), unless a gate in --fail-on needs them")
    scan.add_argument("--max-locations", type=int, default=None, metavar="N",
                      help="first bad locations listed per tensor (default: 5)")
    scan.add_argument("--threads", type=int, default=None, metavar="N",
                      help="worker threads (default: one per core, at most "
                           "FPCLASS_NUM_THREADS; 8 streams for URLs)")
    scan.add_argument("--include", action="append", default=None, metavar="GLOB",
                      help="in directories, read only files whose name or path below the "
                      "directory matches GLOB (repeatable); the others are listed as skipped")
    scan.add_argument("--exclude", action="append", default=None, metavar="GLOB",
                      help="in directories, skip files and directories whose name or path below "
                      "the directory matches GLOB (repeatable)")
    scan.add_argument("--force-exclude", action="store_true",
                      help="apply --include/--exclude to files named on the command line too, and "
                      "skip a named file that holds no tensors (text, images, ...) instead of "
                      "reporting it: for globs (scan dir/*) and pre-commit, which name every file")
    scan.add_argument("--show-skipped", action="store_true",
                      help="list every skipped file with its reason (default: one line counting "
                      "them by reason)")
    scan.add_argument("--max-rows", type=int, default=TABLE_ROWS, metavar="N",
                      help="rows of the terminal table at most, findings and problems first; 0 "
                      f"for all (default: {TABLE_ROWS}; piped lines and --json list all)")
    scan.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                      dest="storage_options",
                      help="an fsspec filesystem option for URL paths (s3://, https://, hf://), "
                           "VALUE read as JSON when it parses (true, 3, {...}), else as text "
                           "(repeatable; see docs/remote.md)")
    scan.add_argument("--allow-global", action="append", default=None, metavar="MODULE.NAME",
                      dest="allow_globals",
                      help="in PyTorch pickles, walk objects of this class like a dict (floats "
                           "inside checked) instead of reporting the file unchecked; nothing is "
                           "imported or called (repeatable)")
    scan.add_argument("--verify", action="store_true",
                      help="also compute each file's SHA-256 in the same read and check it "
                           "against what the file should be (Hugging Face cache blob name, Git "
                           "LFS pointer, SHA256SUMS beside it); a mismatch is a finding (exit 1)")
    scan.add_argument("--config", metavar="FILE", default=None,
                      help="read settings from the [tool.fpclass] table of FILE (default: the "
                      "nearest pyproject.toml with one, upward from the scanned paths; options "
                      "given here win)")
    scan.add_argument("--no-config", action="store_true",
                      help="read no settings file")
    scan.add_argument("--html", metavar="FILE", default=None,
                      help="also write a self-contained HTML report to FILE: the summary, a "
                      "sortable table and a map of where each tensor's findings are")
    scan.add_argument("--scheduler", metavar="ADDRESS", default=None,
                      help="run the scan on a dask.distributed cluster (e.g. tcp://host:8786); "
                           "workers read the files from a shared filesystem (needs the dask "
                           "extra)")
    scan.add_argument("--no-workers-timeout", type=float, default=None, metavar="SECONDS",
                      help="with --scheduler: give up (exit 2, unfinished tensors unchecked) after "
                           "the cluster has had no worker for SECONDS (default: 120)")
    return parser


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _color(mode: str, stream, env) -> bool:
    """Whether to write color to `stream`: always and never decide; auto colors a terminal unless
    NO_COLOR is set and not empty (https://no-color.org)."""
    if mode != "auto":
        return mode == "always"
    return _is_terminal(stream) and env.get("NO_COLOR", "") == ""


def _error(err, message: str) -> None:
    """One line on stderr; names in `message` are escaped (`printable`)."""
    err.write(printable(message) + "\n")


def main(argv=None, *, stdout=None, stderr=None, env=None) -> int:
    """Run the command line with `argv` (default sys.argv[1:]) and the environment `env` (default
    os.environ); returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    env = os.environ if env is None else env
    parser = _parser(out, err)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except _Exit as e:
        return e.code
    if args.command == "warmup":
        # before `warmup`, the parser cannot yet know the command: refuse what it would ignore
        given = [f"--{n}" for n in ("color", "output") if hasattr(args, n)]
        if given:
            _error(err, f"fpclass warmup: error: {' and '.join(given)} apply to scan only")
            return ExitCode.USAGE
    for name, default in GLOBAL_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.command not in ("scan", "warmup"):
        parser.print_help(err)
        return ExitCode.USAGE
    try:
        if args.command == "warmup":
            return _warmup(args, out, err)
        return _scan(args, out, err, env)
    except KeyboardInterrupt:
        err.write("fpclass: interrupted\n")
        return ExitCode.INTERRUPTED
    except Exception as e:
        if args.traceback:
            raise
        _error(err, f"fpclass: error: {type(e).__name__}: {e} (run with --traceback for details)")
        return ExitCode.INCONCLUSIVE


def _warmup(args, out, err) -> int:
    from .operators.warmup import compile_kernels, default_workers

    workers = default_workers() if args.workers is None else args.workers
    if workers < 1:
        _error(err, f"fpclass warmup: error: --workers must be >= 1, got {workers}")
        return ExitCode.USAGE

    def progress(done, total, unit, seconds):
        what = f"{unit[0]} kernels ({unit[1]})"
        out.write(f"fpclass warmup: [{done}/{total}] {what}: {seconds:.1f} s\n")
        out.flush()

    def wait(lock):
        if not args.quiet:
            out.write(f"fpclass warmup: waiting for another warm-up of this cache ({lock})\n")
            out.flush()

    seconds = compile_kernels(None if args.quiet else progress, workers=workers, wait=wait)
    if not args.quiet:
        out.write(f"fpclass: every kernel compiled or loaded from numba's cache in {seconds:.1f} s\n")
    return 0


def _cold_cache_notice(err, quiet: bool) -> None:
    """One line on stderr when the scan first meets a large array while numba's cache is cold."""
    from .kernels import compile_cache

    def notice(policy):
        if not quiet:
            err.write("fpclass: numba's kernel cache is cold: large arrays are checked with NumPy"
                      + (" while `fpclass warmup` runs in the background" if policy == "background"
                         else "; run `fpclass warmup` once") + " (docs/startup.md)\n")
    compile_cache.set_notice(notice)


def _scan(args, out, err, env) -> int:
    from . import settings
    from .scan import engine
    from .results.render import rich_available
    from .results.report import FAIL_ON_NAMES, parse_fail_on

    try:
        if args.json and args.output_format not in (None, "json"):
            raise ValueError(f"--json and --format {args.output_format} contradict each other")
        args.output_format = "json" if args.json else args.output_format or "text"
        if args.config is not None and args.no_config:
            raise ValueError("--config and --no-config contradict each other")
        settings.apply(args, args.paths, args.config, use_config=not args.no_config)
        fail_on = parse_fail_on(args.fail_on)
        if not fail_on:
            raise ValueError(f"--fail-on names no class ({args.fail_on!r}), which would hide "
                             "every finding; accepted: " + ", ".join(FAIL_ON_NAMES))
        if "-" in args.paths:
            raise ValueError("'-' (standard input) is not read: save the data to a file and name "
                             "the file (a file called '-': name it ./-)")
        if args.max_rows < 0:
            raise ValueError(f"--max-rows must be >= 0 (0: every row), got {args.max_rows}")
        if args.max_locations < 0:
            raise ValueError(f"--max-locations must be >= 0, got {args.max_locations}")
        if args.threads is not None and args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        storage_options = _storage_options(args.storage_options)
        for name in args.allow_globals:
            if "." not in name.strip(".") or " " in name:
                raise ValueError(f"--allow-global takes a global as module.Name, got {name!r}")
        if args.verify and args.scheduler:
            raise ValueError("--verify hashes files on this machine; it cannot be used with "
                             "--scheduler")
    except ValueError as e:
        _error(err, f"fpclass scan: error: {e}")
        return ExitCode.USAGE
    for option, path in (("--output", args.output), ("--html", args.html)):
        if path is None:
            continue
        # Fail before a long scan, not after it. Append mode: nothing is truncated yet.
        try:
            open(path, "a").close()
        except OSError as e:
            _error(err, f"fpclass scan: error: {option} {path}: cannot write: {describe(e)}")
            return ExitCode.USAGE
    _cold_cache_notice(err, args.quiet)
    execute_on = None
    if args.scheduler:
        try:
            from .dask import distributed
        except ImportError as e:
            _error(err, f"fpclass scan: error: --scheduler: {e}")
            return ExitCode.USAGE
        timeout = {} if args.no_workers_timeout is None else {
            "no_workers_timeout": args.no_workers_timeout}
        execute_on = functools.partial(distributed.execute, scheduler=args.scheduler, **timeout)
    bar = None
    if _is_terminal(err) and not args.quiet and args.output_format == "text" \
            and rich_available():
        from .results.render import Progress
        bar = Progress(err, color=_color(args.color, err, env))
    try:
        report = engine.scan(args.paths, fail_on=fail_on, max_locations=args.max_locations,
                             threads=args.threads, include=args.include, exclude=args.exclude,
                             force_exclude=args.force_exclude,
                             allow_globals=args.allow_globals, debug=args.traceback,
                             execute_on=execute_on, verify=args.verify,
                             maps=args.html is not None, stats=args.stats,
                             storage_options=storage_options,
                             progress=bar.advance if bar else None,
                             on_planned=bar.start if bar else None)
    except (ConnectionError, OSError) as e:
        if args.traceback or not args.scheduler:
            raise
        _error(err, f"fpclass scan: error: cannot reach scheduler {args.scheduler}: {e}")
        return ExitCode.INCONCLUSIVE
    finally:
        if bar is not None:
            bar.stop()
    if args.output is not None:
        with open(args.output, "w", encoding="utf-8") as f:
            report.write_json(f)
    if args.html is not None:
        report.write_html(args.html)
    return _print(report, args, out, env)


def _storage_options(pairs) -> dict | None:
    """--storage-option KEY=VALUE pairs as a dict (None when there are none); the values are
    never echoed (they may be secrets)."""
    import json
    options = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError("--storage-option takes KEY=VALUE (one has no '=' or no KEY)")
        # a credential stays text: a numeric secret parsed as a number could be echoed by a
        # library's type error
        if any(w in key.lower() for w in ("secret", "token", "password", "key", "credential")):
            options[key] = value
            continue
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options or None


def _print(report, args, out, env) -> int:
    """Write `report` as --format says: JSON, SARIF, or text (a rich table on a terminal with rich
    installed, plain lines otherwise, colored as --color and NO_COLOR say); return its exit
    code."""
    from .results import render

    color = _color(args.color, out, env)
    if args.output_format == "json":
        report.write_json(out)
    elif args.output_format == "sarif":
        from .results.sarif import write_sarif
        write_sarif(report, out)
    elif _is_terminal(out) and render.rich_available():
        render.rich_table(report, out, color=color, max_rows=args.max_rows,
                          show_skipped=args.show_skipped)
    else:
        # Without rich (fpclass[cli]) a terminal gets the plain lines: complete, only less pretty.
        lines = list((render.colored_lines if color else render.plain_lines)(
            report, show_skipped=args.show_skipped))
        for line in lines[:-1] if args.quiet else lines:
            out.write(line + "\n")
    return report.exit_code
