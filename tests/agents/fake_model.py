#!/usr/bin/python3
"""A scripted fake model server for running real agent CLIs in tests.

Speaks, on 127.0.0.1 only:
  * Anthropic Messages      POST [prefix]/v1/messages[?beta=true]   (SSE and JSON)
                            POST [prefix]/v1/messages/count_tokens
  * OpenAI Responses        POST [prefix]/v1/responses               (SSE and JSON)
  * OpenAI Chat Completions POST [prefix]/v1/chat/completions        (SSE and JSON)
  * GET [prefix]/v1/models[/ID], HEAD/GET anything else: 200 with a harmless body.

The script (--script FILE) is JSON: {"turns": [TURN, ...]} (and, optionally,
"chat", "responses" or "anthropic": [TURN, ...], turns of that API's own) where TURN is
  {"text": "..."}                                   a final text answer, or
  {"tool": {"name": "Bash", "input": {...}}}        a tool call.
The turn is chosen per request by counting the tool results already in the
request's conversation (Anthropic: tool_result blocks; Responses: *_call_output
items; Chat: role "tool" messages), so a retried request gets the same answer.
Past the end of the script the answer is the text "[fake_model: script exhausted]".

Tool calls for OpenAI agents: if the request offers a tool with the script's
name, it is called with the script's input as arguments. Otherwise a shell-like
script tool ("Bash", "bash", "shell", anything whose input has "command") is
mapped onto the shell tool the request offers, in this order:
  exec_command {"cmd": CMD}, shell_command {"command": CMD},
  shell {"command": ["bash", "-lc", CMD]}, local_shell (a local_shell_call item).
A turn may pin the OpenAI call exactly: {"tool": {...}, "openai": {"name": N, "arguments": {...}}}.
A turn with a tool the request does not offer at all (e.g. a side request
without tools) is answered with a short text instead.

Every request is recorded as one JSON line in --record FILE:
  {"ts", "method", "path", "headers" (lower-case names), "body" (JSON or text),
   "api", "turn", "status"}.
--fail-status N answers every model request (messages, count_tokens, responses,
chat/completions) with HTTP N and an error body in the API's shape, plus
"x-should-retry: false" (the Anthropic and OpenAI SDKs then do not retry).
--port-file FILE receives the bound port once the socket listens. With --cert
and --key it speaks HTTPS. SIGTERM and SIGINT stop the server cleanly (exit 0).
"""

import argparse
import gzip
import json
import os
import signal
import ssl
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

EXHAUSTED = "[fake_model: script exhausted]"
SIDE_TEXT = "ok"


class State:
    def __init__(self, turns, record_path, fail_status, model_name):
        self.turns = turns
        self.by_api = {}  # "chat", "responses", "anthropic": turns of their own
        self.record_path = record_path
        self.fail_status = fail_status
        self.model_name = model_name
        self.lock = threading.Lock()
        self.record_file = open(record_path, "a", encoding="utf-8") if record_path else None

    def record(self, entry):
        if not self.record_file:
            return
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        with self.lock:
            self.record_file.write(line + "\n")
            self.record_file.flush()

    def turn(self, index, api=None):
        turns = self.by_api.get(api, self.turns)
        if 0 <= index < len(turns):
            return turns[index]
        return {"text": EXHAUSTED}


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


def is_shell_like(tool):
    name = str(tool.get("name", "")).lower()
    if name in ("bash", "shell", "shell_command", "exec_command", "sh"):
        return True
    inp = tool.get("input") or {}
    return isinstance(inp, dict) and "command" in inp


def shell_command_text(tool):
    inp = tool.get("input") or {}
    cmd = inp.get("command", inp.get("cmd", ""))
    if isinstance(cmd, list):
        # ["bash", "-lc", "x"] -> "x"; otherwise join naively.
        if len(cmd) == 3 and cmd[1] in ("-c", "-lc"):
            return cmd[2]
        return " ".join(cmd)
    return str(cmd)


# ---------------------------------------------------------------- counting

def count_anthropic_results(body):
    n = 0
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    n += 1
    return n


def count_responses_results(body):
    items = body.get("input")
    n = 0
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
                n += 1
    return n


def count_chat_results(body):
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")


