/* Example: generate text with a whole model (gpt-oss or Qwen3-MoE GGUF).
 *
 *   cc generate.c $(pkg-config --cflags --libs hotset) -o generate
 *   ./generate model.gguf "Why is the sky blue?" [N [cpu|sim|cuda]]
 *
 * One user turn in the model's chat format, the prompt decoded in one
 * batch, then up to N tokens (default 64) picked greedily and printed as
 * whole UTF-8 characters arrive, until the model ends its turn. */
#include <stdio.h>
#include <stdlib.h>

#include <hotset.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N [DEVICE]]\n", argv[0]);
		return 2;
	}
	int n_gen = argc > 3 ? atoi(argv[3]) : 64, n = 0, rc = 1;
	struct hs_runtime_opts ro = { .device = argc > 4 ? argv[4] : NULL, .q = -1 };
	struct hs_chat_message msg = { .role = "user", .content = argv[2] };
	struct hs_sampler_params greedy = { .temperature = 0, .top_p = 1 };
	hs_runtime *rt = NULL;
	hs_context *ctx = NULL;
	hs_tokenizer *tk = NULL;
	hs_detok *dt = NULL;
	hs_sampler *smp = NULL;
	int32_t *ids = NULL;
	struct hs_token *batch = NULL;
	const char *text;
	size_t len;

	if (hs_runtime_open(argv[1], &ro, &rt) || hs_context_create(rt, NULL, &ctx) ||
	    hs_tokenizer_open(argv[1], &tk) || hs_detok_new(tk, 0, &dt) ||
	    hs_chat_tokenize(tk, &msg, 1, NULL, &ids, &n) ||
	    hs_sampler_create(&greedy, hs_runtime_model_info(rt)->n_vocab, &smp) || !(batch = calloc(n, sizeof *batch)))
		goto out;
	for (int i = 0; i < n; i++) /* the prompt: sequence 0, logits of the last entry only */
		batch[i] = (struct hs_token){ .id = ids[i], .pos = i, .seq = 0, .logits = i == n - 1 };
	if (hs_decode(ctx, n, batch))
		goto out;
	for (int i = 0; i < n_gen; i++) {
		int32_t id = hs_sampler_sample(smp, hs_context_logits(ctx, 0));
		if (id == hs_tokenizer_eot(tk) || id == hs_tokenizer_eos(tk))
			break;
		if (hs_detok_push(dt, id, &text, &len) == 0)
			fwrite(text, 1, len, stdout), fflush(stdout);
		struct hs_token next = { .id = id, .pos = n + i, .seq = 0, .logits = 1 };
		if (i + 1 < n_gen && hs_decode(ctx, 1, &next))
			goto out;
	}
	if (hs_detok_flush(dt, &text, &len) == 0)
		fwrite(text, 1, len, stdout);
	putchar('\n');
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "%s\n", hs_last_error()); /* one line: what and why */
	free(batch);
	free(ids);
	hs_sampler_free(smp);
	hs_detok_free(dt);
	hs_tokenizer_free(tk);
	hs_context_free(ctx);
	hs_runtime_close(rt);
	return rc;
}
