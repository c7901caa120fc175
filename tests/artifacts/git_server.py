#!/usr/bin/python3
"""A git smart-HTTP server for tests: the real `git http-backend` behind a token.

    git_server.py --root DIR --port 0 --port-file FILE --token TOKEN [--log FILE]
                  [--init NAME]... [--init-only] [--host 127.0.0.1]
                  [--tls-cert PEM [--tls-key PEM]]

Serves the bare repositories under DIR (http://127.0.0.1:PORT/NAME.git) through
`git http-backend` run as a CGI, one process per request. Every request, fetch
(git-upload-pack) and push (git-receive-pack) alike, needs the token:

    Authorization: Basic base64(ANYUSER:TOKEN)     or     Authorization: Bearer TOKEN

anything else gets 401 with `WWW-Authenticate: Basic realm="git"`. Request
bodies may be chunked (git sends big pushes with Transfer-Encoding: chunked)
and/or gzip-compressed (Content-Encoding: gzip, git's medium-sized requests):
the server decodes both into a temporary file and hands the CGI the plain body
with its exact CONTENT_LENGTH. The CGI's output is streamed back, its Status and
headers turned into the HTTP response head; each response ends by closing the
connection (no keep-alive), which an egress proxy that relays one request per
connection expects anyway.

--init NAME (repeatable) creates DIR/NAME.git (bare, HEAD -> main,
http.receivepack=true) before serving; --init-only exits after that.
The bound port is written to --port-file (atomically) once listening. SIGTERM
and SIGINT stop the server cleanly (exit 0). --log gets one line per request:
client, request line, status, user, body encodings and size; never the token.

--tls-cert/--tls-key serve https instead (clients: GIT_SSL_CAINFO=the CA).
Python 3 standard library only; listens on 127.0.0.1 unless --host says otherwise.
"""

import argparse
import base64
import binascii
import hmac
import os
import re
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GIT = shutil.which("git") or "/usr/bin/git"
MAX_BODY = 1 << 30  # 1 GiB decoded: a test fixture, not a forge
CHUNK = 64 * 1024


class BadRequest(Exception):
    pass


