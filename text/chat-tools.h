/* Tool (function) definitions for the chat formats: the OpenAI API's
 * `tools` array checked, and the two ways the models' formats write it
 * (JSON as Python's json.dumps writes it for Qwen3's template, TypeScript-
 * like types as openai-harmony writes them for gpt-oss). */
#ifndef HS_CHAT_TOOLS_H
#define HS_CHAT_TOOLS_H

#include <jansson.h>

#include "text/tokenizer.h"

/* Parses tools_json (an array of {"type": "function", "function": {"name",
 * "description", "parameters"}}); *tools = NULL when there are none (NULL,
 * "[]").  -EINVAL naming the tool's index for bad JSON or a bad tool
 * (parameters nested more than 64 deep included). */
int hs__chat_tools_load(const char *tools_json, json_t **tools);

/* Appends v as json.dumps(v, ensure_ascii=False) writes it: ", " and ": "
 * between items, keys in their order, floats as Python's repr.  0 or -ENOMEM. */
int hs__py_json(struct hs_buf *b, const json_t *v);

/* Appends v as Python's str() prints the value json.loads gives: a string
 * as it is, True, False, None, numbers and containers as hs__py_json(). */
int hs__py_str(struct hs_buf *b, const json_t *v);

/* Appends harmony's "# Tools\n\n## functions ... } // namespace functions"
 * for the tools, as openai-harmony renders them.  0 or -ENOMEM. */
int hs__chat_tools_typescript(struct hs_buf *b, const json_t *tools);

#endif
