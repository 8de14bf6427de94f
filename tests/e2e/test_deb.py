# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: the Debian packages, built, checked, installed on this machine,
upgraded and purged.

`make deb` builds herald and herald-tools in a temporary folder (from a copy
of the tree, as it always does), lintian finds no error and no warning in
either, and `dpkg -i` installs them here: the files with their modes and
owners, the system user herald, herald.conf readable by the service's group
only, the units enabled the Debian way and accepted by `systemd-analyze
verify`, and the installed herald, run as user herald, loads the installed
configuration and serves. A second build with the next version installed
over an edited herald.conf keeps the edit; purge removes every file, the
enablement links, /etc/herald and /var/lib/herald, and keeps the user (as
Debian does with system users, whose files may outlive the package).

Installing is real, so the test needs root (it says so and does nothing
otherwise), refuses to run while a herald package is already installed, and
purges in a finally, also when the test runner's time limit ends it. No
service starts: systemd is not running here, and where it runs a
policy-rc.d keeps the maintainer scripts from starting anything."""

# Installs and purges the package on this machine, yet may run beside the
# other tests: they start herald from the build under test and install only
# into temporary folders (their units first on SYSTEMD_UNIT_PATH), so none
# of them reads what the package puts in /usr, /etc or /lib/systemd.
import grp
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICY_RC_D = "/usr/sbin/policy-rc.d"
UNITS = ("herald.service", "herald.socket", "herald@.service")


def _run(cmd, cwd=None, timeout=300, env=None, ok=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = r.stdout.decode(errors="replace")
    if ok:
        assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{out[-6000:]}"
    return r.returncode, out


def _read(path):
    with open(path) as f:
        return f.read()


def _version():
    return _run(["make", "--no-print-directory", "-s", "version"], cwd=ROOT)[1].strip()


def _copy_tree(dest):
    """The files git tracks (or, outside a checkout, all but build/) into dest."""
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if r.returncode == 0:
        for rel in r.stdout.decode().split("\0"):
            if not rel:
                continue
            src, dst = os.path.join(ROOT, rel), os.path.join(dest, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif os.path.isfile(src):
                shutil.copy2(src, dst)
    else:
        shutil.copytree(ROOT, dest, symlinks=True, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True)


def _build(tree, out):
    """`make deb` in tree into out; the paths of herald's and herald-tools' .deb."""
    _run(["make", "--no-print-directory", "deb", f"DEB_OUT={out}"], cwd=tree, timeout=400)
    debs = sorted(f for f in os.listdir(out) if f.endswith(".deb") and "dbgsym" not in f)
    herald = [f for f in debs if f.startswith("herald_")]
    tools = [f for f in debs if f.startswith("herald-tools_")]
    assert len(herald) == 1 and len(tools) == 1, debs
    return os.path.join(out, herald[0]), os.path.join(out, tools[0])


def _bump(tree, old, new):
    """The copied tree at version new: the Makefile's VERSION, a changelog
    entry, and a changed herald.conf (so dpkg has a conffile to decide on)."""
    mk = os.path.join(tree, "Makefile")
    text = _read(mk)
    assert f"VERSION   := {old}\n" in text
    with open(mk, "w") as f:
        f.write(text.replace(f"VERSION   := {old}\n", f"VERSION   := {new}\n"))
    cl = os.path.join(tree, "debian/changelog")
    entry = (f"herald ({new}) unstable; urgency=medium\n\n  * The next release.\n\n"
             " -- herald maintainers <maintainers@users.noreply.a-seed-aa4ea1dc.example>  "
             "Wed, 02 Dec 2026 12:00:00 +0000\n\n")
    text = _read(cl)
    with open(cl, "w") as f:
        f.write(entry + text)
    with open(os.path.join(tree, "conf/herald.conf"), "a") as f:
        f.write("; A line added in the next release.\n")


def _installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    st = r.stdout.decode().split()
    return st[1] if r.returncode == 0 and st and st[0] == "installed" and len(st) > 1 else None


def _status(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status}", pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    return r.stdout.decode().strip() if r.returncode == 0 else ""


def _purge():
    subprocess.run(["dpkg", "--purge", "herald-tools", "herald"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   timeout=120)


def _dpkg_install(*debs, env=None):
    e = dict(os.environ)
    e["DEBIAN_FRONTEND"] = "noninteractive"
    e.update(env or {})
    return _run(["dpkg", "-i", "--force-confold"] + list(debs), env=e, timeout=120)[1]


def _owner(path):
    st = os.stat(path)
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, stat.S_IMODE(st.st_mode)


def _check_lintian(*debs):
    code, out = _run(["lintian", "--fail-on", "error,warning"] + list(debs), ok=False, timeout=300)
    tags = [ln for ln in out.splitlines() if re.match(r"[EW]: ", ln)]
    assert code == 0 and not tags, f"lintian ({code}):\n{out}"


def _check_installed(version):
    assert _installed("herald") == version and _installed("herald-tools") == version
    assert _owner("/usr/bin/herald") == ("root", "root", 0o755)
    user = pwd.getpwnam("herald")
    assert user.pw_uid < 1000 and user.pw_dir == "/var/lib/herald" and user.pw_shell == "/usr/sbin/nologin", user
    assert grp.getgrgid(user.pw_gid).gr_name == "herald"
    # It may hold tokens: root writes it, the service's group reads it.
    assert _owner("/etc/herald/herald.conf") == ("root", "herald", 0o640), _owner("/etc/herald/herald.conf")
    assert "\ndb = /var/lib/herald/herald.db\n" in _read("/etc/herald/herald.conf")
    assert "/etc/herald/herald.conf" in _read("/var/lib/dpkg/info/herald.conffiles").split()
    for u in UNITS:
        p = f"/lib/systemd/system/{u}"
        assert _owner(p) == ("root", "root", 0o644), (p, _owner(p))
        text = "".join(ln for ln in _read(p).splitlines(True) if not ln.startswith("#"))
        assert "/usr/local" not in text, f"{p} names /usr/local"
        if u.endswith(".service"):
            assert re.search(r"^ExecStart=/usr/bin/herald --config /etc/herald/herald.conf ", text, re.M), text
    # Enabled the Debian way (deb-systemd-helper's links, as systemctl enable makes them).
    assert os.path.islink("/etc/systemd/system/multi-user.target.wants/herald.service")
    assert os.path.islink("/etc/systemd/system/sockets.target.wants/herald.socket")
    assert _read("/usr/lib/sysusers.d/herald.conf").count("\nu herald ") == 1
    man = subprocess.run(["zcat", "/usr/share/man/man8/herald.8.gz"], stdout=subprocess.PIPE, timeout=30).stdout
    man = man.decode()
    assert ".SH OPTIONS\n" in man and "/usr/local/" not in man and "/usr/share/herald/" in man
    for t in ("readers", "open-only", "overflow-report", "publish", "bench", "plot"):
        p = f"/usr/lib/herald/load/{t}"
        assert _owner(p) == ("root", "root", 0o755), (p, _owner(p))


def _check_units_verify():
    env = dict(os.environ)
    env["SYSTEMD_LOG_COLOR"] = "0"
    man = [] if shutil.which("man") else ["--man=no"]
    code, out = _run(["systemd-analyze", "verify"] + man + [f"/lib/systemd/system/{u}" for u in
                                                           ("herald.service", "herald.socket")],
                     env=env, ok=False, timeout=60)
    assert code == 0 and not out.strip(), f"systemd-analyze verify ({code}):\n{out}"
    # A template is verified through an instance of it.
    code, out = _run(["systemd-analyze", "verify"] + man + ["herald@8201.service"], env=env, ok=False, timeout=60)
    assert code == 0 and not out.strip(), f"systemd-analyze verify herald@8201 ({code}):\n{out}"


def _as_herald():
    user = pwd.getpwnam("herald")

    def drop():
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    return drop, user


def _check_serves():
    """The installed herald, as user herald, accepts the installed
    configuration and serves with it (its own port and database here)."""
    drop, user = _as_herald()
    r = subprocess.run(["/usr/bin/herald", "--config", "/etc/herald/herald.conf", "--check-config"],
                       preexec_fn=drop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0 and "configuration OK" in out, out
    d = tempfile.mkdtemp(prefix="herald-deb-run-")
    os.chmod(d, 0o755)
    os.chown(d, user.pw_uid, user.pw_gid)
    saved = harness.HERALD_BIN
    harness.HERALD_BIN = "/usr/bin/herald"
    h = None
    try:
        h = harness.Herald(args=["--config", "/etc/herald/herald.conf"], dir=d, preexec_fn=drop)
        assert h.port not in (None, 8199), h.log()  # --listen wins over the file's listen
        s = harness.Stream(h.port)
        assert s.status == 200, s.status
        eid = harness.publish(h.port, data="from the package")
        got = s.events(1)
        assert got[0]["id"] == eid and "from the package" in got[0]["data"], got
        s.close()
        assert _owner(h.db)[0] == "herald"
        h.stop()
        h = None
    finally:
        harness.HERALD_BIN = saved
        if h is not None:
            h.kill()
        shutil.rmtree(d, ignore_errors=True)


def _check_tools_find_installed_herald():
    env = {k: v for k, v in os.environ.items() if k not in ("HERALD_BIN", "HERALD_BUILD")}
    env["PATH"] = "/usr/bin:/bin"
    _, out = _run(["python3", "/usr/lib/herald/load/tool_herald.py"], cwd="/", env=env, timeout=30)
    assert out.strip() == "/usr/bin/herald", out


def test_deb_build_install_upgrade_purge():
    if os.geteuid() != 0:
        print("test_deb: skipped: installing the package needs root (the suite runs as root in CI)")
        return
    for pkg in ("herald", "herald-tools"):
        assert _status(pkg) in ("", "not-installed"), \
            f"the package {pkg} is already on this machine ({_status(pkg)}): this test installs and purges " \
            f"it, so it leaves an existing one alone; dpkg --purge {pkg} first"
    assert not os.path.exists("/etc/herald") and not os.path.exists("/var/lib/herald"), \
        "/etc/herald or /var/lib/herald exists (make install?): this test would purge them; remove them first"
    # The runner ends a test past its time limit with SIGTERM: purge even then.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("test_deb: terminated"))
    top = tempfile.mkdtemp(prefix="herald-deb-")
    own_policy = False
    try:
        version = _version()
        tree = os.path.join(top, "src")
        _copy_tree(tree)
        next_tree = os.path.join(top, "src-next")
        shutil.copytree(tree, next_tree, symlinks=True)
        herald_deb, tools_deb = _build(tree, os.path.join(top, "out"))
        assert os.path.basename(herald_deb) == f"herald_{version}_amd64.deb", herald_deb
        assert os.path.basename(tools_deb) == f"herald-tools_{version}_amd64.deb", tools_deb
        assert _run(["git", "-C", ROOT, "status", "--porcelain", "--ignored", "debian"], ok=False)[1].strip() == "", \
            "the build wrote into the source tree's debian/"
        _check_lintian(herald_deb, tools_deb)

        # A changelog that names another version than the Makefile stops the build.
        parts = version.split(".")
        nxt = ".".join(parts[:-1] + [str(int(parts[-1]) + 1)])
        _bump(next_tree, version, nxt)
        mk = _read(os.path.join(next_tree, "Makefile"))
        with open(os.path.join(next_tree, "Makefile"), "w") as f:
            f.write(mk.replace(f"VERSION   := {nxt}\n", f"VERSION   := {version}\n"))
        code, out = _run(["make", "--no-print-directory", "deb", f"DEB_OUT={top}/mismatch"], cwd=next_tree,
                         ok=False, timeout=120)
        assert code != 0 and f"debian/changelog names {nxt} but the Makefile's VERSION is {version}" in out, out
        with open(os.path.join(next_tree, "Makefile"), "w") as f:
            f.write(mk)
        next_herald, next_tools = _build(next_tree, os.path.join(top, "out-next"))

        if not os.path.exists(POLICY_RC_D):
            with open(POLICY_RC_D, "w") as f:
                f.write("#!/bin/sh\nexit 101\n")
            os.chmod(POLICY_RC_D, 0o755)
            own_policy = True

        _dpkg_install(herald_deb, tools_deb)
        _check_installed(version)
        _check_units_verify()
        _check_serves()
        _check_tools_find_installed_herald()

        # Upgrade over an edited herald.conf: the edit stays (the new one is
        # put beside it as herald.conf.dpkg-dist), with its owner and mode.
        conf = "/etc/herald/herald.conf"
        text = _read(conf)
        assert "\nper_address_limit = 32\n" in text
        with open(conf, "w") as f:
            f.write(text.replace("\nper_address_limit = 32\n", "\nper_address_limit = 7\n"))
        _dpkg_install(next_herald, next_tools)
        assert _installed("herald") == nxt, _installed("herald")
        assert "\nper_address_limit = 7\n" in _read(conf)
        assert "A line added in the next release" not in _read(conf)
        assert "A line added in the next release" in _read(conf + ".dpkg-dist")
        assert _owner(conf) == ("root", "herald", 0o640), _owner(conf)
        _check_installed(nxt)

        # Purge: what the packages and the service put down goes; the user stays.
        os.makedirs("/var/lib/herald/8201", exist_ok=True)  # as StateDirectory= makes it
        _run(["dpkg", "--purge", "herald-tools", "herald"], timeout=120)
        for p in ["/usr/bin/herald", "/etc/herald", "/var/lib/herald", "/usr/lib/herald", "/usr/share/herald",
                  "/usr/lib/sysusers.d/herald.conf", "/usr/share/man/man8/herald.8.gz", "/usr/share/doc/herald",
                  "/etc/systemd/system/multi-user.target.wants/herald.service",
                  "/etc/systemd/system/sockets.target.wants/herald.socket"] + \
                [f"/lib/systemd/system/{u}" for u in UNITS]:
            assert not os.path.lexists(p), f"{p} is still there after purge"
        assert _status("herald") in ("", "not-installed") and _status("herald-tools") in ("", "not-installed")
        pwd.getpwnam("herald")
    finally:
        _purge()
        if own_policy:
            os.unlink(POLICY_RC_D)
        shutil.rmtree(top, ignore_errors=True)
    assert _status("herald") in ("", "not-installed"), "herald is still installed"


test_deb_build_install_upgrade_purge.timeout = 600  # two package builds; beside another test on a busy machine
