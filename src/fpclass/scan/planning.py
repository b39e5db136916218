"""Planning: paths to tasks (headers only), and large tasks split into parts that run in
parallel."""

from __future__ import annotations


from .._oserrors import describe
from .paths import expand
from .storage.source import real as real_path
from .reader_options import reader_options
from .readers import ReaderError
from .readers.registry import planner
from .tasks import CHECK, FILE, PROBLEM, Task, problem, skipped

#: Raw tensors larger than this are split into parts that run in parallel.
TASK_BYTES = 256 << 20


class PlanInterrupted(KeyboardInterrupt):
    """Ctrl-C while planning; `tasks` holds what was planned so far (a report can still be made)."""

    def __init__(self, tasks: list):
        super().__init__("interrupted while reading file headers")
        self.tasks = tasks


def plan(paths, *, include=(), exclude=(), task_bytes: int = TASK_BYTES,
         debug: bool = False, allow_globals=(), force_exclude: bool = False) -> list:
    """Tasks for every tensor in `paths` (files or directories), plus FILE markers, file problems
    and skipped files. Reads headers only. Shards reached through an index are planned once; a
    file another file reads (external data, a shard) is not reported again. Ctrl-C raises
    PlanInterrupted holding the tasks planned so far. `allow_globals` go to the PyTorch reader;
    `force_exclude`: see paths.expand."""
    tasks: list = []
    try:
        walk = expand(paths, include, exclude, force_exclude)
        tasks += [problem(p, r) for p, r in walk.problems]
        _plan_files(walk.found, tasks, task_bytes, debug, _globals(allow_globals))
        read = {real_path(f) for f in {t.source or t.file for t in tasks
                                              if t.status != PROBLEM}}
        unread = [problem(p, r) for p, r in walk.unreadable if real_path(p) not in read]
        unread += [skipped(p, r) for p, r in walk.skipped if real_path(p) not in read]
    except KeyboardInterrupt:
        raise PlanInterrupted(tasks) from None
    return tasks + unread


def _globals(names) -> tuple:
    """`allow_globals` as a tuple of "module.Name" strings; ValueError otherwise."""
    names = (names,) if isinstance(names, str) else tuple(names)
    for n in names:
        if not (isinstance(n, str) and "." in n.strip(".") and " " not in n):
            raise ValueError(f"allow_globals must name globals as 'module.Name', got {n!r}")
    return names


def _plan_files(found, tasks, task_bytes, debug, allow_globals=()) -> None:
    # Indexes first, so a shard listed by an index and also found directly is planned once.
    found = sorted(found, key=lambda f: f[1] != "safetensors-index")
    seen: set = set()
    for path, kind in found:
        real = real_path(path)
        if real in seen:
            continue
        try:
            options = reader_options(kind, allow_globals)
            file_tasks = planner(kind)(path, **options)
        except ReaderError as e:
            seen.add(real)
            tasks.append(problem(path, str(e)))
            continue
        except OSError as e:
            seen.add(real)
            tasks.append(problem(path, f"cannot read: {describe(e)}"))
            continue
        except Exception as e:  # a reader bug must not stop the other files
            if debug:
                raise
            seen.add(real)
            tasks.append(problem(path, f"internal error: {type(e).__name__}: {e}"))
            continue
        dropped = set()
        for t in file_tasks:
            if t.status == FILE:
                r = real_path(t.file)
                if r in seen:
                    dropped.add(t.file)
                seen.add(r)
        tasks += [p for t in file_tasks if t.file not in dropped for p in _split(t, task_bytes)]


def _split(task: Task, task_bytes: int) -> list:
    """A CHECK task cut into parts of about `task_bytes` where its storage allows: a byte range
    into items, record bands into rows, a block grid into whole blocks."""
    if task.status != CHECK or task.storage is None:
        return [task]
    return [task.part(first, count) for first, count in task.storage.parts(task, task_bytes)] \
        or [task]
