/* GGUF v3 writer (see gguf-write.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_kernels/formats.h"
#include "base/error.h"
#include "model/gguf-write.h"
#include "model/gguf.h"

#define CHUNK_BYTES (8u << 20)

struct wtensor {
	char *name;
	int n_dims, type;
	uint64_t ne[HS_GGUF_MAX_DIMS];
	uint64_t row_bytes, n_rows, offset;
};

struct hs_gguf_writer {
	uint8_t *meta;
	size_t meta_len, meta_cap;
	uint64_t n_kv;
	struct wtensor *t;
	int n_t, cap_t;
	int failed; /* an earlier add failed (ENOMEM): refuse to write */
};

struct hs_gguf_writer *hs__gguf_writer_new(void)
{
	struct hs_gguf_writer *w = calloc(1, sizeof *w);
	if (!w)
		hs__error(ENOMEM, "GGUF writer: out of memory");
	return w;
}

void hs__gguf_writer_free(struct hs_gguf_writer *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n_t; i++)
		free(w->t[i].name);
	free(w->t);
	free(w->meta);
	free(w);
}

static int put(struct hs_gguf_writer *w, const void *p, size_t n)
{
	if (w->meta_len + n > w->meta_cap) {
		size_t cap = w->meta_cap ? w->meta_cap : 4096;
		while (cap < w->meta_len + n)
			cap *= 2;
		uint8_t *m = realloc(w->meta, cap);
		if (!m) {
			w->failed = 1;
			return hs__error(ENOMEM, "GGUF writer: out of memory");
		}
		w->meta = m;
		w->meta_cap = cap;
	}
	memcpy(w->meta + w->meta_len, p, n);
	w->meta_len += n;
	return 0;
}

static int put_u32(struct hs_gguf_writer *w, uint32_t v) { return put(w, &v, 4); }
static int put_u64(struct hs_gguf_writer *w, uint64_t v) { return put(w, &v, 8); }

static int put_str(struct hs_gguf_writer *w, const char *s)
{
	size_t n = strlen(s);
	int rc = put_u64(w, n);
	return rc ? rc : put(w, s, n);
}

static int key(struct hs_gguf_writer *w, const char *k, int type)
{
	int rc = put_str(w, k);
	if (!rc)
		rc = put_u32(w, (uint32_t)type);
	if (!rc)
		w->n_kv++;
	return rc;
}

int hs__gguf_w_u32(struct hs_gguf_writer *w, const char *k, uint32_t v)
{
	int rc = key(w, k, HS_GGUF_UINT32);
	return rc ? rc : put_u32(w, v);
}

int hs__gguf_w_u64(struct hs_gguf_writer *w, const char *k, uint64_t v)
{
	int rc = key(w, k, HS_GGUF_UINT64);
	return rc ? rc : put_u64(w, v);
}

int hs__gguf_w_f32(struct hs_gguf_writer *w, const char *k, float v)
{
	int rc = key(w, k, HS_GGUF_FLOAT32);
	return rc ? rc : put(w, &v, 4);
}

int hs__gguf_w_bool(struct hs_gguf_writer *w, const char *k, int v)
{
	uint8_t b = v != 0;
	int rc = key(w, k, HS_GGUF_BOOL);
	return rc ? rc : put(w, &b, 1);
}

int hs__gguf_w_str(struct hs_gguf_writer *w, const char *k, const char *v)
{
	int rc = key(w, k, HS_GGUF_STRING);
	return rc ? rc : put_str(w, v);
}

int hs__gguf_w_arr_str(struct hs_gguf_writer *w, const char *k, const char *const *v, uint64_t n)
{
	int rc = key(w, k, HS_GGUF_ARRAY);
	if (!rc)
		rc = put_u32(w, HS_GGUF_STRING);
	if (!rc)
		rc = put_u64(w, n);
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = put_str(w, v[i]);
	return rc;
}

int hs__gguf_w_arr_i32(struct hs_gguf_writer *w, const char *k, const int32_t *v, uint64_t n)
{
	int rc = key(w, k, HS_GGUF_ARRAY);
	if (!rc)
		rc = put_u32(w, HS_GGUF_INT32);
	if (!rc)
		rc = put_u64(w, n);
	return rc ? rc : put(w, v, n * 4);
}

