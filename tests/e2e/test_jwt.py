# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: per-reader and per-publisher rights from signed tokens (JWT).

Tokens are minted here with the standard library (HS256) and the openssl
command (RS256, ES256: keys made once per test process in a temporary
folder, removed when the test ends). Each test starts real herald processes
on loopback with jwt_algorithm and its key file, and checks what readers
receive (live, from catch-up, on resume, across a restart and a token's
expiry), what is refused and why (401 with the cause, 403 for rights), the
cookie and CORS rules, and that no token reaches the log.
"""
import base64
import functools
import hashlib
import hmac
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from harness import (Herald, Stream, check_refusal, parse_frame, publish, publish_many, request, sqlite,
                     wait_until)

# ---------------------------------------------------------------- minting


def b64u(raw):
    """base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _json(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def _der_len(buf, i):
    """(length, index after the length octets) of the DER length at buf[i]."""
    n = buf[i]
    if n < 0x80:
        return n, i + 1
    k = n & 0x7F
    return int.from_bytes(buf[i + 1:i + 1 + k], "big"), i + 1 + k


def _der_take(buf, i, tag):
    """(contents, index after them) of the DER element with this tag at buf[i]."""
    assert buf[i] == tag, f"DER: expected tag {tag:#x} at {i}, found {buf[i]:#x}"
    n, j = _der_len(buf, i + 1)
    return buf[j:j + n], j + n


def ecdsa_der_to_raw(der, size=32):
    """An ECDSA signature as openssl writes it (SEQUENCE of INTEGER r, s) in
    the JWS form: r and s as fixed-size big-endian numbers, concatenated."""
    seq, _ = _der_take(der, 0, 0x30)
    r, i = _der_take(seq, 0, 0x02)
    s, _ = _der_take(seq, i, 0x02)
    return b"".join(x.lstrip(b"\0").rjust(size, b"\0") for x in (r, s))


def _openssl_sign(key_path, data):
    r = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_path], input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, f"openssl dgst -sign failed: {r.stderr.decode(errors='replace')}"
    return r.stdout


def mint(alg, key, claims, header=None):
    """A compact JWS: header (default {"alg": alg, "typ": "JWT"}), claims (a
    dict, or bytes used as the payload as is), signed with alg: HS256 with key
    as the secret (bytes); RS256 and ES256 with key the path of a PEM private
    key; "none" with an empty signature."""
    head = {"alg": alg, "typ": "JWT"} if header is None else header
    payload = claims if isinstance(claims, (bytes, bytearray)) else _json(claims)
    signing_input = (b64u(head if isinstance(head, bytes) else _json(head)) + "." + b64u(payload)).encode()
    if alg == "HS256":
        sig = hmac.new(key, signing_input, hashlib.sha256).digest()
    elif alg == "RS256":
        sig = _openssl_sign(key, signing_input)
    elif alg == "ES256":
        sig = ecdsa_der_to_raw(_openssl_sign(key, signing_input))
    elif alg == "none":
        sig = b""
    else:
        raise ValueError(alg)
    return signing_input.decode() + "." + b64u(sig)


# ---------------------------------------------------------------- keys


