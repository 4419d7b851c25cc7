/* hotset/text.h: the tokenizer, the detokenizer, chat formats and the reply
 * parser.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_TEXT_H
#define HOTSET_TEXT_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* A model's tokenizer, read from its GGUF file: byte-level BPE
 * (tokenizer.ggml.model "gpt2") with the pre-tokenizer "gpt-4o" (gpt-oss's
 * o200k, ids exactly as OpenAI's tiktoken gives them) or "qwen2" (Qwen2,
 * Qwen3).  Read-only once opened: any number of threads may use one
 * tokenizer at the same time. */

/* Opens the tokenizer of a GGUF file, a whole model or a vocab-only file.
 * The tokenizer keeps its own copy of what it needs; the file is closed
 * before this returns.  Free *out with hs_tokenizer_free().  Errors: -ENOENT,
 * -EIO (a broken file or tokenizer array, the message names the key and the
 * limit), -EINVAL (a tokenizer model or pre-tokenizer hotset does not
 * implement, named in the message), -ENOMEM. */
int hs_tokenizer_open(const char *gguf_path, hs_tokenizer **out);
void hs_tokenizer_free(hs_tokenizer *t);

/* Number of token ids (valid ids are 0 .. n_vocab - 1). */
int hs_tokenizer_n_vocab(const hs_tokenizer *t);
/* Ids the file names (tokenizer.ggml.bos_token_id, eos_token_id,
 * eot_token_id); -1 when it names none.  Without an eot key, the chat
 * format's end of turn: <|return|> (harmony) or <|im_end|> (ChatML). */
int32_t hs_tokenizer_bos(const hs_tokenizer *t);
int32_t hs_tokenizer_eos(const hs_tokenizer *t);
int32_t hs_tokenizer_eot(const hs_tokenizer *t);
/* The id of the token whose text is exactly `text` (NUL-terminated), e.g.
 * "<|return|>" or "Hello"; -1 when no token has it, -EINVAL when t or text
 * is NULL (bos, eos and eot too give -EINVAL for a NULL t).  Special tokens are
 * found by their text, ordinary ones by their bytes. */
int32_t hs_tokenizer_find(const hs_tokenizer *t, const char *text);

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum hs_token_type {
	HS_TOKEN_NORMAL = 1, HS_TOKEN_UNKNOWN = 2, HS_TOKEN_CONTROL = 3,
	HS_TOKEN_USER_DEFINED = 4, HS_TOKEN_UNUSED = 5, HS_TOKEN_BYTE = 6,
};
/* The type of token id; -EINVAL when id is out of range. */
int hs_tokenizer_token_type(const hs_tokenizer *t, int32_t id);
/* 1 for a control token (types control, unknown, unused: no text of their
 * own, shown only when asked), 0 for others, -EINVAL out of range. */
int hs_tokenizer_is_control(const hs_tokenizer *t, int32_t id);

/* Static strings owned by t: general.architecture ("gpt-oss", "qwen3moe",
 * "" when absent) and the pre-tokenizer ("gpt-4o", "qwen2"). */
const char *hs_tokenizer_arch(const hs_tokenizer *t);
const char *hs_tokenizer_pre(const hs_tokenizer *t);
/* The file's own chat template (tokenizer.chat_template, Jinja text) or NULL
 * when it has none.  Owned by t.  hotset does not run it: the built-in
 * formats below are written in C. */
const char *hs_tokenizer_chat_template(const hs_tokenizer *t);

/* hs_tokenize() flags */
#define HS_TOK_PARSE_SPECIAL 1 /* control tokens' texts in the input become those tokens */
#define HS_TOK_ADD_BOS 2       /* begin with BOS when the file asks for it (add_bos_token) */

/* Encodes text[0..len) (UTF-8; need not be NUL-terminated) into ids: the
 * special tokens split out first (at each place the longest that matches;
 * user-defined tokens always, control tokens only with
 * HS_TOK_PARSE_SPECIAL), then the pre-tokenizer, then byte-level BPE.
 * Returns the number of ids the text needs and writes at most max_ids of them
 * to ids (ids may be NULL when max_ids is 0): when the result is larger than
 * max_ids, call again with a larger buffer.  len + 1 ids always suffice.
 * Bytes that are not well-formed UTF-8 are kept, each one a character of
 * its own (punctuation, for the pre-tokenizer) encoded by its byte tokens, so
 * decoding gives back the same bytes for any input.  -EINVAL when len is
 * more than INT_MAX - 1, max_ids is negative, or text (len > 0) or ids
 * (max_ids > 0) is NULL. */
