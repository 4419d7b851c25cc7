/* The plan as JSON and back (schema in docs/plan-json.md).  The runtime
 * reads this file, so everything the planner decided is in it. */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "base/error.h"
#include "base/jsonio.h"
#include "planner/planner.h"

static const char *kv_name(enum hs_kv_type t)
{
	return t == HS_KV_Q8_0 ? "q8_0" : "f16";
}

int hs__plan_check(const struct hs_plan *p)
{
	HS_NEED(p, -EINVAL);
	if (p->n_layers < 0 || p->n_layers > HS_MAX_LAYERS || p->memory.n_nodes < 0 || p->memory.n_nodes > HS_MAX_NODES ||
	    p->n_warnings < 0 || p->n_warnings > HS_MAX_WARNINGS)
		return hs__error(EINVAL, "plan: %d layers (0..%d), %d memory nodes (0..%d), %d warnings (0..%d)",
				 p->n_layers, HS_MAX_LAYERS, p->memory.n_nodes, HS_MAX_NODES, p->n_warnings,
				 HS_MAX_WARNINGS);
	if (!HS_STR_ENDED(p->model) || !HS_STR_ENDED(p->machine) || !HS_STR_ENDED(p->profile_source) ||
	    !HS_STR_ENDED(p->predicted.bound) || !HS_STR_ENDED(p->assumptions) || !HS_STR_ENDED(p->routing))
		return hs__error(EINVAL, "plan: a text field is not NUL-terminated within its array");
	if ((unsigned)p->decode_mode > HS_MODE_HYBRID || (unsigned)p->prefill_mode > HS_MODE_HYBRID ||
	    (unsigned)p->kv_type > HS_KV_Q8_0)
		return hs__error(EINVAL, "plan: decode mode %d, prefill mode %d (0..%d), KV type %d (0..%d)",
				 (int)p->decode_mode, (int)p->prefill_mode, HS_MODE_HYBRID, (int)p->kv_type, HS_KV_Q8_0);
	for (int i = 0; i < p->n_layers; i++) {
		const struct hs_plan_layer *l = &p->layers[i];
		if ((unsigned)l->placement > HS_PLACEMENT_HOST_CACHE || l->n_numa_nodes < 0 || l->n_numa_nodes > 2 ||
		    l->slots < 0)
			return hs__error(EINVAL, "plan: layer %d: placement %d (0..%d), %d nodes (0..2), %d slots", i,
					 (int)l->placement, HS_PLACEMENT_HOST_CACHE, l->n_numa_nodes, l->slots);
	}
	for (int i = 0; i < p->n_warnings; i++)
		if (!HS_STR_ENDED(p->warnings[i].code) || !HS_STR_ENDED(p->warnings[i].message))
			return hs__error(EINVAL, "plan: warning %d is not NUL-terminated within its array", i);
	return 0;
}

