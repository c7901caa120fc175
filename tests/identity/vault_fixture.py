#!/usr/bin/python3
"""A HashiCorp Vault KV v2 server for tests: the subset ringfence uses, on loopback.

Vault itself cannot be installed on these machines, so the tests start this
instead. It answers as Vault 1.x does (paths, JSON shapes, status codes), and
the tests drive it with python3-hvac, the real client, so it cannot drift from
the real API (tests/identity/vault_fixture_test.py and the C++ tests that read
back through hvac).

    vault_fixture.py --token-file F [--mount secret] [--port-file P]

Binds 127.0.0.1:0 and writes the port to --port-file (or stdout). The token is
read from a file, never argv. Only this subset is served:

    GET    /v1/sys/health | /v1/sys/init | /v1/sys/seal-status
    GET    /v1/auth/token/lookup-self       POST /v1/auth/token/revoke-self
    GET    /v1/M/data/P[?version=N]         POST|PUT /v1/M/data/P  {"data":{..},"options":{"cas":N}}
    DELETE /v1/M/data/P                      (soft-deletes the latest version)
    POST   /v1/M/delete/P | /v1/M/undelete/P | /v1/M/destroy/P   {"versions":[..]}
    GET    /v1/M/metadata/P                  DELETE /v1/M/metadata/P
    LIST   /v1/M/metadata/P  (or GET ?list=true)

Anything else is a 404 as Vault gives for a route with no handler. A missing or
wrong X-Vault-Token is a 403 "permission denied", as is any request after
revoke-self.
"""
import argparse
import datetime
import http.client
import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Headers(dict):
    """Request headers, case-insensitive: what http.server reads of them."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name):
        return dict.get(self, name.lower())


def parse_headers(fp, _class=None):
    """http.client.parse_headers without the email package: Python's own spends
    most of a request's time there, and the fixture stands in for Vault (Go),
    whose answers take microseconds, in the benches too."""
    headers = Headers()
    count = 0
    while True:
        line = fp.readline(65537)
        if len(line) > 65536:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return headers
        count += 1
        if count > 100:
            raise http.client.HTTPException("got more than 100 headers")
        name, sep, value = line.decode("iso-8859-1").partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()


http.client.parse_headers = parse_headers
REQUEST_IDS = itertools.count(1)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Store:
    def __init__(self, mounts, token):
        self.lock = threading.Lock()
        self.mounts = {m: {} for m in mounts}  # mount -> path -> {"versions": {n: {...}}, "current": n}
        self.token = token
        self.revoked = False
        self.requests = 0


def envelope(data):
    return {
        "request_id": "fixture-%08d" % next(REQUEST_IDS),
        "lease_id": "",
        "renewable": False,
        "lease_duration": 0,
        "data": data,
        "wrap_info": None,
        "warnings": None,
        "auth": None,
    }


def version_meta(v, n):
    return {
        "created_time": v["created_time"],
        "custom_metadata": None,
        "deletion_time": v["deletion_time"],
        "destroyed": v["destroyed"],
        "version": n,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vault-fixture"
    # Headers and body go out in two writes; without TCP_NODELAY the second
    # waits for the client's delayed ACK (40 ms), which Vault (Go) never makes
    # its clients pay.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # quiet: tests read stderr for errors only
        pass

    # --- replies ---
    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Cache-Control", "no-store")
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        # Head and body in one write, as Vault sends them.
        self._headers_buffer.append(b"\r\n" + data)
        self.flush_headers()

    def errors(self, status, *messages):
        self.reply(status, {"errors": list(messages)})

    # --- request plumbing ---
    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def authorised(self, store):
        token = self.headers.get("X-Vault-Token")
        if token is None:
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        return not store.revoked and token == store.token

    def route(self, method):
        store = self.server.store
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        with store.lock:
            store.requests += 1
        if parts[:3] == ["v1", "sys", "health"]:
            return self.reply(200, {"initialized": True, "sealed": False, "standby": False,
                                    "version": "1.15.0-fixture", "cluster_name": "fixture"})
        if parts[:3] == ["v1", "sys", "init"]:
            return self.reply(200, {"initialized": True})
        if parts[:3] == ["v1", "sys", "seal-status"]:
            return self.reply(200, {"type": "shamir", "initialized": True, "sealed": False,
                                    "t": 1, "n": 1, "progress": 0, "nonce": "",
                                    "version": "1.15.0-fixture", "migration": False,
                                    "recovery_seal": False, "storage_type": "inmem"})
        body = self.body() if method in ("POST", "PUT") else {}
        if body is None:
            return self.errors(400, "failed to parse JSON input")
        with store.lock:
            if not self.authorised(store):
                return self.errors(403, "permission denied")
            if parts[:3] == ["v1", "auth", "token"] and len(parts) == 4:
                if parts[3] == "lookup-self" and method == "GET":
                    return self.reply(200, envelope({"id": store.token, "policies": ["root"],
                                                     "ttl": 0, "renewable": False}))
                if parts[3] == "revoke-self" and method in ("POST", "PUT"):
                    store.revoked = True
                    return self.reply(204)
                return self.errors(405, "unsupported operation")
            if len(parts) < 4 or parts[0] != "v1" or parts[1] not in store.mounts:
                return self.errors(404, "no handler for route \"%s\"" % url.path[len("/v1/"):])
            kv = store.mounts[parts[1]]
            kind, path = parts[2], "/".join(parts[3:])
            if method == "LIST" or (method == "GET" and query.get("list") == ["true"]):
                if kind != "metadata":
                    return self.errors(405, "unsupported operation")
                prefix = path.rstrip("/") + "/" if path else ""
                keys = sorted({p[len(prefix):].split("/")[0] + ("/" if "/" in p[len(prefix):] else "")
                               for p in kv if p.startswith(prefix)})
                if not keys:
                    return self.errors(404)
                return self.reply(200, envelope({"keys": keys}))
            if kind == "data":
                return self.data(method, kv, path, query, body)
            if kind in ("delete", "undelete", "destroy") and method in ("POST", "PUT"):
                return self.versions(kind, kv, path, body)
            if kind == "metadata":
                return self.metadata(method, kv, path)
            return self.errors(404, "no handler for route")

    def data(self, method, kv, path, query, body):
        entry = kv.get(path)
        if method == "GET":
            if entry is None:
                return self.errors(404)
            n = int(query["version"][0]) if "version" in query else entry["current"]
            v = entry["versions"].get(n)
            if v is None:
                return self.errors(404)
            live = not v["deletion_time"] and not v["destroyed"]
            doc = envelope({"data": v["data"] if live else None, "metadata": version_meta(v, n)})
            # Vault answers a deleted or destroyed version with 404 and its metadata.
            return self.reply(200 if live else 404, doc)
        if method in ("POST", "PUT"):
            data = body.get("data")
            if not isinstance(data, dict):
                return self.errors(400, "no data provided")
            options = body.get("options") or {}
            cas = options.get("cas")
            current = entry["current"] if entry else 0
            if cas is not None and cas != current:
                return self.errors(400, "check-and-set parameter did not match the current version")
            if entry is None:
                entry = kv[path] = {"versions": {}, "current": 0, "created_time": now()}
            n = current + 1
            entry["versions"][n] = {"data": data, "created_time": now(),
                                    "deletion_time": "", "destroyed": False}
            entry["current"] = n
            return self.reply(200, envelope(version_meta(entry["versions"][n], n)))
        if method == "DELETE":
            if entry is not None:
                v = entry["versions"][entry["current"]]
                if not v["deletion_time"]:
                    v["deletion_time"] = now()
            return self.reply(204)
        return self.errors(405, "unsupported operation")

    def versions(self, kind, kv, path, body):
        wanted = body.get("versions")
        if not isinstance(wanted, list) or not wanted:
            return self.errors(400, "no version number provided")
        entry = kv.get(path)
        for n in wanted:
            v = entry["versions"].get(n) if entry else None
            if v is None:
                continue
            if kind == "delete" and not v["deletion_time"]:
                v["deletion_time"] = now()
            elif kind == "undelete" and not v["destroyed"]:
                v["deletion_time"] = ""
            elif kind == "destroy":
                v["destroyed"] = True
                v["data"] = None
        return self.reply(204)

    def metadata(self, method, kv, path):
        entry = kv.get(path)
        if method == "DELETE":
            kv.pop(path, None)
            return self.reply(204)
        if method != "GET":
            return self.errors(405, "unsupported operation")
        if entry is None:
            return self.errors(404)
        versions = {str(n): {"created_time": v["created_time"], "deletion_time": v["deletion_time"],
                             "destroyed": v["destroyed"]} for n, v in entry["versions"].items()}
        return self.reply(200, envelope({
            "cas_required": False, "created_time": entry["created_time"],
            "current_version": entry["current"], "custom_metadata": None,
            "delete_version_after": "0s", "max_versions": 0,
            "oldest_version": min(entry["versions"]), "updated_time": now(),
            "versions": versions}))

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def do_LIST(self):
        self.route("LIST")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--mount", action="append", default=None)
    ap.add_argument("--port-file")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    args = ap.parse_args()
    with open(args.token_file) as f:
        token = f.read().strip()
    if not token:
        sys.exit("vault_fixture: the token file %s is empty" % args.token_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.store = Store(args.mount or ["secret"], token)
    if args.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    port = str(server.server_address[1])
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(port + "\n")
        import os
        os.rename(tmp, args.port_file)
    else:
        print(port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
