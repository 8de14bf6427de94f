# SPDX-License-Identifier: BSD-2-Clause
"""The documentation does not drift from herald: every configuration key
is in the example configuration, the table of docs/configuration.md and
the man page, and the example configuration passes --check-config; every
load tool has its row in docs/tools.md; the shapes and commands the pages
give are the ones herald answers and needs. The README stays short and
links every page of docs/, and every relative link and #anchor between
them resolves."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from harness import HERALD_BIN, Herald, request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _keys():
    out = subprocess.run([HERALD_BIN, "--help"], capture_output=True, text=True, timeout=10).stdout
    keys = re.findall(r"^  ([a-z_]+) ", out.split("Keys and defaults", 1)[1], re.M)
    assert len(keys) > 20, out
    return keys


def _read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def test_every_key_is_documented():
    conf, page, man = _read("conf/herald.conf"), _read("docs/configuration.md"), _read("docs/herald.8")
    # The table's rows: a key named only in prose elsewhere on the page does not count.
    table = "\n".join(ln for ln in page.splitlines() if ln.startswith("| `"))
    missing = []
    for k in _keys():
        if not re.search(rf"^{k} =", conf, re.M):
            missing.append(f"{k}: conf/herald.conf")
        if not re.search(rf"^\| (`[a-z_]+`, )*`{k}`", table, re.M):
            missing.append(f"{k}: docs/configuration.md")
        if k not in man:
            missing.append(f"{k}: docs/herald.8")
    assert not missing, "undocumented keys: " + ", ".join(missing)


def test_example_configuration_is_valid():
    r = subprocess.run([HERALD_BIN, "--config", os.path.join(ROOT, "conf/herald.conf"), "--check-config"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert "configuration OK" in r.stdout, r.stdout


def _git(*args):
    return subprocess.run(["git", "-C", ROOT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=30)


# What a run leaves behind: logs, databases, Redis' snapshots and AOF.
RUN_LEFTOVERS = ["r2.log", "redis.log", "herald.log", "dump.rdb", "appendonly.aof", "appendonlydir/x.aof",
                 "herald.db", "herald.db-wal", "load/x.log", "tests/e2e/x.log"]


def test_no_run_leftovers_in_the_tree():
    """No log, database or Redis file is part of the source, and git ignores
    such files wherever a run leaves them."""
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        return  # not a git checkout (an unpacked archive): nothing tracked to check
    tracked = [f for f in _git("ls-files").stdout.splitlines()
               if re.search(r"(\.log|\.rdb|\.aof|\.db|\.db-wal|\.db-shm)$|(^|/)appendonlydir/", f)]
    assert not tracked, f"run leftovers committed: {tracked}"
    r = _git("check-ignore", "--no-index", *RUN_LEFTOVERS)
    ignored = set(r.stdout.split())
    assert ignored == set(RUN_LEFTOVERS), f"not ignored: {sorted(set(RUN_LEFTOVERS) - ignored)}"


def _fake_tree(builds):
    """tests/run.py copied into a temporary tree with, for each (folder,
    has_tests, age_s) in builds, a herald and (when has_tests) a passing unit
    test binary test_alpha there, their times age_s seconds in the past."""
    top = tempfile.mkdtemp(prefix="herald-test-runpy-")
    os.makedirs(os.path.join(top, "tests", "e2e"))
    shutil.copy(os.path.join(ROOT, "tests", "run.py"), os.path.join(top, "tests", "run.py"))
    now = time.time()
    for folder, has_tests, age in builds:
        files = [os.path.join(top, folder, "herald")]
        if has_tests:
            files.append(os.path.join(top, folder, "tests", "test_alpha"))
        for f in files:
            os.makedirs(os.path.dirname(f), exist_ok=True)
            with open(f, "w") as fh:
                fh.write(f"#!/bin/sh\n# {folder}\nexit 0\n")
            os.chmod(f, 0o755)
            os.utime(f, (now - age, now - age))
    return top


def _run_py(top, *words, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("HERALD_BUILD", "HERALD_BIN")}
    e.update(env or {})
    r = subprocess.run([sys.executable, os.path.join(top, "tests", "run.py")] + list(words), cwd=top, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.returncode, r.stdout


def test_run_py_after_make_test_runs_the_asan_build():
    """`python3 tests/run.py WORD` as docs/development.md says, after `make test`
    (which builds into build/asan) and perhaps `make` (build/, no tests):
    it runs the tests of the build that has them, newest first, and says
    which on its first line; a word that matches no test is said plainly,
    with a failing exit status."""
    cases = [
        ([("build/asan", True, 0)], "build/asan"),                        # make test only
        ([("build", False, 0), ("build/asan", True, 100)], "build/asan"),  # make test, then make
        ([("build", True, 100), ("build/asan", True, 0)], "build/asan"),  # both built, asan newer
        ([("build", True, 0), ("build/asan", True, 100)], "build"),       # both built, release newer
    ]
    for builds, want in cases:
        top = _fake_tree(builds)
        try:
            code, out = _run_py(top, "alpha")
            first = out.splitlines()[0] if out else ""
            assert code == 0 and "ok    tests/test_alpha" in out and "1 passed, 0 failed" in out, (builds, out)
            assert f" {want} " in first + " " and f"{want}/herald" in first, (builds, want, out)
            # A filter that matches nothing.
            code, out = _run_py(top, "nosuchtest")
            assert code != 0 and "no test matches 'nosuchtest'" in out, (builds, out)
            assert "0 passed, 0 failed" not in out, out
            # One word matches, another does not: the run fails and says which.
            code, out = _run_py(top, "alpha", "nosuchtest")
            assert code != 0 and "ok    tests/test_alpha" in out and "no test matches 'nosuchtest'" in out, out
            # HERALD_BUILD, when set, is what runs.
            other = "build" if want == "build/asan" else "build/asan"
            code, out = _run_py(top, "alpha", env={"HERALD_BUILD": other})
            assert f"{other}/herald" in out.splitlines()[0], out
        finally:
            shutil.rmtree(top, ignore_errors=True)


def test_deployment_packages_build_herald():
    """docs/deployment.md's `apt-get install` line names every package a
    build needs: the compiler and tools, and each library's -dev package that
    the Makefile checks for (and scripts/deps installs)."""
    page, deps, mk = _read("docs/deployment.md"), _read("scripts/deps"), _read("Makefile").replace("\\\n", " ")
    section = page.split("# Deployment", 1)[1]
    m = re.search(r"apt-get install -y ((?:[^\n\\]|\\\n)+)", section)
    assert m, "no apt-get install line in docs/deployment.md"
    listed = set(m.group(1).replace("\\\n", " ").split())
    deps_pkgs = set(re.search(r'^PKGS="([^"]*)"', deps, re.M).group(1).split())
    make_pkgs = set(re.findall(r"=(lib[a-z0-9-]+-dev)\b", re.search(r"^PKG_DEBIAN\s*:=(.*)$", mk, re.M).group(1)))
    build = {"gcc", "make", "pkg-config", "libc6-dev"} | {p for p in deps_pkgs if p.endswith("-dev")}
    assert make_pkgs <= deps_pkgs, f"the Makefile checks for packages scripts/deps lacks: {make_pkgs - deps_pkgs}"
    assert build <= listed, f"docs/deployment.md's apt-get install lacks {sorted(build - listed)}"


def test_health_answer_is_as_documented():
    """docs/health.md's shape of /api/health has the keys a real herald
    answers with, one process and a group of workers (which adds the worker
    that answered, as docs/cluster.md says)."""
    health, cluster = _read("docs/health.md"), _read("docs/cluster.md")
    m = re.search(r"Health \(also `HEAD`\): `(\{[^`]*\})`", health)
    assert m, "docs/health.md documents no /api/health answer"
    documented = re.findall(r'"([a-z0-9_]+)":', m.group(1))
    with Herald() as h:
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, body
        got = list(json.loads(body))
    assert documented == got, f"docs/health.md says {documented}, herald answers {got}"
    with Herald(args=["--workers", "2"]) as h:
        st, _, body = request(h.port, "GET", "/api/health")
        extra = set(json.loads(body)) - set(got)
    assert extra == {"worker"}, extra
    assert re.search(r"`/api/health` gives `workers`.*the `worker` that\s+answered", cluster, re.S), \
        "docs/cluster.md does not say what a group's health answer adds"


def _man_section(man, name):
    m = re.search(rf"^\.SH {name}\n(.*?)(?=^\.SH )", man, re.M | re.S)
    assert m, f"herald(8) has no {name} section"
    return m.group(1)


def test_man_page_synopsis_files_and_description():
    """herald(8): every option --help lists is in the SYNOPSIS; every file
    `make install` puts in the unit and example folders is under FILES; and
    the description does not call herald one process when workers make it
    several."""
    man = _read("docs/herald.8")
    usage = subprocess.run([HERALD_BIN, "--help"], capture_output=True, text=True, timeout=10).stdout
    synopsis = _man_section(man, "SYNOPSIS").replace("\\-", "-")
    for opt in sorted(set(re.findall(r"--[a-z][a-z-]+", usage.split("\n\n", 1)[0]))):
        assert opt in synopsis, f"{opt} is missing from herald(8)'s SYNOPSIS"
    files = _man_section(man, "FILES").replace("\\-", "-").replace("\\&", "")
    mk = _read("Makefile").replace("\\\n", " ")
    installed = re.findall(r"> \$\(DESTDIR\)\$\(UNITDIR\)/(\S+)", mk)
    installed += re.findall(r"\$\(DESTDIR\)\$\(UNITDIR\)/(herald\.socket)", mk)
    share = re.search(r"install -m 644 ((?:[^\s$]\S*[ \t]+)+)\$\(DESTDIR\)\$\(SHAREDIR\)/", mk)
    assert share and installed, "cannot find the install recipe"
    installed += [os.path.basename(p) for p in share.group(1).split()]
    for name in sorted(set(installed)):
        assert name in files, f"{name} (installed by make install) is missing from herald(8)'s FILES"
    description = _man_section(man, "DESCRIPTION")
    assert "one process with one thread" not in description, "herald(8) says herald is always one process"
    assert "workers" in description


def test_cookie_streams_without_origin_are_documented():
    """A stream authorized by cookie with no Origin header is served (a
    browser sends none on a same-origin GET); docs/tokens.md, docs/browsers.md
    and SECURITY.md say so and why, beside the refusal of an unlisted Origin."""
    for rel in ("docs/tokens.md", "docs/browsers.md", "docs/SECURITY.md"):
        text = re.sub(r"\s+", " ", _read(rel))
        assert re.search(r"[Ww]ithout an `Origin`|with no `Origin`|no `Origin` header", text), \
            f"{rel} does not say what happens to a cookie stream without Origin"
        assert "same-origin" in text, f"{rel} does not say why a request without Origin is served"


def test_every_benchmark_names_its_commit_and_date():
    """Each section of docs/BENCHMARKS.md with figures names the commit it
    measured and the date; the pictures in docs/bench come with the note of
    the run that drew them (run.txt: its date, commit and commands), the CSV
    files they were drawn from, and BENCHMARKS.md names that same run."""
    text = _read("docs/BENCHMARKS.md")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    missing = []
    for sec in sections:
        title = sec.splitlines()[0]
        if not re.search(r"^\|.*\d", sec, re.M):
            continue  # no table of figures
        if not re.search(r"commits? `?[0-9a-f]{7}\b", sec):
            missing.append(f"{title}: no commit")
        if not re.search(r"\b20\d\d-\d\d-\d\d\b", sec):
            missing.append(f"{title}: no date")
    assert not missing, "BENCHMARKS.md sections without their commit or date: " + "; ".join(missing)
    run = _read("docs/bench/run.txt")
    commit = re.search(r"^- commit: ([0-9a-f]{7,})\s*$", run, re.M)
    date = re.search(r"^- date: (20\d\d-\d\d-\d\d) ", run, re.M)
    assert commit and date, run
    for name in ("latency", "opens", "rate"):
        assert os.path.exists(os.path.join(ROOT, "docs", "bench", name + ".png")), name
        assert os.path.exists(os.path.join(ROOT, "docs", "bench", name + ".csv")), name
    pictures = text.split("### Pictures", 1)[1].split("\n## ", 1)[0]
    assert commit.group(1) in pictures and date.group(1) in pictures, \
        f"BENCHMARKS.md's pictures section does not name their run ({commit.group(1)}, {date.group(1)})"


def test_every_load_tool_is_documented():
    """Every tool the Makefile builds or installs from load/ has its row in
    docs/tools.md's table, under the name it is run by (`load/NAME`)."""
    mk = _read("Makefile").replace("\\\n", " ")
    names = []
    for var in ("LOAD_TOOLS", "LOAD_SCRIPTS"):
        m = re.search(rf"^{var}\s*:=(.*)$", mk, re.M)
        assert m, f"no {var} in the Makefile"
        names += m.group(1).split()
    assert len(names) > 10, names
    rows = [ln for ln in _read("docs/tools.md").splitlines() if ln.startswith("| `load/")]
    missing = [n for n in names if not any(re.match(rf"\| `load/{re.escape(n)}[ `]", r) for r in rows)]
    assert not missing, f"load tools without a row in docs/tools.md: {missing}"