int hs_tokenize(const hs_tokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int max_ids);

/* The bytes of token id: what it stands for in the text, which may be part
 * of a UTF-8 character.  A control token gives its text (e.g.
 * "<|channel|>") when render_special is set, else nothing.  Writes at most n
 * bytes to buf (no NUL) and returns the full length; -EINVAL naming the id
 * and n_vocab when id is out of range. */
int hs_token_bytes(const hs_tokenizer *t, int32_t id, int render_special, char *buf, size_t n);

/* A streaming detokenizer: ids go in one at a time, and only whole, valid
 * UTF-8 comes out.  The bytes of a character split across tokens wait for
 * the token that completes it; bytes that can never become a valid
 * character come out as U+FFFD (one per maximal invalid sequence, as
 * Python's errors="replace" does), so nothing is lost and nothing invalid
 * leaves.  Uses t, which must outlive it.  Free with hs_detok_free(). */
int hs_detok_new(const hs_tokenizer *t, int render_special, hs_detok **out);
void hs_detok_free(hs_detok *d);
/* Pushes one id; *text (NUL-terminated, owned by d, valid until the next
 * call on d) receives the *len bytes of text that became complete, possibly
 * none.  -EINVAL naming the id and n_vocab when id is out of range (nothing
 * changes). */
int hs_detok_push(hs_detok *d, int32_t id, const char **text, size_t *len);
/* Ends the text: a character still waiting for bytes comes out as U+FFFD.
 * The detokenizer can then start again. */
int hs_detok_flush(hs_detok *d, const char **text, size_t *len);
/* Detokenizes a whole sequence: *text is malloc'd (the caller frees it),
 * NUL-terminated valid UTF-8 of *len bytes (len may be NULL). */
int hs_detokenize(const hs_tokenizer *t, const int32_t *ids, int n, int render_special, char **text, size_t *len);

/* Chat formats written in C.  AUTO picks the architecture's own format:
 * gpt-oss -> HARMONY, qwen2/qwen3/qwen3moe -> CHATML (Qwen3's template),
 * qwen35/qwen35moe -> QWEN35 (Qwen3.5's: ChatML turns, the generation
 * prompt opens the reasoning block, XML-like tool calls), glm4moe -> GLM
 * (GLM-4.5's role tokens, <think></think>, <arg_key>/<arg_value> calls), and
 * for other architectures the one whose special tokens the vocabulary has,
 * else RAW (messages' contents one after another, replies are plain
 * content).  docs/text.md has what each writes. */
enum hs_chat_format {
	HS_CHAT_AUTO = 0, HS_CHAT_HARMONY = 1, HS_CHAT_CHATML = 2, HS_CHAT_RAW = 3, HS_CHAT_QWEN35 = 4, HS_CHAT_GLM = 5
};
/* "auto", "harmony", "chatml", "raw", "qwen35", "glm" (static strings) */
const char *hs_chat_format_name(enum hs_chat_format f);
/* The format of that name; -EINVAL otherwise. */
int hs_chat_format_parse(const char *name, enum hs_chat_format *out);
/* What AUTO means for this tokenizer: never AUTO, except as the error
 * value for a NULL t (with a message). */
enum hs_chat_format hs_chat_format_of(const hs_tokenizer *t);

