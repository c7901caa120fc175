#!/usr/bin/env python3
"""An independent check of a ringfence receipt file (issue 15), sharing no
code with ringfence: Python's hashlib and base64 only.

  check_receipt.py RECEIPT.json OUT_DIR

Recomputes each audit event's hash from its fields, its RFC 6962 leaf hash,
walks its inclusion path to the root and compares it with the checkpoint's;
checks the receipt names the report's digest; writes, for `openssl pkeyutl
-verify -rawin`, the DSSE pre-authentication encoding and signature of both
envelopes and the checkpoint's signed text and signature. Prints one JSON
line; exits 1 on the first mismatch, naming it."""
import base64
import hashlib
import json
import os
import sys


def fail(what):
    print(json.dumps({"ok": False, "problem": what}))
    sys.exit(1)


def event_hash(e):
    # store/audit_log.h: each field as "<len>:<bytes>\n", in this order.
    def opt(v):
        return "" if v is None else str(v)
    fields = [e["prev_hash"], str(e["seq"]), str(e["at"]), e["kind"], e["actor"],
              opt(e["project"]), opt(e["run"]), opt(e["call"]), opt(e["sandbox"]),
              e["detail_json"]]
    h = hashlib.sha256()
    for f in fields:
        b = f.encode()
        h.update(str(len(b)).encode() + b":" + b + b"\n")
    return h.hexdigest()


def node(l, r):
    return hashlib.sha256(b"\x01" + l + r).digest()


def root_from_path(index, size, leaf, path):
    # RFC 9162 2.1.3.2
    if index >= size:
        fail("index outside the tree")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            fail("path too long")
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        fail("path too short")
    return r


def pae(t, body):
    t = t.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def main():
    bundle = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    note = bundle["log"]["checkpoint"]
    text, sigs = note.split("\n\n", 1)
    origin, size, root_b64 = text.split("\n")[:3]
    size, root = int(size), base64.b64decode(root_b64)
    sig_line = sigs.split("\n")[0]
    assert sig_line.startswith("\u2014 " + origin + " ")
    raw = base64.b64decode(sig_line.split(" ")[2])
    open(os.path.join(out, "checkpoint.txt"), "wb").write((text + "\n").encode())
    open(os.path.join(out, "checkpoint.sig"), "wb").write(raw[4:])
    digests = {}
    for name in ("receipt", "report"):
        env = bundle[name]
        body = base64.b64decode(env["payload"])
        digests[name] = hashlib.sha256(body).hexdigest()
        open(os.path.join(out, name + ".pae"), "wb").write(pae(env["payloadType"], body))
        open(os.path.join(out, name + ".sig"), "wb").write(
            base64.b64decode(env["signatures"][0]["sig"]))
        entry = bundle["log"][name + "_entry"]
        ev = entry["event"]
        if event_hash(ev) != ev["hash"]:
            fail(name + " event: hash does not match its fields")
        if json.loads(ev["detail_json"])["sha256"] != digests[name]:
            fail(name + " event: records another digest")
        leaf = hashlib.sha256(b"\x00" + bytes.fromhex(ev["hash"])).digest()
        path = [bytes.fromhex(h) for h in entry["inclusion"]]
        if root_from_path(entry["index"], size, leaf, path) != root:
            fail(name + " event: the inclusion path does not lead to the checkpoint's root")
    receipt = json.loads(base64.b64decode(bundle["receipt"]["payload"]))
    if receipt["predicate"]["report"]["sha256"] != digests["report"]:
        fail("the receipt names another report")
    print(json.dumps({"ok": True, "size": size, "origin": origin}))


main()
