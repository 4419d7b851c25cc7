/* `hotset model`: what a model file holds and what its experts weigh. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cpu_kernels/formats.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset model FILE [--json]\n\n"
	       "Reads a GGUF model file (gpt-oss or qwen3moe) and shows its MoE shape: layers,\n"
	       "experts, experts used per token, n_embd, n_ff, expert type, and the bytes of one\n"
	       "expert, of the experts one token reads per layer, of a layer and of the whole\n"
	       "model, and the bytes that are not experts. A split model (llama-gguf-split's\n"
	       "NAME-00001-of-0000N.gguf ...) opens from any of its shards; its file bytes are\n"
	       "those of all shards, each listed with its own.\n\n"
	       "  --json      print JSON instead of text\n"
	       "  -h, --help  this text\n");
}

/* 13219200 -> "13,219,200" */
const char *hs_cli_grouped(uint64_t v, char *buf, size_t n)
{
	char tmp[32];
	int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;

	for (int i = 0; i < len && o + 2 < (int)n; i++) {
		if (i && (len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = '\0';
	return buf;
}

/* llama.cpp's llama_ftype names for general.file_type (the mix
 * llama-quantize was asked for), or NULL. */
static const char *file_type_name(uint64_t ft)
{
	static const char *const names[] = {
		[0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1",
		[10] = "Q2_K", [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M",
		[16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K", [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S",
		[22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M",
		[28] = "IQ2_S", [29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0",
		[37] = "TQ2_0", [38] = "MXFP4_MOE",
	};
	return ft < sizeof names / sizeof names[0] ? names[ft] : NULL;
}

/* Tensors and bytes per ggml type, most bytes first. */
struct type_use {
	int type, tensors;
	uint64_t bytes;
};

static int type_uses(const struct hs_gguf *g, struct type_use *u, int max)
{
	int n = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		int k;
		for (k = 0; k < n && u[k].type != g->tensors[i].type; k++)
			;
		if (k == n) {
			if (n == max)
				continue;
			u[n++] = (struct type_use){ g->tensors[i].type, 0, 0 };
		}
		u[k].tensors++;
		u[k].bytes += g->tensors[i].size;
	}
	for (int a = 1; a < n; a++) /* insertion sort, by bytes */
		for (int b = a; b > 0 && u[b - 1].bytes < u[b].bytes; b--) {
			struct type_use t = u[b];
			u[b] = u[b - 1];
			u[b - 1] = t;
		}
	return n;
}

static void print_text(const char *path, const struct hs_model_info *in, const struct hs_gguf *g)
{
	char a[32], b[32], c[32];

	printf("model: %s%s%s%s\n", path, in->name[0] ? " (" : "", in->name, in->name[0] ? ")" : "");
	printf("architecture: %s\n", in->arch);
	printf("layers: %d (%d with experts)", in->n_layers, in->n_moe_layers);
	if (in->n_nextn_layers)
		printf("; %d MTP (nextn) layer%s after them in the file, skipped (not run for plain decoding)",
		       in->n_nextn_layers, in->n_nextn_layers > 1 ? "s" : "");
	printf("\n");
	printf("experts: %d per layer, %d used per token\n", in->n_experts, in->n_used);
	printf("n_embd: %d, expert n_ff: %d, expert types: %s\n", in->n_embd, in->n_ff, in->expert_types);
	printf("bytes per expert: %s weights + %s biases = %s (%.2f MiB)\n",
	       hs_cli_grouped(in->expert_weight_bytes, a, sizeof a), hs_cli_grouped(in->expert_bias_bytes, b, sizeof b),
	       hs_cli_grouped(in->expert_weight_bytes + in->expert_bias_bytes, c, sizeof c),
	       (in->expert_weight_bytes + in->expert_bias_bytes) / 1048576.0);
	printf("bytes per layer-token (%d experts): %s (%.2f MiB)\n", in->n_used,
	       hs_cli_grouped(in->layer_token_bytes, a, sizeof a), in->layer_token_bytes / 1048576.0);
	printf("bytes per layer (%d experts): %s (%.1f MiB)\n", in->n_experts,
	       hs_cli_grouped(in->layer_expert_bytes, a, sizeof a), in->layer_expert_bytes / 1048576.0);
	printf("expert bytes in total: %s (%.2f GiB)\n", hs_cli_grouped(in->expert_bytes, a, sizeof a),
	       in->expert_bytes / 1073741824.0);
	printf("non-expert bytes: %s (%.2f GiB; routers %s)\n", hs_cli_grouped(in->non_expert_bytes, a, sizeof a),
	       in->non_expert_bytes / 1073741824.0, hs_cli_grouped(in->router_bytes, b, sizeof b));
	printf("file bytes: %s (%.2f GiB)\n", hs_cli_grouped(in->file_bytes, a, sizeof a), in->file_bytes / 1073741824.0);
	uint64_t ft;
	if (hs__gguf_get_u64(g, "general.file_type", &ft) == 0)
		printf("file type: %s (general.file_type %llu)\n", file_type_name(ft) ? file_type_name(ft) : "unknown",
		       (unsigned long long)ft);
	struct type_use u[48];
	int nu = type_uses(g, u, 48);
	printf("tensor types:");
	for (int i = 0; i < nu; i++)
		printf("%s %s %d (%.1f MiB)", i ? "," : "", hs__type_name(u[i].type), u[i].tensors, u[i].bytes / 1048576.0);
	printf("\n");
	if (g->n_shards > 1) {
		printf("shards: %d\n", g->n_shards);
		for (int i = 0; i < g->n_shards; i++) {
			const char *name = strrchr(g->shards[i].path, '/');
			printf("  %s: %s bytes, %llu tensors\n", name ? name + 1 : g->shards[i].path,
			       hs_cli_grouped(g->shards[i].size, a, sizeof a), (unsigned long long)g->shards[i].n_tensors);
		}
	}
	if (in->whole) {
		printf("attention: %d heads, %d KV heads, head size %d", in->n_head, in->n_head_kv, in->head_dim);
		if (in->swa_window)
			printf(", sliding window %d on alternate layers", in->swa_window);
		printf("\nvocabulary: %d tokens, context %d\n", in->n_vocab, in->n_ctx_train);
		if (in->n_dense_ffn_layers)
			printf("dense FFN layers: %d leading (0..%d), ff %d, %s bytes\n", in->n_dense_ffn_layers,
			       in->n_dense_ffn_layers - 1, in->n_ff_dense, hs_cli_grouped(in->dense_ffn_bytes, a, sizeof a));
		if (in->n_ff_shared)
			printf("shared expert: one per MoE layer, ff %d, run for every token: %s bytes in all (%.1f MiB)\n",
			       in->n_ff_shared, hs_cli_grouped(in->shared_expert_bytes, a, sizeof a),
			       in->shared_expert_bytes / 1048576.0);
		if (in->n_recurrent_layers)
			printf("Gated DeltaNet: %d of %d layers (no KV cache), state per sequence %.2f MiB\n",
			       in->n_recurrent_layers, in->n_layers, in->recurrent_state_bytes / 1048576.0);
	} else {
		printf("whole model: no (routers and experts only: it runs layer by layer, not token by token)\n");
	}
}

static int print_json(const char *path, const struct hs_model_info *in, const struct hs_gguf *g)
{
	json_t *shards = json_array();
	for (int i = 0; shards && i < g->n_shards; i++)
		json_array_append_new(shards, json_pack("{s:s, s:I, s:I}", "file", g->shards[i].path, "bytes",
							(json_int_t)g->shards[i].size, "tensors",
							(json_int_t)g->shards[i].n_tensors));
	json_t *types = json_object();
	struct type_use u[48];
	int nu = type_uses(g, u, 48);
	for (int i = 0; types && i < nu; i++)
		json_object_set_new(types, hs__type_name(u[i].type),
				    json_pack("{s:i, s:I}", "tensors", u[i].tensors, "bytes", (json_int_t)u[i].bytes));
	json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:o, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
			      " s:o, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I}",
			      "file", path, "name", in->name, "arch", in->arch, "layers", in->n_layers,
			      "moe_layers", in->n_moe_layers, "experts", in->n_experts, "used", in->n_used,
			      "n_embd", in->n_embd, "n_ff", in->n_ff, "expert_type", in->expert_type_name,
			      "expert_types", in->expert_types, "tensor_types", types,
			      "has_bias", in->has_bias, "expert_weight_bytes", (json_int_t)in->expert_weight_bytes,
			      "expert_bias_bytes", (json_int_t)in->expert_bias_bytes,
			      "layer_token_bytes", (json_int_t)in->layer_token_bytes,
			      "layer_expert_bytes", (json_int_t)in->layer_expert_bytes,
			      "expert_bytes", (json_int_t)in->expert_bytes, "router_bytes", (json_int_t)in->router_bytes,
			      "non_expert_bytes", (json_int_t)in->non_expert_bytes, "file_bytes", (json_int_t)in->file_bytes,
			      "shards", shards,
			      "whole", in->whole, "vocab", in->n_vocab, "heads", in->n_head, "kv_heads", in->n_head_kv,
			      "head_dim", in->head_dim, "context", in->n_ctx_train, "sliding_window", in->swa_window,
			      "recurrent_layers", in->n_recurrent_layers,
			      "recurrent_state_bytes", (json_int_t)in->recurrent_state_bytes);
	if (j && in->n_nextn_layers)
		json_object_set_new(j, "nextn_layers_skipped", json_integer(in->n_nextn_layers));
	if (j && (in->n_dense_ffn_layers || in->n_ff_shared)) {
		json_object_set_new(j, "dense_ffn_layers", json_integer(in->n_dense_ffn_layers));
		json_object_set_new(j, "n_ff_dense", json_integer(in->n_ff_dense));
		json_object_set_new(j, "dense_ffn_bytes", json_integer((json_int_t)in->dense_ffn_bytes));
		json_object_set_new(j, "n_ff_shared", json_integer(in->n_ff_shared));
		json_object_set_new(j, "shared_expert_bytes", json_integer((json_int_t)in->shared_expert_bytes));
	}
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;

	json_decref(j);
	if (!s)
		return hs_cli_fail("model", "out of memory");
	printf("%s\n", s);
	free(s);
	return 0;
}

int hs_cmd_model(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, json = 0, rc;
	hs_model *m;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("model");
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "hotset model: %s\n", optind >= argc ? "no model file given" : "one model file only");
		return hs_cli_usage_error("model");
	}
	if (hs_model_open(argv[optind], &m) != 0)
		return hs_cli_fail("model", "%s", hs_last_error());
	rc = 0;
	if (json)
		rc = print_json(argv[optind], hs_model_info(m), hs__model_gguf(m));
	else
		print_text(argv[optind], hs_model_info(m), hs__model_gguf(m));
	hs_model_free(m);
	return rc;
}