/* One message of a conversation.  The strings belong to the caller. */
struct hs_chat_message {
	const char *role;      /* "system", "developer", "user", "assistant", "tool" */
	const char *content;   /* its text (NULL = ""); an assistant's text beside its tool call is
				  harmony's preamble (commentary) and ChatML's text before <tool_call> */
	const char *reasoning; /* an assistant's reasoning, or NULL.  Both formats drop it from
				  history as the models expect: harmony keeps it only where no
				  later final answer follows (the tool calls in progress) and at
				  the end of a conversation rendered for training, ChatML only
				  after the last user turn */
	const char *tool_name; /* an assistant message: the function it calls; a tool message: the
				  function whose result it holds (NULL: the latest call's); NULL
				  otherwise.  A turn that called several functions is one assistant
				  message per call, in order, the first with the turn's text and
				  reasoning: ChatML writes them as one turn, harmony as one
				  message each */
	const char *arguments; /* an assistant's tool call: its arguments, JSON text (NULL = "{}") */
};

/* Options of hs_chat_render(); all zeros mean the defaults. */
struct hs_chat_opts {
	enum hs_chat_format format;   /* AUTO: hs_chat_format_of(t) */
	const char *reasoning_effort; /* harmony: "low", "medium" (NULL) or "high" */
	int no_thinking;              /* ChatML: 1 = thinking off (the empty think block) */
	const char *date;             /* harmony's "Current date: "; NULL = today (UTC), YYYY-MM-DD */
	const char *model_identity;   /* harmony; NULL = gpt-oss's default identity line */
	const char *knowledge_cutoff; /* harmony; NULL = "2024-06" as gpt-oss's template says */
	int no_generation_prompt;     /* 1: do not end with the opening of the assistant's turn */
	const char *tools_json;       /* the functions the model may call: a JSON array of OpenAI tool
					 objects {"type": "function", "function": {"name", "description",
					 "parameters": <JSON schema>}}; NULL or "[]" = none.  Harmony
					 writes them into the developer message as TypeScript-like
					 types ("namespace functions"), ChatML as Qwen3's "# Tools"
					 block of JSON lines in the system message; RAW ignores them */
};
/* The defaults (all zeros: opts NULL means the same). */
struct hs_chat_opts hs_chat_opts_default(void);

/* Renders a conversation as the prompt text the model was trained on
 * (harmony: as openai-harmony renders it, docs/text.md has the mapping:
 * system message with identity, knowledge cutoff, date, reasoning effort
 * and channels; the first system or developer message as developer
 * instructions beside the tools; ... ; ending with "<|start|>assistant").  *prompt is
 * malloc'd and NUL-terminated, the caller frees it; tokenize it with
 * HS_TOK_PARSE_SPECIAL, or use hs_chat_tokenize().  t may be NULL when
 * opts->format is not AUTO.  -EINVAL for an unknown role, a tool message
 * without tool_name, a bad reasoning effort, or tools_json that is not JSON
 * or holds a tool without a function name (named, with the tool's index);
 * -ENOMEM. */
int hs_chat_render(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		   const struct hs_chat_opts *opts, char **prompt);
/* The same conversation as ids, where only the format's own special tokens
 * are special: text in a message that looks like a special token (e.g. a
 * user typing "<|end|>") stays text.  Otherwise the same ids as rendering and
 * tokenizing with HS_TOK_PARSE_SPECIAL.  *ids is malloc'd (the caller frees
 * it), *n_ids its count. */
int hs_chat_tokenize(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		     const struct hs_chat_opts *opts, int32_t **ids, int *n_ids);