char *hs_plan_to_json(const struct hs_plan *p)
{
	if (hs__plan_check(p))
		return NULL;
	json_t *root = json_object(), *layers = json_array(), *warnings = json_array(), *nodes = json_array();

	json_object_set_new(root, "hotset_plan", json_integer(1));
	json_object_set_new(root, "model", json_string(p->model));
	json_object_set_new(root, "machine", json_string(p->machine));
	json_object_set_new(root, "profile_source", json_string(p->profile_source));
	json_object_set_new(root, "gpu", p->gpu >= 0 ? json_integer(p->gpu) : json_null());
	json_object_set_new(root, "ctx", json_integer(p->ctx));
	json_object_set_new(root, "kv", json_string(kv_name(p->kv_type)));
	json_object_set_new(root, "ubatch", json_integer(p->ubatch));
	json_object_set_new(root, "cpu", json_pack("{s:i, s:i}", "node", p->cpu_node, "threads", p->cpu_threads));
	json_object_set_new(root, "modes",
			    json_pack("{s:s, s:f, s:s, s:f}", "decode", hs_mode_name(p->decode_mode), "decode_q",
				      p->decode_q, "prefill", hs_mode_name(p->prefill_mode), "prefill_q", p->prefill_q));
	json_object_set_new(root, "counts",
			    json_pack("{s:i, s:i, s:i}", "gpu_layers", p->n_gpu_layers, "host_layers", p->n_host_layers,
				      "slots", p->total_slots));
	for (int i = 0; i < p->n_layers; i++) {
		const struct hs_plan_layer *l = &p->layers[i];
		json_t *nn = json_array();
		for (int j = 0; j < l->n_numa_nodes; j++)
			json_array_append_new(nn, json_integer(l->numa_nodes[j]));
		json_array_append_new(layers, json_pack("{s:i, s:s, s:i, s:o, s:f, s:f, s:f}", "layer", l->layer,
							"placement", hs_placement_name(l->placement), "slots", l->slots,
							"numa_nodes", nn, "hit_rate", l->hit_rate, "decode_ms",
							l->decode_ms, "prefill_ms", l->prefill_ms));
	}
	json_object_set_new(root, "layers", layers);
	const struct hs_plan_predicted *q = &p->predicted;
	json_object_set_new(
		root, "predicted",
		json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:s, s:{s:f, s:f, s:f, s:f}}", "label",
			  "prediction", "decode_tok_s", q->decode_tok_s, "decode_host_bound_tok_s",
			  q->decode_host_bound_tok_s, "decode_cpu_compute_tok_s", q->decode_cpu_tok_s,
			  "decode_pcie_stream_tok_s", q->decode_stream_tok_s, "decode_hybrid_tok_s",
			  q->decode_hybrid_tok_s, "prefill_tok_s", q->prefill_tok_s, "host_bytes_per_token",
			  (json_int_t)q->host_bytes_per_token, "miss_bytes_per_token", (json_int_t)q->miss_bytes_per_token,
			  "gpu_bytes_per_token", (json_int_t)q->gpu_bytes_per_token, "bound", q->bound, "figures",
			  "host_read_gbps", q->host_read_gbps, "cpu_kernel_gbps", q->cpu_kernel_gbps, "pcie_gbps",
			  q->pcie_gbps, "gpu_mem_gbps", q->gpu_mem_gbps));
	json_object_set_new(json_object_get(root, "predicted"), "expert",
			    json_pack("{s:I, s:i, s:i}", "bytes", (json_int_t)q->expert_bytes, "n_experts", q->n_experts,
				      "n_used", q->n_used));
	if (q->model_decode_tok_s > 0)
		json_object_set_new(json_object_get(root, "predicted"), "whole_model",
				    json_pack("{s:f, s:f, s:f, s:I, s:I, s:f}", "decode_tok_s", q->model_decode_tok_s,
					      "decode_ctx_tok_s", q->model_decode_ctx_tok_s, "prefill_tok_s",
					      q->model_prefill_tok_s, "dense_bytes_per_token",
					      (json_int_t)q->dense_bytes_per_token, "kv_bytes_at_ctx",
					      (json_int_t)q->kv_bytes_at_ctx, "dense_gbps", q->dense_gbps));
	for (int j = 0; j < p->memory.n_nodes; j++)
		json_array_append_new(nodes, json_pack("{s:i, s:I}", "node", p->memory.node_os_index[j], "bytes",
						       (json_int_t)p->memory.ram_node_bytes[j]));
	json_object_set_new(
		root, "memory",
		json_pack("{s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:o}", "vram_bytes",
			  (json_int_t)p->memory.vram_bytes, "vram_budget_bytes", (json_int_t)p->memory.vram_budget,
			  "ram_bytes", (json_int_t)p->memory.ram_bytes, "ram_budget_bytes",
			  (json_int_t)p->memory.ram_budget, "vram", "nonexpert", (json_int_t)p->memory.vram_nonexpert,
			  "kv", (json_int_t)p->memory.vram_kv, "experts", (json_int_t)p->memory.vram_experts, "slots",
			  (json_int_t)p->memory.vram_slots, "staging", (json_int_t)p->memory.vram_staging, "workspace",
			  (json_int_t)p->memory.vram_workspace, "ram_nodes", nodes));
	for (int i = 0; i < p->n_warnings; i++)
		json_array_append_new(warnings, json_pack("{s:s, s:s}", "code", p->warnings[i].code, "message",
							  p->warnings[i].message));
	json_object_set_new(root, "warnings", warnings);
	json_object_set_new(root, "assumptions", json_string(p->assumptions));
	json_object_set_new(root, "routing", json_string(p->routing));
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(root);
	return s;
}

