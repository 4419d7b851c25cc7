/* GGUF reader.  The file is untrusted: every read goes through a cursor that
 * checks the bytes are there, every count is bounded by the bytes left before
 * anything is allocated, and all size arithmetic is overflow-checked. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_kernels/formats.h"
#include "base/error.h"
#include "model/gguf.h"

#define MAX_NESTING 4      /* arrays of arrays of ... */
#define MAX_NAME 256       /* tensor name bytes (llama.cpp allows 63) */
/* Tensors are read in place, f32 values among them: an alignment that is
 * not a multiple of their 4 bytes would leave floats at odd addresses. */
#define MIN_ALIGNMENT 4

struct cursor {
	const uint8_t *base, *p, *end;
	const char *what;
};

static int short_read(struct cursor *c, const char *field, uint64_t need)
{
	return hs__error(EIO, "%s: truncated at byte %zu reading %s (%llu more bytes needed, %zu left)",
			 c->what, (size_t)(c->p - c->base), field, (unsigned long long)need,
			 (size_t)(c->end - c->p));
}

static int take(struct cursor *c, const char *field, uint64_t n, const uint8_t **at)
{
	if (n > (uint64_t)(c->end - c->p))
		return short_read(c, field, n);
	*at = c->p;
	c->p += n;
	return 0;
}

static int rd_u32(struct cursor *c, const char *field, uint32_t *v)
{
	const uint8_t *at = NULL;
	int rc = take(c, field, 4, &at);
	if (!rc)
		memcpy(v, at, 4);
	return rc;
}

static int rd_u64(struct cursor *c, const char *field, uint64_t *v)
{
	const uint8_t *at = NULL;
	int rc = take(c, field, 8, &at);
	if (!rc)
		memcpy(v, at, 8);
	return rc;
}

static int rd_str(struct cursor *c, const char *field, struct hs_gguf_str *s)
{
	const uint8_t *at = NULL;
	int rc = rd_u64(c, field, &s->n);
	if (!rc && (rc = take(c, field, s->n, &at)) == 0)
		s->p = (const char *)at;
	return rc;
}

static size_t scalar_size(int t)
{
	switch (t) {
	case HS_GGUF_UINT8: case HS_GGUF_INT8: case HS_GGUF_BOOL: return 1;
	case HS_GGUF_UINT16: case HS_GGUF_INT16: return 2;
	case HS_GGUF_UINT32: case HS_GGUF_INT32: case HS_GGUF_FLOAT32: return 4;
	case HS_GGUF_UINT64: case HS_GGUF_INT64: case HS_GGUF_FLOAT64: return 8;
	default: return 0;
	}
}

const char *hs__gguf_vtype_name(int t)
{
	static const char *names[] = { "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
				       "bool", "string", "array", "uint64", "int64", "float64" };
	return t >= 0 && t <= HS_GGUF_FLOAT64 ? names[t] : "unknown";
}

/* Skips one value of type t, checking every nested length. */
static int skip_value(struct cursor *c, const char *key, int t, int depth, int *arr_type, uint64_t *arr_n)
{
	const uint8_t *at = NULL;
	size_t sz = scalar_size(t);

	if (sz)
		return take(c, key, sz, &at);
	if (t == HS_GGUF_STRING) {
		struct hs_gguf_str s;
		return rd_str(c, key, &s);
	}
	if (t != HS_GGUF_ARRAY)
		return hs__error(EIO, "%s: key '%s' has unknown value type %d (0..12 are defined)", c->what, key, t);
	if (depth >= MAX_NESTING)
		return hs__error(EIO, "%s: key '%s' nests arrays deeper than %d", c->what, key, MAX_NESTING);

	uint32_t et;
	uint64_t n;
	int rc;
	if ((rc = rd_u32(c, key, &et)) || (rc = rd_u64(c, key, &n)))
		return rc;
	if (arr_type) {
		*arr_type = (int)et;
		*arr_n = n;
	}
	sz = scalar_size((int)et);
	if (sz) {
		if (n > (uint64_t)(c->end - c->p) / sz)
			return hs__error(EIO, "%s: key '%s' claims %llu %s elements, more than the %zu bytes left",
					 c->what, key, (unsigned long long)n, hs__gguf_vtype_name((int)et),
					 (size_t)(c->end - c->p));
		return take(c, key, n * sz, &at);
	}
	if (et != HS_GGUF_STRING && et != HS_GGUF_ARRAY)
		return hs__error(EIO, "%s: key '%s' is an array of unknown type %u", c->what, key, et);
	/* Each string or array element takes at least 8 bytes. */
	if (n > (uint64_t)(c->end - c->p) / 8)
		return hs__error(EIO, "%s: key '%s' claims %llu elements, more than the %zu bytes left", c->what,
				 key, (unsigned long long)n, (size_t)(c->end - c->p));
	for (uint64_t i = 0; i < n; i++)
		if ((rc = skip_value(c, key, (int)et, depth + 1, NULL, NULL)))
			return rc;
	return 0;
}

