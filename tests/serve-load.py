#!/usr/bin/env python3
"""Load test of `hotset serve` (run by tests/serve-load.sh): many concurrent
clients, several hundred requests, half of them streamed, some asking n = 2
or 3 choices (each its own sequence, the prompt's cells copied from the
first).  Every request is answered (200, or 503 with Retry-After and then
200 on a retry), none is lost or answered twice, every choice is the greedy
answer its prompt gets alone; streams of n = 3 dropped after their first
event leave nothing behind: afterwards /metrics shows no KV cell held and
the counts add up.

usage: serve-load.py URL CLIENTS REQUESTS SECONDS
Prints one line per problem and exits 1, or a summary and exits 0."""
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

url, clients, total, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
u = urllib.parse.urlparse(url)
PROMPTS = [[(7 * k + 3 * i) % 250 + 1 for i in range(3 + 5 * k)] for k in range(8)]
problems = []
lock = threading.Lock()


def problem(msg):
    with lock:
        problems.append(msg)


def post(body, timeout=120):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return c, r


def ask(k, stream, n=1):
    """One request for prompt k; returns (status, retry_after, [(text, tokens)] per choice, id, usage)."""
    body = {"prompt": PROMPTS[k], "max_tokens": 4 + k, "temperature": 0, "ignore_eos": True, "n": n,
            "return_tokens": True, "stream": stream, "stream_options": {"include_usage": True}}
    c, r = post(body)
    try:
        if r.status != 200:
            data = json.loads(r.read())
            if "error" not in data:
                problem(f"status {r.status} without an error object: {data}")
            return r.status, r.getheader("Retry-After"), None, None, None
        if not stream:
            j = json.loads(r.read())
            if [ch["index"] for ch in j["choices"]] != list(range(n)):
                problem(f"choices {[ch['index'] for ch in j['choices']]} for n = {n}")
            return 200, None, [(ch["text"], ch["tokens"]) for ch in j["choices"]], j["id"], j["usage"]
        text, tokens, ids, usage, done, finishes = [""] * n, [None] * n, set(), None, 0, 0
        for raw in r:
            line = raw.decode("utf-8").rstrip("\n")
            if not line:
                continue
            if not line.startswith("data: "):
                problem(f"stream line {line!r}")
                continue
            if line == "data: [DONE]":
                done += 1
                continue
            if done:
                problem("an event after [DONE]")
            j = json.loads(line[6:])
            ids.add(j["id"])
            if "usage" in j:
                usage = j["usage"]
            for ch in j["choices"]:
                text[ch["index"]] += ch["text"]
                finishes += ch["finish_reason"] is not None
                if "tokens" in j:  # with a choice's finish_reason
                    tokens[ch["index"]] = j["tokens"]
        if done != 1 or finishes != n or len(ids) != 1:
            problem(f"stream: {done} [DONE], {finishes} finish_reason for n = {n}, {len(ids)} ids")
        return 200, None, list(zip(text, tokens)), ids.pop() if ids else None, usage
    finally:
        c.close()


def metrics():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/metrics")
    out = {}
    for line in c.getresponse().read().decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    c.close()
    return out


# greedy answer of each prompt alone (one request at a time)
expected = []
for k in range(len(PROMPTS)):
    st, _, got, _, usage = ask(k, False)
    if st != 200:
        sys.exit(f"reference request {k}: status {st}")
    expected.append(got[0])

# the load: `clients` threads take requests from a shared counter until `total` are answered
counter = iter(range(total))
answers, ids, retries = {}, set(), [0]
t_end = time.monotonic() + limit


def client(seed):
    rnd = random.Random(seed)
    while True:
        with lock:
            i = next(counter, None)
        if i is None:
            return
        k, stream, n = i % len(PROMPTS), bool(i % 2), [3, 2, 1, 1, 1][i % 5]
        while True:
            if time.monotonic() > t_end:
                problem(f"request {i}: not answered within {limit} s")
                return
            try:
                st, ra, got, rid, usage = ask(k, stream, n)
            except Exception as e:  # a refused or broken connection is a problem, not a retry
                problem(f"request {i}: {type(e).__name__}: {e}")
                return
            if st == 503:
                if not ra or int(ra) < 1:
                    problem(f"request {i}: 503 without Retry-After")
                with lock:
                    retries[0] += 1
                time.sleep(rnd.uniform(0.1, 0.3))  # shorter than Retry-After: keep the test short
                continue
            if st != 200:
                problem(f"request {i}: status {st}")
                return
            break
        with lock:
            if i in answers:
                problem(f"request {i} answered twice")
            answers[i] = True
            if rid in ids:
                problem(f"request {i}: id {rid} given twice")
            ids.add(rid)
        for c, answer in enumerate(got):
            if answer != expected[k]:
                problem(f"request {i} (prompt {k}, stream {stream}, choice {c} of {n}): {answer}, alone {expected[k]}")
        if not usage or usage["prompt_tokens"] != len(PROMPTS[k]) or usage["completion_tokens"] != n * (4 + k):
            problem(f"request {i}: usage {usage} for n = {n}")


def drop(k):
    """A stream of n = 3 whose client leaves after the first event (long
    enough that the server sees it go before the tokens run out: at 64 a
    fast decode of the tiny model once finished one as 'length')."""
    body = {"prompt": PROMPTS[k], "max_tokens": 512, "temperature": 0, "ignore_eos": True, "n": 3, "stream": True}
    c, r = post(body)
    if r.status == 200:
        r.readline()
    c.close()


m0 = metrics()
t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(s,)) for s in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
dt = time.monotonic() - t0
DROPS = 4
for k in range(DROPS):
    drop(k)
if len(answers) != total:
    problem(f"{len(answers)} of {total} requests answered")
# the scheduler publishes after its step: give it a moment to settle
for _ in range(100):
    m1 = metrics()
    if m1["hotset_requests_running"] == 0 and m1["hotset_kv_cells_used"] == 0:
        break
    time.sleep(0.05)
for name in ("hotset_kv_cells_used", "hotset_requests_running", "hotset_requests_queued"):
    if m1[name] != 0:
        problem(f"after the load: {name} = {m1[name]}")
done = m1['hotset_requests_finished_total{reason="length"}'] - m0['hotset_requests_finished_total{reason="length"}']
if done != total:
    problem(f"/metrics counts {done:.0f} finished requests, the clients got {total}")
ok = m1.get('hotset_http_requests_total{route="/v1/completions",code="200"}', 0) - \
    m0.get('hotset_http_requests_total{route="/v1/completions",code="200"}', 0)
if ok != total + DROPS:  # the dropped streams had their 200
    problem(f"/metrics counts {ok:.0f} answers with 200, the clients got {total} (and {DROPS} left)")
for p in problems[:20]:
    print(p)
if problems:
    print(f"{len(problems)} problems")
    sys.exit(1)
print(f"{total} requests from {clients} clients in {dt:.1f} s, {retries[0]} retries after 503")