static int name_to(const struct hs_json_in *in, const char *field, const char *s, int n, const char *(*name)(int),
		   int *out)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name(i), s) == 0) {
			*out = i;
			return 0;
		}
	return hs__json_bad(in, field, "is '%s', not a known name", s);
}

static const char *placement_i(int i)
{
	return hs_placement_name((enum hs_placement)i);
}

static const char *mode_i(int i)
{
	return hs_mode_name((enum hs_mode)i);
}

static int parse(struct hs_json_in *in, json_t *root, struct hs_plan *p)
{
	json_t *o, *a;
	char buf[32];
	int rc, v, ver;

	memset(p, 0, sizeof *p);
	p->gpu = -1;
	if (!json_is_object(root))
		return hs__json_bad(in, "(top)", "is not a JSON object");
	if ((rc = hs__json_int(in, root, "hotset_plan", "", 1, 1, 1, &ver)) ||
	    (rc = hs__json_str(in, root, "model", "", p->model, sizeof p->model, 1)) ||
	    (rc = hs__json_str(in, root, "machine", "", p->machine, sizeof p->machine, 1)) ||
	    (rc = hs__json_str(in, root, "profile_source", "", p->profile_source, sizeof p->profile_source, 0)) ||
	    (rc = hs__json_int(in, root, "gpu", "", 0, HS_MAX_GPUS - 1, 0, &p->gpu)) ||
	    (rc = hs__json_int(in, root, "ctx", "", 1, 1 << 30, 1, &p->ctx)) ||
	    (rc = hs__json_int(in, root, "ubatch", "", 1, 1 << 20, 1, &p->ubatch)) ||
	    (rc = hs__json_str(in, root, "kv", "", buf, sizeof buf, 1)))
		return rc;
	if (strcmp(buf, "f16") && strcmp(buf, "q8_0"))
		return hs__json_bad(in, "kv", "is '%s' (f16 or q8_0)", buf);
	p->kv_type = strcmp(buf, "q8_0") == 0 ? HS_KV_Q8_0 : HS_KV_F16;
	o = json_object_get(root, "cpu");
	if ((rc = hs__json_int(in, o, "node", "cpu", 0, 4095, 1, &p->cpu_node)) ||
	    (rc = hs__json_int(in, o, "threads", "cpu", 1, 1 << 16, 1, &p->cpu_threads)))
		return rc;
	o = json_object_get(root, "modes");
	if ((rc = hs__json_str(in, o, "decode", "modes", buf, sizeof buf, 1)) ||
	    (rc = name_to(in, "modes.decode", buf, 4, mode_i, &v)))
		return rc;
	p->decode_mode = (enum hs_mode)v;
	if ((rc = hs__json_str(in, o, "prefill", "modes", buf, sizeof buf, 1)) ||
	    (rc = name_to(in, "modes.prefill", buf, 4, mode_i, &v)) ||
	    (rc = hs__json_num(in, o, "decode_q", "modes", 0, 1, 1, &p->decode_q)) ||
	    (rc = hs__json_num(in, o, "prefill_q", "modes", 0, 1, 1, &p->prefill_q)))
		return rc;
	p->prefill_mode = (enum hs_mode)v;
	o = json_object_get(root, "counts");
	if ((rc = hs__json_int(in, o, "gpu_layers", "counts", 0, HS_MAX_LAYERS, 1, &p->n_gpu_layers)) ||
	    (rc = hs__json_int(in, o, "host_layers", "counts", 0, HS_MAX_LAYERS, 1, &p->n_host_layers)) ||
	    (rc = hs__json_int(in, o, "slots", "counts", 0, 1 << 30, 1, &p->total_slots)))
		return rc;

	a = json_object_get(root, "layers");
	if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > HS_MAX_LAYERS)
		return hs__json_bad(in, "layers", "must be an array of 1..%d layers", HS_MAX_LAYERS);
	p->n_layers = (int)json_array_size(a);
	int n_host = 0, n_slots = 0;
	for (int i = 0; i < p->n_layers; i++) {
		json_t *l = json_array_get(a, i), *nn;
		struct hs_plan_layer *pl = &p->layers[i];
		if ((rc = hs__json_int(in, l, "layer", "layers[]", 0, 1 << 20, 1, &pl->layer)) ||
		    (rc = hs__json_str(in, l, "placement", "layers[]", buf, sizeof buf, 1)) ||
		    (rc = name_to(in, "layers[].placement", buf, 3, placement_i, &v)) ||
		    (rc = hs__json_int(in, l, "slots", "layers[]", 0, 1 << 20, 1, &pl->slots)) ||
		    (rc = hs__json_num(in, l, "hit_rate", "layers[]", 0, 1, 0, &pl->hit_rate)) ||
		    (rc = hs__json_num(in, l, "decode_ms", "layers[]", 0, 1e9, 0, &pl->decode_ms)) ||
		    (rc = hs__json_num(in, l, "prefill_ms", "layers[]", 0, 1e9, 0, &pl->prefill_ms)))
			return rc;
		pl->placement = (enum hs_placement)v;
		if (pl->placement != HS_PLACEMENT_HOST_CACHE && pl->slots)
			return hs__json_bad(in, "layers[].slots", "of layer %d is %d, but only host+cache layers have slots",
					    pl->layer, pl->slots);
		nn = json_object_get(l, "numa_nodes");
		if (!json_is_array(nn) || json_array_size(nn) > 2)
			return hs__json_bad(in, "layers[].numa_nodes", "of layer %d must be an array of at most 2 nodes",
					    pl->layer);
		pl->n_numa_nodes = (int)json_array_size(nn);
		if (pl->placement != HS_PLACEMENT_GPU && pl->n_numa_nodes == 0)
			return hs__json_bad(in, "layers[].numa_nodes", "of host layer %d is empty", pl->layer);
		for (int j = 0; j < pl->n_numa_nodes; j++) {
			json_t *x = json_array_get(nn, j);
			if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 4095)
				return hs__json_bad(in, "layers[].numa_nodes", "holds something that is not a node number");
			pl->numa_nodes[j] = (int)json_integer_value(x);
		}
		if (i > 0 && pl->layer <= p->layers[i - 1].layer)
			return hs__json_bad(in, "layers[].layer", "must ascend (%d follows %d)", pl->layer,
					    p->layers[i - 1].layer);
		n_host += pl->placement != HS_PLACEMENT_GPU;
		n_slots += pl->slots;
	}
	if (n_host != p->n_host_layers || p->n_layers - n_host != p->n_gpu_layers || n_slots != p->total_slots)
		return hs__json_bad(in, "counts", "disagree with \"layers\" (%d host layers, %d slots there)", n_host,
				    n_slots);

	o = json_object_get(root, "predicted");
	struct hs_plan_predicted *q = &p->predicted;
	json_t *f = json_object_get(o, "figures");
	if ((rc = hs__json_num(in, o, "decode_tok_s", "predicted", 0, 1e12, 1, &q->decode_tok_s)) ||
	    (rc = hs__json_num(in, o, "decode_host_bound_tok_s", "predicted", 0, 1e12, 1, &q->decode_host_bound_tok_s)) ||
	    (rc = hs__json_num(in, o, "decode_cpu_compute_tok_s", "predicted", 0, 1e12, 0, &q->decode_cpu_tok_s)) ||
	    (rc = hs__json_num(in, o, "decode_pcie_stream_tok_s", "predicted", 0, 1e12, 0, &q->decode_stream_tok_s)) ||
	    (rc = hs__json_num(in, o, "decode_hybrid_tok_s", "predicted", 0, 1e12, 0, &q->decode_hybrid_tok_s)) ||
	    (rc = hs__json_num(in, o, "prefill_tok_s", "predicted", 0, 1e12, 1, &q->prefill_tok_s)) ||
	    (rc = hs__json_u64(in, o, "host_bytes_per_token", "predicted", 1, &q->host_bytes_per_token)) ||
	    (rc = hs__json_u64(in, o, "miss_bytes_per_token", "predicted", 0, &q->miss_bytes_per_token)) ||
	    (rc = hs__json_u64(in, o, "gpu_bytes_per_token", "predicted", 0, &q->gpu_bytes_per_token)) ||
	    (rc = hs__json_str(in, o, "bound", "predicted", q->bound, sizeof q->bound, 0)) ||
	    (f && ((rc = hs__json_num(in, f, "host_read_gbps", "predicted.figures", 0, 1e6, 0, &q->host_read_gbps)) ||
		   (rc = hs__json_num(in, f, "cpu_kernel_gbps", "predicted.figures", 0, 1e6, 0, &q->cpu_kernel_gbps)) ||
		   (rc = hs__json_num(in, f, "pcie_gbps", "predicted.figures", 0, 1e6, 0, &q->pcie_gbps)) ||
		   (rc = hs__json_num(in, f, "gpu_mem_gbps", "predicted.figures", 0, 1e6, 0, &q->gpu_mem_gbps)))))
		return rc;
	json_t *wm = json_object_get(o, "whole_model"); /* plans of MoE-only files have none */
	if (wm && ((rc = hs__json_num(in, wm, "decode_tok_s", "predicted.whole_model", 0, 1e12, 1, &q->model_decode_tok_s)) ||
		   (rc = hs__json_num(in, wm, "decode_ctx_tok_s", "predicted.whole_model", 0, 1e12, 1,
				      &q->model_decode_ctx_tok_s)) ||
		   (rc = hs__json_num(in, wm, "prefill_tok_s", "predicted.whole_model", 0, 1e12, 1, &q->model_prefill_tok_s)) ||
		   (rc = hs__json_u64(in, wm, "dense_bytes_per_token", "predicted.whole_model", 1, &q->dense_bytes_per_token)) ||
		   (rc = hs__json_u64(in, wm, "kv_bytes_at_ctx", "predicted.whole_model", 1, &q->kv_bytes_at_ctx)) ||
		   (rc = hs__json_num(in, wm, "dense_gbps", "predicted.whole_model", 0, 1e6, 1, &q->dense_gbps))))
		return rc;
	json_t *ex = json_object_get(o, "expert");
	if (ex && ((rc = hs__json_u64(in, ex, "bytes", "predicted.expert", 1, &q->expert_bytes)) ||
		   (rc = hs__json_int(in, ex, "n_experts", "predicted.expert", 0, 1 << 20, 1, &q->n_experts)) ||
		   (rc = hs__json_int(in, ex, "n_used", "predicted.expert", 0, 1 << 20, 1, &q->n_used))))
		return rc;

	o = json_object_get(root, "memory");
	json_t *vr = json_object_get(o, "vram");
	if ((rc = hs__json_u64(in, o, "vram_bytes", "memory", 1, &p->memory.vram_bytes)) ||
	    (rc = hs__json_u64(in, o, "vram_budget_bytes", "memory", 0, &p->memory.vram_budget)) ||
	    (rc = hs__json_u64(in, o, "ram_bytes", "memory", 1, &p->memory.ram_bytes)) ||
	    (rc = hs__json_u64(in, o, "ram_budget_bytes", "memory", 0, &p->memory.ram_budget)) ||
	    (vr && ((rc = hs__json_u64(in, vr, "nonexpert", "memory.vram", 0, &p->memory.vram_nonexpert)) ||
		    (rc = hs__json_u64(in, vr, "kv", "memory.vram", 0, &p->memory.vram_kv)) ||
		    (rc = hs__json_u64(in, vr, "experts", "memory.vram", 0, &p->memory.vram_experts)) ||
		    (rc = hs__json_u64(in, vr, "slots", "memory.vram", 0, &p->memory.vram_slots)) ||
		    (rc = hs__json_u64(in, vr, "staging", "memory.vram", 0, &p->memory.vram_staging)) ||
		    (rc = hs__json_u64(in, vr, "workspace", "memory.vram", 0, &p->memory.vram_workspace)))))
		return rc;
	a = json_object_get(o, "ram_nodes");
	if (a && (!json_is_array(a) || json_array_size(a) > HS_MAX_NODES))
		return hs__json_bad(in, "memory.ram_nodes", "must be an array of at most %d nodes", HS_MAX_NODES);
	p->memory.n_nodes = a ? (int)json_array_size(a) : 0;
	for (int j = 0; j < p->memory.n_nodes; j++) {
		json_t *e = json_array_get(a, j);
		if ((rc = hs__json_int(in, e, "node", "memory.ram_nodes[]", 0, 4095, 1, &p->memory.node_os_index[j])) ||
		    (rc = hs__json_u64(in, e, "bytes", "memory.ram_nodes[]", 1, &p->memory.ram_node_bytes[j])))
			return rc;
	}

	a = json_object_get(root, "warnings");
	if (a && (!json_is_array(a) || json_array_size(a) > HS_MAX_WARNINGS))
		return hs__json_bad(in, "warnings", "must be an array of at most %d warnings", HS_MAX_WARNINGS);
	p->n_warnings = a ? (int)json_array_size(a) : 0;
	for (int i = 0; i < p->n_warnings; i++) {
		json_t *w = json_array_get(a, i);
		if ((rc = hs__json_str(in, w, "code", "warnings[]", p->warnings[i].code, sizeof p->warnings[i].code, 1)) ||
		    (rc = hs__json_str(in, w, "message", "warnings[]", p->warnings[i].message,
				       sizeof p->warnings[i].message, 1)))
			return rc;
	}
	if ((rc = hs__json_str(in, root, "routing", "", p->routing, sizeof p->routing, 0)))
		return rc;
	return hs__json_str(in, root, "assumptions", "", p->assumptions, sizeof p->assumptions, 0);
}