static int str_eq(struct hs_gguf_str s, const char *z)
{
	size_t n = strlen(z);
	return s.n == n && memcmp(s.p, z, n) == 0;
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return strcmp((*(struct hs_gguf_tensor *const *)a)->name, (*(struct hs_gguf_tensor *const *)b)->name);
}

static int cmp_key(const void *a, const void *b)
{
	const struct hs_gguf_kv *x = *(struct hs_gguf_kv *const *)a, *y = *(struct hs_gguf_kv *const *)b;
	uint64_t n = x->key.n < y->key.n ? x->key.n : y->key.n;
	int r = memcmp(x->key.p, y->key.p, n);
	return r ? r : (x->key.n > y->key.n) - (x->key.n < y->key.n);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
	const struct hs_gguf_tensor *x = *(struct hs_gguf_tensor *const *)a, *y = *(struct hs_gguf_tensor *const *)b;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Each tensor owns its bytes: data ranges that overlap would make a write
 * to one tensor's copy of the data change another, and are a sign of a
 * forged file.  Empty tensors own nothing. */
static int check_disjoint(struct hs_gguf *g, const char *what)
{
	struct hs_gguf_tensor **v;
	uint64_t n = 0;
	int rc = 0;

	if (g->n_tensors < 2)
		return 0;
	v = malloc(g->n_tensors * sizeof *v);
	if (!v)
		return hs__error(ENOMEM, "%s: out of memory", what);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].size)
			v[n++] = &g->tensors[i];
	qsort(v, n, sizeof *v, cmp_tensor_offset);
	for (uint64_t i = 1; i < n && !rc; i++)
		if (v[i - 1]->offset + v[i - 1]->size > v[i]->offset) /* both lie inside the file: no overflow */
			rc = hs__error(EIO, "%s: tensors '%s' [%llu, +%llu) and '%s' [%llu, +%llu) overlap", what,
				       v[i - 1]->name, (unsigned long long)v[i - 1]->offset,
				       (unsigned long long)v[i - 1]->size, v[i]->name, (unsigned long long)v[i]->offset,
				       (unsigned long long)v[i]->size);
	free(v);
	return rc;
}

/* Both lists must hold unique names (llama.cpp refuses duplicates too). */
static int check_unique(struct hs_gguf *g, const char *what)
{
	uint64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
	void **v;
	int rc = 0;

	if (n < 2)
		return 0;
	v = malloc(n * sizeof *v);
	if (!v)
		return hs__error(ENOMEM, "%s: out of memory", what);
	for (uint64_t i = 0; i < g->n_kv; i++)
		v[i] = &g->kv[i];
	qsort(v, g->n_kv, sizeof *v, cmp_key);
	for (uint64_t i = 1; i < g->n_kv && !rc; i++)
		if (cmp_key(&v[i - 1], &v[i]) == 0) {
			struct hs_gguf_kv *k = v[i];
			rc = hs__error(EIO, "%s: duplicate metadata key '%.*s'", what, (int)(k->key.n > 200 ? 200 : k->key.n),
				       k->key.p);
		}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		v[i] = &g->tensors[i];
	qsort(v, g->n_tensors, sizeof *v, cmp_tensor_name);
	for (uint64_t i = 1; i < g->n_tensors && !rc; i++)
		if (cmp_tensor_name(&v[i - 1], &v[i]) == 0)
			rc = hs__error(EIO, "%s: duplicate tensor name '%s'", what,
				       ((struct hs_gguf_tensor *)v[i])->name);
	free(v);
	return rc;
}