/* A model's reply, parsed as it is generated: one id at a time in, pieces of
 * text out, each tagged with what it is.  Harmony: the analysis channel is
 * reasoning, final (and commentary without a recipient) is content, a
 * message to a recipient (" to=functions.x", the name any UTF-8) is a tool
 * call, its text the arguments; the markers <|channel|>, <|message|>,
 * <|end|>, <|start|>assistant are consumed (a header after <|end|> whose
 * <|start|> is missing too); the reply stops at <|return|> or
 * <|call|> (so a harmony reply holds at most one call in practice; each
 * message to a recipient is one).  ChatML: <think>...</think> is reasoning
 * (newlines next to the markers trimmed), each <tool_call>...</tool_call> a
 * tool call, the rest (text between the calls too) content; it stops at
 * <|im_end|> or <|endoftext|>.  A ChatML call comes out whole when its block
 * ends: {"name": N, "arguments": A} is the call of N, its text A as compact
 * JSON (A itself when it is a string, "{}" when absent); a block that is not
 * a JSON object with a string "name" is a call without a name, its text the
 * block's.
 * QWEN35 is parsed as ChatML, but begins inside the reasoning (its
 * generation prompt opened <think>; hs_reply_parser_set_prompt() says
 * otherwise), and a call's block is <function=N> with <parameter=K>V
 * </parameter> for each argument: the call of N, its text the arguments as
 * compact JSON (a value that is JSON text, or True, False, None, becomes
 * that value, any other a string).  GLM: as ChatML for <think> and
 * <tool_call>, a block is N, then <arg_key>K</arg_key><arg_value>V
 * </arg_value> for each argument (a value that is JSON text becomes that
 * value); it stops at <|user|> and <|observation|>.  A block in neither
 * form is a call without a name, its text the block's.
 * RAW: all content, stops at eot.  Every format also stops at the file's
 * eos and at <|endoftext|>.  A reply that does not follow its
 * format (small or random models write anything) comes out as plain content,
 * never as an error; control tokens in it are dropped and bytes that are not
 * UTF-8 come out as U+FFFD: every delta is valid UTF-8. */
enum hs_reply_kind { HS_REPLY_CONTENT = 0, HS_REPLY_REASONING = 1, HS_REPLY_TOOL_CALL = 2 };
struct hs_reply_delta {
	enum hs_reply_kind kind;
	const char *text; /* valid UTF-8 (U+0000 included), NUL-terminated, owned by the parser */
	size_t len;
	int tool_index; /* HS_REPLY_TOOL_CALL: the call's index in the reply (0, 1, ...); else -1 */
};
/* format AUTO: hs_chat_format_of(t).  t must outlive the parser. */
int hs_reply_parser_new(const hs_tokenizer *t, enum hs_chat_format format, hs_reply_parser **out);
void hs_reply_parser_free(hs_reply_parser *p);
/* Pushes one generated id.  *deltas receives *n_deltas pieces of text (0 or
 * more, in order; owned by p, valid until the next call on p).  Returns 1
 * when id is the format's stop token (it adds no text, and later pushes
 * return 1 with nothing), 0 otherwise; -EINVAL naming the id and n_vocab
 * for an id out of range. */
int hs_reply_parser_push(hs_reply_parser *p, int32_t id, const struct hs_reply_delta **deltas, int *n_deltas);
/* Ends the reply (after the stop, or when generation ended otherwise):
 * text held back while a marker might have been starting, and a character
 * cut short (as U+FFFD), come out. */
int hs_reply_parser_finish(hs_reply_parser *p, const struct hs_reply_delta **deltas, int *n_deltas);
/* The prompt the reply continues (its ids; the last 64 are read), given
 * before the first push: a ChatML, QWEN35 or GLM prompt whose last turn
 * opened <think> and did not close it makes the reply begin as reasoning,
 * else it begins as the format does after its own marker (QWEN35 with
 * thinking off: content).  Nothing for other formats.  -EINVAL for an id
 * out of range or a parser that has had ids. */
int hs_reply_parser_set_prompt(hs_reply_parser *p, const int32_t *ids, int n);
/* The tool calls begun so far (a ChatML call begins at <tool_call>). */
int hs_reply_parser_tool_count(const hs_reply_parser *p);
/* The function of tool call index: harmony's recipient (e.g.
 * "functions.get_weather"), ChatML's "name" (known once its deltas came);
 * NULL when it has none or index is out of range.  Owned by p. */
const char *hs_reply_parser_tool_name_at(const hs_reply_parser *p, int index);
/* The latest tool call's function, or NULL (tool_name_at(count - 1)). */
const char *hs_reply_parser_tool_name(const hs_reply_parser *p);

/* A whole reply parsed at once (ids after the stop token are ignored).  Every
 * string is malloc'd and NUL-terminated ("" when empty, a call's name NULL
 * when it has none); free them with hs_reply_free().  The lengths count
 * bytes: a model may write U+0000, which is valid UTF-8 and stays in. */