# ---------------------------------------------------------------- OpenAI tool mapping

def openai_tool_names(body):
    """{name: kind} of the tools a Responses or Chat request offers."""
    out = {}
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "local_shell":
            out["local_shell"] = "local_shell"
        elif isinstance(t.get("function"), dict):  # chat shape
            out[t["function"].get("name")] = "function"
        elif t.get("name"):
            out[t["name"]] = t.get("type", "function")
    return out


def openai_call(turn, body):
    """Map a tool turn onto an OpenAI call: (kind, name, arguments) or None."""
    if "openai" in turn:
        o = turn["openai"]
        return ("function", o["name"], o.get("arguments", {}))
    tool = turn["tool"]
    offered = openai_tool_names(body)
    name = tool.get("name")
    if name in offered and offered[name] != "local_shell":
        return (offered[name], name, tool.get("input", {}))
    if is_shell_like(tool):
        cmd = shell_command_text(tool)
        if "exec_command" in offered:
            return ("function", "exec_command", {"cmd": cmd})
        if "shell_command" in offered:
            return ("function", "shell_command", {"command": cmd})
        if "shell" in offered:
            return ("function", "shell", {"command": ["bash", "-lc", cmd]})
        if "local_shell" in offered:
            return ("local_shell", "local_shell", {"command": ["bash", "-lc", cmd]})
        if "bash" in offered:
            return ("function", "bash", {"command": cmd})
    return None


# ---------------------------------------------------------------- SSE helpers

def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data, separators=(",", ":")))).encode()


def sse_data(data):
    return ("data: %s\n\n" % json.dumps(data, separators=(",", ":"))).encode()


# ---------------------------------------------------------------- Anthropic

def anthropic_content(turn, body):
    """The content blocks and stop_reason for a turn."""
    if "tool" in turn:
        offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if turn["tool"].get("name") in offered:
            block = {"type": "tool_use", "id": new_id("toolu_"), "name": turn["tool"]["name"],
                     "input": turn["tool"].get("input", {})}
            return [block], "tool_use"
        return [{"type": "text", "text": SIDE_TEXT}], "end_turn"
    return [{"type": "text", "text": str(turn.get("text", ""))}], "end_turn"


def anthropic_json(turn, body, model):
    content, stop = anthropic_content(turn, body)
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def anthropic_sse(turn, body, model):
    content, stop = anthropic_content(turn, body)
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})]
    for i, block in enumerate(content):
        if block["type"] == "tool_use":
            start = dict(block, input={})
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": start}))
            js = json.dumps(block["input"])
            half = len(js) // 2
            for part in (js[:half], js[half:]):
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": part}}))
        else:
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 10}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# ---------------------------------------------------------------- OpenAI Responses

