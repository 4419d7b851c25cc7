#!/usr/bin/env python3
"""Aggregate generation speed of `hotset serve` with N streams at once (run by
bench/run-serve.sh).  Each round sends N streamed completions together (a
prompt of P distinct tokens, G generated with ignore_eos) and times the round
from the first request to the last [DONE]; the server's own decode figure
(decode tokens / decode seconds from /metrics, prefill excluded) is read
around the rounds.  Prints one line per round and a summary line:

  summary streams=N rounds=R gen_tok_s=<median aggregate> min=<> max=<> decode_tok_s=<> prefill_tok_s=<>

usage: serve-bench.py URL STREAMS ROUNDS PROMPT GEN"""
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

url, n, rounds, plen, gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
u = urllib.parse.urlparse(url)


def metrics():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("GET", "/metrics")
    out = {}
    for line in c.getresponse().read().decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    c.close()
    return out


def stream(i, r, got):
    body = {"prompt": [(37 * (i + 8 * r) + 11 * t) % 1000 + 1 for t in range(plen)], "max_tokens": gen,
            "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = c.getresponse()
    if resp.status != 200:
        raise SystemExit(f"status {resp.status}: {resp.read()[:300]}")
    for raw in resp:
        line = raw.decode().strip()
        if line.startswith("data: {") and '"usage"' in line:
            got[i] = json.loads(line[6:])["usage"]["completion_tokens"]
    c.close()


speeds = []
m0 = metrics()
for r in range(rounds):
    got = [0] * n
    th = [threading.Thread(target=stream, args=(i, r, got)) for i in range(n)]
    t0 = time.monotonic()
    for t in th:
        t.start()
    for t in th:
        t.join()
    dt = time.monotonic() - t0
    if sum(got) != n * gen:
        raise SystemExit(f"round {r}: {sum(got)} tokens generated, {n * gen} expected")
    speeds.append(n * gen / dt)
    print(f"round {r}: {n} streams x {gen} tokens in {dt:.3f} s = {n * gen / dt:.2f} tok/s")
m1 = metrics()
dec = (m1["hotset_decode_tokens_total"] - m0["hotset_decode_tokens_total"]) / \
    max(1e-9, m1["hotset_decode_seconds_total"] - m0["hotset_decode_seconds_total"])
pre = (m1["hotset_prefill_tokens_total"] - m0["hotset_prefill_tokens_total"]) / \
    max(1e-9, m1["hotset_prefill_seconds_total"] - m0["hotset_prefill_seconds_total"])
print(f"summary streams={n} rounds={rounds} gen_tok_s={statistics.median(speeds):.2f} min={min(speeds):.2f} "
      f"max={max(speeds):.2f} decode_tok_s={dec:.2f} prefill_tok_s={pre:.2f}")