struct hs_reply_call {
	char *name;      /* as hs_reply_parser_tool_name_at() */
	char *arguments; /* the call's text: its arguments as JSON text (see above) */
	size_t arguments_len;
};
struct hs_reply {
	char *content, *reasoning;
	size_t content_len, reasoning_len;
	struct hs_reply_call *calls; /* n_calls of them, in order; NULL when none */
	int n_calls;
	int32_t stop_id; /* the stop token that ended it, -1 when none came */
};
int hs_reply_parse(const hs_tokenizer *t, enum hs_chat_format format, const int32_t *ids, int n,
		   struct hs_reply *out);
void hs_reply_free(struct hs_reply *r);

/* ---- grammars: constrained generation -------------------------------------- */

/* A grammar in GBNF as llama.cpp writes it (grammars/README.md there): rules
 * `name ::= alternatives`, the start rule `root`; "literals" with \n \t \r
 * \\ \" \xHH \uHHHH \UHHHHHHHH escapes, [character classes] ([^...] negated,
 * a-z ranges), `.` for any character, ( groups ), * + ? {m} {m,} {m,n}
 * repetitions, # comments; and whole tokens: <[id]> the token of that id,
 * <text> the token whose text that is (it must be one token of t),
 * !<[id]> / !<text> any one token but that one.  Characters are Unicode code
 * points matched on the UTF-8 bytes of tokens, so a token may end inside a
 * character.  Control tokens (<|end|>, <|im_end|> ...) and tokens the
 * grammar names are never matched by their text, only where a token element
 * names them; a negated token element matches ordinary tokens only.  Where
 * the grammar may end, the tokenizer's eos and eot are allowed too.
 * compile the grammar for t's vocabulary (t must outlive it) and start it at
 * root.  -EINVAL with one line naming the rule, line and column for a syntax
 * error, an undefined rule, left recursion (`a ::= a "x"`), or a token text
 * that is not one token; -ENOMEM.  The grammar holds its matcher's state:
 * one generation at a time.  Free with hs_grammar_free(). */
int hs_grammar_new(const hs_tokenizer *t, const char *gbnf, hs_grammar **out);
void hs_grammar_free(hs_grammar *g);
/* Back to the start of root (nothing accepted). */
int hs_grammar_reset(hs_grammar *g);
/* Advances by one token; -EINVAL (the state unchanged) when the grammar
 * does not allow it there, or for an id out of range. */
int hs_grammar_accept(hs_grammar *g, int32_t id);
/* Sets logits[id] to -INFINITY for every token of the vocabulary the grammar
 * does not allow next (logits has n_vocab floats).  The number of tokens
 * allowed: 0 means none (a dead end: the grammar is complete and the
 * tokenizer has no eos/eot, or it cannot go on). */
int hs_grammar_mask(hs_grammar *g, float *logits);
/* 1 when what was accepted is a whole sentence of the grammar (generation
 * may stop here), 0 otherwise, -EINVAL for NULL. */
int hs_grammar_done(const hs_grammar *g);
/* The grammar gbnf with every rule renamed PREFIXname (root becomes
 * PREFIXroot), so that several grammars go into one text: a rule of your
 * own that names PREFIXroot uses that grammar whole.  prefix: letters,
 * digits, '-' and '_'.  *out is malloc'd (free() it); the text is not
 * checked here (hs_grammar_new() does). */
int hs_grammar_prefix(const char *gbnf, const char *prefix, char **out);
/* The GBNF text for JSON values matching a JSON Schema (the subset OpenAI's
 * structured outputs take: type, properties, required, additionalProperties,
 * items, prefixItems, minItems/maxItems, enum, const, anyOf/oneOf, allOf of
 * objects, $ref into $defs/definitions, string minLength/maxLength and the
 * formats date, time, date-time, uuid; text/json-schema.c's head and
 * docs/server.md list what is ignored and what is refused).
 * The root rule is the whole value: between its tokens one space or a
 * newline with up to 40 blanks, none before or after it (so generation
 * can end right after the value).  schema_json "{}" or "true" is any JSON
 * value.  *gbnf is
 * malloc'd (free() it).  -EINVAL naming the schema's path (e.g.
 * "#/properties/a/pattern: not supported") for what it cannot express. */
int hs_json_schema_to_grammar(const char *schema_json, char **gbnf);

#endif /* HOTSET_TEXT_H */
