# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: herald as a systemd service, without systemd as PID 1.
The unit files pass `systemd-analyze verify` cleanly and rate an exposure of
2.0 or less in `systemd-analyze security --offline=true`; herald started by
systemd-socket-activate (TCP and unix socket) serves streams on the socket it
was handed and logs the backlog the kernel reports for it (compared with
ss); a NOTIFY_SOCKET the test listens on receives READY=1, STATUS=,
WATCHDOG=1, RELOADING=1 and READY=1 around SIGHUP, and STOPPING=1, in that
order; logs carry journald priority prefixes when JOURNAL_STREAM names
stderr, timestamps otherwise, and nothing per event at the default level."""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness
from harness import Herald, PortTaken, Stream, on_spare_ports, publish, request, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = os.path.join(ROOT, "systemd")
EXPOSURE_LIMIT = 2.0


def _analyze(args, env=None, cwd=None):
    r = subprocess.run(["systemd-analyze"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=env, cwd=cwd, timeout=60)
    return r.returncode, r.stdout.decode(errors="replace")


def _unit_tree(with_unix_dropin=False):
    """The units as `make install` lays them out, in a temporary unit path:
    ExecStart pointing at the herald binary under test, the man page on a
    MANPATH (verify checks Documentation=man:herald(8))."""
    d = tempfile.mkdtemp(prefix="herald-units-")
    units = os.path.join(d, "units")
    os.makedirs(units)
    binary = os.path.abspath(harness.HERALD_BIN)
    with open(os.path.join(UNITS, "herald.service")) as f:
        text = f.read()
    assert "ExecStart=/usr/local/bin/herald " in text, "ExecStart should name /usr/local/bin/herald"
    with open(os.path.join(units, "herald.service"), "w") as f:
        f.write(text.replace("/usr/local/bin/herald", binary))
    shutil.copy(os.path.join(UNITS, "herald.socket"), units)
    if with_unix_dropin:
        os.makedirs(os.path.join(units, "herald.socket.d"))
        shutil.copy(os.path.join(UNITS, "herald-unix.conf"), os.path.join(units, "herald.socket.d", "unix.conf"))
    man8 = os.path.join(d, "man", "man8")
    os.makedirs(man8)
    shutil.copy(os.path.join(ROOT, "docs", "herald.8"), man8)
    env = dict(os.environ)
    env["SYSTEMD_UNIT_PATH"] = units + ":"
    env["MANPATH"] = os.path.join(d, "man") + ":"
    env["SYSTEMD_LOG_COLOR"] = "0"
    return d, units, env


def test_units_verify_clean():
    for dropin in (False, True):
        d, units, env = _unit_tree(with_unix_dropin=dropin)
        try:
            # Documentation=man:herald(8) is checked with man(1) where man-db is installed.
            man = [] if shutil.which("man") else ["--man=no"]
            for args in (["verify"] + man + ["herald.service", "herald.socket"],
                         ["verify"] + man + [os.path.join(units, "herald.service"),
                                             os.path.join(units, "herald.socket")]):
                rc, out = _analyze(args, env=env, cwd=d)
                assert rc == 0 and out.strip() == "", f"systemd-analyze {' '.join(args)} (drop-in {dropin}): " \
                                                      f"exit {rc}:\n{out}"
        finally:
            shutil.rmtree(d, ignore_errors=True)


test_units_verify_clean.timeout = 120


def test_service_security_exposure_at_most_2():
    path = os.path.join(UNITS, "herald.service")
    rc, out = _analyze(["security", "--offline=true", path])
    m = re.search(r"Overall exposure level for herald\.service: (\d+\.\d+)", out)
    assert m, f"no overall exposure in:\n{out}"
    exposure = float(m.group(1))
    assert exposure <= EXPOSURE_LIMIT, f"exposure {exposure} above {EXPOSURE_LIMIT}:\n{out}"
    # The same judgement through systemd-analyze's own threshold (0-100 scale).
    rc, out = _analyze(["security", "--offline=true", f"--threshold={int(EXPOSURE_LIMIT * 10)}", path])
    assert rc == 0, f"systemd-analyze security --threshold failed ({rc}):\n{out}"


def _unit_settings(name):
    out = {}
    with open(os.path.join(UNITS, name)) as f:
        for line in f:
            line = line.strip()
            if line and line[0] not in "#;[" and "=" in line:
                k, _, v = line.partition("=")
                out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_units_say_what_a_notify_service_needs():
    s = _unit_settings("herald.service")
    assert s["Type"] == ["notify"], s.get("Type")
    assert s["Restart"] == ["on-failure"], s.get("Restart")
    assert "WatchdogSec" in s and "StateDirectory" in s and "LimitNOFILE" in s, s
    assert any("-HUP" in v for v in s["ExecReload"]), s["ExecReload"]
    assert int(s["LimitNOFILE"][0]) >= 65536, s["LimitNOFILE"]
    assert "--db /var/lib/" + s["StateDirectory"][0] + "/" in s["ExecStart"][0], (s["ExecStart"], s["StateDirectory"])
    sock = _unit_settings("herald.socket")
    assert sock["Backlog"] == ["1024"], sock
    assert sock["ListenStream"] == ["127.0.0.1:8199"], sock
    unix = _unit_settings("herald-unix.conf")
    assert unix["ListenStream"] == ["", "/run/herald/herald.sock"], unix


def _activated(listen, args=(), env=None, fdnames=None):
    """herald under systemd-socket-activate listening on `listen` (host:port or
    a unix path, or a list of them), the sockets named `fdnames` (e.g.
    "tls:plain") when given. systemd-socket-activate starts herald at the
    first connection and passes it only the environment named with -E."""
    listens = [listen] if isinstance(listen, str) else list(listen)
    d = tempfile.mkdtemp(prefix="herald-activate-")
    real = os.path.abspath(harness.HERALD_BIN)
    passed = ["ASAN_OPTIONS", "UBSAN_OPTIONS"] + sorted((env or {}).keys())
    opts = ["-l " + shlex.quote(a) for a in listens] + ["-E " + shlex.quote(k) for k in passed]
    if fdnames:
        opts.append("--fdname=" + shlex.quote(fdnames))
    wrapper = os.path.join(d, "activate")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec systemd-socket-activate " + " ".join(opts) + " " + shlex.quote(real) + ' "$@"\n')
    os.chmod(wrapper, 0o755)
    saved = harness.HERALD_BIN
    harness.HERALD_BIN = wrapper
    try:
        h = Herald(args=args, dir=d, listen=False, wait=False, env=env)
    finally:
        harness.HERALD_BIN = saved
    _wait_bound(h, listens)
    return h


def _wait_bound(h, listens):
    """Wait until the systemd-socket-activate in h has bound every address in
    listens (it says so on stderr, before any connection starts herald). If it
    exited instead, end h and raise PortTaken when an address was in use."""
    def bound_or_exited():
        log = h.log()
        return h.proc.poll() is not None or all(f"Listening on {a} as " in log for a in listens)
    try:
        wait_until(bound_or_exited, timeout=10, what="systemd-socket-activate to listen")
    except BaseException:
        h.kill()
        raise
    if h.proc.poll() is not None:
        h.kill()
        if "Address already in use" in h.log():
            raise PortTaken(f"systemd-socket-activate on {listens}: {h.log()[-300:]}")
        raise AssertionError(f"systemd-socket-activate exited with {h.proc.returncode}:\n{h.log()}")


def _activated_tcp(count, args=(), env=None, fdnames=None):
    """(herald under systemd-socket-activate, [ports]): listening on 127.0.0.1
    at `count` spare ports (systemd-socket-activate cannot be asked for port 0
    and say which it got), tried again on others if one was taken first."""
    def start(*ports):
        return _activated([f"127.0.0.1:{p}" for p in ports], args, env, fdnames), list(ports)
    return on_spare_ports(start, count)


def _ss_backlog(args, local):
    """Send-Q (the accept-queue limit) of the listening socket whose local
    address is `local`, from ss."""
    r = subprocess.run(["ss", "-Hl"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    for line in r.stdout.decode().splitlines():
        f = line.split()
        if local in f:
            i = f.index("LISTEN")
            return int(f[i + 2])
    raise AssertionError(f"ss {args} lists no listener at {local}:\n{r.stdout.decode()}")


def _serves_a_stream(h, port=None, path=None):
    s = Stream(port, path=path)
    try:
        assert s.status == 200, s.status
        s.opening()
        eid = publish(port, data="handed over", path=path)
        evs = s.events(1)
        assert [e["id"] for e in evs] == [eid] and evs[0]["data"] == "handed over", evs
    finally:
        s.close()


def test_socket_activation_tcp():
    h, (port,) = _activated_tcp(1)
    addr = f"127.0.0.1:{port}"
    try:
        # The first connection is what makes systemd-socket-activate start
        # herald; it waits in the accept queue meanwhile.
        first = Stream(port, timeout=15)
        assert first.status == 200, first.status
        first.close()
        h.wait_log(r"herald ready")
        log = h.log()
        m = re.search(r"listening on tcp 127\.0\.0\.1:(\d+) \(backlog (\d+), from systemd\)", log)
        assert m and int(m.group(1)) == port, log
        assert int(m.group(2)) == _ss_backlog(["-tn"], addr), (m.group(0), "ss disagrees")
        assert "using 1 socket(s) from systemd" in log, log
        _serves_a_stream(h, port=port)
        h.stop()
    finally:
        h.kill()


def test_socket_activation_unix():
    d = tempfile.mkdtemp(prefix="herald-sock-")
    path = os.path.join(d, "herald.sock")
    h = _activated(path)
    try:
        first = Stream(path=path, timeout=15)
        assert first.status == 200, first.status
        first.close()
        h.wait_log(r"herald ready")
        log = h.log()
        m = re.search(r"listening on unix (\S+) \(backlog (\d+), from systemd\)", log)
        assert m and m.group(1) == path, log
        assert int(m.group(2)) == _ss_backlog(["-xn"], path), (m.group(0), "ss disagrees")
        _serves_a_stream(h, path=path)
        h.stop()
        # The socket belongs to whoever created it, not to herald.
        assert os.path.exists(path), "herald removed a socket systemd handed it"
    finally:
        h.kill()
        shutil.rmtree(d, ignore_errors=True)


class Notifications:
    """A NOTIFY_SOCKET for herald: every datagram, parsed into (time, {K: V})."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="herald-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.msgs = []

    def poll(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return
            kv = {}
            for line in data.decode().split("\n"):
                if "=" in line:
                    k, _, v = line.partition("=")
                    kv[k] = v
            self.msgs.append((time.monotonic(), kv))
            if time.monotonic() >= deadline:
                return

    def wait_for(self, key, value=None, timeout=10.0, after=0):
        """Index of the first message from `after` on with key (= value)."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(after, len(self.msgs)):
                kv = self.msgs[i][1]
                if key in kv and (value is None or kv[key] == value):
                    return i
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {key}={value} within {timeout} s; got {[m for _, m in self.msgs]}")
            self.poll(min(left, 0.2))

    def states(self):
        """The state changes in order (READY, RELOADING, STOPPING)."""
        out = []
        for _, kv in self.msgs:
            for k in ("READY", "RELOADING", "STOPPING"):
                if kv.get(k) == "1":
                    out.append(k)
        return out

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_notify_ready_status_watchdog_reload_stopping():
    n = Notifications()
    watchdog_usec = 400000
    h = None
    try:
        h = Herald(env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": str(watchdog_usec)})
        ready = n.wait_for("READY", "1")
        # READY=1 only once listening and the database is open: the port
        # answers, and the log said so before.
        st, _, body = request(h.port, "GET", "/api/health")
        assert st == 200, (st, body)
        log_at_ready = h.log()
        assert "listening on tcp" in log_at_ready and "herald ready" in log_at_ready, log_at_ready
        status = n.wait_for("STATUS", after=ready)
        assert re.search(r"\b0 readers\b", n.msgs[status][1]["STATUS"]), n.msgs[status]
        # The watchdog is answered from the loop at half the interval.
        first = n.wait_for("WATCHDOG", "1", after=ready)
        n.poll(1.0)
        pings = [t for t, kv in n.msgs[first:] if kv.get("WATCHDOG") == "1"]
        assert len(pings) >= 3, f"{len(pings)} watchdog pings in about 1 s"
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert max(gaps) < watchdog_usec / 1e6, f"watchdog gaps {gaps} exceed WATCHDOG_USEC"

        # Readers survive a reload, and STATUS counts them and the events.
        readers = [Stream(h.port) for _ in range(2)]
        for r in readers:
            r.opening()
        publish(h.port, data="before reload")
        for r in readers:
            assert [e["data"] for e in r.events(1)] == ["before reload"]
        mark = len(n.msgs)
        h.signal(signal.SIGHUP)
        reloading = n.wait_for("RELOADING", "1", after=mark)
        assert "MONOTONIC_USEC" in n.msgs[reloading][1], n.msgs[reloading]
        ready2 = n.wait_for("READY", "1", after=reloading)
        status2 = n.wait_for("STATUS", after=ready2)
        text = n.msgs[status2][1]["STATUS"]
        assert re.search(r"\b2 readers\b", text) and re.search(r"\b1 events\b", text), text
        eid = publish(h.port, data="after reload")
        for r in readers:
            evs = r.events(1)
            assert [e["id"] for e in evs] == [eid], evs
            r.close()

        mark = len(n.msgs)
        h.signal(signal.SIGTERM)
        n.wait_for("STOPPING", "1", after=mark)
        assert h.proc.wait(10) == 0, h.log()
        n.poll(0.2)
        assert n.states() == ["READY", "RELOADING", "READY", "STOPPING"], n.states()
        # WATCHDOG=1 kept coming between start and shutdown.
        first_stop = max(i for i, (_, kv) in enumerate(n.msgs) if kv.get("STOPPING") == "1")
        assert any(kv.get("WATCHDOG") == "1" for _, kv in n.msgs[ready:first_stop]), n.msgs
        h.stop()
    finally:
        if h:
            h.kill()
        n.close()


def test_notify_failed_reload_keeps_running():
    n = Notifications()
    h = None
    try:
        h = Herald(config="per_address_limit = 5\n", env={"NOTIFY_SOCKET": n.path})
        n.wait_for("READY", "1")
        with open(os.path.join(h.dir, "herald.conf"), "w") as f:
            f.write("per_address_limit = lots\n")
        mark = len(n.msgs)
        h.signal(signal.SIGHUP)
        r = n.wait_for("RELOADING", "1", after=mark)
        n.wait_for("READY", "1", after=r)
        h.wait_log(r"reload failed")
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200
        h.stop()
        n.poll(0.2)
        assert n.states() == ["READY", "RELOADING", "READY", "STOPPING"], n.states()
    finally:
        if h:
            h.kill()
        n.close()


def test_no_notifications_without_notify_socket():
    # Herald() removes NOTIFY_SOCKET: nothing breaks, nothing is sent.
    with Herald(env={"WATCHDOG_USEC": "200000"}) as h:
        st, _, _ = request(h.port, "GET", "/api/health")
        assert st == 200


JOURNAL_LINE = re.compile(r"<[0-7]>\S")
PLAIN_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warning|notice|info|debug): \S")


def _log_lines(h):
    return [ln for ln in h.log().splitlines() if ln and not ln.startswith(("==", "    #"))]


def test_journal_priority_prefixes_when_stderr_is_the_journal():
    d = tempfile.mkdtemp(prefix="herald-journal-")
    logpath = os.path.join(d, "herald.log")
    open(logpath, "w").close()
    st = os.stat(logpath)
    with Herald(dir=d, env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}) as h:
        # A refusal (notice) and the start-up lines (info).
        request(h.port, "GET", "/nowhere")
        h.wait_log(r"refused")
    lines = _log_lines(h)
    assert lines and all(JOURNAL_LINE.match(ln) for ln in lines), lines
    assert any(ln.startswith("<6>") and "herald ready" in ln for ln in lines), lines
    assert any(ln.startswith("<5>") and "refused" in ln for ln in lines), lines


def test_plain_timestamped_lines_otherwise():
    # JOURNAL_STREAM naming some other file (inherited from a parent whose
    # stderr was the journal) must not switch the format.
    with Herald(env={"JOURNAL_STREAM": "1:2"}) as h:
        request(h.port, "GET", "/nowhere")
        h.wait_log(r"refused")
    lines = _log_lines(h)
    assert lines and all(PLAIN_LINE.match(ln) for ln in lines), lines


def test_no_line_per_event_at_default_level():
    with Herald() as h:
        readers = [Stream(h.port) for _ in range(3)]
        for r in readers:
            r.opening()
        before = len(_log_lines(h))
        for i in range(20):
            publish(h.port, data=f"event {i}")
        for r in readers:
            assert len(r.events(20)) == 20
            r.close()
        time.sleep(0.2)
        after = _log_lines(h)
        assert len(after) == before, after[before:]


def test_log_level_warning_is_quiet():
    # With a publish token: without one, a unix socket earns a warning
    # (a proxy that adds no X-Forwarded-For would open publishing).
    h = Herald(args=["--log-level", "warning", "--publish-token", "t"], unix=True, wait=False)
    try:
        wait_until(lambda: os.path.exists(h.sock_path) and _health(h.sock_path), timeout=15,
                   what="herald to answer on its unix socket")
        request(None, "GET", "/nowhere", path=h.sock_path)
        publish(None, data="quiet", path=h.sock_path, token="t")
        h.stop()
        assert _log_lines(h) == [], h.log()
    finally:
        h.kill()


def _health(path):
    try:
        return request(None, "GET", "/api/health", path=path)[0] == 200
    except OSError:
        return False