static int parse_tensor(struct cursor *c, struct hs_gguf *g, uint64_t i, struct hs_gguf_tensor *t)
{
	struct hs_gguf_str name;
	uint32_t n_dims, type;
	uint64_t nvals = 1;
	char field[64];
	int rc;

	snprintf(field, sizeof field, "tensor %llu name", (unsigned long long)i);
	if ((rc = rd_str(c, field, &name)))
		return rc;
	if (name.n == 0 || name.n >= MAX_NAME || memchr(name.p, 0, name.n))
		return hs__error(EIO, "%s: tensor %llu: name of %llu bytes (1..%d without NUL bytes allowed)", c->what,
				 (unsigned long long)i, (unsigned long long)name.n, MAX_NAME - 1);
	t->name = strndup(name.p, name.n);
	if (!t->name)
		return hs__error(ENOMEM, "%s: out of memory", c->what);
	snprintf(field, sizeof field, "tensor '%.40s' shape", t->name);
	if ((rc = rd_u32(c, field, &n_dims)))
		return rc;
	if (n_dims < 1 || n_dims > HS_GGUF_MAX_DIMS)
		return hs__error(EIO, "%s: tensor '%s': n_dims %u (1..%d allowed)", c->what, t->name, n_dims,
				 HS_GGUF_MAX_DIMS);
	t->n_dims = (int)n_dims;
	for (int d = 0; d < HS_GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d < (int)n_dims && (rc = rd_u64(c, field, &t->ne[d])))
			return rc;
		if (t->ne[d] > INT64_MAX || (t->ne[d] && nvals > INT64_MAX / t->ne[d]))
			return hs__error(EIO, "%s: tensor '%s': dimension %d = %llu makes too many elements", c->what,
					 t->name, d, (unsigned long long)t->ne[d]);
		nvals *= t->ne[d];
	}
	snprintf(field, sizeof field, "tensor '%.40s' type", t->name);
	if ((rc = rd_u32(c, field, &type)))
		return rc;
	if (!hs__type_name((int)type))
		return hs__error(EIO, "%s: tensor '%s': ggml type %u is not one ggml defines",
				 c->what, t->name, type);
	t->type = (int)type;
	if (t->ne[0] % hs__type_block_values(t->type))
		return hs__error(EIO, "%s: tensor '%s': row length %llu is not a multiple of %s's block of %zu",
				 c->what, t->name, (unsigned long long)t->ne[0], hs__type_name(t->type),
				 hs__type_block_values(t->type));
	snprintf(field, sizeof field, "tensor '%.40s' offset", t->name);
	if ((rc = rd_u64(c, field, &t->offset)))
		return rc;
	/* bytes = (values / block) * block bytes; nvals < 2^63, block bytes <= 34 */
	uint64_t blocks = nvals / hs__type_block_values(t->type);
	if (blocks > UINT64_MAX / hs__type_block_bytes(t->type))
		return hs__error(EIO, "%s: tensor '%s' is too large", c->what, t->name);
	t->size = blocks * hs__type_block_bytes(t->type);
	(void)g;
	return 0;
}

