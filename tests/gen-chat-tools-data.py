#!/usr/bin/env python3
"""Writes tests/data/chat/tools.json: ChatML conversations, tool (function)
definitions and tool calls among them, and the prompt text Qwen3's own chat
template renders for them, which tests/test-chat.c compares hotset's C
rendering with, byte for byte.  (gpt-oss's harmony is checked against
openai-harmony instead: tests/gen-chat-harmony-data.py.)

The template is not in hotset's tree.  It is the copy llama.cpp keeps in its
models/templates/ folder (github.com/ggml-org/llama.cpp, as of upstream
commit 1eeb523c, "vulkan: optimize UMA buffer operations ... (#16059)"):

  Qwen-Qwen3-0.6B.jinja      git blob 699ff8df401fe4788525e9c1f9b86a99eadd6230
                             (the template every Qwen3 and Qwen3-MoE model of the
                             first release ships, Qwen3-30B-A3B included)

Get it from a llama.cpp checkout (`git show 1eeb523c:models/templates/NAME`),
then, offline:

    pip install jinja2      # 3.1.6 here
    python3 tests/gen-chat-tools-data.py DIR_WITH_THE_TEMPLATE

The script checks the template's blob hash before using it. Rendering is done
as Hugging Face transformers does it (chat_template_utils): jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, `tojson` replaced by json.dumps(ensure_ascii=False)
with Python's default separators (", " and ": ") and key order kept, and the
globals raise_exception and strftime_now (here a fixed date).

Each case holds hotset's side of the conversation (hs_chat_message fields:
role, content, reasoning, tool_name, arguments), the hs_chat_opts used,
tools_json (the exact text hotset is given) and "expected". The template's
side is built from the same data: an assistant message with a tool call is
one with "tool_calls" (its arguments the string as it is, as the template
writes it) and its text as "content"; the next assistant messages with calls
and no text or reasoning of their own are further calls of the same turn.
"""
import hashlib
import json
import os
import sys

# (jinja2 is imported where it is used: gen-chat-harmony-data.py imports
# this file for its tools and messages and does not need it)

TEMPLATES = {
    "chatml": ("Qwen-Qwen3-0.6B.jinja", "699ff8df401fe4788525e9c1f9b86a99eadd6230"),
}
DATE = "2025-08-06"

# ---- tool sets -----------------------------------------------------------------

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius",
                     "description": "Temperature unit"},
            "days": {"type": "integer", "description": "Days ahead.\nAt most 7.", "default": 0},
        },
        "required": ["location"],
    }}}

NO_PARAMS = [
    {"type": "function", "function": {"name": "get_time", "description": "The time now, UTC."}},
    {"type": "function", "function": {"name": "list_files", "description": "Lists the files.",
                                      "parameters": {"type": "object", "properties": {}}}},
]

# many schema shapes in one function
SEARCH = {"type": "function", "function": {
    "name": "search",
    "description": "Suche nach Café ☕ — 検索 \"quoted\" and \\back\\slashes",
    "parameters": {
        "type": "object",
        "required": ["query", "filters"],
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to match"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "weights": {"type": "array", "items": {"type": "number"}, "nullable": True},
            "flags": {"type": "array", "items": {"type": "boolean"}},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "anything": {"type": "array"},
            "points": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "number"}, "y": {"type": "number"}, "label": {"type": "string"}}}},
            "objs": {"type": "array", "items": {"type": "object"}},
            "modes": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "filters": {"type": "object", "description": "Date range", "properties": {
                "from": {"type": "string"}, "to": {"type": "string", "nullable": True},
                "inner": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]}},
                "required": ["from"]},
            "meta": {"type": "object"},
            "limit": {"type": "number", "default": 10},
            "ratio": {"type": "number", "default": 0.1},
            "tiny": {"type": "number", "default": 1e-05},
            "huge": {"type": "number", "default": 1e16},
            "neg": {"type": "number", "default": -2.5},
            "exact": {"type": "boolean", "default": False},
            "note": {"type": "string", "nullable": True, "default": None},
            "label": {"type": "string", "default": "naïve \"x\""},
            "opts": {"type": "object", "default": {"a": [1, 2.0, "z"], "b": None}},
            "either": {"type": ["string", "number"]},
            "one": {"type": ["integer"]},
            "maybe": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer", "default": 3}]},
            "choice": {"oneOf": [{"type": "string"}, {"type": "object"}]},
            "free": {"description": "any value"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
        },
    }}}

