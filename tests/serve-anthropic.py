#!/usr/bin/env python3
"""The official Anthropic Python client against `hotset serve`'s
/v1/messages (run by tests/serve-anthropic.sh) on a qwen35 model: messages
whole and streamed (thinking and text blocks, the streamed message equal to
the whole one for a seed), count_tokens equal to the answer's input_tokens,
system prompts, stop_sequences, max_tokens, tools and a tool_use /
tool_result turn as the client sends them, the key in x-api-key, and the
errors the client raises for 400 and 401; forced calls (tool_choice any
and tool) whole and streamed.  With HARMONY_URL, a gpt-oss model's server:
a forced call's input streams as input_json_delta pieces as it is written,
adding up to the whole answer's input.

usage: serve-anthropic.py BASE_URL API_KEY [HARMONY_URL]"""
import json
import sys
import urllib.request

import anthropic

base, key = sys.argv[1], sys.argv[2]
problems = []


def check(cond, msg):
    if not cond:
        problems.append("FAIL: " + msg)


cl = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=60)
msgs = [{"role": "user", "content": "Hello"}]


def chat(seed):
    """The same prompt's reply from /v1/chat/completions (hotset's `seed`;
    temperature 1 is the default of both endpoints)."""
    body = json.dumps({"model": "q.gguf", "max_tokens": 100, "seed": seed,
                       "messages": [{"role": "system", "content": "Be brief."}] + msgs}).encode()
    req = urllib.request.Request(base + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["choices"][0]["message"]


# a seed whose random reply has both reasoning and content, searched for on
# the chat endpoint (which seeds do depends on the CPU's kernel tier): its
# message has a thinking block and a text block holding the same two texts
seed = next((s for s in range(1, 61) if (lambda c: c.get("reasoning_content") and c.get("content"))(chat(s))), None)
check(seed is not None, "none of seeds 1-60 gives a reply with reasoning and content")
seed = seed or 8
both = chat(seed)
kw = dict(model="q.gguf", max_tokens=100, system="Be brief.", messages=msgs,
          extra_body={"seed": seed})
m = cl.messages.create(**kw)
types = [b.type for b in m.content]
check(m.type == "message" and m.role == "assistant" and m.id.startswith("msg_"), f"message: {m}")
check(types == ["thinking", "text"], f"blocks {types}: a thinking block and a text block expected for seed {seed}")
check([getattr(b, "thinking", None) or getattr(b, "text", None) for b in m.content] ==
      [both["reasoning_content"], both["content"]], f"seed {seed}: blocks {m.content} vs chat {both}")
check(m.stop_reason in ("end_turn", "max_tokens") and m.usage.output_tokens >= 1 and m.usage.input_tokens > 1,
      f"stop and usage: {m.stop_reason} {m.usage}")
n = cl.messages.count_tokens(model="q.gguf", system="Be brief.", messages=msgs)
check(n.input_tokens == m.usage.input_tokens, f"count_tokens {n.input_tokens} vs usage {m.usage.input_tokens}")

# streamed: the client's own accumulation gives the same message
with cl.messages.stream(**kw) as st:
    events = [e.type for e in st]
    final = st.get_final_message()
check([(b.type, getattr(b, "text", None) or getattr(b, "thinking", None)) for b in final.content] ==
      [(b.type, getattr(b, "text", None) or getattr(b, "thinking", None)) for b in m.content],
      f"streamed {final.content} vs whole {m.content}")
check(final.stop_reason == m.stop_reason and final.usage.output_tokens == m.usage.output_tokens,
      f"streamed stop/usage {final.stop_reason} {final.usage} vs {m.stop_reason} {m.usage}")
check(events[0] == "message_start" and events[-1] == "message_stop" and "content_block_start" in events,
      f"stream events {events[:4]} ... {events[-3:]}")

# max_tokens and a stop sequence the reply holds
# (the seed's reply, so its first 3 tokens are those of m, which has more:
# a random draw could end the reply at its third token)
check(m.usage.output_tokens > 3, f"seed {seed}: the reply has {m.usage.output_tokens} tokens, 4 or more expected")
short = cl.messages.create(**{**kw, "max_tokens": 3})
check(short.stop_reason == "max_tokens" and short.usage.output_tokens == 3, f"max_tokens 3: {short}")
text = next((b.text for b in m.content if b.type == "text"), "")
stop = next((ch for ch in text if ch.isascii() and ch.isprintable() and ch != " "), None)
if stop:
    s = cl.messages.create(stop_sequences=[stop], **kw)
    st_text = next((b.text for b in s.content if b.type == "text"), "")
    check(s.stop_reason == "stop_sequence" and s.stop_sequence == stop and st_text == text[:text.index(stop)],
          f"stop_sequences [{stop!r}]: {s.stop_reason} {s.stop_sequence!r} {st_text!r} vs {text!r}")

# tools and a tool_use / tool_result turn as an agent sends them
tools = [{"name": "get_weather", "description": "Current weather of a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
t = cl.messages.create(model="q.gguf", max_tokens=8, tools=tools, messages=msgs)
check(t.usage.input_tokens > m.usage.input_tokens - 5, f"tools rendered: {t.usage} vs {m.usage}")
for b in t.content:
    if b.type == "tool_use":
        check(b.name and isinstance(b.input, dict) and b.id.startswith("toolu_"), f"tool_use block {b}")
turn = msgs + [
    {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                      {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                       "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C, sunny"}]}]
r = cl.messages.create(model="q.gguf", max_tokens=4, tools=tools, messages=turn)
check(r.usage.input_tokens > t.usage.input_tokens, f"tool turn: {r.usage} vs {t.usage}")
n2 = cl.messages.count_tokens(model="q.gguf", tools=tools, messages=turn)
check(n2.input_tokens == r.usage.input_tokens, f"count_tokens of the tool turn {n2.input_tokens} vs {r.usage}")
# tool_choice any and tool force a call (Qwen3.5's XML-like form, whose
# string parameter is text of at most maxLength characters), whole and streamed
short = [{"name": "get_weather", "description": "Current weather of a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}},
                           "required": ["city"]}},
         {"name": "get_time", "description": "Time in a zone.",
          "input_schema": {"type": "object", "properties": {"zone": {"enum": ["utc", "cet"]}}, "required": ["zone"]}}]
for choice, names in (({"type": "any"}, ("get_weather", "get_time")), ({"type": "tool", "name": "get_time"}, ("get_time",))):
    kw = dict(model="q.gguf", max_tokens=1200, tools=short, tool_choice=choice, messages=msgs, extra_body={"seed": 3})
    f = cl.messages.create(**kw)
    uses = [b for b in f.content if b.type == "tool_use"]
    check(f.stop_reason == "tool_use" and len(uses) == 1 and uses[0].name in names and
          ("zone" if uses[0].name == "get_time" else "city") in uses[0].input, f"tool_choice {choice}: {f}")
    with cl.messages.stream(**kw) as st:
        fs = st.get_final_message()
    check([(b.type, getattr(b, "name", None), getattr(b, "input", None)) for b in fs.content if b.type == "tool_use"]
          == [(b.type, b.name, b.input) for b in uses], f"tool_choice {choice} streamed: {fs} vs {f}")

if len(sys.argv) > 3:
    h = anthropic.Anthropic(base_url=sys.argv[3], api_key="none", max_retries=0, timeout=60)
    hk = dict(model="m.gguf", max_tokens=3000, tools=short, tool_choice={"type": "tool", "name": "get_weather"},
              messages=msgs, extra_body={"seed": 5})
    whole = [b for b in h.messages.create(**hk).content if b.type == "tool_use"]
    with h.messages.stream(**hk) as st:
        deltas = [ev.delta.partial_json for ev in st if ev.type == "content_block_delta"
                  and ev.delta.type == "input_json_delta"]
        final = st.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"]
    check(len(whole) == 1 and whole[0].name == "get_weather" and isinstance(whole[0].input.get("city"), str),
          f"gpt-oss forced call: {whole}")
    check(len(deltas) > 1 and [(b.name, b.input) for b in streamed] == [(b.name, b.input) for b in whole],
          f"gpt-oss forced call streamed in {len(deltas)} pieces: {streamed} vs {whole}")

try:
    cl.messages.create(model="q.gguf", max_tokens=4, messages=[])
    check(False, "empty messages accepted")
except anthropic.BadRequestError as e:
    check(e.status_code == 400 and "messages" in str(e), f"empty messages: {e}")
try:
    cl.messages.create(model="q.gguf", max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    check(False, "an image accepted")
except anthropic.BadRequestError as e:
    check("image" in str(e), f"image: {e}")
try:
    anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(
        model="q.gguf", max_tokens=4, messages=msgs)
    check(False, "wrong key accepted")
except anthropic.AuthenticationError as e:
    check(e.status_code == 401, f"wrong key: {e}")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