int hs__gguf_w_raw(struct hs_gguf_writer *w, const char *k, int type, const void *value, size_t len)
{
	int rc = key(w, k, type);
	return rc ? rc : put(w, value, len);
}

int hs__gguf_w_tensor(struct hs_gguf_writer *w, const char *name, int n_dims, const uint64_t *ne, int type)
{
	struct wtensor *t;
	uint64_t rows = 1;

	if (n_dims < 1 || n_dims > HS_GGUF_MAX_DIMS)
		return hs__error(EINVAL, "tensor '%s': n_dims %d (1..%d)", name, n_dims, HS_GGUF_MAX_DIMS);
	if (!hs__type_name(type))
		return hs__error(EINVAL, "tensor '%s': unknown type %d", name, type);
	if (!hs__type_row_bytes(type, ne[0]))
		return hs__error(EINVAL, "tensor '%s': row length %llu does not fit %s blocks of %zu", name,
				 (unsigned long long)ne[0], hs__type_name(type), hs__type_block_values(type));
	if (w->n_t == w->cap_t) {
		int cap = w->cap_t ? 2 * w->cap_t : 16;
		struct wtensor *nt = realloc(w->t, cap * sizeof *nt);
		if (!nt) {
			w->failed = 1;
			return hs__error(ENOMEM, "GGUF writer: out of memory");
		}
		w->t = nt;
		w->cap_t = cap;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	if (!t->name) {
		w->failed = 1;
		return hs__error(ENOMEM, "GGUF writer: out of memory");
	}
	t->n_dims = n_dims;
	t->type = type;
	for (int d = 0; d < HS_GGUF_MAX_DIMS; d++) {
		t->ne[d] = d < n_dims ? ne[d] : 1;
		if (d)
			rows *= t->ne[d];
	}
	t->row_bytes = hs__type_row_bytes(type, ne[0]);
	t->n_rows = rows;
	return w->n_t++;
}

static int write_all(int fd, const void *p, size_t n, const char *path)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return hs__error(errno == ENOSPC ? ENOSPC : EIO, "%s: write failed: %s", path,
					 k < 0 ? strerror(errno) : "no progress");
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Tensors [t0, t1) after the metadata block `meta` (n_kv entries) into a
 * new file `tmp`, offsets counted from its own data section.  On failure
 * tmp is removed. */
static int write_one(struct hs_gguf_writer *w, const char *tmp, const struct hs_gguf_writer *meta, int t0, int t1,
		     hs_gguf_fill_fn fill, void *fill_ctx, hs_gguf_progress_fn progress, void *progress_ctx,
		     uint64_t *done, uint64_t total)
{
	static const uint8_t zeros[HS_GGUF_DEFAULT_ALIGNMENT];
	struct hs_gguf_writer hdr = { 0 };
	uint64_t data_len = 0;
	uint8_t *buf = NULL;
	int fd = -1, rc;

	/* header, metadata, tensor infos */
	rc = put(&hdr, "GGUF", 4);
	if (!rc) rc = put_u32(&hdr, 3);
	if (!rc) rc = put_u64(&hdr, (uint64_t)(t1 - t0));
	if (!rc) rc = put_u64(&hdr, meta->n_kv);
	if (!rc) rc = put(&hdr, meta->meta, meta->meta_len);
	for (int i = t0; i < t1 && !rc; i++) {
		struct wtensor *t = &w->t[i];
		t->offset = data_len;
		data_len = align_up(data_len + t->row_bytes * t->n_rows, HS_GGUF_DEFAULT_ALIGNMENT);
		rc = put_str(&hdr, t->name);
		if (!rc) rc = put_u32(&hdr, (uint32_t)t->n_dims);
		for (int d = 0; d < t->n_dims && !rc; d++)
			rc = put_u64(&hdr, t->ne[d]);
		if (!rc) rc = put_u32(&hdr, (uint32_t)t->type);
		if (!rc) rc = put_u64(&hdr, t->offset);
	}
	if (rc)
		goto out_free;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = hs__error(EIO, "%s: cannot create: %s", tmp, strerror(errno));
		goto out_free;
	}
	if ((rc = write_all(fd, hdr.meta, hdr.meta_len, tmp)) ||
	    (rc = write_all(fd, zeros, align_up(hdr.meta_len, HS_GGUF_DEFAULT_ALIGNMENT) - hdr.meta_len, tmp)))
		goto out_unlink;
	buf = malloc(CHUNK_BYTES);
	if (!buf) {
		rc = hs__error(ENOMEM, "GGUF writer: out of memory");
		goto out_unlink;
	}
	for (int i = t0; i < t1; i++) {
		struct wtensor *t = &w->t[i];
		uint64_t per = t->row_bytes ? CHUNK_BYTES / t->row_bytes : 0, bytes = t->row_bytes * t->n_rows;

		if (t->row_bytes > CHUNK_BYTES) {
			rc = hs__error(EINVAL, "tensor '%s': a row of %llu bytes exceeds the writer's chunk of %u bytes",
				       t->name, (unsigned long long)t->row_bytes, CHUNK_BYTES);
			goto out_unlink;
		}
		for (uint64_t r = 0; r < t->n_rows; r += per) {
			uint64_t n = t->n_rows - r < per ? t->n_rows - r : per;
			if ((rc = fill(fill_ctx, i, r, n, buf)) || (rc = write_all(fd, buf, n * t->row_bytes, tmp)))
				goto out_unlink;
			*done += n * t->row_bytes;
			if (progress)
				progress(progress_ctx, *done, total);
		}
		if ((rc = write_all(fd, zeros, align_up(bytes, HS_GGUF_DEFAULT_ALIGNMENT) - bytes, tmp)))
			goto out_unlink;
	}
	if (fsync(fd) != 0 && errno != EINVAL) {
		rc = hs__error(EIO, "%s: fsync failed: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = hs__error(EIO, "%s: close failed: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	rc = 0;
	goto out_free;

out_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
out_free:
	free(buf);
	free(hdr.meta);
	return rc;
}

/* The padded data bytes of all tensors: what progress counts to. */
static uint64_t total_bytes(const struct hs_gguf_writer *w)
{
	uint64_t n = 0;
	for (int i = 0; i < w->n_t; i++)
		n = align_up(n + w->t[i].row_bytes * w->t[i].n_rows, HS_GGUF_DEFAULT_ALIGNMENT);
	return n;
}

static char *part_name(const char *path)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 6);

	if (tmp) {
		memcpy(tmp, path, plen);
		memcpy(tmp + plen, ".part", 6);
	}
	return tmp;
}

