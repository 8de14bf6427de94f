#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""tests/run.py: run every test of herald and end with 'N passed, N failed'.

Unit and fuzz-replay binaries under $HERALD_BUILD/tests and $HERALD_BUILD/fuzz
are one test each (pass = exit 0). End-to-end tests are the functions named
test_* in tests/e2e/test_*.py; each runs in its own child process with a time
limit, so a hang fails that test instead of the run. Arguments filter tests by
substring: tests/run.py stream resume; a word that matches no test is named and
fails the run.

Unit and fuzz-replay binaries, then end-to-end tests, run three at a time
($HERALD_TEST_JOBS; 1 runs them one by one), each a process of its own,
the longest first (by time limit), except the end-to-end tests that measure
or load the machine: a test function with `alone = True`, or every test of a
module with `ALONE = True`, runs with nothing beside it, after the others.

$HERALD_BUILD names the build folder under test. Unset, it is the build that
has test binaries (build/asan after `make test`, build after `make all unit`),
the newer when both have; the first line says which, and which herald. It is
exported as HERALD_BUILD, so the tests run that build's load tools
($HERALD_BUILD/load/NAME).
"""
import concurrent.futures
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TIMEOUT = 60
# The build folders the Makefile makes: `make` and `make test`.
BUILDS = ("build", "build/asan")


def binaries(build):
    for sub in ("tests", "fuzz"):
        d = os.path.join(ROOT, build, sub)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                p = os.path.join(d, name)
                if os.access(p, os.X_OK) and not name.endswith(".d"):
                    yield f"{sub}/{name}", p


def pick_build():
    """The build folder to test and why: $HERALD_BUILD, else the build with
    test binaries (`make` alone builds none), the newest when several have
    them; a release build and an ASan one often sit side by side."""
    if os.environ.get("HERALD_BUILD"):
        return os.environ["HERALD_BUILD"], "HERALD_BUILD"
    found = []
    for b in BUILDS:
        files = [p for _, p in binaries(b)]
        herald = os.path.join(ROOT, b, "herald")
        stamps = [os.stat(p).st_mtime for p in files + ([herald] if os.path.exists(herald) else [])]
        if stamps:
            found.append((bool(files), max(stamps), b))
    if not found:
        return "build", "no build found: run make test first"
    found.sort()
    has_tests, _, b = found[-1]
    if not has_tests:
        return b, "no build has test binaries: run make test"
    if sum(1 for f in found if f[0]) > 1:
        return b, "the newer of the builds with test binaries; HERALD_BUILD picks another"
    return b, "the build with test binaries; HERALD_BUILD picks another"


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
                alone = getattr(f, "alone", getattr(mod, "ALONE", False))
                yield (f"{fn[:-3]}.{name}", os.path.join(d, fn), name, getattr(f, "timeout", DEFAULT_TIMEOUT),
                       alone)


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


class Running:
    """One end-to-end test in a child process of its own."""

    def __init__(self, name, path, fname, timeout):
        ctx = multiprocessing.get_context("fork")
        self.name, self.timeout = name, timeout
        self.q = ctx.Queue()
        self.p = ctx.Process(target=_child, args=(path, fname, self.q))
        self.t0 = time.monotonic()
        self.p.start()

    def poll(self):
        """None while it runs; else (error or None, seconds)."""
        dt = time.monotonic() - self.t0
        try:
            # The result first: a child cannot end before its queue is read.
            err = self.q.get_nowait()
            self.p.join()
            return err, dt
        except Exception:
            pass
        if self.p.is_alive():
            if dt < self.timeout:
                return None
            self.p.terminate()
            self.p.join(5)
            if self.p.is_alive():
                self.p.kill()
                self.p.join()
            return f"timed out after {self.timeout} s", dt
        try:
            return self.q.get(timeout=1), dt
        except Exception:
            return f"test process exited with code {self.p.exitcode} and no result", dt


def run_e2e_all(tests, jobs, report):
    """Run tests (name, path, fname, timeout, alone): those not alone jobs at
    a time, then the others one by one; report(name, error, seconds) as each
    ends."""
    shared = [t for t in tests if not t[4]]
    alone = [t for t in tests if t[4]]
    for batch, width in ((shared, max(1, jobs)), (alone, 1)):
        # The longest first (a test's time limit says how long it may take),
        # so that no long test starts last beside an idle slot.
        waiting, running = sorted(batch, key=lambda t: -t[3]), []
        while waiting or running:
            while waiting and len(running) < width:
                name, path, fname, timeout, _ = waiting.pop(0)
                running.append(Running(name, path, fname, timeout))
            for r in list(running):
                res = r.poll()
                if res is not None:
                    running.remove(r)
                    report(r.name, *res)
            time.sleep(0.02)


def main():
    os.chdir(ROOT)
    build, why = pick_build()
    os.environ["HERALD_BUILD"] = build
    os.environ.setdefault("HERALD_BIN", os.path.join(ROOT, build, "herald"))
    print(f"tests/run.py: testing {build} ({why}); herald {os.environ['HERALD_BIN']}", flush=True)
    filters = sys.argv[1:]
    passed = failed = 0
    failures = []

    def want(n):
        return not filters or any(f in n for f in filters)

    bins = list(binaries(build))
    e2e = list(e2e_tests())
    names = [n for n, _ in bins] + [t[0] for t in e2e]
    unmatched = [f for f in filters if not any(f in n for n in names)]
    for f in unmatched:
        print(f"no test matches {f!r} (among {len(names)} tests: unit and fuzz binaries in {build}, "
              f"tests/e2e)", flush=True)
    if filters and len(unmatched) == len(filters):
        sys.exit(1)

    def run_binary(path):
        t0 = time.monotonic()
        try:
            r = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            return r.returncode, r.stdout, time.monotonic() - t0
        except subprocess.TimeoutExpired as e:
            return "timed out after 300 s", e.stdout or b"", time.monotonic() - t0

    jobs = int(os.environ.get("HERALD_TEST_JOBS", "3"))
    # The unit and fuzz-replay binaries time nothing: as many at once as
    # end-to-end tests, each reported as it ends. Three at a time on two
    # cores: most tests wait on their servers, not on the CPU (the load
    # average stays near 1.5 with two).
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_binary, path): name for name, path in bins if want(name)}
        for f in concurrent.futures.as_completed(futures):
            name = futures[f]
            code, out, dt = f.result()
            if code == 0:
                passed += 1
                print(f"ok    {name} ({dt:.2f} s)", flush=True)
            else:
                failed += 1
                failures.append(name)
                print(f"FAIL  {name} (exit {code})\n{out.decode(errors='replace')[-4000:]}", flush=True)

    counts = {"passed": 0, "failed": 0}

    def report(name, err, dt):
        if err is None:
            counts["passed"] += 1
            print(f"ok    {name} ({dt:.2f} s)", flush=True)
        else:
            counts["failed"] += 1
            failures.append(name)
            print(f"FAIL  {name} ({dt:.2f} s)\n{err}", flush=True)

    run_e2e_all([t for t in e2e if want(t[0])], jobs, report)
    passed += counts["passed"]
    failed += counts["failed"]

    if failures:
        print("failed: " + ", ".join(failures))
    for f in unmatched:
        print(f"no test matches {f!r}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed or unmatched else 0)


if __name__ == "__main__":
    main()
