# SPDX-License-Identifier: BSD-2-Clause
"""load/tool_herald.py: which herald the scripts in load/ start, found the way
the C tools find theirs (load/tool-herald.c), and whether it is built with a
sanitizer, which a benchmark must say on its first line.

  $HERALD_BIN when set; else the release build of the tree (build/herald),
  else its sanitized build (build/asan/herald, from make test); else the
  first herald on PATH. The tree is the one this file sits in, or the one it
  was installed from (TREE, written by make install).

Run as a program (python3 load/tool_herald.py, as load/bench does), it prints
the herald's path and, when that herald is sanitized, the warning line; exit
status 1 when there is none.
"""
import os
import shutil
import sys

TREE = None  # make install writes the tree's folder here

# The symbols a sanitizer's runtime brings into a program.
SANITIZER_SYMBOLS = [(b"__asan_init", "AddressSanitizer"), (b"__ubsan_handle_", "UndefinedBehaviorSanitizer"),
                     (b"__tsan_init", "ThreadSanitizer"), (b"__msan_init", "MemorySanitizer")]


def sanitizers(path):
    """The sanitizers the program at path was built with, by name ([] for none)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [name for sym, name in SANITIZER_SYMBOLS if sym in data]


def warning(path):
    """The line a tool prints first when path is a sanitized herald; None otherwise."""
    names = sanitizers(path)
    if not names:
        return None
    return (f"warning: herald {path} is built with {' and '.join(names)}: these figures include the "
            "sanitizer's cost and are not herald's (make builds a release herald in build/; HERALD_BIN names one)")


def _trees():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [t for t in (TREE, here) if t]


def find():
    """The path of the herald to start; SystemExit (status 1) naming the
    places tried when there is none."""
    env = os.environ.get("HERALD_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise SystemExit(f"HERALD_BIN={env} cannot be run")
    builds = [os.path.join(t, "build", "herald") for t in _trees()]
    builds += [os.path.join(t, "build", "asan", "herald") for t in _trees()]
    there = [b for b in builds if os.access(b, os.X_OK)]
    clean = [b for b in there if not sanitizers(b)]
    if clean or there:
        return (clean or there)[0]
    on_path = shutil.which("herald")
    if on_path:
        return on_path
    raise SystemExit(f"no herald to start: HERALD_BIN is not set, none of {', '.join(builds)} exists, and there "
                     "is no herald on PATH. Set HERALD_BIN=/path/to/herald or put herald on PATH (make install).")


def announce(path):
    """Print the warning for path, if any, on stdout now (the first line)."""
    line = warning(path)
    if line:
        print(line, flush=True)


if __name__ == "__main__":
    try:
        found = find()
    except SystemExit as e:
        print(f"tool_herald: {e}", file=sys.stderr)
        sys.exit(1)
    print(found)
    announce(found)
