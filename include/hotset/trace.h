/* hotset/trace.h: routing traces (docs/trace-format.md): recording,
 * reading, generating, projecting.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_TRACE_H
#define HOTSET_TRACE_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* Writes to "<path>.part"; close with keep = 1 renames it to path, keep = 0
 * deletes it (nothing half-written is left). */
int hs_trace_writer_open(const char *path, int n_experts, int n_used, hs_trace_writer **out);
/* One record: ids[n_tokens][n_used] (-1 = none) and their weights. */
int hs_trace_writer_add(hs_trace_writer *w, int step, int layer, int n_tokens, const int32_t *ids,
			const float *weights);
int hs_trace_writer_close(hs_trace_writer *w, int keep);
/* Reads a whole trace; -EIO naming the byte offset of a broken record. */
int hs_trace_load(const char *path, hs_trace **out);
void hs_trace_free(hs_trace *t);
/* Any out-pointer may be NULL; a NULL t gives zeros (and a message). */
void hs_trace_info(const hs_trace *t, int *n_records, int *n_experts, int *n_used);
/* Record i; the arrays are owned by t. */
int hs_trace_record(const hs_trace *t, int i, int *step, int *layer, int *n_tokens, const int32_t **ids,
		    const float **weights);
/* step,layer,token,slot,expert,weight per line, through "<path>.part". */
int hs_trace_write_csv(const hs_trace *t, const char *path);
/* A synthetic trace: n_layers layers of n_experts (n_used per token), each
 * layer's popularity a Zipf curve whose top_n experts take top_share of the
 * slots (a different hot set per layer), and with probability `locality`
 * a token reuses an expert of the layer's previous step. */
int hs_trace_generate(const char *path, int n_layers, int n_experts, int n_used, int steps, int tokens, int top_n,
		      double top_share, double locality, uint64_t seed);

/* Predicted decode tokens/s of a plan's MoE part when its host layers hit
 * their GPU copies at hit_rate[i] (one per plan layer; GPU layers ignore
 * theirs), with the plan's own figures and decode mode.  Pure.  A negative
 * errno (-EINVAL) for a NULL or malformed plan or a NULL hit_rate. */
double hs_plan_project(const struct hs_plan *p, const double *hit_rate);

#endif /* HOTSET_TRACE_H */
