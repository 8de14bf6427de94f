#!/usr/bin/env python3
"""tests/run.py: run every test of herald and end with 'N passed, N failed'.

Unit and fuzz-replay binaries under $HERALD_BUILD/tests and $HERALD_BUILD/fuzz
are one test each (pass = exit 0). End-to-end tests are the functions named
test_* in tests/e2e/test_*.py; each runs in its own child process with a time
limit, so a hang fails that test instead of the run. Arguments filter tests by
substring: tests/run.py stream resume
"""
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("HERALD_BUILD", "build")
DEFAULT_TIMEOUT = 60


def binaries():
    for sub in ("tests", "fuzz"):
        d = os.path.join(ROOT, BUILD, sub)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                p = os.path.join(d, name)
                if os.access(p, os.X_OK) and not name.endswith(".d"):
                    yield f"{sub}/{name}", p


def e2e_tests():
    d = os.path.join(ROOT, "tests", "e2e")
    sys.path.insert(0, d)
    for fn in sorted(os.listdir(d)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(d, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in sorted(vars(mod)):
            f = getattr(mod, name)
            if name.startswith("test_") and callable(f):
                yield f"{fn[:-3]}.{name}", os.path.join(d, fn), name, getattr(f, "timeout", DEFAULT_TIMEOUT)


def _child(path, name, q):
    try:
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        getattr(mod, name)()
        q.put(None)
    except BaseException:
        q.put(traceback.format_exc())


def run_e2e(path, name, timeout):
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(path, name, q))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.terminate()
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
        return f"timed out after {timeout} s"
    try:
        return q.get(timeout=1)
    except Exception:
        return f"test process exited with code {p.exitcode} and no result"


def main():
    os.chdir(ROOT)
    os.environ.setdefault("HERALD_BIN", os.path.join(ROOT, BUILD, "herald"))
    filters = sys.argv[1:]
    passed = failed = 0
    failures = []

    def want(n):
        return not filters or any(f in n for f in filters)

    for name, path in binaries():
        if not want(name):
            continue
        t0 = time.monotonic()
        r = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        dt = time.monotonic() - t0
        if r.returncode == 0:
            passed += 1
            print(f"ok    {name} ({dt:.2f} s)", flush=True)
        else:
            failed += 1
            failures.append(name)
            print(f"FAIL  {name} (exit {r.returncode})\n{r.stdout.decode(errors='replace')[-4000:]}", flush=True)

    for name, path, fname, timeout in e2e_tests():
        if not want(name):
            continue
        t0 = time.monotonic()
        err = run_e2e(path, fname, timeout)
        dt = time.monotonic() - t0
        if err is None:
            passed += 1
            print(f"ok    {name} ({dt:.2f} s)", flush=True)
        else:
            failed += 1
            failures.append(name)
            print(f"FAIL  {name} ({dt:.2f} s)\n{err}", flush=True)

    if failures:
        print("failed: " + ", ".join(failures))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