int hs__gguf_w_write(struct hs_gguf_writer *w, const char *path, hs_gguf_fill_fn fill, void *fill_ctx,
		     hs_gguf_progress_fn progress, void *progress_ctx)
{
	char *tmp = part_name(path);
	uint64_t done = 0;
	int rc;

	if (!tmp)
		return hs__error(ENOMEM, "GGUF writer: out of memory");
	if (w->failed) {
		rc = hs__error(ENOMEM, "%s: an earlier metadata or tensor call failed", path);
		goto out_free;
	}
	if ((rc = write_one(w, tmp, w, 0, w->n_t, fill, fill_ctx, progress, progress_ctx, &done, total_bytes(w))))
		goto out_free;
	if (rename(tmp, path) != 0) {
		rc = hs__error(EIO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
	}
out_free:
	free(tmp);
	return rc;
}

/* ---- split output, as llama-gguf-split writes it ------------------------ */

void hs__gguf_split_path(char *buf, size_t n, const char *prefix, int i, int count)
{
	snprintf(buf, n, "%s-%05d-of-%05d.gguf", prefix, i + 1, count);
}

/* The first tensor of each shard into first[] (room for w->n_t + 1; first[n]
 * = n_t), the count returned.  llama-gguf-split's rule: a tensor starts a
 * new shard when the shard's data (each tensor padded to the alignment)
 * would pass max_bytes with it, unless the shard is empty. */
static int plan_shards(const struct hs_gguf_writer *w, uint64_t max_bytes, int *first)
{
	uint64_t cur = 0;
	int n = 0;

	for (int i = 0; i < w->n_t; i++) {
		uint64_t b = align_up(w->t[i].row_bytes * w->t[i].n_rows, HS_GGUF_DEFAULT_ALIGNMENT);
		if (i == 0 || cur + b > max_bytes) {
			if (first)
				first[n] = i;
			n++;
			cur = 0;
		}
		cur += b;
	}
	if (n == 0) { /* no tensors: one shard of metadata, as llama-gguf-split writes */
		if (first)
			first[0] = 0;
		n = 1;
	}
	if (first)
		first[n] = w->n_t;
	return n;
}

int hs__gguf_w_shard_count(const struct hs_gguf_writer *w, uint64_t max_bytes)
{
	return plan_shards(w, max_bytes ? max_bytes : 1, NULL);
}

int hs__gguf_w_write_split(struct hs_gguf_writer *w, const char *prefix, uint64_t max_bytes, hs_gguf_fill_fn fill,
			   void *fill_ctx, hs_gguf_progress_fn progress, void *progress_ctx)
{
	const size_t len = strlen(prefix) + 32;
	int *first = malloc(sizeof *first * (size_t)(w->n_t + 2)), n = 0, written = 0, renamed = 0, rc = 0;
	char **path = NULL, **tmp = NULL;
	const uint64_t total = total_bytes(w);
	uint64_t done = 0;

	if (!first)
		return hs__error(ENOMEM, "GGUF writer: out of memory");
	if (w->failed) {
		rc = hs__error(ENOMEM, "%s: an earlier metadata or tensor call failed", prefix);
		goto out_free;
	}
	if (max_bytes == 0) {
		rc = hs__error(EINVAL, "%s: a shard size of 0 bytes", prefix);
		goto out_free;
	}
	n = plan_shards(w, max_bytes, first);
	if (n > 65535) { /* split.count is a uint16 */
		rc = hs__error(EINVAL, "%s: %d shards of at most %llu bytes; split.count allows 65535", prefix, n,
			       (unsigned long long)max_bytes);
		goto out_free;
	}
	path = calloc((size_t)n, sizeof *path);
	tmp = calloc((size_t)n, sizeof *tmp);
	if (!path || !tmp) {
		rc = hs__error(ENOMEM, "GGUF writer: out of memory");
		goto out_free;
	}
	for (int i = 0; i < n; i++) {
		if (!(path[i] = malloc(len)) || !(tmp[i] = malloc(len + 5))) {
			rc = hs__error(ENOMEM, "GGUF writer: out of memory");
			goto out_free;
		}
		hs__gguf_split_path(path[i], len, prefix, i, n);
		snprintf(tmp[i], len + 5, "%s.part", path[i]);
	}
	/* every shard to its .part first: the final names are touched only once
	 * all are written, so a failure leaves any earlier files as they were */
	for (int i = 0; i < n && !rc; i++) {
		struct hs_gguf_writer meta = { 0 };
		const uint16_t no = (uint16_t)i, count = (uint16_t)n;
		const int32_t tensors = w->n_t;
		/* the first shard carries the model's metadata, every shard the
		 * split keys, in the order llama-gguf-split leaves them */
		if (i == 0 && w->meta_len)
			rc = put(&meta, w->meta, w->meta_len);
		if (!rc) rc = hs__gguf_w_raw(&meta, "split.no", HS_GGUF_UINT16, &no, 2);
		if (!rc) rc = hs__gguf_w_raw(&meta, "split.tensors.count", HS_GGUF_INT32, &tensors, 4);
		if (!rc) rc = hs__gguf_w_raw(&meta, "split.count", HS_GGUF_UINT16, &count, 2);
		if (i == 0)
			meta.n_kv += w->n_kv;
		if (!rc && !(rc = write_one(w, tmp[i], &meta, first[i], first[i + 1], fill, fill_ctx, progress,
					    progress_ctx, &done, total)))
			written++;
		free(meta.meta);
	}
	for (int i = 0; i < n && !rc; i++) {
		if (rename(tmp[i], path[i]) != 0)
			rc = hs__error(EIO, "%s: cannot rename to %s: %s", tmp[i], path[i], strerror(errno));
		else
			renamed++;
	}
	if (rc) {
		for (int i = 0; i < renamed; i++)
			unlink(path[i]);
		for (int i = renamed; i < written; i++)
			unlink(tmp[i]);
	}
out_free:
	for (int i = 0; i < n && path; i++) {
		free(path[i]);
		free(tmp ? tmp[i] : NULL);
	}
	free(path);
	free(tmp);
	free(first);
	return rc;
}