class _Keys:
    """Key files made on first use in one temporary folder: an HS256 secret
    (and a second, wrong one), RSA and P-256 pairs (and a second pair of
    each, whose tokens the server must refuse)."""

    SECRET = b"herald-test-secret-0123456789abcdef-0123456789"
    OTHER_SECRET = b"another-secret-of-enough-length-9876543210zyxw"

    def __init__(self):
        self.dir = None

    def _path(self, name):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="herald-jwt-keys-")
        return os.path.join(self.dir, name)

    def secret_file(self):
        p = self._path("hs256.secret")
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(self.SECRET + b"\n")  # one trailing line end is dropped
        return p

    def private(self, kind):
        """kind: "rsa", "rsa2", "ec", "ec2"; the PEM private key's path."""
        p = self._path(kind + ".pem")
        if not os.path.exists(p):
            if kind.startswith("rsa"):
                opts = ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
            else:
                opts = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
            subprocess.run(["openssl", "genpkey", *opts, "-out", p], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        return p

    def public(self, kind):
        p = self._path(kind + ".pub.pem")
        if not os.path.exists(p):
            subprocess.run(["openssl", "pkey", "-in", self.private(kind), "-pubout", "-out", p], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        return p

    def remove(self):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


KEYS = _Keys()
SERVER_KEY = {"RS256": "rsa", "ES256": "ec"}


def jwt_test(seconds):
    """Give a test its time limit, and remove the key folder when it ends."""
    def wrap(fn):
        @functools.wraps(fn)
        def run():
            try:
                fn()
            finally:
                KEYS.remove()
        run.timeout = seconds
        return run
    return wrap


def signing_key(alg):
    """What the test signs with for a server configured with alg."""
    return _Keys.SECRET if alg == "HS256" else KEYS.private(SERVER_KEY[alg])


def claims(sub=None, pub=None, ttl=60, **extra):
    """Claims with exp ttl seconds from now (None: no exp), and the
    subscribe / publish patterns when given."""
    c = {}
    if ttl is not None:
        c["exp"] = int(time.time()) + ttl
    if sub is not None:
        c["subscribe"] = sub
    if pub is not None:
        c["publish"] = pub
    c.update(extra)
    return c


def token(alg, **kw):
    return mint(alg, signing_key(alg), claims(**kw))


def jwt_args(alg):
    if alg == "HS256":
        return ["--jwt-algorithm", "HS256", "--jwt-secret-file", KEYS.secret_file()]
    return ["--jwt-algorithm", alg, "--jwt-public-key-file", KEYS.public(SERVER_KEY[alg])]


PT = "static-publish-token-0123456789"


def herald(alg="HS256", args=(), publish_token=PT, **kw):
    """A Herald with tokens of alg turned on and publish_token set (what
    the tests publish with, unless a test is about publishing), plus args."""
    extra = ["--publish-token", publish_token] if publish_token else []
    return Herald(args=jwt_args(alg) + extra + list(args), **kw)


# ---------------------------------------------------------------- streams


def slow_socket(port):
    """A connected client socket behind which herald can queue little: a
    tiny receive window (SO_RCVBUF), and a small MSS (TCP_MAXSEG). On
    loopback the MSS is 64 KiB, from which the kernel sizes herald's send
    buffer at about 4 MiB at once; with 536 it stays near 200 KiB, so a
    reader that does not read overflows its queue after a few hundred KiB
    and herald moves it to catch-up."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
    except BaseException:
        s.close()
        raise
    return s


def open_stream(h, tok=None, via="header", query="", headers=None, slow=False, timeout=10.0, cookie="herald_token"):
    """A stream to h presenting tok (Authorization header, ?token= or the
    cookie), on a slow_socket() when slow; the opening frame is consumed
    when the answer is 200."""
    hd = dict(headers or {})
    q = query
    if tok is not None:
        if via == "header":
            hd["Authorization"] = "Bearer " + tok
        elif via == "query":
            q = (q + "&" if q else "") + "token=" + urllib.parse.quote(tok, safe="")
        elif via == "cookie":
            hd["Cookie"] = f"a=b; {cookie}={tok}"
        else:
            raise ValueError(via)
    s = Stream(h.port, query=q, headers=hd, timeout=timeout, sock=slow_socket(h.port) if slow else None)
    if s.status == 200:
        s.opening()
    return s


def expect_refused(s, status, cause=None, what=""):
    """Check that stream s was refused with status (and, for 401, the
    invalid_token challenge) and an error matching the cause regex."""
    body = s.read_body() if s.status != 200 else b""
    s.close()
    assert s.status == status, f"{what}: expected {status}, got {s.status} {s.headers} {body!r}"
    check_refusal(s.status, s.headers, body, status)
    if status == 401:
        wa = s.headers.get("www-authenticate", "")
        assert wa.startswith("Bearer") and 'error="invalid_token"' in wa, f"{what}: WWW-Authenticate {wa!r}"
    if cause:
        err = json.loads(body)["error"]
        assert re.search(cause, err, re.I), f"{what}: the error {err!r} does not name the cause ({cause})"


def until_id(s, last, timeout=10.0, what="stream"):
    """Events of s up to and including id last (asserts it arrives)."""
    out = []
    deadline = time.monotonic() + timeout
    while not out or out[-1]["id"] is None or out[-1]["id"] < last:
        left = deadline - time.monotonic()
        assert left > 0 and not (s.closed and not s.buf), f"{what}: no event {last} within {timeout} s; got {out}"
        out += s.events(1, timeout=min(left, 1.0))
    assert out[-1]["id"] == last, f"{what}: passed {last} without it: {out}"
    return out


def pub(h, topic, data, public=False, tok=PT):
    """Publish one event with tok (None: token-less from loopback); its id."""
    return publish(h.port, type="t", topic=topic, data=data, public=public, token=tok)


def ids_of(evs):
    return [e["id"] for e in evs]


# ---------------------------------------------------------------- 1. algorithms


@jwt_test(90)
def test_valid_tokens_each_algorithm():
    for alg in ("HS256", "RS256", "ES256"):
        with herald(alg) as h:
            tok = token(alg, sub=["user/42/inbox", "team/7/*"])
            readers = {"header": open_stream(h, tok), "query": open_stream(h, tok, via="query")}
            anon = open_stream(h)
            for via, s in readers.items():
                assert s.status == 200, (alg, via, s.status, s.read_body())
            plan = [("user/42/inbox", False), ("user/43/inbox", False), ("news", True), ("team/7/chat", False),
                    ("team/8/chat", False), ("user/42/inbox", True), ("team/7", False)]
            ids = [pub(h, t, f"{alg}-{k}", p) for k, (t, p) in enumerate(plan)]
            end = pub(h, "end", "end", True)
            want = [ids[0], ids[2], ids[3], ids[5], end]
            for via, s in readers.items():
                got = until_id(s, end, what=f"{alg} {via}")
                assert ids_of(got) == want, f"{alg} token by {via}: got {ids_of(got)}, want {want} (ids {ids})"
                assert [e["data"] for e in got[:-1]] == [f"{alg}-{k}" for k in (0, 2, 3, 5)], got
                s.close()
            got = until_id(anon, end, what=f"{alg} no token")
            assert ids_of(got) == [ids[2], ids[5], end], f"{alg} without a token got {ids_of(got)}"
            anon.close()


@jwt_test(60)
def test_read_token_still_sees_every_private_event():
    with herald("HS256", ["--read-token", "static-read-token-123"]) as h:
        s = open_stream(h, "static-read-token-123")
        assert s.status == 200, s.read_body()
        ids = [pub(h, t, t) for t in ("user/1", "user/2", "x")]
        end = pub(h, "end", "end", True)
        assert ids_of(until_id(s, end)) == ids + [end]
        s.close()


# ---------------------------------------------------------------- 2. refusals


def _hs(c, key=_Keys.SECRET, header=None):
    return mint("HS256", key, c, header)


def _with_payload(tok, payload):
    """tok with its payload replaced (header and signature kept)."""
    h, _, s = tok.split(".")
    return h + "." + b64u(payload if isinstance(payload, bytes) else _json(payload)) + "." + s


@jwt_test(90)
def test_refusals_name_the_cause():
    now = int(time.time())
    good = claims(sub=["user/1"])
    sig_of_good = _hs(good).split(".")[2]
    cases = [
        ("expired", _hs({"exp": now - 60, "subscribe": ["user/1"]}), "expired"),
        ("nbf in the future", _hs({"exp": now + 600, "nbf": now + 60, "subscribe": ["user/1"]}),
         "not yet valid|not valid yet"),
        ("exp missing", _hs({"subscribe": ["user/1"]}), "exp"),
        ("wrong key", _hs(good, key=_Keys.OTHER_SECRET), "signature"),
        ("alg none", mint("none", None, good, {"alg": "none", "typ": "JWT"}), "algorithm"),
        ("alg none, HS256 signature kept", mint("none", None, good, {"alg": "none"}) + sig_of_good, "algorithm"),
        ("tampered payload", _with_payload(_hs(good), dict(good, subscribe=["*"])), "signature"),
        ("no dot", "eyJhbGciOiJIUzI1NiJ9", "malformed"),
        ("one dot", "eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjF9", "malformed"),
        ("three dots", _hs(good) + ".x", "malformed"),
        ("bad base64", "!!!!.????." + sig_of_good, "malformed"),
        ("header not JSON", _hs(good, header=b"not json"), "malformed"),
        ("payload not JSON", _hs(b"{\"exp\": 1, oops"), "malformed"),
        ("subscribe is a number", _hs(dict(good, subscribe=42)), "malformed"),
        ("exp is a string", _hs(dict(good, exp="tomorrow")), "malformed|exp"),
    ]
    with herald("HS256") as h:
        for what, tok, cause in cases:
            expect_refused(open_stream(h, tok), 401, cause, what)
        # The same through ?token=: never a silent downgrade to public events.
        for what, tok, cause in cases[:4]:
            expect_refused(open_stream(h, tok, via="query"), 401, cause, what + " (?token=)")
        # Leeway: 5 s past exp is still within the default 10 s.
        s = open_stream(h, _hs({"exp": now - 5, "subscribe": ["user/1"]}))
        assert s.status == 200, f"a token 5 s past exp was refused with the default leeway: {s.read_body()!r}"
        i = pub(h, "user/1", "leeway")
        assert ids_of(s.events(1)) == [i]
        s.close()
        ok = open_stream(h, _hs(good))
        assert ok.status == 200, ok.read_body()
        ok.close()


@jwt_test(120)
def test_refusals_across_algorithms():
    with herald("RS256") as h:
        good = claims(sub=["user/1"])
        pem = open(KEYS.public("rsa"), "rb").read()
        expect_refused(open_stream(h, mint("ES256", KEYS.private("ec"), good)), 401, "algorithm", "ES256 to RS256")
        expect_refused(open_stream(h, mint("HS256", pem, good)), 401, "algorithm", "HS256 keyed with the public PEM")
        expect_refused(open_stream(h, mint("HS256", pem.rstrip(b"\n"), good)), 401, "algorithm",
                       "HS256 keyed with the public PEM, no final newline")
        expect_refused(open_stream(h, mint("RS256", KEYS.private("rsa2"), good)), 401, "signature", "other RSA key")
        expect_refused(open_stream(h, mint("none", None, good)), 401, "algorithm", "alg none to RS256")
        s = open_stream(h, mint("RS256", KEYS.private("rsa"), good))
        assert s.status == 200, s.read_body()
        s.close()
    with herald("ES256") as h:
        good = claims(sub=["user/1"])
        pem = open(KEYS.public("ec"), "rb").read()
        expect_refused(open_stream(h, mint("RS256", KEYS.private("rsa"), good)), 401, "algorithm", "RS256 to ES256")
        expect_refused(open_stream(h, mint("HS256", pem, good)), 401, "algorithm", "HS256 keyed with the EC PEM")
        expect_refused(open_stream(h, mint("ES256", KEYS.private("ec2"), good)), 401, "signature", "other EC key")
        # The DER form of the signature is not the JWS form.
        t = mint("ES256", KEYS.private("ec"), good)
        hd, pl, _ = t.split(".")
        der = _openssl_sign(KEYS.private("ec"), (hd + "." + pl).encode())
        expect_refused(open_stream(h, hd + "." + pl + "." + b64u(der)), 401, "signature|malformed", "DER signature")
        s = open_stream(h, t)
        assert s.status == 200, s.read_body()
        s.close()


@jwt_test(60)
def test_audience_and_issuer_when_configured():
    with herald("HS256", ["--jwt-audience", "herald-test", "--jwt-issuer", "https://issuer.example"]) as h:
        base = claims(sub=["user/1"])
        both = dict(base, aud="herald-test", iss="https://issuer.example")
        for what, c, cause in [
            ("wrong aud", dict(both, aud="someone-else"), "audience"),
            ("aud list without it", dict(both, aud=["a", "b"]), "audience"),
            ("aud missing", {k: v for k, v in both.items() if k != "aud"}, "audience"),
            ("wrong iss", dict(both, iss="https://evil.example"), "issuer"),
            ("iss missing", {k: v for k, v in both.items() if k != "iss"}, "issuer"),
        ]:
            expect_refused(open_stream(h, _hs(c)), 401, cause, what)
        for c in (both, dict(both, aud=["other", "herald-test"])):
            s = open_stream(h, _hs(c))
            assert s.status == 200, (c, s.read_body())
            i = pub(h, "user/1", "aud")
            assert ids_of(s.events(1)) == [i]
            s.close()


# ---------------------------------------------------------------- 3. patterns


@jwt_test(60)
def test_topic_patterns():
    with herald("HS256") as h:
        sub42 = open_stream(h, token("HS256", sub=["user/42/*"]))
        star = open_stream(h, token("HS256", sub="*"))
        own = open_stream(h, token("HS256", sub=["user/*"]), query="topic=user/42/*")
        anon_filtered = open_stream(h, query="topic=user/42/*")
        for s in (sub42, star, own, anon_filtered):
            assert s.status == 200, (s.status, s.read_body())
        expect_refused(open_stream(h, token("HS256", sub=["user/42"]), query="topic=user/43"), 403, None,
                       "?topic=user/43 with a token for user/42")
        expect_refused(open_stream(h, token("HS256", sub=["user/42/*"]), query="topic=*"), 403, None,
                       "?topic=* with a token for user/42/*")
        expect_refused(open_stream(h, token("HS256", sub=["user/42/*"]), query="topic=user/*"), 403, None,
                       "?topic=user/* with a token for user/42/*")
        topics = ["user/42/inbox", "user/42/a/b", "user/42", "user/420/x", "user/4", "user/43/inbox"]
        ids = {t: pub(h, t, t) for t in topics}
        pub42 = pub(h, "user/42/pub", "public one", True)
        news = pub(h, "news", "news", True)
        end = pub(h, "user/42/end", "end", True)
        got = ids_of(until_id(sub42, end, what="user/42/*"))
        assert got == [ids["user/42/inbox"], ids["user/42/a/b"], pub42, news, end], (got, ids)
        got = ids_of(until_id(star, end, what="*"))
        assert got == [ids[t] for t in topics] + [pub42, news, end], (got, ids)
        got = ids_of(until_id(own, end, what="?topic=user/42/* with user/*"))
        assert got == [ids["user/42/inbox"], ids["user/42/a/b"], pub42, end], (got, ids)
        got = ids_of(until_id(anon_filtered, end, what="?topic=user/42/* without a token"))
        assert got == [pub42, end], f"without a token, ?topic=user/42/* must get public events only: {got}"
        for s in (sub42, star, own, anon_filtered):
            s.close()


# ---------------------------------------------------------------- 4. Mercure claims


@jwt_test(60)
def test_mercure_style_claims():
    args = ["--jwt-subscribe-claim", "mercure.subscribe", "--jwt-publish-claim", "mercure.publish"]
    with herald("HS256", args) as h:
        exp = int(time.time()) + 60
        merc = _hs({"exp": exp, "mercure": {"subscribe": ["user/42/*"], "publish": ["user/42/*"]}})
        flat = _hs({"exp": exp, "subscribe": ["*"], "publish": ["*"]})  # not where this server looks
        s = open_stream(h, merc)
        f = open_stream(h, flat)
        assert s.status == 200 and f.status == 200
        a = pub(h, "user/42/inbox", "a", tok=merc)
        st, hd, body = _post(h, "user/43/inbox", merc)
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, "user/42/inbox", flat)
        check_refusal(st, hd, body, 403)
        b = pub(h, "user/43/inbox", "b")
        end = pub(h, "end", "end", True)
        assert ids_of(until_id(s, end)) == [a, end]
        assert ids_of(until_id(f, end)) == [end], "top-level claims must grant nothing under mercure.*"
        assert b
        s.close()
        f.close()


# ---------------------------------------------------------------- 5. every path


def _catchups(h):
    st, _, body = request(h.port, "GET", "/metrics")
    assert st == 200, st
    return int(float(re.search(rb"^herald_readers_to_catchup_total (\S+)$", body, re.M).group(1)))


def _rows(db, after):
    """[(id, topic, public, data)] stored after id `after`."""
    out = []
    for ln in sqlite(db, f"SELECT id, topic, public, data FROM events WHERE id > {after} ORDER BY id").split("\n"):
        if ln:
            i, t, p, d = ln.split("|", 3)
            out.append((int(i), t, p == "1", d))
    return out


def _granted(rows, topic):
    return [i for i, t, p, _ in rows if p or t == topic]


@jwt_test(120)
def test_every_path_live_catchup_resume():
    with herald("HS256", ["--queue-limit", "4096", "--stall-timeout", "300s"]) as h:
        tok = token("HS256", sub=["user/1"])
        live = open_stream(h, tok)
        slow = open_stream(h, tok, slow=True, timeout=30)
        assert live.status == 200 and slow.status == 200
        start = pub(h, "news", "start", True)
        assert ids_of(live.events(1)) == [start]
        # Live.
        a = [pub(h, "user/1", "live-1"), pub(h, "user/2", "live-2"), pub(h, "news", "live-pub", True)]
        assert ids_of(until_id(live, a[2])) == [a[0], a[2]]
        # Catch-up: the slow reader does not read while ~600 KiB flow to it.
        before = _catchups(h)
        topics = ["user/1", "user/2", "news"]
        evs = [{"type": "bulk", "topic": topics[k % 3], "data": f"{k:04d}-" + "x" * 1500, "public": k % 3 == 2}
               for k in range(600)]
        half = publish_many(h.port, evs[:300], token=PT)
        sqlite(h.db, "BEGIN; " + "".join(f"INSERT INTO events(type,topic,data,public) VALUES('cli','{t}','cli-{k}',"
                                         f"{int(t == 'news')}); " for k, t in enumerate(topics * 10)) + "COMMIT;")
        rest = publish_many(h.port, evs[300:], token=PT)
        end = pub(h, "end", "end", True)
        assert half and rest
        got_live = until_id(live, end, timeout=60, what="live reader")
        assert _catchups(h) > before, "the slow reader never moved to catch-up"
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        got_slow = until_id(slow, end, timeout=60, what="slow reader")
        rows = _rows(h.db, start)
        want = _granted(rows, "user/1")
        got = ids_of(got_slow)
        assert got[0] == start, got[:3]  # it did not read before; the live reader did
        extra, missing = sorted(set(got[1:]) - set(want)), sorted(set(want) - set(got))
        assert got[1:] == want, (f"slow reader (catch-up): {len(got) - 1} events, want {len(want)}; "
                                 f"extra {extra[:10]}, missing {missing[:10]}")
        assert ids_of(got_live) == [i for i in want if i > a[2]]
        by_id = {i: d for i, _, _, d in rows}
        assert all(by_id[e["id"]] == e["data"] for e in got_slow[1:]), "catch-up data differs from the store"
        # Resume, by header and by query, with the token by header, query and
        # (for the resume id in the query) both.
        mid = want[len(want) // 2]
        after = [i for i in want if i > mid]
        for how in ("header", "query"):
            hd = {"Last-Event-ID": str(mid)} if how == "header" else {}
            q = f"last_event_id={mid}" if how == "query" else ""
            s = open_stream(h, tok, via=how, headers=hd, query=q)
            assert s.status == 200, s.read_body()
            assert ids_of(until_id(s, end, timeout=30, what=f"resume ({how})")) == after
            s.close()
        # A resume point past the newest id: reset, then live granted events.
        s = open_stream(h, tok, headers={"Last-Event-ID": str(end + 1000)})
        first = s.events(1)
        assert first and first[0]["event"] == "reset" and first[0]["id"] == end, first
        x = [pub(h, "user/2", "after-reset"), pub(h, "user/1", "after-reset")]
        assert ids_of(s.events(1)) == [x[1]]
        s.close()
        live.close()
        slow.close()


@jwt_test(60)
def test_reset_for_a_pruned_resume_point_with_a_token():
    with herald("HS256", ["--retention-count", "5"]) as h:
        tok = token("HS256", sub=["user/1"])
        ids = [pub(h, ("user/1", "user/2", "news")[k % 3], f"e{k}", k % 3 == 2) for k in range(20)]
        newest = ids[-1]
        deadline = time.monotonic() + 20
        first = None
        while time.monotonic() < deadline:
            s = open_stream(h, tok, headers={"Last-Event-ID": str(ids[0])})
            assert s.status == 200, s.read_body()
            evs = s.events(1, timeout=2)
            first = evs[0] if evs else None
            if first and first["event"] == "reset":
                break
            s.close()
            time.sleep(0.2)
        assert first and first["event"] == "reset", f"no reset for a pruned resume point; got {first}"
        assert first["id"] == newest and json.loads(first["data"])["last_event_id"] == ids[0], first
        x = [pub(h, "user/2", "no"), pub(h, "user/1", "yes"), pub(h, "news", "pub", True)]
        got = until_id(s, x[2])
        assert ids_of(got) == [x[1], x[2]], got
        s.close()


# ---------------------------------------------------------------- 6. cookie


@jwt_test(60)
def test_cookie_token_and_origin():
    with herald("HS256", ["--jwt-cookie", "herald_token", "--allow-origin", "https://app.example"]) as h:
        tok = token("HS256", sub=["user/42/*"])
        plain = open_stream(h, tok, via="cookie")
        assert plain.status == 200, plain.read_body()
        app = open_stream(h, tok, via="cookie", headers={"Origin": "https://app.example"})
        assert app.status == 200, app.read_body()
        assert app.headers.get("access-control-allow-origin") == "https://app.example", app.headers
        expect_refused(open_stream(h, tok, via="cookie", headers={"Origin": "https://evil.example"}), 403, None,
                       "cookie token from another origin")
        # A bad cookie token is a 401, not public events.
        expect_refused(open_stream(h, token("HS256", sub=["user/42/*"], ttl=-60), via="cookie"), 401, "expired",
                       "expired cookie token")
        # Another cookie's name is not the token.
        other = open_stream(h, tok, via="cookie", cookie="other_token")
        assert other.status == 200
        i = pub(h, "user/42/inbox", "mine")
        end = pub(h, "end", "end", True)
        for s in (plain, app):
            assert ids_of(until_id(s, end)) == [i, end]
            s.close()
        assert ids_of(until_id(other, end)) == [end]
        other.close()


# ---------------------------------------------------------------- 7. publish rights


def _post(h, topic, tok=None, public=False, headers=None):
    hd = dict(headers or {})
    if tok is not None:
        hd["Authorization"] = "Bearer " + tok
    return request(h.port, "POST", "/api/events", {"type": "t", "topic": topic, "data": "d", "public": public},
                   headers=hd)


@jwt_test(60)
def test_publish_rights():
    with herald("HS256") as h:
        reader = open_stream(h, token("HS256", sub=["user/42/*"]))
        writer = token("HS256", pub=["user/42/*"])
        st, _, body = _post(h, "user/42/inbox", writer)
        assert st == 201, (st, body)
        mine = json.loads(body)["id"]
        st, hd, body = _post(h, "user/43/inbox", writer)
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, "user/42", writer)  # "user/42/*" does not cover user/42
        check_refusal(st, hd, body, 403)
        st, hd, body = _post(h, "user/42/inbox", token("HS256", pub=["user/42/*"], ttl=-60))
        check_refusal(st, hd, body, 401)
        assert "expired" in json.loads(body)["error"], body
        assert hd.get("www-authenticate", "").startswith("Bearer"), hd
        st, hd, body = _post(h, "user/42/inbox", _hs(claims(pub=["user/42/*"]), key=_Keys.OTHER_SECRET))
        check_refusal(st, hd, body, 401)
        st, hd, body = _post(h, "user/42/inbox", token("HS256", sub=["user/42/*"]))  # no publish claim
        check_refusal(st, hd, body, 403)
        st, _, body = _post(h, "user/43/inbox", PT)
        assert st == 201, (st, body)
        st, hd, body = _post(h, "user/42/inbox")  # publish_token set: no token is 401 as before
        check_refusal(st, hd, body, 401)
        end = pub(h, "end", "end", True, tok=PT)
        assert ids_of(until_id(reader, end)) == [mine, end]
        reader.close()
    with Herald(args=["--publish-token", PT]) as h:  # no jwt_algorithm: only publish_token, as before
        st, hd, body = _post(h, "user/42/x", token("HS256", pub="*"))
        check_refusal(st, hd, body, 403)
    with herald("HS256", publish_token=None) as h:  # jwt_algorithm without publish_token
        assert _post(h, "user/42/x", token("HS256", pub="user/42/*"))[0] == 201
        st, hd, body = _post(h, "user/43/x", token("HS256", pub="user/42/*"))
        check_refusal(st, hd, body, 403)
        # Token-less local publishing is unchanged by jwt_algorithm.
        st, _, body = _post(h, "anything")
        assert st == 201, f"token-less local publishing with jwt_algorithm set got {st} {body!r}"


# ---------------------------------------------------------------- 8. isolation


class _Reader:
    """One stream reader of the isolation test: its user, whether it reads
    late, and every event it got as (id, data)."""

    def __init__(self, user, slow, tok):
        self.user, self.slow, self.tok = user, slow, tok
        self.got = []
        self.s = None
        self.buf = b""
        self.closed = True
        self.paused = slow

    def connect(self, port, last):
        hd = {"Authorization": "Bearer " + self.tok}
        if last is not None:
            hd["Last-Event-ID"] = str(last)
        self.s = Stream(port, headers=hd, timeout=10, sock=slow_socket(port) if self.slow else None)
        assert self.s.status == 200, (self.s.status, self.s.read_body())
        self.s.opening()
        self.buf = self.s.buf
        self.s.sock.setblocking(False)
        self.closed = False
        self.paused = self.slow

    def feed(self):
        """Take what the socket has; False once it is closed."""
        try:
            d = self.s.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return True
        except ConnectionResetError:
            d = b""
        if not d:
            self.closed = True
            self.s.close()
            return False
        parts = (self.buf + d).split(b"\n\n")
        self.buf = parts.pop()
        for raw in parts:
            ev = parse_frame(raw)
            if ev is not None:
                self.got.append((ev["id"], ev["data"]))
        return True

    @property
    def last(self):
        return self.got[-1][0] if self.got else None


def _pump(readers, seconds, done=None):
    """Read every open, unpaused reader for up to seconds, or until done()."""
    sel = selectors.DefaultSelector()
    for r in readers:
        if not r.closed and not r.paused:
            sel.register(r.s.sock, selectors.EVENT_READ, r)
    deadline = time.monotonic() + seconds
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 or (done and done()):
                return
            for key, _ in sel.select(min(left, 0.2)):
                if not key.data.feed():
                    sel.unregister(key.fileobj)
    finally:
        sel.close()


def _mixed(n, tag, size):
    topics = ("user/1", "user/2", "user/2", "user/1", "news")
    return [{"type": "iso", "topic": topics[k % 5], "data": f"{tag}-{k:03d}-" + "y" * size, "public": k % 5 == 4}
            for k in range(n)]


def _cli_batch(db, n, tag):
    topics = ("user/2", "user/1", "news")
    sqlite(db, "BEGIN; " + "".join(f"INSERT INTO events(type,topic,data,public) VALUES('iso','{topics[k % 3]}',"
                                   f"'{tag}-{k:03d}',{int(k % 3 == 2)}); " for k in range(n)) + "COMMIT;")


@jwt_test(150)
def test_isolation_two_users_many_readers_with_restart():
    per_user, slow_per_user = 100, 10
    args = ["--queue-limit", "4096", "--per-address-limit", "0", "--stall-timeout", "300s"]
    toks = {u: token("HS256", sub=[f"user/{u}"], ttl=600) for u in (1, 2)}
    h1 = herald("HS256", args)
    h2 = None
    try:
        for k in range(5):  # history the readers must not get
            pub(h1, ("user/1", "user/2", "news")[k % 3], f"old-{k}", k % 3 == 2)
        start = pub(h1, "user/2", "old-last")
        readers = [_Reader(u, i < slow_per_user, toks[u]) for u in (1, 2) for i in range(per_user)]
        for r in readers:
            r.connect(h1.port, None)
        t0 = time.monotonic()
        before = _catchups(h1)
        for rnd in range(3):
            publish_many(h1.port, _mixed(40, f"a{rnd}", 3000), token=PT)
            _pump(readers, 0.2)
            _cli_batch(h1.db, 15, f"acli{rnd}")
            _pump(readers, 0.2)
        _pump(readers, 1.0)
        moved = _catchups(h1) - before
        assert moved >= 1, "no slow reader moved to catch-up before the restart"
        # Restart: every stream ends; each reader drains what reached it
        # (the slow ones too), then reconnects with its last id.
        h1.stop()
        for r in readers:
            r.paused = False
        _pump(readers, 15, done=lambda: all(r.closed for r in readers))
        assert all(r.closed for r in readers), f"{sum(not r.closed for r in readers)} streams not closed by SIGTERM"
        _cli_batch(h1.db, 12, "down")
        h2 = herald("HS256", args, db=h1.db)
        for r in readers:
            r.buf = b""  # a partial frame cut by the close is sent again
            r.connect(h2.port, r.last if r.last is not None else start)
        for rnd in range(2):
            publish_many(h2.port, _mixed(40, f"b{rnd}", 3000), token=PT)
            _pump(readers, 0.2)
            _cli_batch(h2.db, 15, f"bcli{rnd}")
            _pump(readers, 0.2)
        end = pub(h2, "news", "end", True)
        for r in readers:
            if r.slow:
                r.s.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            r.paused = False
        # Read until every reader has the end, for as long as they keep
        # getting events (a busy machine reads the 200 sockets slowly; the
        # test's own limit bounds it): a reader that stops short is judged.
        got = -1
        while not all(r.last == end for r in readers) and sum(len(r.got) for r in readers) != got:
            got = sum(len(r.got) for r in readers)
            _pump(readers, 10, done=lambda: all(r.last == end for r in readers))
        rows = _rows(h2.db, start)
        for r in readers:
            want = [(i, d) for i, t, p, d in rows if p or t == f"user/{r.user}"]
            if r.got != want:
                got_ids, want_ids = [i for i, _ in r.got], [i for i, _ in want]
                foreign = [i for i, t, p, _ in rows if not p and t != f"user/{r.user}" and i in set(got_ids)]
                dup = len(got_ids) - len(set(got_ids))
                missing = sorted(set(want_ids) - set(got_ids))[:10]
                raise AssertionError(f"user {r.user} {'slow' if r.slow else 'fast'} reader: {len(r.got)} events, "
                                     f"want {len(want)}; other user's: {foreign[:10]}; duplicates: {dup}; "
                                     f"missing: {missing}; in order: {got_ids == sorted(got_ids)}")
        print(f"200 readers checked; {moved} moved to catch-up before the restart; "
              f"{time.monotonic() - t0:.1f} s")
        for r in readers:
            r.s.close()
        h2.stop()
    finally:
        for x in (h1, h2):
            if x is not None and x.proc.poll() is None:
                x.kill()


# ---------------------------------------------------------------- 9. expiry


@jwt_test(60)
def test_token_expiry_ends_the_stream_and_resume_misses_nothing():
    with herald("HS256", ["--jwt-leeway", "0", "--heartbeat-interval", "1s"]) as h:
        exp = int(time.time()) + 3
        s = open_stream(h, _hs({"exp": exp, "subscribe": ["user/1"]}))
        assert s.status == 200, s.read_body()
        published = []
        stop = threading.Event()

        def publisher():
            k = 0
            while not stop.is_set():
                t = ("user/1", "user/2", "news")[k % 3]
                published.append((pub(h, t, f"p{k}", t == "news"), t))
                k += 1
                time.sleep(0.1)

        th = threading.Thread(target=publisher)
        th.start()
        try:
            frames = []
            deadline = time.monotonic() + 20
            while not s.closed and time.monotonic() < deadline:
                frames += list(s.frames(timeout=0.5))
            closed_at = time.time()
            assert s.closed, "the stream did not end after its token expired"
            assert s.buf == b"", f"the stream ended inside a frame: {s.buf!r}"
            assert exp - 0.5 <= closed_at <= exp + 3.5, f"closed at {closed_at:.1f}, exp {exp}"
            evs = [e for e in (parse_frame(f) for f in frames) if e]
            last_ev = max((k for k, f in enumerate(frames) if parse_frame(f)), default=-1)
            tail = b"\n".join(frames[last_ev + 1:]).split(b"\n")
            assert b": token expired" in tail, f"no ': token expired' after the last event: {frames[last_ev + 1:]}"
            assert any(ln.startswith(b"retry:") for ln in tail), f"no retry: at the end: {frames[last_ev + 1:]}"
            assert all(ln.startswith((b":", b"retry:")) or not ln for ln in tail), tail
            s.close()
            # A fresh token, from the last id: everything published meanwhile.
            time.sleep(0.5)
            last = evs[-1]["id"] if evs else 0
            s2 = open_stream(h, token("HS256", sub=["user/1"]), headers={"Last-Event-ID": str(last)})
            assert s2.status == 200, s2.read_body()
            time.sleep(0.5)
        finally:
            stop.set()
            th.join()
        end = pub(h, "news", "end", True)
        evs += until_id(s2, end)
        want = [i for i, t in published if t != "user/2"] + [end]
        assert ids_of(evs) == want, f"got {ids_of(evs)}, want {want}"
        s2.close()


# ---------------------------------------------------------------- 10. CORS


def _preflight(h, path, origin, method="POST"):
    return request(h.port, "OPTIONS", path, headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization, content-type, last-event-id"})


def _names(v):
    return {x.strip().lower() for x in v.split(",") if x.strip()}


@jwt_test(60)
def test_cors_preflight_and_post():
    listed = ["--allow-origin", "https://app.example, https://other.example"]
    with herald("HS256", listed) as h:
        for path, method in (("/api/events", "POST"), ("/api/events/stream", "GET")):
            st, hd, body = _preflight(h, path, "https://app.example", method)
            assert st == 204, (path, st, hd, body)
            assert hd.get("access-control-allow-origin") == "https://app.example", hd
            assert method.lower() in _names(hd.get("access-control-allow-methods", "")), hd
            assert {"authorization", "content-type", "last-event-id"} <= _names(
                hd.get("access-control-allow-headers", "")), hd
            assert int(hd.get("access-control-max-age", "0")) > 0, hd
            assert hd.get("access-control-allow-credentials") == "true", hd
            assert "origin" in _names(hd.get("vary", "")), hd
            st, hd, body = _preflight(h, path, "https://evil.example", method)
            check_refusal(st, hd, body, 403)
            assert "access-control-allow-origin" not in hd, hd
        st, hd, body = _post(h, "news", PT, True, {"Origin": "https://other.example"})
        assert st == 201, (st, body)
        assert hd.get("access-control-allow-origin") == "https://other.example", hd
    with herald("HS256", ["--allow-origin", "*"]) as h:
        for path in ("/api/events", "/api/events/stream"):
            st, hd, body = _preflight(h, path, "https://anyone.example")
            assert st == 204 and hd.get("access-control-allow-origin") == "*", (path, st, hd)
            assert {"authorization", "content-type", "last-event-id"} <= _names(
                hd.get("access-control-allow-headers", "")), hd
        st, hd, body = _post(h, "news", PT, True, {"Origin": "https://anyone.example"})
        assert st == 201 and hd.get("access-control-allow-origin") == "*", (st, hd, body)
    with herald("HS256") as h:  # allow_origin empty
        for path in ("/api/events", "/api/events/stream"):
            st, hd, body = _preflight(h, path, "https://app.example")
            check_refusal(st, hd, body, 403)


# ---------------------------------------------------------------- 11. the log


@jwt_test(60)
def test_no_token_in_the_log():
    args = ["--log-level", "debug", "--jwt-cookie", "herald_token", "--read-token", "static-read-tok-ABCDEF123"]
    with herald("HS256", args, publish_token="static-pub-tok-GHIJKL456") as h:
        valid = token("HS256", sub=["user/1"], pub=["user/1"])
        expired = token("HS256", sub=["user/1"], pub=["user/1"], ttl=-600)
        forged = _hs(claims(sub="*", pub="*"), key=_Keys.OTHER_SECRET)
        garbage = "not-a-jwt-ZXCVBNM987654321"
        sent = [valid, expired, forged, garbage, "static-read-tok-ABCDEF123", "static-pub-tok-GHIJKL456",
                "wrong-static-QWERTY000111"]
        for tok, via, status in [(valid, "query", 200), (expired, "query", 401), (forged, "query", 401),
                                 (garbage, "query", 401), (valid, "header", 200), (expired, "header", 401),
                                 (valid, "cookie", 200), (forged, "cookie", 401),
                                 ("static-read-tok-ABCDEF123", "query", 200)]:
            s = open_stream(h, tok, via=via, query="topic=user/1")
            assert s.status == status, (via, status, s.status, s.read_body())
            s.close()
        for tok, status in [(valid, 201), (expired, 401), (forged, 401), ("static-pub-tok-GHIJKL456", 201),
                            ("wrong-static-QWERTY000111", 401)]:
            st, _, body = _post(h, "user/1", tok)
            assert st == status, (status, st, body)
        st, _, _ = request(h.port, "GET", "/api/events/stream?token=" + garbage + "&topic=bad%zz")
        assert st == 400, st
    log = h.log()
    assert "refused" in log, "nothing was logged at debug level: the check would prove nothing"
    for tok in sent:
        parts = [tok] + [p for p in tok.split(".") if len(p) >= 16]
        for p in parts:
            assert p not in log, f"the log holds a token (or part of one) sent: {p[:24]}...\n{log}"


# ---------------------------------------------------------------- 12. unreadable private events


def _warnings(log):
    return [ln for ln in log.split("\n") if " warning: " in ln]


@jwt_test(60)
def test_private_event_nobody_can_read_is_warned_once():
    with Herald() as h:  # no read_token, no jwt_algorithm
        base, size = len(_warnings(h.log())), h.log_size()
        for k in range(5):
            pub(h, "user/1", f"p{k}", tok=None)
        h.wait_log(r" warning: ", since=size, timeout=5)
        time.sleep(0.3)
        for k in range(5):
            pub(h, "user/1", f"q{k}", tok=None)
        time.sleep(0.3)
        new = _warnings(h.log())[base:]
        assert len(new) == 1, f"expected one warning for 10 private publishes nobody can read, got {new}"
        assert re.search(r"private|public|read_token|jwt", new[0], re.I), new
    for args in (["--read-token", "rt-0123456789"], jwt_args("HS256")):
        with Herald(args=args + ["--publish-token", PT]) as h:
            base = len(_warnings(h.log()))
            for k in range(3):
                pub(h, "user/1", f"p{k}")
            time.sleep(0.3)
            assert _warnings(h.log())[base:] == [], (args, _warnings(h.log()))


# ---------------------------------------------------------------- 13. the cost of a token


def _counter(h, name):
    """A counter of h's /metrics (asserted present)."""
    st, _, body = request(h.port, "GET", "/metrics")
    assert st == 200, (st, body)
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    assert m, f"/metrics has no {name}"
    return int(m.group(1))


def _readers(h):
    st, _, body = request(h.port, "GET", "/api/health")
    return json.loads(body)["readers"]


def _forged(alg):
    """A well-formed token of alg, valid for a minute, whose signature is
    random bytes of the right length: it costs a full verification."""
    good = token(alg, sub=["user/1"])
    head, payload, sig = good.split(".")
    return head + "." + payload + "." + b64u(os.urandom(len(base64.urlsafe_b64decode(sig + "==="))))


@jwt_test(60)
def test_caps_are_checked_before_the_signature():
    # A request the caps refuse is refused before any signature work: the
    # forged token gets the cap's answer, and no verification is counted.
    with herald("ES256", ["--per-address-limit", "1"]) as h:
        first = open_stream(h)
        assert first.status == 200, first.read_body()
        forged = _forged("ES256")
        for via in ("header", "query"):
            s = open_stream(h, forged, via=via)
            body = s.read_body()
            s.close()
            assert s.status == 429, f"a forged token past per_address_limit ({via}): {s.status} {body!r}"
            check_refusal(s.status, s.headers, body, 429)
        # A browser's EventSource gets its survivable refusal as before.
        s = open_stream(h, forged, headers={"Accept": "text/event-stream"})
        assert s.status == 200 and s.headers.get("x-refused-status") == "429", (s.status, s.headers)
        s.close()
        assert _counter(h, "herald_token_verifications_total") == 0
        # With room again, the same token is a 401 naming its cause: it
        # was checked, once.
        first.close()
        wait_until(lambda: _readers(h) == 0, what="the first stream's close")
        expect_refused(open_stream(h, forged), 401, "signature", "forged token with room")
        assert _counter(h, "herald_token_verifications_total") == 1
        # An expired token is refused before its signature is looked at.
        expect_refused(open_stream(h, token("ES256", sub=["user/1"], ttl=-600)), 401, "expired", "expired")
        expect_refused(open_stream(h, _forged("ES256").split(".")[0] + ".x.y"), 401, "malformed", "malformed")
        assert _counter(h, "herald_token_verifications_total") == 1
    with herald("HS256", ["--max-readers", "1"]) as h:
        first = open_stream(h)
        assert first.status == 200, first.read_body()
        s = open_stream(h, _forged("HS256"))
        body = s.read_body()
        s.close()
        assert s.status == 503, f"a forged token past max_readers: {s.status} {body!r}"
        assert _counter(h, "herald_token_verifications_total") == 0
        first.close()


@jwt_test(60)
def test_reopening_with_the_same_token_is_not_verified_again():
    with herald("ES256") as h:
        tok = token("ES256", sub=["user/1"], pub=["user/1"])
        other = token("ES256", sub=["user/2"])
        s = open_stream(h, tok, query="topic=user/1")
        assert s.status == 200, s.read_body()
        assert _counter(h, "herald_token_verifications_total") == 1
        s.close()
        wait_until(lambda: _readers(h) == 0, what="the stream's close")
        # The reconnect: the same token, answered from the cache with the
        # same rights (a topic outside them is still 403).
        again = open_stream(h, tok, query="topic=user/1")
        assert again.status == 200, again.read_body()
        expect_refused(open_stream(h, tok, query="topic=user/2"), 403, "grant", "a topic the token lacks")
        assert _counter(h, "herald_token_verifications_total") == 1
        assert _counter(h, "herald_token_cache_hits_total") == 2
        i = pub(h, "user/1", "cached rights")
        assert ids_of(again.events(1)) == [i]
        # Publishing with it is answered from the cache too.
        st, _, body = _post(h, "user/1", tok)
        assert st == 201, (st, body)
        assert _counter(h, "herald_token_verifications_total") == 1
        # Another token is verified on its own.
        o = open_stream(h, other)
        assert o.status == 200, o.read_body()
        assert _counter(h, "herald_token_verifications_total") == 2
        o.close()
        again.close()


@jwt_test(60)
def test_a_cached_token_does_not_outlive_a_key_change():
    with herald("HS256") as h:
        tok = token("HS256", sub=["user/1"])
        s = open_stream(h, tok)
        assert s.status == 200, s.read_body()
        s.close()
        # SIGHUP with another secret: a token of the old one is refused,
        # though it was verified (and cached) a moment ago.
        with open(KEYS.secret_file(), "wb") as f:
            f.write(_Keys.OTHER_SECRET + b"\n")
        mark = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"configuration reloaded", since=mark)
        expect_refused(open_stream(h, tok), 401, "signature", "a token of the old secret")
        fresh = _hs(claims(sub=["user/1"]), key=_Keys.OTHER_SECRET)
        s = open_stream(h, fresh)
        assert s.status == 200, s.read_body()
        s.close()


@jwt_test(90)
def test_a_refused_token_gives_its_place_back_in_a_group():
    # In a group of workers admission counts the reader at once; a token
    # refused after that must not keep the place.
    with herald("HS256", config="workers = 2\nper_address_limit = 1\n") as h:
        forged = _forged("HS256")
        for _ in range(6):
            expect_refused(open_stream(h, forged), 401, "signature", "forged token")
        expect_refused(open_stream(h, token("HS256", sub=["user/1"]), query="topic=other"), 403, "grant", "no grant")
        s = open_stream(h, token("HS256", sub=["user/1"]))
        assert s.status == 200, f"the place was kept by refused tokens: {s.status} {s.read_body()!r}"
        s.close()
