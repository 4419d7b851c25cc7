#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol (its --remote-debugging-pipe:
JSON messages ended by NUL on file descriptors 3 and 4) to the chat page of
`hotset serve` (run by tests/serve-page.sh): the page sends ?q=..., the answer
streams in, and the page marks itself done; the reply bubble must hold the
answer's text and usage, the page no error; a screenshot is written.

usage: serve-page.py CHROMIUM URL SCREENSHOT SECONDS"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

chromium, url, shot, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()
profile = tempfile.mkdtemp(prefix="hs-chromium-")


def child_fds():
    # through high numbers first: a pipe end may already be 3 or 4
    os.dup2(to_chrome_r, 100)
    os.dup2(from_chrome_w, 101)
    os.dup2(100, 3)
    os.dup2(101, 4)
    os.set_inheritable(3, True)
    os.set_inheritable(4, True)


proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                         "--remote-debugging-pipe", "--user-data-dir=" + profile, "--window-size=900,700",
                         "about:blank"],
                        preexec_fn=child_fds, close_fds=False,
                        stdout=subprocess.DEVNULL, stderr=open(os.environ.get("HS_CHROMIUM_LOG", os.devnull), "w"))
os.close(to_chrome_r)
os.close(from_chrome_w)
buf = b""
next_id = [0]
deadline = time.monotonic() + limit


def call(method, session=None, **params):
    """One command; returns its result (events in between are skipped)."""
    global buf
    next_id[0] += 1
    msg = {"id": next_id[0], "method": method, "params": params}
    if session:
        msg["sessionId"] = session
    os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    t_end = time.monotonic() + 30
    while True:
        while b"\0" not in buf:
            if time.monotonic() > t_end:
                sys.exit(f"chromium did not answer {method} within 30 s")
            chunk = os.read(from_chrome_r, 65536)
            if not chunk:
                sys.exit(f"chromium closed the pipe during {method}")
            buf += chunk
        raw, buf = buf.split(b"\0", 1)
        m = json.loads(raw)
        if m.get("id") == next_id[0]:
            if "error" in m:
                sys.exit(f"{method}: {m['error']}")
            return m["result"]


def js(session, expr):
    r = call("Runtime.evaluate", session, expression=expr, returnByValue=True)
    return r["result"].get("value")


try:
    target = call("Target.createTarget", url=url)["targetId"]
    session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    while js(session, "document.body && document.body.dataset.done") != "1":
        if time.monotonic() > deadline:
            sys.exit("the answer did not finish streaming within the time limit: "
                     + str(js(session, "document.getElementById('log').innerText")))
        time.sleep(0.1)
    user = js(session, "document.querySelector('.msg.user').innerText")
    answer = js(session, "document.querySelector('.msg.assistant').innerText")
    err = js(session, "document.querySelector('.msg.assistant .err') ? "
                      "document.querySelector('.msg.assistant .err').innerText : ''")
    stats = js(session, "document.querySelector('.msg.assistant .stats').innerText")
    # the status line is filled by its own requests (/health, then /v1/models),
    # which may finish after a short answer did
    status = js(session, "document.getElementById('status').innerText")
    while not (status or "").startswith("ready: ") and time.monotonic() < deadline:
        time.sleep(0.1)
        status = js(session, "document.getElementById('status').innerText")
    png = base64.b64decode(call("Page.captureScreenshot", session, format="png")["data"])
    with open(shot, "wb") as f:
        f.write(png)
    problems = []
    if "Hello" not in (user or ""):
        problems.append(f"user bubble: {user!r}")
    if err:
        problems.append(f"the page shows an error: {err!r}")
    if "finish: " not in (stats or "") or "generated" not in (stats or ""):
        problems.append(f"no finish reason or usage under the answer: {stats!r}")
    if not status.startswith("ready: "):
        problems.append(f"status line: {status!r}")
    if len(png) < 2000:
        problems.append(f"screenshot of {len(png)} bytes")
    for p in problems:
        print(p)
    print(f"answer bubble: {answer!r}")
    sys.exit(1 if problems else 0)
finally:
    try:
        call("Browser.close")
    except SystemExit:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    subprocess.run(["rm", "-rf", profile])
