#!/usr/bin/env python3
"""Soak traffic for `hotset serve` (bench/run-soak.sh runs it beside an
ASan build of the server and samples the server's memory): CLIENTS threads
send a mix of what the server meets for SECONDS seconds: completions whole
and streamed, chat turns with tool definitions, tool calls without
arguments and their results by id, clients that hang up mid-stream, and bad
requests (broken JSON, wrong types, bodies over the cap, odd paths).
Every answer must be a status the request calls for; at the end no KV cell
may be held.

usage: soak-serve.py URL CLIENTS SECONDS   (SOAK_KEEPALIVE=1: connections kept
between requests where the server keeps them)
Prints a summary (and one line per problem) and exits 1 on any problem."""
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse

url, clients, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
u = urllib.parse.urlparse(url)
lock = threading.Lock()
counts, problems = {}, []
TOOL = {"type": "function", "function": {"name": "get_time", "description": "The time.",
                                          "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}


def note(kind, status, ok):
    with lock:
        counts[kind] = counts.get(kind, 0) + 1
        if not ok:
            problems.append(f"{kind}: status {status}")


KEEP = os.environ.get("SOAK_KEEPALIVE") == "1"  # reuse a connection while the server keeps it
local = threading.local()


def request(method, path, body=None, headers=None, read=True):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c = getattr(local, "conn", None) if KEEP and read else None
    if c is None:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        c.request(method, path, body, h)
        r = c.getresponse()
    except (http.client.HTTPException, ConnectionError):  # the server closed a kept one
        c.close()
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        c.request(method, path, body, h)
        r = c.getresponse()
    data = r.read() if read else None
    if KEEP and read:
        local.conn = None if (r.getheader("Connection") or "").lower() == "close" else c
    return c, r, data


def chat_with_calls(rng):
    n = rng.randint(1, 12)
    msgs = [{"role": "user", "content": "What time is it?"}]
    msgs.append({"role": "assistant", "content": None,
                 "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "get_time"}}
                                for i in range(n)]})
    msgs += [{"role": "tool", "tool_call_id": f"c{i}", "content": "12:00"} for i in range(n)]
    return {"messages": msgs, "tools": [TOOL], "max_tokens": 2, "temperature": 0}


def one(rng):
    k = rng.randrange(9)
    if k == 0:
        body = {"prompt": "Hello there", "max_tokens": rng.randint(1, 8), "temperature": 0}
        _, r, _ = request("POST", "/v1/completions", json.dumps(body))
        note("completion", r.status, r.status in (200, 503))
    elif k == 1:
        body = {"prompt": [rng.randrange(1, 250) for _ in range(rng.randint(1, 30))], "max_tokens": 6,
                "stream": True, "stream_options": {"include_usage": True}}
        _, r, data = request("POST", "/v1/completions", json.dumps(body))
        note("stream", r.status, r.status in (200, 503) and (r.status != 200 or data.endswith(b"data: [DONE]\n\n")))
    elif k == 2:
        body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                "tools": [TOOL], "max_tokens": 4}
        _, r, _ = request("POST", "/v1/chat/completions", json.dumps(body))
        note("chat+tools", r.status, r.status in (200, 503))
    elif k == 3:
        _, r, _ = request("POST", "/v1/chat/completions", json.dumps(chat_with_calls(rng)))
        note("tool calls without arguments", r.status, r.status in (200, 503))
    elif k == 4:  # a client that hangs up after the first bytes of a stream
        c, r, _ = request("POST", "/v1/completions", json.dumps({"prompt": "Hi", "max_tokens": 200, "stream": True,
                                                                  "ignore_eos": True}), read=False)
        if r.status == 200:
            r.read(64)
        c.close()
        note("hang-up", r.status, r.status in (200, 503))
    elif k == 5:
        bad = rng.choice(['{"prompt":', '{"prompt":"x","max_tokens":"ten"}', '[1,2]',
                          '{"messages":[{"role":"' + "é" * 700 + '","content":"x"}]}',
                          '{"messages":[{"role":"user","content":"x"}],"reasoning_effort":5}'])
        path = "/v1/chat/completions" if "messages" in bad else "/v1/completions"
        _, r, _ = request("POST", path, bad.encode())
        note("bad request", r.status, r.status == 400)
    elif k == 6:
        _, r, _ = request("POST", "/v1/completions", b'{"prompt":"' + b"a" * 70000 + b'"}')
        note("over the body cap", r.status, r.status == 413)
    elif k == 7:
        _, r, _ = request("GET", rng.choice(["/v1/models%c3", "/%ff", "/v1/nothing", "/v1/models%00"]))
        note("odd path", r.status, r.status in (400, 404))
    else:
        _, r, _ = request("GET", rng.choice(["/health", "/metrics", "/v1/models"]))
        note("GET", r.status, r.status == 200)


def client(seed):
    rng = random.Random(seed)
    end = time.time() + seconds
    while time.time() < end:
        try:
            one(rng)
        except Exception as e:  # a refused or reset connection is a problem too
            with lock:
                problems.append(f"exception {type(e).__name__}: {e}")


threads = [threading.Thread(target=client, args=(s,)) for s in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
time.sleep(1)
_, r, data = request("GET", "/metrics")
held = [line for line in data.decode().splitlines() if line.startswith("hotset_kv_cells_used ")]
if not held or held[0].split()[1] not in ("0", "0.0"):
    problems.append(f"KV cells held after the soak: {held}")
print("requests:", sum(counts.values()), " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
for p in problems[:20]:
    print("problem:", p)
print(f"{len(problems)} problems")
sys.exit(1 if problems else 0)