int hs__gguf_parse(const void *buf, size_t size, const char *what, struct hs_gguf **out)
{
	struct cursor c = { buf, buf, (const uint8_t *)buf + size, what };
	struct hs_gguf *g;
	const uint8_t *magic = NULL;
	int rc;

	*out = NULL;
	g = calloc(1, sizeof *g);
	if (!g)
		return hs__error(ENOMEM, "%s: out of memory", what);
	g->base = buf;
	g->size = size;
	g->alignment = HS_GGUF_DEFAULT_ALIGNMENT;
	g->shards = calloc(1, sizeof *g->shards);
	if (!g->shards || !(g->shards[0].path = strdup(what))) {
		rc = hs__error(ENOMEM, "%s: out of memory", what);
		goto out_free;
	}
	g->n_shards = 1;
	g->shards[0].base = buf;
	g->shards[0].size = size;
	if ((rc = take(&c, "magic", 4, &magic)))
		goto out_free;
	if (memcmp(magic, "GGUF", 4) != 0) {
		rc = hs__error(EIO, "%s: not a GGUF file (magic bytes are not 'GGUF')", what);
		goto out_free;
	}
	if ((rc = rd_u32(&c, "version", &g->version)))
		goto out_free;
	if (g->version != 2 && g->version != 3) {
		rc = hs__error(EIO, "%s: GGUF version %u (2 and 3 are read)%s", what, g->version,
			       g->version > 0xffff ? "; a big-endian file?" : "");
		goto out_free;
	}
	if ((rc = rd_u64(&c, "tensor count", &g->n_tensors)) || (rc = rd_u64(&c, "metadata count", &g->n_kv)))
		goto out_free;
	/* A key/value takes at least 8+4 bytes, a tensor info at least 8+4+8+4+8. */
	if (g->n_kv > (uint64_t)(c.end - c.p) / 12) {
		rc = hs__error(EIO, "%s: metadata count %llu is more than the %zu bytes left can hold", what,
			       (unsigned long long)g->n_kv, (size_t)(c.end - c.p));
		goto out_free;
	}
	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
	if (!g->kv) {
		rc = hs__error(ENOMEM, "%s: out of memory", what);
		goto out_free;
	}
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct hs_gguf_kv *kv = &g->kv[i];
		char key[128];
		uint32_t t;

		snprintf(key, sizeof key, "metadata %llu key", (unsigned long long)i);
		if ((rc = rd_str(&c, key, &kv->key)))
			goto out_free;
		snprintf(key, sizeof key, "%.*s", (int)(kv->key.n > 100 ? 100 : kv->key.n), kv->key.p);
		if (kv->key.n == 0 || memchr(kv->key.p, 0, kv->key.n)) {
			rc = hs__error(EIO, "%s: metadata %llu: empty key or a key with NUL bytes", what,
				       (unsigned long long)i);
			goto out_free;
		}
		if ((rc = rd_u32(&c, key, &t)))
			goto out_free;
		kv->type = (int)t;
		kv->value = c.p;
		if ((rc = skip_value(&c, key, kv->type, 0, &kv->arr_type, &kv->arr_n)))
			goto out_free;
		if (str_eq(kv->key, "general.alignment")) {
			if (kv->type != HS_GGUF_UINT32) {
				rc = hs__error(EIO, "%s: general.alignment is %s, not uint32", what, hs__gguf_vtype_name(kv->type));
				goto out_free;
			}
			memcpy(&g->alignment, kv->value, 4);
			if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) || g->alignment > (1u << 20)) {
				rc = hs__error(EIO, "%s: general.alignment %u (a power of two up to 1 MiB needed)", what,
					       g->alignment);
				goto out_free;
			}
			if (g->alignment % MIN_ALIGNMENT) {
				rc = hs__error(EIO,
					       "%s: general.alignment %u is not a multiple of %d, the largest element "
					       "(f32) read in place",
					       what, g->alignment, MIN_ALIGNMENT);
				goto out_free;
			}
		}
	}
	if (g->n_tensors > (uint64_t)(c.end - c.p) / 32) {
		rc = hs__error(EIO, "%s: tensor count %llu is more than the %zu bytes left can hold", what,
			       (unsigned long long)g->n_tensors, (size_t)(c.end - c.p));
		goto out_free;
	}
	g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
	if (!g->tensors) {
		rc = hs__error(ENOMEM, "%s: out of memory", what);
		goto out_free;
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if ((rc = parse_tensor(&c, g, i, &g->tensors[i])))
			goto out_free;
	g->data_offset = (uint64_t)(c.p - c.base);
	g->data_offset += (g->alignment - g->data_offset % g->alignment) % g->alignment;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct hs_gguf_tensor *t = &g->tensors[i];
		if (t->offset % g->alignment) {
			rc = hs__error(EIO, "%s: tensor '%s': data offset %llu is not a multiple of the alignment %u",
				       what, t->name, (unsigned long long)t->offset, g->alignment);
			goto out_free;
		}
		if (g->data_offset > size || t->offset > size - g->data_offset ||
		    t->size > size - g->data_offset - t->offset) {
			rc = hs__error(EIO, "%s: tensor '%s': data [%llu, +%llu) lies past the end of the file (%zu bytes)",
				       what, t->name, (unsigned long long)(g->data_offset + t->offset),
				       (unsigned long long)t->size, size);
			goto out_free;
		}
		t->offset += g->data_offset;
		t->data = c.base + t->offset;
	}
	if ((rc = check_unique(g, what)) || (rc = check_disjoint(g, what)))
		goto out_free;
	g->shards[0].n_tensors = g->n_tensors;
	*out = g;
	return 0;

