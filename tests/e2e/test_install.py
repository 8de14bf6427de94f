# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: `make install` and `make uninstall`.

`make install DESTDIR=<temporary folder>` lays out the binary, every tool
in load/ (the C programs and the scripts, which run the installed tools
beside them), /etc/herald/herald.conf (pointing at the service's database, mode
0640 as it may hold tokens, and accepted by herald --check-config), the
units with PREFIX filled in, the sysusers.d entry, herald(8) and the
examples; an existing herald.conf is
never overwritten; `make uninstall` removes everything again except a
herald.conf edited since. Installed with DESTDIR=/ and PREFIX inside a
temporary folder, the units name an existing binary and man page, so
`systemd-analyze verify` checks them as installed.

The suite has already built herald and the tools (ASan, build/asan), so the
tests install that build (BUILD=..., HERALD=...) with `make -o all`: they
exercise the install recipe without rebuilding the shared tree with other
flags."""
import grp
import json
import os
import shutil
import stat
import subprocess
import tempfile

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_tools():
    """Every tool in load/: each C program (a load/NAME.c with a main; the
    other .c files are parts of one) and each script (an executable file
    starting with #!; the links load/NAME, which run a C tool in the tree,
    are not scripts of their own)."""
    d = os.path.join(ROOT, "load")
    tools = []
    for fn in sorted(os.listdir(d)):
        p = os.path.join(d, fn)
        if fn.endswith(".c"):
            with open(p) as f:
                if "\nint main(" in f.read():
                    tools.append(fn[:-2])
        elif "." not in fn and not os.path.islink(p) and os.path.isfile(p) and os.access(p, os.X_OK):
            with open(p, "rb") as f:
                if f.read(2) == b"#!":
                    tools.append(fn)
    return tools


LOAD_TOOLS = _load_tools()


def _make(target, **vars):
    binary = os.path.abspath(harness.HERALD_BIN)
    build = os.path.join(ROOT, os.environ.get("HERALD_BUILD") or os.path.dirname(binary))
    cmd = ["make", "--no-print-directory", "-o", "all", target, f"BUILD={build}", f"HERALD={binary}"]
    cmd += [f"{k}={v}" for k, v in vars.items()]
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{out}"
    return out


def _files(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def _expected(prefix="usr/local", etc="etc"):
    files = {
        f"{prefix}/bin/herald",
        f"{prefix}/lib/systemd/system/herald.service",
        f"{prefix}/lib/systemd/system/herald.socket",
        f"{prefix}/lib/systemd/system/herald@.service",
        f"{prefix}/lib/sysusers.d/herald.conf",
        f"{prefix}/share/man/man8/herald.8",
        f"{prefix}/share/herald/Caddyfile",
        f"{prefix}/share/herald/Caddyfile.cluster",
        f"{prefix}/share/herald/herald-unix.conf",
        f"{prefix}/share/herald/60-herald.conf",
        f"{etc}/herald/herald.conf",
    }
    files |= {f"{prefix}/lib/herald/load/{t}" for t in LOAD_TOOLS}
    files.add(f"{prefix}/lib/herald/load/tool_herald.py")  # what the scripts share
    return files


def _read(path):
    with open(path) as f:
        return f.read()


def test_install_layout_and_uninstall():
    dest = tempfile.mkdtemp(prefix="herald-destdir-")
    try:
        _make("install", DESTDIR=dest)
        got = _files(dest)
        assert got == _expected(), f"missing {sorted(_expected() - got)}, unexpected {sorted(got - _expected())}"
        for rel in ["usr/local/bin/herald"] + [f"usr/local/lib/herald/load/{t}" for t in LOAD_TOOLS]:
            mode = os.stat(os.path.join(dest, rel)).st_mode
            assert mode & stat.S_IXUSR and mode & stat.S_IXOTH, f"{rel} is not executable ({oct(mode)})"
        with open(os.path.join(dest, "usr/local/bin/herald"), "rb") as a, open(harness.HERALD_BIN, "rb") as b:
            assert a.read() == b.read(), "the installed herald differs from the built one"
        unit = _read(os.path.join(dest, "usr/local/lib/systemd/system/herald.service"))
        assert "ExecStart=/usr/local/bin/herald --config /etc/herald/herald.conf" in unit, unit
        assert _read(os.path.join(dest, "usr/local/lib/systemd/system/herald.socket")) == \
            _read(os.path.join(ROOT, "systemd/herald.socket"))
        assert _read(os.path.join(dest, "usr/local/lib/sysusers.d/herald.conf")).count("\nu herald ") == 1
        man = _read(os.path.join(dest, "usr/local/share/man/man8/herald.8"))
        for section in ("OPTIONS", "CONFIGURATION", "SIGNALS", "FILES", "EXIT STATUS"):
            assert f".SH {section}\n" in man, f"herald(8) has no {section} section"
        r = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(dest, "usr/local/share/man/man8/herald.8")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30) \
            if shutil.which("groff") else None
        assert r is None or (r.returncode == 0 and not r.stdout), r.stdout if r else None

        conf = os.path.join(dest, "etc/herald/herald.conf")
        text = _read(conf)
        assert "\ndb = /var/lib/herald/herald.db\n" in text, text
        # It may hold tokens: never readable by every user.
        st = os.stat(conf)
        assert st.st_mode & 0o777 == 0o640, oct(st.st_mode)
        if os.geteuid() == 0:
            try:
                want_gid = grp.getgrnam("herald").gr_gid
            except KeyError:
                want_gid = 0
            assert st.st_gid == want_gid, f"herald.conf's group is {st.st_gid}, not {want_gid}"
        r = subprocess.run([harness.HERALD_BIN, "--config", conf, "--check-config"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        assert r.returncode == 0, r.stdout.decode(errors="replace")

        # A second install keeps the operator's configuration.
        with open(conf, "a") as f:
            f.write("per_address_limit = 7\n")
        edited = _read(conf)
        out = _make("install", DESTDIR=dest)
        assert "keeping the existing" in out, out
        assert _read(conf) == edited

        # Uninstall removes every file but the edited configuration.
        out = _make("uninstall", DESTDIR=dest)
        assert _files(dest) == {"etc/herald/herald.conf"}, sorted(_files(dest))
        assert "edited" in out, out
        # An unedited configuration goes too, with its folder.
        _make("install", DESTDIR=dest)
        os.unlink(conf)
        _make("install", DESTDIR=dest)
        _make("uninstall", DESTDIR=dest)
        assert _files(dest) == set(), sorted(_files(dest))
        assert not os.path.exists(os.path.join(dest, "etc/herald"))
    finally:
        shutil.rmtree(dest, ignore_errors=True)


test_install_layout_and_uninstall.timeout = 180


def test_install_prefix_and_installed_units_verify():
    # DESTDIR=/ with every folder inside a temporary one: the units then
    # name a binary that exists, so systemd-analyze can check them as
    # installed (and no user is created: DESTDIR is set).
    top = tempfile.mkdtemp(prefix="herald-prefix-")
    try:
        prefix = os.path.join(top, "usr")
        etc = os.path.join(top, "etc")
        _make("install", DESTDIR="/", PREFIX=prefix, SYSCONFDIR=etc)
        mode = os.stat(os.path.join(etc, "herald/herald.conf")).st_mode & 0o777
        assert mode == 0o640, oct(mode)
        got = _files(top)
        want = _expected(prefix="usr", etc="etc")
        assert got == want, f"missing {sorted(want - got)}, unexpected {sorted(got - want)}"
        unitdir = os.path.join(prefix, "lib/systemd/system")
        unit = _read(os.path.join(unitdir, "herald.service"))
        assert f"ExecStart={prefix}/bin/herald --config {etc}/herald/herald.conf " in unit, unit
        man = _read(os.path.join(prefix, "share/man/man8/herald.8"))
        assert f"{prefix}/share/herald/" in man and "/usr/local/" not in man

        env = dict(os.environ)
        env["SYSTEMD_UNIT_PATH"] = unitdir + ":"
        env["MANPATH"] = os.path.join(prefix, "share/man") + ":"
        env["SYSTEMD_LOG_COLOR"] = "0"
        man = [] if shutil.which("man") else ["--man=no"]
        r = subprocess.run(["systemd-analyze", "verify"] + man + ["herald.service", "herald.socket",
                                                                  "herald@8201.service"], env=env, cwd=top,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        out = r.stdout.decode(errors="replace")
        assert r.returncode == 0 and not out.strip(), f"verify of the installed units ({r.returncode}):\n{out}"
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20",
                            os.path.join(unitdir, "herald.service")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0, r.stdout.decode(errors="replace")

        _make("uninstall", DESTDIR="/", PREFIX=prefix, SYSCONFDIR=etc)
        assert _files(top) == set(), sorted(_files(top))
    finally:
        shutil.rmtree(top, ignore_errors=True)


test_install_prefix_and_installed_units_verify.timeout = 180


def _pc_dir_without(*names):
    """A folder of links to every pkg-config file on this system but the
    named packages' (PKG_CONFIG_LIBDIR pointed at it: those look missing)."""
    d = tempfile.mkdtemp(prefix="herald-pc-")
    path = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"], stdout=subprocess.PIPE, text=True,
                          timeout=10).stdout.strip()
    for folder in path.split(":"):
        if not os.path.isdir(folder):
            continue
        for fn in os.listdir(folder):
            if fn.endswith(".pc") and fn[:-3] not in names and not os.path.exists(os.path.join(d, fn)):
                os.symlink(os.path.join(folder, fn), os.path.join(d, fn))
    return d


