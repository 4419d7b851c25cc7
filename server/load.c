/* Loading for `hotset serve`: waits politely for the GPU memory the plan
 * needs (with /health saying so), opens the runtime and the context, and
 * keeps the server's state and /v1/models' meta up to date meanwhile. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"

void hs_srv_set_state(struct srv *s, enum srv_state st, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&s->mu);
	s->state = st;
	va_start(ap, fmt);
	vsnprintf(s->state_msg, sizeof s->state_msg, fmt, ap);
	va_end(ap);
	pthread_cond_broadcast(&s->state_cv);
	pthread_mutex_unlock(&s->mu);
}

static void load_progress(const char *what, double f, void *ctx)
{
	struct srv *s = ctx;
	pthread_mutex_lock(&s->mu);
	snprintf(s->state_msg, sizeof s->state_msg, "loading the model: %.0f%% (%s)", 100 * f, what);
	pthread_mutex_unlock(&s->mu);
	if (!s->o.quiet && isatty(2))
		fprintf(stderr, "\rload: %3.0f%% %-40s%s", 100 * f, what, f >= 1 ? "\n" : "");
}

static void vram_progress(const char *what, double f, void *ctx)
{
	struct srv *s = ctx;
	(void)f;
	pthread_mutex_lock(&s->mu);
	snprintf(s->state_msg, sizeof s->state_msg, "waiting for GPU memory: %s", what);
	pthread_mutex_unlock(&s->mu);
}

/* Test hook (HOTSET_SERVE_FAKE_VRAM_WAIT=FILE): a GPU whose 2 GiB are all
 * taken while FILE exists, so a test sees /health while waiting and ends
 * the wait when it has looked, however slow the machine. */
struct fake_gpu {
	const char *busy_file;
};
static int fake_reporter(int device, uint64_t *free_bytes, uint64_t *total_bytes, void *ctx)
{
	const struct fake_gpu *g = ctx;
	(void)device;
	*total_bytes = 2ull << 30;
	*free_bytes = access(g->busy_file, F_OK) == 0 ? 0 : *total_bytes;
	return 0;
}

/* The plan's GPU memory and the CUDA device it is on; 0 with *budget = 0
 * when the plan uses no GPU. */
static int plan_vram(struct srv *s, struct hs_plan *plan, int *have_plan, int *dev, uint64_t *budget)
{
	hs_model *m = NULL;
	hs_topology *t = NULL;
	struct hs_model_desc *md = calloc(1, sizeof *md);
	struct hs_profile *pf = calloc(1, sizeof *pf);
	int rc = -ENOMEM;

	*budget = 0;
	*dev = -1;
	if (!md || !pf)
		goto out_free;
	if ((rc = hs_topology_open(NULL, &t)) || (rc = hs_profile_from_topology(t, pf)))
		goto out_free;
	if (s->o.plan) {
		if ((rc = hs_plan_load(s->o.plan, plan)))
			goto out_free;
	} else {
		struct hs_plan_opts po = { .gpu = pf->n_gpus ? 0 : -1, .ctx = s->o.ctx ? s->o.ctx : 4096,
					   .kv_type = s->o.kv, .n_seq = s->o.parallel, .ubatch = s->o.ubatch,
					   .host_layers = -1 };
		if ((rc = hs_model_open(s->o.model, &m)) || (rc = hs_model_desc_from_model(m, md)) ||
		    (rc = hs_plan_make(md, pf, &po, plan)))
			goto out_free;
	}
	*have_plan = 1;
	if (plan->gpu >= 0 && plan->gpu < pf->n_gpus && pf->gpus[plan->gpu].cuda_index >= 0) {
		*dev = pf->gpus[plan->gpu].cuda_index;
		*budget = plan->memory.vram_bytes;
	}
	rc = 0;
out_free:
	hs_model_free(m);
	hs_topology_free(t);
	free(md);
	free(pf);
	return rc;
}

/* Waits politely for the GPU memory the plan needs (1 s at a time, so a
 * stop is seen); 0 when it is free or there is nothing to wait for. */
static int wait_vram(struct srv *s, struct hs_plan *plan, int *have_plan)
{
	struct fake_gpu fake;
	hs_vram_reporter reporter = NULL;
	const char *hook = getenv("HOTSET_SERVE_FAKE_VRAM_WAIT");
	uint64_t budget = 0;
	int dev = -1, rc;

	if (hook && *hook) {
		fake.busy_file = hook;
		reporter = fake_reporter;
		budget = 1ull << 30;
		dev = 0;
	} else {
		const char *d = s->o.device ? s->o.device : hs_cuda_device_count() > 0 ? "cuda" : "cpu";
		if (strcmp(d, "cuda") || s->o.vram_wait_s <= 0)
			return 0;
		if ((rc = plan_vram(s, plan, have_plan, &dev, &budget)))
			return rc;
		if (!budget)
			return 0;
	}
	hs_srv_set_state(s, SRV_WAITING_VRAM, "waiting for GPU memory");
	double t0 = hs_srv_now(), limit = reporter ? 3600 : s->o.vram_wait_s;
	for (;;) {
		rc = hs_vram_wait(dev, budget, 1.0, 250, reporter, reporter ? &fake : NULL, vram_progress, s);
		if (rc != -ETIMEDOUT)
			return rc;
		pthread_mutex_lock(&s->mu);
		int stop = s->stopping;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			return -ECANCELED;
		if (hs_srv_now() - t0 >= limit) {
			char msg[200];
			snprintf(msg, sizeof msg, "%s", hs_last_error());
			pthread_mutex_lock(&s->mu);
			snprintf(s->state_msg, sizeof s->state_msg, "%s (--vram-wait %.0f s)", msg, limit);
			pthread_mutex_unlock(&s->mu);
			return -ETIMEDOUT;
		}
	}
}