out_free:
	hs__gguf_close(g);
	return rc;
}

/* One file, mapped and parsed. */
static int open_one(const char *path, struct hs_gguf **out)
{
	struct stat st;
	void *map;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return hs__error(errno == ENOENT ? ENOENT : EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return hs__error(EIO, "%s: not a regular file", path);
	}
	if (st.st_size < 24) {
		close(fd);
		return hs__error(EIO, "%s: %lld bytes is too short for a GGUF header (24 bytes)", path,
				 (long long)st.st_size);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return hs__error(EIO, "%s: cannot map: %s", path, strerror(errno));
	rc = hs__gguf_parse(map, (size_t)st.st_size, path, out);
	if (rc) {
		munmap(map, (size_t)st.st_size);
		return rc;
	}
	(*out)->mapped = 1;
	return 0;
}

/* ---- split models (llama-gguf-split) ------------------------------------ */

/* llama.cpp names shard i (0-based) of n "PREFIX-%05d-of-%05d.gguf" with
 * 1-based numbers: 20 bytes after the prefix. */
#define SPLIT_SUFFIX_LEN 20
#define SPLIT_MAX 65535 /* split.count is a uint16 */

/* The prefix length of a shard's name and the shard number and count the
 * name gives; 0 when the name is not one of a shard. */
static int split_name(const char *path, size_t *prefix, unsigned *no, unsigned *count)
{
	size_t n = strlen(path);
	const char *s = n < SPLIT_SUFFIX_LEN ? path : path + n - SPLIT_SUFFIX_LEN;

	if (n < SPLIT_SUFFIX_LEN || s[0] != '-' || memcmp(s + 6, "-of-", 4) || memcmp(s + 15, ".gguf", 5))
		return 0;
	*no = *count = 0;
	for (int i = 0; i < 5; i++) {
		if (s[1 + i] < '0' || s[1 + i] > '9' || s[10 + i] < '0' || s[10 + i] > '9')
			return 0;
		*no = *no * 10 + (unsigned)(s[1 + i] - '0');
		*count = *count * 10 + (unsigned)(s[10 + i] - '0');
	}
	*prefix = n - SPLIT_SUFFIX_LEN;
	return 1;
}

struct split_keys {
	uint64_t no, count, tensors;
};

/* split.no, split.count and split.tensors.count of a shard; llama-gguf-split
 * writes uint16, uint16 and int32, any non-negative integer is taken.  1 if
 * the file has none (not a shard), 0 if it has all three, else an error. */
static int split_keys(const struct hs_gguf *g, const char *path, struct split_keys *k)
{
	static const char *const key[3] = { "split.no", "split.count", "split.tensors.count" };
	uint64_t *v[3] = { &k->no, &k->count, &k->tensors };
	int have = 0;

	for (int i = 0; i < 3; i++)
		have += hs__gguf_find_kv(g, key[i]) != NULL;
	if (!have)
		return 1;
	for (int i = 0; i < 3; i++) {
		const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, key[i]);
		if (!kv)
			return hs__error(EIO, "%s: %s is missing (the file has the other split keys)", path, key[i]);
		if (hs__gguf_get_u64(g, key[i], v[i]))
			return hs__error(EIO, "%s: %s is %s, not a count (uint16 or int32 as llama-gguf-split writes)",
					 path, key[i], scalar_size(kv->type) && kv->type != HS_GGUF_FLOAT32 &&
					 kv->type != HS_GGUF_FLOAT64 && kv->type != HS_GGUF_BOOL ? "negative" :
					 hs__gguf_vtype_name(kv->type));
	}
	if (k->count < 1 || k->count > SPLIT_MAX)
		return hs__error(EIO, "%s: split.count %llu (1..%d allowed)", path, (unsigned long long)k->count, SPLIT_MAX);
	if (k->no >= k->count)
		return hs__error(EIO, "%s: split.no %llu, but split.count is %llu (split.no counts from 0)", path,
				 (unsigned long long)k->no, (unsigned long long)k->count);
	return 0;
}

