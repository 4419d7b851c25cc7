/* `hotset tokenize`: a text through a model's tokenizer, ids (and pieces) out. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset tokenize --model FILE (--text TEXT | --file FILE) [--special] [--pieces] [--json]\n\n"
	       "Encodes a text with the tokenizer of a GGUF file (a model or a vocab-only file:\n"
	       "byte-level BPE with the gpt-4o or qwen2 pre-tokenizer) and prints the token ids\n"
	       "on one line.\n\n"
	       "  --model FILE  the GGUF file whose tokenizer is used\n"
	       "  --text TEXT   the text to encode\n"
	       "  --file FILE   encode this file's bytes exactly (no newline stripped; - = stdin)\n"
	       "  --special     special tokens written in the text (e.g. <|start|>) become those tokens\n"
	       "  --pieces      one line per token: its id, a tab and its bytes in quotes (C escapes)\n"
	       "  --json        one JSON object {\"ids\": [...], \"pieces\": [...]}; a piece that is part\n"
	       "                of a UTF-8 character shows U+FFFD for the bytes it cannot show\n"
	       "  -h, --help    this text\n");
}

/* All of a file's bytes (stdin for "-"); NULL with errno set on failure. */
static char *read_all(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	size_t cap = 4096, n = 0;
	char *buf = NULL;

	if (!f)
		return NULL;
	for (;;) {
		char *p = realloc(buf, cap);
		if (!p) {
			free(buf);
			buf = NULL;
			errno = ENOMEM;
			break;
		}
		buf = p;
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap) {
			if (ferror(f)) {
				int e = errno ? errno : EIO;
				free(buf);
				buf = NULL;
				errno = e;
			}
			break;
		}
		cap *= 2;
	}
	if (f != stdin)
		fclose(f);
	*len = n;
	return buf;
}

static void print_piece(const char *p, int n)
{
	putchar('"');
	for (int i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else if (c == '\r')
			printf("\\r");
		else if (c == '\t')
			printf("\\t");
		else if (c < 0x20 || c == 0x7F)
			printf("\\x%02x", c);
		else if (c >= 0x80) {
			/* whole UTF-8 characters as they are, other bytes escaped */
			int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0, ok = len && i + len <= n;
			for (int k = 1; ok && k < len; k++)
				ok = ((unsigned char)p[i + k] & 0xC0) == 0x80;
			if (ok) {
				fwrite(p + i, 1, (size_t)len, stdout);
				i += len - 1;
			} else {
				printf("\\x%02x", c);
			}
		} else
			putchar(c);
	}
	putchar('"');
}

static int print_json(const hs_tokenizer *t, const int32_t *ids, int n)
{
	json_t *o = json_object(), *a = json_array(), *pc = json_array();
	int rc = 0;

	json_object_set_new(o, "ids", a);
	json_object_set_new(o, "pieces", pc);
	for (int i = 0; i < n && !rc; i++) {
		char *piece;
		json_array_append_new(a, json_integer(ids[i]));
		/* one token alone: valid UTF-8, U+FFFD where it holds part of a character */
		if (hs_detokenize(t, &ids[i], 1, 1, &piece, NULL) != 0) {
			rc = 1;
			break;
		}
		json_array_append_new(pc, json_string(piece));
		free(piece);
	}
	char *s = rc ? NULL : json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return hs_cli_fail("tokenize", "out of memory");
	printf("%s\n", s);
	free(s);
	return 0;
}

int hs_cmd_tokenize(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "text", required_argument, NULL, 't' },
		{ "file", required_argument, NULL, 'f' },
		{ "special", no_argument, NULL, 's' },
		{ "pieces", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *text = NULL, *file = NULL;
	int c, special = 0, pieces = 0, json = 0, n, rc = 0;
	hs_tokenizer *t;
	char *buf = NULL;
	int32_t *ids;
	size_t len;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 't': text = optarg; break;
		case 'f': file = optarg; break;
		case 's': special = 1; break;
		case 'p': pieces = 1; break;
		case 'j': json = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("tokenize");
		}
	}
	if (optind < argc)
		return hs_cli_fail("tokenize", "unexpected argument '%s' (the text goes after --text)", argv[optind]);
	if (!model)
		return hs_cli_fail("tokenize", "--model FILE is needed");
	if (!text == !file)
		return hs_cli_fail("tokenize", text ? "--text and --file cannot be given together"
						    : "give the text with --text TEXT or --file FILE");
	if (file) {
		buf = read_all(file, &len);
		if (!buf)
			return hs_cli_fail("tokenize", "%s: %s", file, strerror(errno));
		text = buf;
	} else {
		len = strlen(text);
	}
	if (hs_tokenizer_open(model, &t) != 0) {
		free(buf);
		return hs_cli_fail("tokenize", "%s", hs_last_error());
	}
	ids = malloc((len + 1) * sizeof *ids); /* len + 1 ids always suffice */
	n = ids ? hs_tokenize(t, text, len, special ? HS_TOK_PARSE_SPECIAL : 0, ids, (int)(len + 1)) : -ENOMEM;
	if (n < 0) {
		rc = hs_cli_fail("tokenize", "%s", ids ? hs_last_error() : "out of memory");
	} else if (json) {
		rc = print_json(t, ids, n);
	} else if (pieces) {
		for (int i = 0; i < n; i++) {
			char piece[1024];
			int m = hs_token_bytes(t, ids[i], 1, piece, sizeof piece);
			printf("%d\t", ids[i]);
			print_piece(piece, m < (int)sizeof piece ? m : (int)sizeof piece);
			putchar('\n');
		}
	} else {
		for (int i = 0; i < n; i++)
			printf("%s%d", i ? " " : "", ids[i]);
		putchar('\n');
	}
	free(ids);
	free(buf);
	hs_tokenizer_free(t);
	return rc;
}
