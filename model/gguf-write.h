/* GGUF v3 writer that streams tensor data to disk: metadata and tensor
 * infos are kept in memory, tensor rows are asked for in chunks, so memory
 * stays small for files of many GB.  Written to "<path>.part" and renamed at
 * the end: the final name never holds a half-written file.  One file, or
 * shards as llama-gguf-split writes them. */
#ifndef HS_GGUF_WRITE_H
#define HS_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

struct hs_gguf_writer;

/* Fills rows [row0, row0 + n_rows) of tensor `tensor` (rows of ne[0]
 * values, counted over ne[1..3]) into buf, in the tensor's type.  Returns 0
 * or a negative errno with hs__error() set. */
typedef int (*hs_gguf_fill_fn)(void *ctx, int tensor, uint64_t row0, uint64_t n_rows, void *buf);
/* Told after each chunk; may be NULL. */
typedef void (*hs_gguf_progress_fn)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);

struct hs_gguf_writer *hs__gguf_writer_new(void);
void hs__gguf_writer_free(struct hs_gguf_writer *w);

int hs__gguf_w_u32(struct hs_gguf_writer *w, const char *key, uint32_t v);
int hs__gguf_w_u64(struct hs_gguf_writer *w, const char *key, uint64_t v);
int hs__gguf_w_f32(struct hs_gguf_writer *w, const char *key, float v);
int hs__gguf_w_bool(struct hs_gguf_writer *w, const char *key, int v);
int hs__gguf_w_str(struct hs_gguf_writer *w, const char *key, const char *v);
int hs__gguf_w_arr_str(struct hs_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
int hs__gguf_w_arr_i32(struct hs_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Any metadata value given as raw GGUF bytes (type, then the value's
 * encoding); used to copy metadata from another file. */
int hs__gguf_w_raw(struct hs_gguf_writer *w, const char *key, int type, const void *value, size_t len);

/* Adds a tensor; returns its index (>= 0) or a negative errno. */
int hs__gguf_w_tensor(struct hs_gguf_writer *w, const char *name, int n_dims, const uint64_t *ne, int type);

/* Writes the file.  On failure nothing is left at `path` or "<path>.part". */
int hs__gguf_w_write(struct hs_gguf_writer *w, const char *path, hs_gguf_fill_fn fill, void *fill_ctx,
		     hs_gguf_progress_fn progress, void *progress_ctx);

/* Split output as `llama-gguf-split --split-max-size` writes it: shards
 * PREFIX-00001-of-0000N.gguf ..., each a whole GGUF v3 file with its own
 * tensor infos and data; tensors in order, a new shard when the next
 * tensor's data (padded to the alignment) would take the shard's data past
 * max_bytes (headers are not counted, so a shard file may be a little
 * larger), never an empty shard; split.no (uint16), split.tensors.count
 * (int32) and split.count (uint16) in every shard, the other metadata in
 * the first.  All shards go to "<shard>.part" first and are renamed once
 * all are written; on failure no shard and no .part is left. */
int hs__gguf_w_write_split(struct hs_gguf_writer *w, const char *prefix, uint64_t max_bytes, hs_gguf_fill_fn fill,
			   void *fill_ctx, hs_gguf_progress_fn progress, void *progress_ctx);
/* How many shards hs__gguf_w_write_split would write. */
int hs__gguf_w_shard_count(const struct hs_gguf_writer *w, uint64_t max_bytes);
/* Shard i (0-based) of count: "PREFIX-%05d-of-%05d.gguf", 1-based as llama.cpp names them. */
void hs__gguf_split_path(char *buf, size_t n, const char *prefix, int i, int count);

#endif