# The pages of docs/ a newcomer reaches from the README (the man page is
# not Markdown; SECURITY, ARCHITECTURE and BENCHMARKS are linked too).
def _pages():
    return sorted(f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))


def test_readme_is_short_and_links_every_page():
    """README.md is read in five minutes: at most 250 lines, and it links
    every page of docs/, where the rest lives."""
    readme = _read("README.md")
    n = len(readme.splitlines())
    assert n <= 250, f"README.md has {n} lines, more than 250: move the detail to a page of docs/"
    links = set(re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)", readme))
    unlinked = [p for p in _pages() if f"docs/{p}" not in links]
    assert not unlinked, f"pages of docs/ the README does not link: {unlinked}"
    for must in ("make run", "make test", "LICENSE"):
        assert must in readme, f"README.md does not mention {must}"


def _slug(heading):
    """The anchor GitHub gives a heading: its text as rendered (no code
    ticks, links reduced to their text), lower case, every character but
    letters, digits, '_', '-' and spaces dropped, spaces made dashes."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _markdown(rel):
    """(anchors, links) of a Markdown file, outside fenced code and inline
    code: the anchors its headings get (a repeated one numbered as GitHub
    numbers it) and each link's (line number, target)."""
    anchors, seen, links, fence = set(), {}, [], False
    for no, line in enumerate(_read(rel).splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        m = re.match(r"^#{1,6} (.*?)\s*#*\s*$", line)
        if m:
            s = _slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            anchors.add(s if n == 0 else f"{s}-{n}")
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            links.append((no, target))
    return anchors, links


def test_every_link_and_anchor_resolves():
    """Every relative link in README.md and docs/*.md names a file of the
    tree, and every #anchor a heading of the page it points at, as GitHub
    makes anchors."""
    files = ["README.md"] + [f"docs/{p}" for p in _pages()]
    parsed = {rel: _markdown(rel) for rel in files}
    bad, checked = [], 0
    for rel in files:
        for no, target in parsed[rel][1]:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto: and the like: not the tree's
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
            checked += 1
            if not os.path.exists(os.path.join(ROOT, dest)):
                bad.append(f"{rel}:{no}: {target}: no file {dest}")
                continue
            if anchor:
                if dest not in parsed:
                    if dest.endswith(".md"):
                        parsed[dest] = _markdown(dest)
                    else:
                        bad.append(f"{rel}:{no}: {target}: an anchor into a file that is not Markdown")
                        continue
                if anchor not in parsed[dest][0]:
                    bad.append(f"{rel}:{no}: {target}: {dest} has no heading #{anchor}")
    assert checked > 20, f"only {checked} links found: the link parser is broken"
    assert not bad, "links that do not resolve:\n" + "\n".join(bad)


def test_licence_is_named_everywhere():
    """LICENSE holds the BSD-2-Clause text; the README names it, and so do
    debian/copyright (machine-readable, the same text) and herald(8)."""
    lic = _read("LICENSE")
    assert lic.startswith("BSD 2-Clause License\n"), lic[:80]
    assert "\nCopyright (c) 2026 the herald authors\n" in lic
    body = lic.split("\n\n", 2)[2].strip()
    assert body.startswith("Redistribution and use") and body.endswith("POSSIBILITY OF SUCH DAMAGE."), body
    assert re.search(r"\]\(LICENSE\)", _read("README.md")), "README.md does not link LICENSE"
    deb = _read("debian/copyright")
    assert deb.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    assert re.search(r"^Files: \*\nCopyright: 2026 the herald authors\nLicense: BSD-2-Clause$", deb, re.M), deb
    m = re.search(r"^License: BSD-2-Clause\n((?: .*\n)+)", deb, re.M)
    assert m, "debian/copyright has no BSD-2-Clause licence paragraph"
    text = "\n".join("" if ln == " ." else ln[1:] for ln in m.group(1).rstrip("\n").split("\n"))
    assert text == body, "debian/copyright's BSD-2-Clause text is not LICENSE's"
    copyright = _man_section(_read("docs/herald.8"), "COPYRIGHT").replace("\\-", "-")
    assert "BSD-2-Clause" in copyright and "2026 the herald authors" in copyright, copyright


SPDX = "SPDX-License-Identifier: BSD-2-Clause"


def _source_files():
    """herald's own source files git tracks: C, Python, Lua, JavaScript,
    the console's HTML, shell (by extension or a #! line) and the Makefile;
    not the Mercure conformance
    suite, which is another project's (AGPL, named in debian/copyright)."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for f in out.split():
        if f.startswith(("tests/mercure-conformance/", "debian/")) or "node_modules" in f:
            continue
        ext = os.path.splitext(f)[1]
        path = os.path.join(ROOT, f)
        if ext in (".c", ".h", ".py", ".lua", ".sh", ".mjs", ".html") or f == "Makefile":
            yield f, path
        elif not ext and os.path.isfile(path) and os.access(path, os.X_OK):
            with open(path, "rb") as fh:
                if fh.read(2) == b"#!":
                    yield f, path


def test_every_source_file_names_its_licence():
    """Each source file says its licence in its first lines (SPDX), so a
    file copied out of the tree keeps it."""
    missing, seen = [], 0
    for f, path in _source_files():
        seen += 1
        with open(path, encoding="utf-8") as fh:
            head = [fh.readline() for _ in range(2)]
        if not any(SPDX in line for line in head):
            missing.append(f)
    assert seen > 300, seen
    assert not missing, f"{len(missing)} source files without '{SPDX}' in their first two lines: {missing[:20]}"