def init_repo(root, name):
    """Creates ROOT/NAME.git as a bare repository that accepts pushes; returns its path."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*", name) or ".." in name:
        raise SystemExit(f"git_server: bad repository name {name!r}")
    if name.endswith(".git"):
        name = name[:-4]
    path = os.path.join(root, name + ".git")
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run([GIT, "init", "--quiet", "--bare", "--initial-branch=main", path],
                   check=True, env=env)
    subprocess.run([GIT, "--git-dir", path, "config", "http.receivepack", "true"], check=True, env=env)
    return path


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # answers 100-continue; each response still closes
    server_version = "ringfence-test-git/1"

    # -- logging: one line per request, to --log, with the token masked -----------------

    def log_message(self, fmt, *args):  # http.server's own lines (errors): through _log
        self._log("note " + (fmt % args))

    def log_request(self, code="-", size="-"):
        pass  # logged by _finish_log with more detail

    def _log(self, text):
        srv = self.server
        tok = srv.token
        if tok:
            text = text.replace(tok, "[token]")
        text = text.replace("\n", "\\n").replace("\r", "\\r")
        line = "%s %s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.client_address[0], text)
        with srv.log_lock:
            if srv.log_file:
                srv.log_file.write(line)
                srv.log_file.flush()

    def _finish_log(self, status, user="-", extra=""):
        te = self.headers.get("Transfer-Encoding", "-") if self.headers else "-"
        ce = self.headers.get("Content-Encoding", "-") if self.headers else "-"
        self._log('"%s" %s user=%s te=%s ce=%s%s' % (
            getattr(self, "requestline", "-"), status, user or "-", te, ce, extra))

    # -- auth -----------------------------------------------------------------------------

    def _authorized_user(self):
        """The user name if the request carries the token, else None."""
        value = self.headers.get("Authorization", "")
        scheme, _, cred = value.strip().partition(" ")
        cred = cred.strip()
        token = self.server.token.encode()
        if scheme.lower() == "bearer":
            if hmac.compare_digest(cred.encode(), token):
                return "bearer"
            return None
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(cred.encode(), validate=True)
            except (binascii.Error, ValueError):
                return None
            user, sep, password = decoded.partition(b":")
            if sep and hmac.compare_digest(password, token):
                return user.decode("utf-8", "replace") or "user"
        return None

    def _send_simple(self, status, text, headers=()):
        body = (text + "\n").encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    # -- the request body: chunked and/or gzip, into a temporary file -------------------

    def _read_exact(self, n):
        data = self.rfile.read(n)
        if len(data) != n:
            raise BadRequest("body ended early")
        return data

    def _raw_body_chunks(self):
        te = self.headers.get("Transfer-Encoding", "").strip().lower()
        if te:
            if te != "chunked":
                raise BadRequest("unsupported Transfer-Encoding %r" % te)
            total = 0
            while True:
                line = self.rfile.readline(1024)
                if not line.endswith(b"\n"):
                    raise BadRequest("bad chunk size line")
                size_text = line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise BadRequest("bad chunk size %r" % size_text[:20])
                if size == 0:
                    while True:  # trailers, up to the blank line
                        t = self.rfile.readline(8192)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    return
                total += size
                if total > MAX_BODY:
                    raise BadRequest("body too large")
                left = size
                while left:
                    piece = self._read_exact(min(left, CHUNK))
                    left -= len(piece)
                    yield piece
                if self.rfile.readline(3).strip():
                    raise BadRequest("missing CRLF after chunk")
        else:
            length = self.headers.get("Content-Length")
            if length is None:
                return
            try:
                left = int(length)
            except ValueError:
                raise BadRequest("bad Content-Length")
            if left < 0 or left > MAX_BODY:
                raise BadRequest("bad Content-Length")
            while left:
                piece = self._read_exact(min(left, CHUNK))
                left -= len(piece)
                yield piece

    def _body_file(self):
        """The decoded body in a temporary file (seeked to 0) and its length."""
        ce = self.headers.get("Content-Encoding", "").strip().lower()
        if ce in ("gzip", "x-gzip"):
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif ce in ("", "identity"):
            inflater = None
        else:
            raise BadRequest("unsupported Content-Encoding %r" % ce)
        f = tempfile.TemporaryFile(prefix="git-server-body-")
        n = 0
        try:
            for piece in self._raw_body_chunks():
                if inflater is not None:
                    piece = inflater.decompress(piece, MAX_BODY + 1 - n)
                    if inflater.unconsumed_tail:
                        raise BadRequest("body too large")
                f.write(piece)
                n += len(piece)
                if n > MAX_BODY:
                    raise BadRequest("body too large")
            if inflater is not None:
                rest = inflater.flush()
                f.write(rest)
                n += len(rest)
                if not inflater.eof:
                    raise BadRequest("truncated gzip body")
        except zlib.error as e:
            f.close()
            raise BadRequest("bad gzip body: %s" % e)
        except BaseException:
            f.close()
            raise
        f.flush()
        f.seek(0)
        return f, n

    def _is_read(self):
        """A fetch or clone (upload-pack), never a push."""
        url = urllib.parse.urlsplit(self.path)
        if url.path.endswith("/git-upload-pack"):
            return True
        return url.path.endswith("/info/refs") and "service=git-upload-pack" in url.query

    # -- the CGI --------------------------------------------------------------------------

    def _handle(self):
        self.close_connection = True
        user = self._authorized_user()
        if user is None and self.server.anonymous_read and self._is_read():
            user = "anonymous"
        if user is None:
            # Drain a small body so the client reads the 401 instead of a reset.
            self._drain_small_body()
            # Logged before the answer: the client (and a test reading the log)
            # may be gone the moment the last byte of a Content-Length body lands.
            self._finish_log(401)
            self._send_simple(401, "authentication required",
                              [("WWW-Authenticate", 'Basic realm="git"')])
            return

        url = urllib.parse.urlsplit(self.path)  # absolute-form too: the path is what counts
        path_info = urllib.parse.unquote(url.path)
        if not path_info.startswith("/") or "\0" in path_info or any(
                p == ".." for p in path_info.split("/")):
            self._finish_log(400, user)
            self._send_simple(400, "bad path")
            return

        try:
            body, body_len = self._body_file()
        except BadRequest as e:
            self._finish_log(400, user, ' error="%s"' % e)
            self._send_simple(400, "bad request: %s" % e)
            return

        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.server.root,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            # Every served repository takes pushes (from authenticated users), and
            # may be owned by another user than the server's.
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "http.receivepack",
            "GIT_CONFIG_VALUE_0": "true",
            "GIT_CONFIG_KEY_1": "safe.directory",
            "GIT_CONFIG_VALUE_1": "*",
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "SERVER_SOFTWARE": self.server_version,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(self.server.server_address[1]),
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path_info,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(body_len),
            "REMOTE_USER": user,
            "REMOTE_ADDR": self.client_address[0],
            "AUTH_TYPE": "Basic",
        }
        gp = self.headers.get("Git-Protocol")
        if gp:
            env["GIT_PROTOCOL"] = gp
            env["HTTP_GIT_PROTOCOL"] = gp

        try:
            proc = subprocess.Popen([GIT, "http-backend"], stdin=body, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, cwd=self.server.root)
        finally:
            body.close()
        stderr_parts = []
        t = threading.Thread(target=lambda: stderr_parts.append(proc.stderr.read()), daemon=True)
        t.start()
        status = 502
        sent = 0
        try:
            status, headers = self._cgi_head(proc.stdout)
            self.send_response(status, None)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                data = proc.stdout.read1(CHUNK) if hasattr(proc.stdout, "read1") else proc.stdout.read(CHUNK)
                if not data:
                    break
                if self.command != "HEAD":
                    self.wfile.write(data)
                    sent += len(data)
            self.wfile.flush()
        except BadRequest as e:
            self._send_simple(502, "bad CGI output: %s" % e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            proc.stdout.close()
            rc = proc.wait()
            t.join(5)
        err = b"".join(p for p in stderr_parts if p).decode("utf-8", "replace").strip()
        extra = " in=%d out=%d rc=%d" % (body_len, sent, rc)
        if err:
            extra += ' stderr="%s"' % err[:500]
        self._finish_log(status, user, extra)

    def _cgi_head(self, out):
        status = 200
        headers = []
        while True:
            line = out.readline(8192)
            if not line:
                raise BadRequest("CGI ended before its headers")
            line = line.rstrip(b"\r\n")
            if not line:
                break
            k, sep, v = line.decode("latin-1").partition(":")
            if not sep:
                raise BadRequest("bad CGI header line")
            k, v = k.strip(), v.strip()
            if k.lower() == "status":
                try:
                    status = int(v.split()[0])
                except (ValueError, IndexError):
                    raise BadRequest("bad Status %r" % v)
            elif k.lower() in ("connection", "transfer-encoding", "keep-alive"):
                continue
            else:
                headers.append((k, v))
        return status, headers

    def _drain_small_body(self):
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return
        if 0 < n <= 1 << 20 and not self.headers.get("Transfer-Encoding"):
            self.rfile.read(n)

    def do_GET(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_HEAD(self):
        self._handle()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    tls = None  # an ssl.SSLContext with --tls-cert

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, on the request's own thread, so a slow
        # or silent client never holds up accept().
        if self.tls is not None:
            request.settimeout(30)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ValueError):
                return
            request.settimeout(None)
            try:
                super().finish_request(request, client_address)
            finally:
                try:  # close_notify: our bodies end with the connection
                    request.settimeout(5)
                    request.unwrap().close()
                except (OSError, ValueError):
                    request.close()
            return
        super().finish_request(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="directory holding the bare repositories")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--port-file", help="written with the bound port once listening")
    ap.add_argument("--token", help="the token every request must carry")
    ap.add_argument("--log", help="one line per request (the token never appears)")
    ap.add_argument("--anonymous-read", action="store_true",
                    help="fetch and clone without the token (pushes still need it)")
    ap.add_argument("--init", action="append", default=[], metavar="NAME",
                    help="create ROOT/NAME.git (bare, pushable) first; repeatable")
    ap.add_argument("--init-only", action="store_true", help="exit after --init")
    ap.add_argument("--tls-cert", help="serve https with this PEM certificate (chain)")
    ap.add_argument("--tls-key", help="its PEM private key (default: in --tls-cert)")
    args = ap.parse_args()

    root = os.path.realpath(args.root)
    os.makedirs(root, exist_ok=True)
    for name in args.init:
        init_repo(root, name)
    if args.init_only:
        return 0
    if not args.token:
        ap.error("--token is required to serve")

    httpd = Server((args.host, args.port), Handler)
    httpd.root = root
    httpd.token = args.token
    httpd.anonymous_read = args.anonymous_read
    httpd.log_lock = threading.Lock()
    httpd.log_file = open(args.log, "a", buffering=1) if args.log else None
    if args.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        httpd.tls = ctx

    def stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    port = httpd.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    if httpd.log_file:
        httpd.log_file.write("%s listening on %s://%s:%d root=%s\n" % (
            time.strftime("%Y-%m-%dT%H:%M:%S"), "https" if httpd.tls else "http", args.host,
            port, root))
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        if httpd.log_file:
            httpd.log_file.write("%s stopped\n" % time.strftime("%Y-%m-%dT%H:%M:%S"))
            httpd.log_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
