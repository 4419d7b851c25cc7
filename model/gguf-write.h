/* GGUF v3 writer that streams tensor data to disk: metadata and tensor
 * infos are kept in memory, tensor rows are asked for in chunks, so memory
 * stays small for files of many GB.  Written to "<path>.part" and renamed at
 * the end: the final name never holds a half-written file. */
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

#endif
