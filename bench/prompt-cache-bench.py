#!/usr/bin/env python3
"""What the prompt cache of `hotset serve` saves on a chat's next turn (run by
bench/run-prompt-cache.sh).  Each round: a first turn (a prompt of P distinct
token ids, G tokens generated), then the next turn (that prompt, the answer,
and T new tokens) twice, with "cache_prompt": false and true, in an order
that alternates between rounds.  The server's own timings give the prompt
time of each; the time to the last byte is measured here.  Prints one line
per round and a summary line:

  summary rounds=R prompt=<n> cached=<n> prompt_ms_off=<median> prompt_ms_on=<median> ratio=<off/on>

usage: prompt-cache-bench.py URL ROUNDS P G T"""
import http.client
import json
import statistics
import sys
import time
import urllib.parse

url, rounds, plen, gen, tail = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
u = urllib.parse.urlparse(url)


def complete(prompt, n, cache):
    body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True, "return_tokens": True,
            "cache_prompt": cache}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    t1 = time.perf_counter()
    c.close()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {data[:300]!r}")
    j = json.loads(data)
    return j, (t1 - t0) * 1e3


off, on = [], []
for k in range(rounds):
    first = [(53 * k + 7 * t) % 1000 + 1 for t in range(plen)]
    j, _ = complete(first, gen, True)
    nxt = first + j["choices"][0]["tokens"] + [(11 * t + k) % 1000 + 1 for t in range(tail)]
    res = {}
    for cache in ((False, True) if k % 2 == 0 else (True, False)):
        res[cache] = complete(nxt, 1, cache)
        if not cache:  # the uncached turn emptied the one sequence: the first turn again refills it
            complete(first, gen, True)
    (jo, wo), (jn, wn) = res[False], res[True]
    off.append(jo["timings"]["prompt_ms"])
    on.append(jn["timings"]["prompt_ms"])
    print(f"round {k}: next turn of {len(nxt)} tokens: cache off prompt {off[-1]:.1f} ms (wall {wo:.1f} ms), "
          f"cache on {jn['usage']['prompt_tokens_details']['cached_tokens']} cached, prompt {on[-1]:.1f} ms "
          f"(wall {wn:.1f} ms)")
    cached = jn["usage"]["prompt_tokens_details"]["cached_tokens"]
mo, mn = statistics.median(off), statistics.median(on)
print(f"summary rounds={rounds} prompt={len(nxt)} cached={cached} prompt_ms_off={mo:.1f} prompt_ms_on={mn:.1f} "
      f"ratio={mo / mn:.1f}")
