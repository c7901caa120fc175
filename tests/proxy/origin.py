#!/usr/bin/env python3
"""An origin server for the egress proxy tests, on 127.0.0.1 only.

Prints "port N" once it listens. With --cert and --key it speaks HTTPS.
  GET  /sse?n=N&gap_ms=G   N server-sent events ("data: i"), G ms apart, then
                           the connection closes
  GET  /header?name=X      the value of request header X, as the body
  GET  /drop               an answer, then the connection closes unannounced
  GET  anything else       200, a body that echoes the request line and the
                           headers as received, one per line
  POST /echo               the request body, as the body
  POST anything else       reads the body (Content-Length) and answers
                           "got N bytes"
With --record FILE every request is appended to FILE as one JSON line:
{"peer" (the client's port), "method", "path", "headers": [[name, value], ...],
"body"}. With --port-file
FILE the port is also written there.
"""
import argparse
import http.server
import json
import ssl
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

RECORD = {"path": None, "lock": threading.Lock()}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, body=b""):
        if not RECORD["path"]:
            return
        entry = {
            "peer": self.client_address[1],  # the client's port: one per connection
            "method": self.command,
            "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("utf-8", "replace"),
        }
        with RECORD["lock"], open(RECORD["path"], "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def reply(self, body, content_type="text/plain"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length", "0"))
        chunks = []
        got = 0
        while got < n:
            chunk = self.rfile.read(min(65536, n - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def do_GET(self):
        self.record()
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        if url.path == "/sse":
            n = int(q.get("n", ["3"])[0])
            gap = int(q.get("gap_ms", ["100"])[0]) / 1000.0
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(n):
                self.wfile.write(b"data: %d\n\n" % i)
                self.wfile.flush()
                if i + 1 < n:
                    time.sleep(gap)
            self.close_connection = True
            return
        if url.path == "/drop":
            # Answered as if the connection stayed, then closed: what an
            # upstream dropping idle connections looks like to its client.
            self.reply("dropping\n")
            self.close_connection = True
            return
        if url.path == "/header":
            self.reply(self.headers.get(q.get("name", [""])[0], ""))
            return
        lines = [self.requestline]
        lines += ["%s: %s" % (k, v) for k, v in self.headers.items()]
        self.reply("\n".join(lines) + "\n")

    def do_POST(self):
        body = self.read_body()
        self.record(body)
        if urlsplit(self.path).path == "/echo":
            self.reply(body, "application/octet-stream")
            return
        self.reply("got %d bytes\n" % len(body))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--record")
    ap.add_argument("--port-file")
    args = ap.parse_args()
    RECORD["path"] = args.record
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, client_address: None  # clients cut on purpose
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("port %d" % server.server_address[1], flush=True)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % server.server_address[1])
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