int hs_srv_load(struct srv *s, hs_runtime **rt, hs_context **ctx)
{
	struct hs_runtime_opts ro = { 0 };
	struct hs_plan *plan = calloc(1, sizeof *plan);
	int have_plan = 0, rc;

	if (!plan) {
		hs_srv_set_state(s, SRV_FAILED, "out of memory");
		return -ENOMEM;
	}
	hs_srv_set_state(s, SRV_LOADING, "loading the model");
	if ((rc = wait_vram(s, plan, &have_plan))) {
		pthread_mutex_lock(&s->mu);
		int stop = s->stopping;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			hs_srv_set_state(s, SRV_STOPPED, "stopped while waiting for GPU memory");
		else if (rc == -ETIMEDOUT)
			hs_srv_set_state(s, SRV_FAILED, "%s", s->state_msg);
		else
			hs_srv_set_state(s, SRV_FAILED, "%s", hs_last_error());
		free(plan);
		return rc;
	}
	hs_srv_set_state(s, SRV_LOADING, "loading the model");
	ro.device = s->o.device ? s->o.device : hs_cuda_device_count() > 0 ? "cuda" : "cpu";
	ro.plan = have_plan ? plan : NULL;
	ro.plan_path = have_plan ? NULL : s->o.plan;
	ro.q = -1;
	ro.max_tokens = s->o.ubatch;
	ro.ctx = s->o.ctx;
	ro.kv_type = s->o.kv;
	ro.n_seq = s->o.parallel;
	ro.threads = s->o.threads;
	ro.progress = load_progress;
	ro.progress_ctx = s;
	if (s->o.mode) {
		static const char *const names[] = { "auto", "cpu", "stream", "hybrid" };
		static const enum hs_mode modes[] = { HS_MODE_NONE, HS_MODE_CPU_COMPUTE, HS_MODE_PCIE_STREAM,
						      HS_MODE_HYBRID };
		for (int i = 0; i < 4; i++)
			if (strcmp(s->o.mode, names[i]) == 0)
				ro.mode = modes[i];
	}
	rc = hs_runtime_open(s->o.model, &ro, rt);
	free(plan);
	if (rc) {
		hs_srv_set_state(s, SRV_FAILED, "%s", hs_last_error());
		return rc;
	}
	struct hs_context_opts co = { .n_ctx = s->o.ctx, .kv_type = s->o.kv, .n_seq = s->o.parallel,
				      .n_ubatch = s->o.ubatch };
	if ((rc = hs_context_create(*rt, &co, ctx))) {
		hs_srv_set_state(s, SRV_FAILED, "%s", hs_last_error());
		return rc;
	}
	const struct hs_model_info *in = hs_runtime_model_info(*rt);
	struct hs_context_stats st;
	hs_context_stats(*ctx, &st);
	if (in->n_vocab != s->n_vocab) {
		hs_srv_set_state(s, SRV_FAILED, "%s: the tokenizer has %d tokens, the model's embeddings %d rows", s->o.model,
			  s->n_vocab, in->n_vocab);
		return -EINVAL;
	}
	json_t *meta = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:s, s:s, s:s}", "arch", in->arch,
				 "name", in->name, "n_vocab", in->n_vocab, "n_ctx", st.n_ctx, "n_ctx_train",
				 in->n_ctx_train, "n_embd", in->n_embd, "n_layers", in->n_layers, "n_experts",
				 in->n_experts, "n_parallel", st.n_seq, "size", (json_int_t)in->file_bytes, "dense",
				 st.dense, "kv_type", st.kv_type == HS_KV_Q8_0 ? "q8_0" : "f16", "chat_format",
				 hs_chat_format_name(s->fmt));
	char *meta_s = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
	json_decref(meta);
	if (!meta_s) {
		hs_srv_set_state(s, SRV_FAILED, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&s->mu);
	s->model_meta = meta_s;
	s->n_ctx = st.n_ctx;
	s->m.kv_cells_total = st.kv_cells_total;
	s->m.kv_bytes = st.kv_bytes;
	pthread_mutex_unlock(&s->mu);
	if (!s->o.quiet)
		fprintf(stderr, "hotset serve: ready: %d sequences of %d positions, KV %s (%.1f MiB), dense part on %s\n",
			st.n_seq, st.n_ctx, st.kv_type == HS_KV_Q8_0 ? "q8_0" : "f16", st.kv_bytes / 1048576.0,
			st.dense);
	hs_srv_set_state(s, SRV_READY, "ok");
	return 0;
}