def responses_items(turn, body):
    if "tool" in turn:
        call = openai_call(turn, body)
        if call is not None:
            kind, name, args = call
            if kind == "local_shell":
                return [{"type": "local_shell_call", "id": new_id("lsh_"), "call_id": new_id("call_"),
                         "status": "completed",
                         "action": {"type": "exec", "command": args["command"], "env": {}}}]
            if kind == "custom":
                return [{"type": "custom_tool_call", "id": new_id("ctc_"), "call_id": new_id("call_"),
                         "name": name, "status": "completed",
                         "input": args if isinstance(args, str) else json.dumps(args)}]
            return [{"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
                     "name": name, "status": "completed",
                     "arguments": args if isinstance(args, str) else json.dumps(args)}]
        text = SIDE_TEXT
    else:
        text = str(turn.get("text", ""))
    return [{"type": "message", "id": new_id("msg_"), "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}]


def responses_object(rid, model, status, output):
    obj = {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
           "model": model, "output": output, "error": None, "incomplete_details": None}
    if status == "completed":
        obj["usage"] = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": 20}
    return obj


def responses_json(turn, body, model):
    return responses_object(new_id("resp_"), model, "completed", responses_items(turn, body))


def responses_sse(turn, body, model):
    rid = new_id("resp_")
    items = responses_items(turn, body)
    seq = [0]

    def ev(event, data):
        data = dict(data, type=event, sequence_number=seq[0])
        seq[0] += 1
        return sse(event, data)

    out = [ev("response.created", {"response": responses_object(rid, model, "in_progress", [])}),
           ev("response.in_progress", {"response": responses_object(rid, model, "in_progress", [])})]
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            added = dict(item, status="in_progress", content=[])
            out.append(ev("response.output_item.added", {"output_index": i, "item": added}))
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(ev("response.content_part.added", {"item_id": item["id"], "output_index": i,
                                                          "content_index": 0, "part": part}))
            out.append(ev("response.output_text.delta", {"item_id": item["id"], "output_index": i,
                                                         "content_index": 0, "delta": text}))
            out.append(ev("response.output_text.done", {"item_id": item["id"], "output_index": i,
                                                        "content_index": 0, "text": text}))
            out.append(ev("response.content_part.done", {"item_id": item["id"], "output_index": i,
                                                         "content_index": 0,
                                                         "part": dict(part, text=text)}))
        elif item["type"] == "function_call":
            added = dict(item, status="in_progress", arguments="")
            out.append(ev("response.output_item.added", {"output_index": i, "item": added}))
            out.append(ev("response.function_call_arguments.delta",
                          {"item_id": item["id"], "output_index": i, "delta": item["arguments"]}))
            out.append(ev("response.function_call_arguments.done",
                          {"item_id": item["id"], "output_index": i, "arguments": item["arguments"]}))
        else:
            out.append(ev("response.output_item.added", {"output_index": i, "item": item}))
        out.append(ev("response.output_item.done", {"output_index": i, "item": item}))
    out.append(ev("response.completed", {"response": responses_object(rid, model, "completed", items)}))
    return b"".join(out)


# ---------------------------------------------------------------- OpenAI Chat Completions

def chat_message(turn, body):
    if "tool" in turn:
        call = openai_call(turn, body)
        if call is not None and call[0] != "local_shell":
            _, name, args = call
            tc = {"id": new_id("call_"), "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            return {"role": "assistant", "content": None, "tool_calls": [tc]}, "tool_calls"
        return {"role": "assistant", "content": SIDE_TEXT}, "stop"
    return {"role": "assistant", "content": str(turn.get("text", ""))}, "stop"


def chat_json(turn, body, model):
    msg, finish = chat_message(turn, body)
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def chat_sse(turn, body, model):
    msg, finish = chat_message(turn, body)
    cid, created = new_id("chatcmpl-"), int(time.time())

    def chunk(delta, fin=None, usage=None):
        d = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}
        if usage is not None:
            d["usage"] = usage
        return sse_data(d)

    out = [chunk({"role": "assistant", "content": ""})]
    if msg.get("tool_calls"):
        tc = msg["tool_calls"][0]
        out.append(chunk({"tool_calls": [{"index": 0, "id": tc["id"], "type": "function",
                                          "function": {"name": tc["function"]["name"], "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": tc["function"]["arguments"]}}]}))
    else:
        out.append(chunk({"content": msg["content"]}))
    out.append(chunk({}, finish, {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY on every accepted connection
    def version_string(self):
        return "fake-model/1"

    def log_message(self, fmt, *args):  # quiet; the record file is the log
        pass

    # -- plumbing
    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n) if n > 0 else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                data = gzip.decompress(data)
            elif enc == "deflate":
                data = zlib.decompress(data)
        except Exception:
            pass
        return data

    def send(self, status, payload, ctype="application/json", extra=None):
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        if ctype.startswith("text/event-stream"):
            self.send_header("Cache-Control", "no-cache")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def record(self, body, api, turn, status):
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = v if k not in headers else headers[k] + ", " + v
        self.server.state.record({"ts": time.time(), "method": self.command, "path": self.path,
                                  "headers": headers, "body": body, "api": api, "turn": turn,
                                  "status": status})

    # -- verbs
    def do_HEAD(self):
        self.record(None, None, None, 200)
        self.send(200, b"", "text/plain")

    def do_GET(self):
        path = urlsplit(self.path).path.rstrip("/")
        model = self.server.state.model_name
        if path.endswith("/models"):
            payload = {"object": "list", "has_more": False, "first_id": model, "last_id": model,
                       "data": [{"id": model, "object": "model", "type": "model", "created": 0,
                                 "created_at": "2025-01-01T00:00:00Z", "display_name": model,
                                 "owned_by": "fake"}],
                       "models": []}
        elif "/models/" in path:
            mid = path.rsplit("/", 1)[1]
            payload = {"id": mid, "object": "model", "type": "model", "created": 0,
                       "created_at": "2025-01-01T00:00:00Z", "display_name": mid, "owned_by": "fake"}
        else:
            payload = {"ok": True}
        self.record(None, None, None, 200)
        self.send(200, payload)

    def do_DELETE(self):
        self.read_body()
        self.record(None, None, None, 200)
        self.send(200, {})

    do_PUT = do_PATCH = do_DELETE

    def do_POST(self):
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else {}
        except Exception:
            body = raw.decode("utf-8", "replace")
        path = urlsplit(self.path).path.rstrip("/")
        st = self.server.state
        jbody = body if isinstance(body, dict) else {}
        model = jbody.get("model") or st.model_name
        stream = bool(jbody.get("stream"))

        if path.endswith("/messages/count_tokens"):
            api, counter = "anthropic-count", None
        elif path.endswith("/messages"):
            api, counter = "anthropic", count_anthropic_results
        elif path.endswith("/responses"):
            api, counter = "responses", count_responses_results
        elif path.endswith("/chat/completions"):
            api, counter = "chat", count_chat_results
        else:
            self.record(body, None, None, 404)
            self.send(404, {"error": {"type": "not_found", "message": "fake_model: no route " + path}})
            return

        if st.fail_status:
            status = st.fail_status
            msg = "fake_model: forced failure (HTTP %d)" % status
            if api.startswith("anthropic"):
                err = {"type": "error", "error": {"type": "api_error", "message": msg}}
            else:
                err = {"error": {"type": "server_error", "code": "fake_failure", "message": msg, "param": None}}
            self.record(body, api, None, status)
            self.send(status, err, extra={"x-should-retry": "false"})
            return

        if api == "anthropic-count":
            self.record(body, api, None, 200)
            self.send(200, {"input_tokens": 10})
            return

        idx = counter(jbody)
        turn = st.turn(idx, api)
        self.record(body, api, idx, 200)
        if api == "anthropic":
            if stream:
                self.send(200, anthropic_sse(turn, jbody, model), "text/event-stream; charset=utf-8",
                          {"request-id": new_id("req_")})
            else:
                self.send(200, anthropic_json(turn, jbody, model), extra={"request-id": new_id("req_")})
        elif api == "responses":
            if stream:
                self.send(200, responses_sse(turn, jbody, model), "text/event-stream; charset=utf-8")
            else:
                self.send(200, responses_json(turn, jbody, model))
        else:
            if stream:
                self.send(200, chat_sse(turn, jbody, model), "text/event-stream; charset=utf-8")
            else:
                self.send(200, chat_json(turn, jbody, model))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description="Scripted fake model server (Anthropic / OpenAI) on 127.0.0.1")
    ap.add_argument("--script", required=True, help='JSON file {"turns": [...]}')
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1", help="must be a loopback address")
    ap.add_argument("--record", help="append every request as a JSON line here")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--fail-status", type=int, default=0, help="answer every model request with this HTTP status")
    ap.add_argument("--model", default="fake-model", help="model name when a request names none")
    ap.add_argument("--cert", help="speak HTTPS with this certificate (PEM)")
    ap.add_argument("--key", help="the certificate's key (PEM)")
    a = ap.parse_args()
    if not a.host.startswith("127."):
        ap.error("--host must be in 127.0.0.0/8")
    with open(a.script, encoding="utf-8") as f:
        script = json.load(f)
    turns = script.get("turns") if isinstance(script, dict) else script
    if not isinstance(turns, list):
        ap.error("script must be {\"turns\": [...]}")

    srv = Server((a.host, a.port), Handler)
    if a.cert:
        # HTTPS (the gateway delivery's upstream in tests); each handshake in
        # its request's thread, not in the accepting one.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    srv.state = State(turns, a.record, a.fail_status, a.model)
    if isinstance(script, dict):
        for api in ("chat", "responses", "anthropic"):
            if isinstance(script.get(api), list):
                srv.state.by_api[api] = script[api]
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, a.port_file)

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()
        if srv.state.record_file:
            srv.state.record_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