/* Joins the shards into the first: its metadata, every shard's tensors in
 * shard order, each shard's mapping.  part[] is consumed (freed or joined)
 * whatever the result. */
static int join_shards(struct hs_gguf **part, int n, uint64_t n_all, struct hs_gguf **out)
{
	struct hs_gguf *g = part[0];
	struct hs_gguf_tensor *all = calloc(n_all ? n_all : 1, sizeof *all), **v = NULL;
	struct hs_gguf_shard *sh = calloc((size_t)n, sizeof *sh);
	uint64_t k = 0;
	int rc = 0;

	if (!all || !sh || (n_all > 1 && !(v = malloc(n_all * sizeof *v)))) {
		rc = hs__error(ENOMEM, "%s: out of memory", g->shards[0].path);
		free(all);
		free(sh);
		goto out_close;
	}
	/* the names move from the parts to the whole */
	for (int i = 0; i < n; i++) {
		for (uint64_t t = 0; t < part[i]->n_tensors; t++, k++) {
			all[k] = part[i]->tensors[t];
			all[k].shard = i;
			part[i]->tensors[t].name = NULL;
		}
		sh[i] = part[i]->shards[0];
		part[i]->shards[0].path = NULL;
		part[i]->mapped = 0; /* the mapping is the whole's now */
	}
	for (int i = 1; i < n; i++) {
		g->size += part[i]->size;
		hs__gguf_close(part[i]);
		part[i] = NULL;
	}
	for (uint64_t t = 0; t < g->n_tensors; t++)
		free(g->tensors[t].name);
	free(g->tensors);
	free(g->shards[0].path);
	free(g->shards);
	g->tensors = all;
	g->n_tensors = n_all;
	g->shards = sh;
	g->n_shards = n;
	g->mapped = 1;
	/* each shard's names were unique; one name in two shards is not */
	for (uint64_t t = 0; v && t < n_all; t++)
		v[t] = &all[t];
	if (v)
		qsort(v, n_all, sizeof *v, cmp_tensor_name);
	for (uint64_t t = 1; v && t < n_all && !rc; t++)
		if (strcmp(v[t - 1]->name, v[t]->name) == 0) {
			const struct hs_gguf_tensor *a = v[t - 1]->shard < v[t]->shard ? v[t - 1] : v[t],
						    *b = a == v[t] ? v[t - 1] : v[t];
			rc = hs__error(EIO, "%s: tensor '%s' is in %s too", sh[b->shard].path, b->name, sh[a->shard].path);
		}
	free(v);
	if (rc)
		goto out_close;
	*out = g;
	return 0;

out_close:
	for (int i = 0; i < n; i++)
		hs__gguf_close(part[i]);
	return rc;
}

/* The other shards of the split model that `first` (opened from path) is
 * shard k.no of: each opened and checked against it, then joined. */