CALC = {"type": "function", "function": {
    "name": "calc",
    "description": "Evaluates an expression.\nReturns a number.",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}


# numbers and strings spelt in ways json.dumps does not write them (the
# templates see the parsed values, so the output is json.dumps' spelling)
SPELLINGS = r"""[{"function": {"name": "spell", "description": "Caf\u00e9 \/ \ud83d\ude00 tab\there",
  "parameters": {"type": "object", "properties": {
    "a": {"type": "number", "default": 1E2}, "b": {"type": "number", "default": 0.10},
    "c": {"type": "integer", "default": -0}, "d": {"type": "number", "default": 1.0e-7},
    "e": {"type": "number", "default": 1e15}, "f": {"type": "number", "default": 123456.789},
    "g": {"type": "number", "default": 1e22}, "h": {"type": "number", "default": -0.0},
    "i": {"type": "number", "default": 5e-324}, "j": {"type": "number", "default": 1.7976931348623157e308},
    "k": {"type": "number", "default": 0.0001}, "l": {"type": "number", "default": 12345678901234567890.0},
    "m": {"type": "string", "default": "\u0001\u001f\u007f"}, "n": {"type": "integer", "default": -9007199254740993}},
  "required": []}, "strict": true}, "type": "function"}]"""

# no description, other keys in another order
BARE = [{"function": {"parameters": {"properties": {"x": {"type": "string"}}, "type": "object"}, "name": "bare"},
         "type": "function"}]


def tools_text(tools, style):
    """the tools_json text hotset is given: several layouts, one meaning"""
    if isinstance(tools, str):
        return tools
    if style == "indent":
        return json.dumps(tools, indent=2, ensure_ascii=False)
    if style == "compact":
        return json.dumps(tools, separators=(",", ":"), ensure_ascii=True)
    return json.dumps(tools, ensure_ascii=False)


def msg(role, content=None, reasoning=None, tool_name=None, arguments=None):
    return {"role": role, "content": content, "reasoning": reasoning, "tool_name": tool_name, "arguments": arguments}


CALL_ARGS = '{"location": "Paris, France", "unit": "celsius"}'
TOOL_TURNS = [
    msg("user", "Weather in Paris?"),
    msg("assistant", None, "Need the weather.", "get_weather", CALL_ARGS),
    msg("tool", '{"temp": 20, "sky": "clear"}'),
]
# two calls in one assistant turn (hotset: consecutive assistant messages
# that call tools), then their two results and the answer
TWO_CALLS = [
    msg("user", "Weather in Paris and Rome?"),
    msg("assistant", None, "Need both.", "get_weather", CALL_ARGS),
    msg("assistant", None, None, "get_weather", '{"location": "Rome, Italy", "unit": "celsius"}'),
    msg("tool", '{"temp": 20, "sky": "clear"}'),
    msg("tool", '{"temp": 25, "sky": "rain"}'),
    msg("assistant", "Paris 20 °C and clear, Rome 25 °C and rain."),
    msg("user", "Thanks"),
]

# an assistant turn with text and calls (the text kept, a newline before the first call)
TEXT_AND_CALLS = [
    msg("user", "Weather in Paris and Rome?"),
    msg("assistant", "I'll check both.", "Two cities.", "get_weather", CALL_ARGS),
    msg("assistant", None, None, "get_weather", '{"location": "Rome, Italy"}'),
    msg("tool", '{"temp": 20}'), msg("tool", '{"temp": 25}'),
]

CASES = [
    ("chatml tools, no system", "chatml", [msg("user", "Hi")], [WEATHER], "plain", {}),
    ("chatml tools and system", "chatml", [msg("system", "Be brief."), msg("user", "Hi")], [WEATHER, CALC],
     "indent", {}),
    ("chatml empty system", "chatml", [msg("system", ""), msg("user", "Hi")], NO_PARAMS, "compact", {}),
    ("chatml many schemas", "chatml", [msg("user", "Find it")], [SEARCH], "indent", {"no_thinking": 1}),
    ("chatml tool call and result", "chatml", TOOL_TURNS + [msg("assistant", "It is 20 °C and clear.")],
     [WEATHER], "plain", {}),
    ("chatml spellings", "chatml", [msg("user", "x")], SPELLINGS, "raw", {}),
    ("chatml no description, keys in another order", "chatml", [msg("user", "x")], BARE, "plain", {}),
    ("chatml many schemas, ASCII-escaped input", "chatml", [msg("user", "Find it")], [SEARCH], "compact", {}),
    ("chatml two calls and results", "chatml", TWO_CALLS, [WEATHER], "plain", {}),
    ("chatml without tools (empty array)", "chatml", [msg("system", "Be brief."), msg("user", "Hi")], [], "plain",
     {}),
    ("chatml text and tool calls in one turn", "chatml", TEXT_AND_CALLS, [WEATHER], "plain", {}),
    ("chatml text and a call, answered", "chatml", TEXT_AND_CALLS + [msg("assistant", "20 and 25.", "Done."),
                                                                     msg("user", "Thanks")], [WEATHER], "plain", {}),
    ("chatml text with think tags and a call", "chatml",
     [msg("user", "x"), msg("assistant", "<think>\nplan\n</think>\n\nCalling.", None, "calc", '{"expr": "1"}'),
      msg("tool", "1")], [CALC], "plain", {}),
    ("chatml newlines only before a call", "chatml",
     [msg("user", "x"), msg("assistant", "\n\n", "why", "calc", '{"expr": "2"}'), msg("tool", "2")], [CALC], "plain",
     {}),
    ("chatml call without arguments", "chatml", [msg("user", "x"), msg("assistant", None, None, "get_time")],
     NO_PARAMS, "plain", {}),
]


def environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE
    return env


def template_messages(fmt, msgs):
    """hotset's messages as the template's input (OpenAI's message shape)"""
    out = []
    prev = None
    for m in msgs:
        t = {"role": m["role"], "content": m["content"] or ""}
        if m["role"] == "assistant" and m["tool_name"]:
            args = m["arguments"] if m["arguments"] is not None else "{}"
            call = {"type": "function", "function": {"name": m["tool_name"], "arguments": args}}
            same_turn = (prev and prev["role"] == "assistant" and prev["tool_name"] and not m["content"]
                         and not m["reasoning"])
            prev = m
            if same_turn:
                out[-1]["tool_calls"].append(call)  # the same turn's next call
                continue
            t["tool_calls"] = [call]
        prev = m
        if m["reasoning"]:
            t["reasoning_content"] = m["reasoning"]
        out.append(t)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    env = environment()
    templates = {}
    for fmt, (name, blob) in TEMPLATES.items():
        data = open(os.path.join(sys.argv[1], name), "rb").read()
        got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if got != blob:
            sys.exit(f"{name}: git blob {got}, expected {blob}")
        templates[fmt] = env.from_string(data.decode())
    cases = []
    for what, fmt, msgs, tools, style, opts in CASES:
        kw = {"add_generation_prompt": not opts.get("no_generation_prompt")}
        if fmt == "chatml" and opts.get("no_thinking"):
            kw["enable_thinking"] = False
        text = tools_text(tools, style)
        expected = templates[fmt].render(messages=template_messages(fmt, msgs), tools=json.loads(text), **kw)
        cases.append({"what": what, "format": fmt, "date": DATE, **opts, "messages": msgs, "tools_json": text,
                      "expected": expected})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "chat", "tools.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/gen-chat-tools-data.py", "jinja2": sys.modules["jinja2"].__version__,
                   "cases": cases}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
