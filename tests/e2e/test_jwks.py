# SPDX-License-Identifier: BSD-2-Clause
"""End-to-end: signing keys by kid from a JWK Set (jwt_jwks_file).

Keys are made with the openssl command (RSA 2048, P-256, Ed25519) and an
HS256 secret, written as a JWK Set by this file (the public parameters read
from each key's DER SubjectPublicKeyInfo), and tokens are signed here:
HS256 with hmac, RS256 and ES256 with test_jwt's mint, EdDSA with openssl
pkeyutl. Real herald processes on loopback check that each key is chosen
by the token's kid, that an unknown kid is refused with its cause and a
log line, that a key held to an issuer takes no other, that a rotation
(the file replaced, or SIGHUP) takes effect without dropping open streams
and without the token cache accepting a removed key, that a bad file
refuses the start and at reload keeps the keys in force, that the
Mercure endpoint subscribes and publishes with a kid-chosen key, and that
EdDSA works from a PEM key with jwt_algorithm = EdDSA too.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

from harness import Herald, publish, request, wait_until
from test_jwt import _der_take, b64u, expect_refused, mint, open_stream, until_id
from test_mercure import HUB, MStream, mpublish

SECRET = b"jwks-test-secret-0123456789abcdef-0123456789"
ISSUER = "https://idp.example"
PT = "static-publish-token-0123456789"


class Keys:
    """Private keys in one temporary folder, each with its public JWK."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="herald-jwks-keys-")
        self.paths = {}

    def private(self, name, kind):
        """kind: "rsa", "ec" or "ed"; the PEM private key's path (made once)."""
        if name not in self.paths:
            p = os.path.join(self.dir, name + ".pem")
            opts = {"rsa": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                    "ec": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
                    "ed": ["-algorithm", "ED25519"]}[kind]
            subprocess.run(["openssl", "genpkey", *opts, "-out", p], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
            self.paths[name] = p
        return self.paths[name]

    def jwk(self, name, kind, **extra):
        """The public JWK of key name, with extra members (kid, alg, iss...)."""
        der = subprocess.run(["openssl", "pkey", "-in", self.private(name, kind), "-pubout", "-outform", "DER"],
                             check=True, stdout=subprocess.PIPE, timeout=30).stdout
        spki, _ = _der_take(der, 0, 0x30)
        _, i = _der_take(spki, 0, 0x30)  # the algorithm
        bits, _ = _der_take(spki, i, 0x03)
        pub = bits[1:]  # after the unused-bits octet
        if kind == "rsa":
            seq, _ = _der_take(pub, 0, 0x30)
            n, j = _der_take(seq, 0, 0x02)
            e, _ = _der_take(seq, j, 0x02)
            k = {"kty": "RSA", "n": b64u(n.lstrip(b"\0")), "e": b64u(e.lstrip(b"\0"))}
        elif kind == "ec":
            assert pub[0] == 4 and len(pub) == 65
            k = {"kty": "EC", "crv": "P-256", "x": b64u(pub[1:33]), "y": b64u(pub[33:])}
        else:
            k = {"kty": "OKP", "crv": "Ed25519", "x": b64u(pub)}
        k.update(extra)
        return k

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def oct_jwk(secret=SECRET, **extra):
    return dict({"kty": "oct", "k": b64u(secret)}, **extra)


def sign_eddsa(key_path, data):
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        r = subprocess.run(["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", key_path, "-in", f.name],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def tok(alg, key, kid, ttl=300, **claims):
    """A token with header {"alg", "kid"} (kid None: none) and exp ttl
    seconds ahead, signed with key: the secret for HS256, else a PEM private
    key's path."""
    header = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    body = dict(claims, exp=int(time.time()) + ttl)
    if alg != "EdDSA":
        return mint(alg, key, body, header=header)
    head = b64u(json.dumps(header, separators=(",", ":")).encode())
    pay = b64u(json.dumps(body, separators=(",", ":")).encode())
    signing = (head + "." + pay).encode()
    return signing.decode() + "." + b64u(sign_eddsa(key, signing))


def write_set(path, keys):
    """Replace path with the set, as a provider's sync would: a rename."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        json.dump({"keys": keys}, f)
    os.replace(tmp, path)


def jwks_test(seconds):
    def wrap(fn):
        def run():
            keys = Keys()
            try:
                fn(keys)
            finally:
                keys.remove()
        run.__name__ = fn.__name__
        run.timeout = seconds
        return run
    return wrap


def herald_with(keys_dir, keys, extra=""):
    path = os.path.join(keys_dir, "jwks.json")
    write_set(path, keys)
    return path, Herald(config=f"jwt_jwks_file = {path}\npublish_token = {PT}\n{extra}")


def stream_ok(h, token, topic="t/1"):
    s = open_stream(h, token, query="topic=" + topic)
    assert s.status == 200, f"stream refused: {s.status} {s.read_body()!r}\n{h.log()[-2000:]}"
    return s


@jwks_test(120)
def test_jwks_each_key_chosen_by_kid(keys):
    rsa, ec, ed = keys.private("rsa", "rsa"), keys.private("ec", "ec"), keys.private("ed", "ed")
    set_ = [keys.jwk("rsa", "rsa", kid="r1", alg="RS256", use="sig"), keys.jwk("ec", "ec", kid="e1"),
            keys.jwk("ed", "ed", kid="d1", alg="EdDSA", iss=ISSUER), oct_jwk(kid="h1")]
    _, h = herald_with(keys.dir, set_)
    with h:
        for alg, key, kid, extra in (("RS256", rsa, "r1", {}), ("ES256", ec, "e1", {}),
                                     ("EdDSA", ed, "d1", {"iss": ISSUER}), ("HS256", SECRET, "h1", {})):
            s = stream_ok(h, tok(alg, key, kid, subscribe=["t/*"], **extra))
            s.close()
        # Unknown kid: 401 naming the cause, and a log line naming the kid.
        since = h.log_size()
        s = open_stream(h, tok("RS256", rsa, "gone-key"), query="topic=t/1")
        expect_refused(s, 401, "unknown key id", "unknown kid")
        h.wait_log(r'warning: jwt: refused a token whose kid "gone-key" is not in jwt_jwks_file .* \(4 keys\)',
                   since=since)
        # A kid with bytes that must not reach the log as they are.
        s = open_stream(h, tok("RS256", rsa, "x\u001b[31m\ny"), query="topic=t/1")
        expect_refused(s, 401, "unknown key id", "control bytes in kid")
        assert "\x1b" not in h.log(), "a kid's control byte reached the log"
        # No kid among several keys; the algorithm of another key; the
        # issuer a key is held to; another key's signature under a kid.
        expect_refused(open_stream(h, tok("ES256", ec, None), query="topic=t/1"), 401, "no key id", "no kid")
        expect_refused(open_stream(h, tok("HS256", SECRET, "r1"), query="topic=t/1"), 401, "algorithm",
                       "HS256 under an RSA kid")
        expect_refused(open_stream(h, tok("EdDSA", ed, "d1"), query="topic=t/1"), 401, "issuer", "no iss")
        expect_refused(open_stream(h, tok("EdDSA", ed, "d1", iss="https://other"), query="topic=t/1"), 401,
                       "issuer", "another iss")
        other = keys.private("ec2", "ec")
        expect_refused(open_stream(h, tok("ES256", other, "e1"), query="topic=t/1"), 401, "signature",
                       "another EC key's signature under the EC kid")


@jwks_test(120)
def test_jwks_rotation_by_file_change_and_sighup_keeps_streams(keys):
    a, b = keys.private("a", "ec"), keys.private("b", "ed")
    path, h = herald_with(keys.dir, [keys.jwk("a", "ec", kid="a")])
    with h:
        old = tok("ES256", a, "a", subscribe=["t/*"])
        s = stream_ok(h, old)
        # Verified once more, so that the cache holds it.
        stream_ok(h, old).close()
        # The provider rotates: key b replaces a, no signal.
        write_set(path, [keys.jwk("b", "ed", kid="b")])
        new = tok("EdDSA", b, "b", subscribe=["t/*"])

        def accepted():
            st = open_stream(h, new, query="topic=t/1")
            ok = st.status == 200
            st.close()
            return ok
        wait_until(accepted, timeout=10, what="the rotated key accepted")
        h.wait_log(r"jwt_jwks_file .* changed: reading its keys again")
        # The removed key's token, cached before, is refused now.
        expect_refused(open_stream(h, old, query="topic=t/1"), 401, "unknown key id", "removed key")
        # The stream opened with the old key stays open and is served.
        eid = publish(h.port, type="t", topic="t/1", data="after rotation", public=True, token=PT)
        assert [e["data"] for e in until_id(s, eid, what="old stream")][-1] == "after rotation"
        # A file that does not parse keeps the keys in force.
        since = h.log_size()
        with open(path + ".new", "w") as f:
            f.write('{"keys": [{"kid": "c", "kty": "EC", "crv": "P-384"}]}')
        os.replace(path + ".new", path)
        h.wait_log(r'jwt: jwt_jwks_file = ".*": keys\[0\] \(kid "c"\): "crv": is "P-384"', since=since)
        h.wait_log(r"signed tokens keep the previous keys", since=since)
        stream_ok(h, new).close()
        # So does a file removed (a provider's sync between two files).
        since = h.log_size()
        os.remove(path)
        h.wait_log(r'jwt: jwt_jwks_file = ".*": No such file or directory', since=since)
        stream_ok(h, new).close()
        # SIGHUP reads the file again too: key a is back.
        with open(path + ".new", "w") as f:
            json.dump({"keys": [keys.jwk("a", "ec", kid="a")]}, f)
        os.replace(path + ".new", path)
        since = h.log_size()
        h.signal(signal.SIGHUP)
        h.wait_log(r"configuration reloaded", since=since)
        stream_ok(h, tok("ES256", a, "a", subscribe=["t/*"])).close()
        expect_refused(open_stream(h, new, query="topic=t/1"), 401, "unknown key id", "key b removed")
        eid = publish(h.port, type="t", topic="t/1", data="after sighup", public=True, token=PT)
        assert [e["data"] for e in until_id(s, eid, what="old stream")][-1] == "after sighup"
        s.close()


@jwks_test(60)
def test_jwks_bad_file_refuses_the_start(keys):
    path = os.path.join(keys.dir, "jwks.json")
    with open(path, "w") as f:
        json.dump({"keys": [keys.jwk("e", "ec", kid="one"), keys.jwk("d", "ed")]}, f)
    h = Herald(config=f"jwt_jwks_file = {path}\n", wait=False)
    try:
        code = h.proc.wait(30)
    finally:
        h.kill()
    log = h.log()
    assert code != 0, log
    assert f'jwt_jwks_file = "{path}": keys[1]: "kid": missing; each key of a set of more than one needs a kid' \
        in log, log
    # Beside jwt_algorithm: refused, naming both.
    with open(path, "w") as f:
        json.dump({"keys": [oct_jwk()]}, f)
    h = Herald(config=f"jwt_jwks_file = {path}\njwt_algorithm = HS256\n", wait=False)
    try:
        code = h.proc.wait(30)
    finally:
        h.kill()
    assert code != 0 and "jwt_algorithm = \"HS256\" is set, but jwt_jwks_file" in h.log(), h.log()


@jwks_test(90)
def test_jwks_mercure_subscribe_and_publish(keys):
    ec, ed = keys.private("ec", "ec"), keys.private("ed", "ed")
    set_ = [keys.jwk("ec", "ec", kid="sub-key"), keys.jwk("ed", "ed", kid="pub-key", iss=ISSUER)]
    _, h = herald_with(keys.dir, set_, extra=f"mercure_url = {HUB}\n")
    with h:
        topic = "https://example.com/books/1"
        sub = tok("ES256", ec, "sub-key", mercure={"subscribe": [topic]})
        s = MStream(h.port, [("topic", topic)], headers={"Authorization": "Bearer " + sub})
        assert s.status == 200, s.status
        pub = tok("EdDSA", ed, "pub-key", iss=ISSUER, mercure={"publish": [topic]})
        _, _, uid = mpublish(h.port, [("topic", topic), ("data", "secret"), ("private", "on")], pub)
        got = s.events(1)
        assert got and got[0]["id"] == uid and got[0]["data"] == "secret", got
        # Unknown kid and a key's issuer: refused.
        bad = tok("EdDSA", ed, "nobody", iss=ISSUER, mercure={"publish": [topic]})
        mpublish(h.port, [("topic", topic), ("data", "x")], bad, expect=401)
        wrong_iss = tok("EdDSA", ed, "pub-key", mercure={"publish": [topic]})
        mpublish(h.port, [("topic", topic), ("data", "x")], wrong_iss, expect=401)
        s.close()


@jwks_test(60)
def test_eddsa_with_a_pem_public_key(keys):
    ed = keys.private("ed", "ed")
    pub = os.path.join(keys.dir, "ed.pub.pem")
    subprocess.run(["openssl", "pkey", "-in", ed, "-pubout", "-out", pub], check=True, timeout=30)
    with Herald(config=f"jwt_algorithm = EdDSA\njwt_public_key_file = {pub}\n") as h:
        stream_ok(h, tok("EdDSA", ed, None, subscribe=["t/*"])).close()
        other = keys.private("ed2", "ed")
        expect_refused(open_stream(h, tok("EdDSA", other, None, subscribe=["t/*"]), query="topic=t/1"), 401,
                       "signature", "another Ed25519 key")
        expect_refused(open_stream(h, tok("HS256", SECRET, None, subscribe=["t/*"]), query="topic=t/1"), 401,
                       "algorithm", "HS256 against an EdDSA key")
