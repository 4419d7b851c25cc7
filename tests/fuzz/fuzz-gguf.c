/* libFuzzer target for the GGUF parser: any bytes must parse or fail with a
 * clean error, never crash or read outside the buffer.  Built and run by
 * tests/fuzz/run.sh (clang, -fsanitize=fuzzer,address,undefined). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hs_gguf *g;

	if (hs__gguf_parse(data, size, "fuzz", &g) != 0)
		return 0;
	/* Touch what a reader touches: every key's value, every tensor's
	 * first and last byte, the lookups. */
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct hs_gguf_str s;
		uint64_t u;
		char key[64];
		size_t n = g->kv[i].key.n < 63 ? g->kv[i].key.n : 63;
		memcpy(key, g->kv[i].key.p, n);
		key[n] = '\0';
		hs__gguf_get_u64(g, key, &u);
		hs__gguf_get_str(g, key, &s);
		if (g->kv[i].type == HS_GGUF_ARRAY && g->kv[i].arr_type == HS_GGUF_STRING && g->kv[i].arr_n)
			hs__gguf_get_arr_str(&g->kv[i], g->kv[i].arr_n - 1, &s);
	}
	volatile uint8_t sink = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct hs_gguf_tensor *t = &g->tensors[i];
		if (t->size)
			sink ^= t->data[0] ^ t->data[t->size - 1];
		hs__gguf_find_tensor(g, t->name);
	}
	(void)sink;
	/* a tokenizer from whatever tokenizer.ggml.* keys are there: a clean
	 * error or a tokenizer that encodes */
	hs_tokenizer *t;
	if (hs__tokenizer_from_gguf(g, &t) == 0) {
		static const char text[] = "Hello <|end|> w\xc3\xb6rld\xff";
		int32_t ids[64];
		hs_tokenize(t, text, sizeof text - 1, HS_TOK_PARSE_SPECIAL, ids, 64);
		hs_tokenizer_free(t);
	}
	hs__gguf_close(g);
	return 0;
}