static int open_split(const char *path, struct hs_gguf *opened, const struct split_keys *k, struct hs_gguf **out)
{
	const int n = (int)k->count;
	struct hs_gguf **part = calloc((size_t)n, sizeof *part);
	size_t prefix = 0;
	unsigned name_no = 0, name_count = 0;
	uint64_t n_all = 0;
	char *name = NULL;
	int rc = 0;

	if (!part) {
		hs__gguf_close(opened);
		return hs__error(ENOMEM, "%s: out of memory", path);
	}
	part[k->no] = opened;
	if (!split_name(path, &prefix, &name_no, &name_count)) {
		rc = hs__error(EIO, "%s: shard %llu of %d (split.no, split.count), but the name does not end in "
				    "-%05llu-of-%05d.gguf, so the other shards cannot be found",
			       path, (unsigned long long)k->no + 1, n, (unsigned long long)k->no + 1, n);
		goto out_close;
	}
	if (name_no != k->no + 1 || name_count != (unsigned)n) {
		rc = hs__error(EIO, "%s: split.no %llu and split.count %d make it shard -%05llu-of-%05d.gguf, not the "
				    "one its name says",
			       path, (unsigned long long)k->no, n, (unsigned long long)k->no + 1, n);
		goto out_close;
	}
	name = malloc(prefix + 32); /* room for any int, though a count fits 5 digits */
	if (!name) {
		rc = hs__error(ENOMEM, "%s: out of memory", path);
		goto out_close;
	}
	memcpy(name, path, prefix);
	for (int i = 0; i < n; i++) {
		struct split_keys ki;
		if (i == (int)k->no)
			continue;
		snprintf(name + prefix, 32, "-%05d-of-%05d.gguf", i + 1, n);
		if ((rc = open_one(name, &part[i]))) {
			if (rc == -ENOENT)
				rc = hs__error(ENOENT, "%s: missing (split.count %d in %s)", name, n, path);
			goto out_close;
		}
		if ((rc = split_keys(part[i], name, &ki)) < 0)
			goto out_close;
		if (rc) {
			rc = hs__error(EIO, "%s: no split keys, so not shard %d of %s's model", name, i + 1, path);
			goto out_close;
		}
		if (ki.no != (uint64_t)i) {
			rc = hs__error(EIO, "%s: split.no %llu (shard %llu), but the name says shard %d", name,
				       (unsigned long long)ki.no, (unsigned long long)ki.no + 1, i + 1);
			goto out_close;
		}
		if (ki.count != (uint64_t)n) {
			rc = hs__error(EIO, "%s: split.count %llu, but %s says %d", name, (unsigned long long)ki.count, path, n);
			goto out_close;
		}
		if (ki.tensors != k->tensors) {
			rc = hs__error(EIO, "%s: split.tensors.count %llu, but %s says %llu: a shard of another model", name,
				       (unsigned long long)ki.tensors, path, (unsigned long long)k->tensors);
			goto out_close;
		}
	}
	for (int i = 0; i < n; i++)
		n_all += part[i]->n_tensors;
	if (n_all != k->tensors) {
		rc = hs__error(EIO, "%s: split.tensors.count %llu, but its %d shards hold %llu tensors", part[0]->shards[0].path,
			       (unsigned long long)k->tensors, n, (unsigned long long)n_all);
		goto out_close;
	}
	free(name);
	rc = join_shards(part, n, n_all, out);
	free(part);
	return rc;

out_close:
	for (int i = 0; i < n; i++)
		hs__gguf_close(part[i]);
	free(part);
	free(name);
	return rc;
}

int hs__gguf_open(const char *path, struct hs_gguf **out)
{
	struct hs_gguf *g;
	struct split_keys k;
	int rc;

	*out = NULL;
	if ((rc = open_one(path, &g)))
		return rc;
	if ((rc = split_keys(g, path, &k)) < 0) {
		hs__gguf_close(g);
		return rc;
	}
	if (rc == 1) { /* not split */
		*out = g;
		return 0;
	}
	if (k.count == 1) { /* llama-gguf-split's one shard: a whole file with split keys */
		if (k.tensors != g->n_tensors) {
			rc = hs__error(EIO, "%s: split.tensors.count %llu, but the file holds %llu tensors", path,
				       (unsigned long long)k.tensors, (unsigned long long)g->n_tensors);
			hs__gguf_close(g);
			return rc;
		}
		*out = g;
		return 0;
	}
	return open_split(path, g, &k, out);
}

