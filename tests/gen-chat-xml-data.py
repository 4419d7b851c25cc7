#!/usr/bin/env python3
"""Writes tests/data/chat/xml.json: conversations in the two chat formats
whose tool calls are XML-like, Qwen3.5's ("qwen35") and GLM-4.5's ("glm"),
and the prompt text each model's own chat template renders for them, which
tests/test-chat.c compares hotset's C rendering with, byte for byte.

The templates are not in hotset's tree.  Where they were taken from:

  Qwen3.5-35B-A3B.jinja   the string _QWEN35_DEFAULT_CHAT_TEMPLATE in
                          rtp_llm/frontend/tokenizer_factory/tokenizers/qwen_tokenizer.py
                          of github.com/alibaba/rtp-llm at commit cb4828e3 (it says it
                          is Qwen/Qwen3.5-35B-A3B's chat_template.jinja; the
                          Qwen3.5-2B template quoted elsewhere has the same tool-call,
                          tool-response and generation-prompt parts), written to a
                          file as it is: git blob a585dec894e63da457d9440ec6aa7caa16d20860
  GLM-4.5.jinja           rtp_llm/test/model_test/fake_test/testdata/glm45/tokenizer/
                          chat_template.jinja of the same repository at commit de8bee30
                          (zai-org/GLM-4.5's template; GLM-4.6's differs only in
                          `tc.arguments or {}` and a final newline):
                          git blob 41478957aca7a04b7321022e7d1f73de5badd995

Then, offline:

    pip install jinja2      # 3.1.6 here
    python3 tests/gen-chat-xml-data.py DIR_WITH_THE_TEMPLATES

Rendering is Hugging Face transformers' (as tests/gen-chat-tools-data.py
does it, whose tools and helpers this script reuses).  The templates take a
tool call's arguments as a mapping: the script gives them the parsed JSON
of the text hotset is given, as OpenAI-compatible servers do.
"""
import hashlib
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tools_data", os.path.join(HERE, "gen-chat-tools-data.py"))
T = importlib.util.module_from_spec(spec)
spec.loader.exec_module(T)
msg = T.msg

TEMPLATES = {
    "qwen35": ("Qwen3.5-35B-A3B.jinja", "a585dec894e63da457d9440ec6aa7caa16d20860"),
    "glm": ("GLM-4.5.jinja", "41478957aca7a04b7321022e7d1f73de5badd995"),
}

KINDS = ('{"s": "Caf\\u00e9 \\"q\\"\\nline", "n": 3, "f": 0.5, "e": 1e-05, "big": 1e16, "b": true, '
         '"no": false, "z": null, "l": [1, "a", 2.5], "o": {"k": [true, null]}, "empty": ""}')
HISTORY = [
    msg("system", "  You are terse.\n"),
    msg("user", "Hi"),
    msg("assistant", "Hello.", "The user greets."),
    msg("user", " What is 2+2? \n"),
    msg("assistant", "4", "Simple sum."),
]


def conversations(fmt):
    return [
        (f"{fmt} one user turn", [msg("user", "Hi")], None, {}),
        (f"{fmt} system and user", [msg("system", "Be brief."), msg("user", "Hi")], None, {}),
        (f"{fmt} history with reasoning, ended by the assistant", HISTORY, None, {"no_generation_prompt": 1}),
        (f"{fmt} history with reasoning, a new question", HISTORY + [msg("user", "And 3+3?")], None, {}),
        (f"{fmt} thinking off", HISTORY + [msg("user", "And 3+3?")], None, {"no_thinking": 1}),
        (f"{fmt} thinking off, a user turn ending in /nothink", [msg("user", "Quick /nothink")], None,
         {"no_thinking": 1}),
        (f"{fmt} reasoning written into the content", [msg("user", "x"),
                                                       msg("assistant", "<think>\nplan\n</think>\n\nDone.")], None,
         {"no_generation_prompt": 1}),
        (f"{fmt} tools, no system", [msg("user", "Hi")], [T.WEATHER], {}),
        (f"{fmt} tools and system", [msg("system", "Be brief."), msg("user", "Hi")], [T.WEATHER, T.CALC], {}),
        (f"{fmt} tools and an empty system", [msg("system", ""), msg("user", "Hi")], T.NO_PARAMS, {}),
        (f"{fmt} many schemas", [msg("user", "Find it")], [T.SEARCH], {}),
        (f"{fmt} tool call and result, answered", T.TOOL_TURNS + [msg("assistant", "It is 20 °C and clear.")],
         [T.WEATHER], {}),
        (f"{fmt} tool call and result, then the generation prompt", T.TOOL_TURNS, [T.WEATHER], {}),
        (f"{fmt} two calls and results", T.TWO_CALLS, [T.WEATHER], {}),
        (f"{fmt} text and tool calls in one turn", T.TEXT_AND_CALLS, [T.WEATHER], {}),
        (f"{fmt} call without arguments", [msg("user", "x"), msg("assistant", None, None, "get_time"),
                                           msg("tool", "12:00")], T.NO_PARAMS, {}),
        (f"{fmt} arguments of every JSON kind", [msg("user", "x"), msg("assistant", None, "why", "calc", KINDS),
                                                 msg("tool", "ok")], [T.CALC], {}),
    ]


def template_messages(msgs):
    out = T.template_messages("xml", msgs)
    for m in out:  # the templates iterate the arguments' items
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    env = T.environment()
    cases = []
    for fmt, (name, blob) in TEMPLATES.items():
        data = open(os.path.join(sys.argv[1], name), "rb").read()
        got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if got != blob:
            sys.exit(f"{name}: git blob {got}, expected {blob}")
        tpl = env.from_string(data.decode())
        for what, msgs, tools, opts in conversations(fmt):
            kw = {"add_generation_prompt": not opts.get("no_generation_prompt")}
            if opts.get("no_thinking"):
                kw["enable_thinking"] = False
            text = json.dumps(tools, ensure_ascii=False) if tools is not None else None
            expected = tpl.render(messages=template_messages(msgs), tools=tools, **kw)
            case = {"what": what, "format": fmt, **opts, "messages": msgs, "expected": expected}
            if text is not None:
                case["tools_json"] = text
            cases.append(case)
    out = os.path.join(HERE, "data", "chat", "xml.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/gen-chat-xml-data.py", "jinja2": sys.modules["jinja2"].__version__,
                   "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