def test_build_names_a_missing_library_package():
    """With one library's pkg-config package missing, the build stops before
    compiling anything and names it with its Debian package, instead of
    failing at the link with undefined references; targets that build
    nothing (clean) are not stopped."""
    pc = _pc_dir_without("hiredis")
    build = tempfile.mkdtemp(prefix="herald-build-")
    try:
        env = dict(os.environ, PKG_CONFIG_LIBDIR=pc)
        env.pop("PKG_CONFIG_PATH", None)
        # A private build folder and the herald binary alone: the tree's
        # load tools are not touched, whatever happens.
        r = subprocess.run(["make", "--no-print-directory", f"BUILD={build}", "OPT=-O0", f"{build}/herald"],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        out = r.stdout.decode(errors="replace")
        assert r.returncode != 0, out
        assert "missing pkg-config package(s): hiredis (Debian: libhiredis-dev)" in out, out
        assert "scripts/deps" in out, out
        assert " -c src/" not in out and not os.path.exists(os.path.join(build, "obj")), out
        # Two missing: both named.
        pc2 = _pc_dir_without("hiredis", "inih")
        try:
            r = subprocess.run(["make", "--no-print-directory", f"BUILD={build}", f"{build}/herald"], cwd=ROOT,
                               env=dict(env, PKG_CONFIG_LIBDIR=pc2), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
            out = r.stdout.decode(errors="replace")
            assert r.returncode != 0 and "inih (Debian: libinih-dev)" in out and "libhiredis-dev" in out, out
        finally:
            shutil.rmtree(pc2, ignore_errors=True)
        # clean builds nothing: it is not stopped.
        r = subprocess.run(["make", "--no-print-directory", "-n", "clean"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0 and "missing" not in r.stdout.decode(), r.stdout.decode()
    finally:
        shutil.rmtree(pc, ignore_errors=True)
        shutil.rmtree(build, ignore_errors=True)


test_build_names_a_missing_library_package.timeout = 600


def test_installed_scripts_run_the_installed_tools():
    """The scripts among the tools, installed to a folder of their own, run
    the tools installed beside them (not the tree's) and find herald."""
    dest = tempfile.mkdtemp(prefix="herald-destdir-")
    try:
        _make("install", DESTDIR=dest, TOOLDIR="/opt/herald-tools")
        tools = os.path.join(dest, "opt/herald-tools")
        assert set(os.listdir(tools)) == set(LOAD_TOOLS) | {"tool_herald.py"}, sorted(os.listdir(tools))
        env = dict(os.environ, HERALD_BIN=os.path.abspath(harness.HERALD_BIN))
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        for name in ("bench", "plot", "bench-tokens", "bench-redis", "bench-workers", "bench-catchup", "bench-check",
                     "bench-peer", "bench-adversary", "bench-h2c"):
            r = subprocess.run([os.path.join(tools, name), "--help"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, timeout=30)
            assert r.returncode == 0 and r.stdout.startswith(f"usage: load/{name}".encode()), (name, r.stdout)
        # bench-tokens runs the readers installed beside it: with the tree's
        # out of reach (a copy of the folder elsewhere), it still works.
        moved = os.path.join(dest, "elsewhere")
        shutil.copytree(tools, moved)
        r = subprocess.run([os.path.join(moved, "bench-tokens"), "3"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env, cwd=dest, timeout=120)
        out = r.stdout.decode(errors="replace")
        js = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
        assert r.returncode == 0 and [x["opened"] for x in js["runs"]] == [3] * len(js["runs"]), out
        assert {x["token"] for x in js["runs"]} == {"no token", "HS256", "ES256"}, out
        # Without HERALD_BIN the installed scripts find herald as the C tools do.
        env.pop("HERALD_BIN")
        r = subprocess.run(["python3", os.path.join(tools, "tool_herald.py")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env, timeout=30)
        assert r.returncode == 0 or b"no herald to start" in r.stdout, r.stdout
    finally:
        shutil.rmtree(dest, ignore_errors=True)


test_installed_scripts_run_the_installed_tools.timeout = 240