int hs_plan_from_json(const char *text, struct hs_plan *out)
{
	struct hs_json_in in;
	json_t *root;

	HS_NEED(text, -EINVAL);
	HS_NEED(out, -EINVAL);
	int rc = hs__json_parse(text, "plan", "(text)", &in, &root);

	if (rc)
		return rc;
	rc = parse(&in, root, out);
	json_decref(root);
	return rc;
}

int hs_plan_save(const struct hs_plan *p, const char *path)
{
	int rc;

	HS_NEED(path, -EINVAL);
	if ((rc = hs__plan_check(p)))
		return rc;
	char *s = hs_plan_to_json(p);
	if (!s)
		return hs__error(ENOMEM, "plan: no memory for the JSON text");
	struct hs_piece pieces[2] = { { s, strlen(s) }, { "\n", 1 } };
	rc = hs__write_file_atomic(path, pieces, 2, 0);
	free(s);
	return rc;
}

int hs_plan_load(const char *path, struct hs_plan *out)
{
	struct hs_json_in in;
	json_t *root;

	HS_NEED(path, -EINVAL);
	HS_NEED(out, -EINVAL);
	int rc = hs__json_load(path, "plan", &in, &root);

	if (rc)
		return rc;
	rc = parse(&in, root, out);
	json_decref(root);
	return rc;
}