int hs__gguf_locate(const struct hs_gguf *g, const void *p, size_t n, const char **path, uint64_t *offset)
{
	const uintptr_t a = (uintptr_t)p;

	for (int i = 0; i < g->n_shards; i++) {
		const struct hs_gguf_shard *s = &g->shards[i];
		const uintptr_t b = (uintptr_t)s->base;
		if (a >= b && a - b <= s->size && n <= s->size - (a - b)) {
			if (path)
				*path = s->path;
			if (offset)
				*offset = a - b;
			return i;
		}
	}
	return hs__error(EINVAL, "%zu bytes at %p lie in none of the model's %d files", n, p, g->n_shards);
}

void hs__gguf_close(struct hs_gguf *g)
{
	if (!g)
		return;
	for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++)
		free(g->tensors[i].name);
	free(g->tensors);
	free(g->kv);
	for (int i = 0; g->shards && i < g->n_shards; i++) {
		if (g->mapped)
			munmap((void *)g->shards[i].base, g->shards[i].size);
		free(g->shards[i].path);
	}
	free(g->shards);
	free(g);
}

const struct hs_gguf_kv *hs__gguf_find_kv(const struct hs_gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (str_eq(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const struct hs_gguf_tensor *hs__gguf_find_tensor(const struct hs_gguf *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (strcmp(g->tensors[i].name, name) == 0)
			return &g->tensors[i];
	return NULL;
}

int hs__gguf_get_u64(const struct hs_gguf *g, const char *key, uint64_t *v)
{
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, key);
	int64_t s = 0;
	uint64_t u = 0;

	if (!kv)
		return -ENOENT;
	switch (kv->type) {
	case HS_GGUF_UINT8: u = kv->value[0]; break;
	case HS_GGUF_INT8: s = (int8_t)kv->value[0]; break;
	case HS_GGUF_UINT16: { uint16_t x; memcpy(&x, kv->value, 2); u = x; break; }
	case HS_GGUF_INT16: { int16_t x; memcpy(&x, kv->value, 2); s = x; break; }
	case HS_GGUF_UINT32: { uint32_t x; memcpy(&x, kv->value, 4); u = x; break; }
	case HS_GGUF_INT32: { int32_t x; memcpy(&x, kv->value, 4); s = x; break; }
	case HS_GGUF_UINT64: memcpy(&u, kv->value, 8); break;
	case HS_GGUF_INT64: memcpy(&s, kv->value, 8); break;
	default: return hs__error(EINVAL, "metadata '%s' is %s, not an integer", key, hs__gguf_vtype_name(kv->type));
	}
	if (s < 0)
		return hs__error(EINVAL, "metadata '%s' is negative (%lld)", key, (long long)s);
	*v = s ? (uint64_t)s : u;
	return 0;
}

int hs__gguf_get_f32(const struct hs_gguf *g, const char *key, float *v)
{
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->type == HS_GGUF_FLOAT32) {
		memcpy(v, kv->value, 4);
		return 0;
	}
	if (kv->type == HS_GGUF_FLOAT64) {
		double d;
		memcpy(&d, kv->value, 8);
		*v = (float)d;
		return 0;
	}
	return hs__error(EINVAL, "metadata '%s' is %s, not a float", key, hs__gguf_vtype_name(kv->type));
}

int hs__gguf_get_str(const struct hs_gguf *g, const char *key, struct hs_gguf_str *v)
{
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->type != HS_GGUF_STRING)
		return hs__error(EINVAL, "metadata '%s' is %s, not a string", key, hs__gguf_vtype_name(kv->type));
	memcpy(&v->n, kv->value, 8);
	v->p = (const char *)kv->value + 8;
	return 0;
}

int hs__gguf_get_arr_str(const struct hs_gguf_kv *kv, uint64_t i, struct hs_gguf_str *v)
{
	const uint8_t *p;

	if (kv->type != HS_GGUF_ARRAY || kv->arr_type != HS_GGUF_STRING || i >= kv->arr_n)
		return -EINVAL;
	p = kv->value + 12; /* element type, count */
	for (uint64_t k = 0;; k++) {
		/* lengths were checked by the parser */
		memcpy(&v->n, p, 8);
		if (k == i) {
			v->p = (const char *)p + 8;
			return 0;
		}
		p += 8 + v->n;
	}
}
