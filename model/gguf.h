/* GGUF v2/v3 files as llama.cpp reads and writes them (little-endian):
 * header, metadata key/values, tensor infos, aligned tensor data.  A model
 * split by llama-gguf-split (PREFIX-00001-of-0000N.gguf ...: each shard a
 * whole GGUF file with the keys split.no, split.count and
 * split.tensors.count, the other metadata in the first) reads as one. */
#ifndef HS_GGUF_H
#define HS_GGUF_H

#include <stddef.h>
#include <stdint.h>

enum hs_gguf_vtype {
	HS_GGUF_UINT8 = 0, HS_GGUF_INT8 = 1, HS_GGUF_UINT16 = 2, HS_GGUF_INT16 = 3,
	HS_GGUF_UINT32 = 4, HS_GGUF_INT32 = 5, HS_GGUF_FLOAT32 = 6, HS_GGUF_BOOL = 7,
	HS_GGUF_STRING = 8, HS_GGUF_ARRAY = 9, HS_GGUF_UINT64 = 10, HS_GGUF_INT64 = 11,
	HS_GGUF_FLOAT64 = 12,
};

#define HS_GGUF_MAX_DIMS 4
#define HS_GGUF_DEFAULT_ALIGNMENT 32

struct hs_gguf_str {
	const char *p; /* not NUL-terminated; points into the file */
	uint64_t n;
};

struct hs_gguf_kv {
	struct hs_gguf_str key;
	int type;                  /* enum hs_gguf_vtype */
	const uint8_t *value;      /* the raw value bytes in the file */
	int arr_type;              /* for arrays: element type */
	uint64_t arr_n;            /* for arrays: element count */
};

struct hs_gguf_tensor {
	char *name;                /* NUL-terminated copy */
	int n_dims;
	uint64_t ne[HS_GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims 1 */
	int type;                  /* ggml type id (cpu_kernels/formats.h) */
	int shard;                 /* the file that holds its data: index into hs_gguf.shards */
	uint64_t offset;           /* from the start of that file */
	uint64_t size;             /* bytes */
	const uint8_t *data;       /* in that file's mapping */
};

/* One file of the model: a plain GGUF has one, a split model one per shard. */
struct hs_gguf_shard {
	char *path;                /* as opened (a parsed buffer: its name in messages) */
	const uint8_t *base;       /* the whole file */
	size_t size;
	uint64_t n_tensors;        /* tensors whose data it holds */
};

struct hs_gguf {
	const uint8_t *base;       /* the file of the metadata (split: the first shard) */
	size_t size;               /* bytes of every file together (the model's file_bytes) */
	int mapped;                /* the shards are mmaps of their files (else caller's memory) */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;      /* start of the tensor data section */
	uint64_t n_kv, n_tensors;
	struct hs_gguf_kv *kv;
	struct hs_gguf_tensor *tensors; /* split: every shard's, in shard order */
	int n_shards;              /* 1 unless split */
	struct hs_gguf_shard *shards; /* shards[0] holds the metadata (kv points into it) */
};

/* Maps and parses a file; every count, length, type and offset is checked
 * against the file before use.  -EIO with a message naming the file and the
 * field for a broken file, -ENOMEM.  A shard of a split model (any of
 * them) opens the whole model: the other shards are found by the
 * -NNNNN-of-NNNNN.gguf name in the same folder, each must say it is that
 * shard of that many with the same tensor count, and together they hold
 * split.tensors.count tensors, no name twice; -ENOENT or -EIO naming the
 * shard file that is missing or wrong.  Free with hs__gguf_close(). */
int hs__gguf_open(const char *path, struct hs_gguf **out);
/* Parses `size` bytes at `buf` (not copied: they must outlive the result).
 * `what` names the input in messages.  One file: split keys are not
 * followed.  Used by the fuzz target and tests. */
int hs__gguf_parse(const void *buf, size_t size, const char *what, struct hs_gguf **out);
void hs__gguf_close(struct hs_gguf *g);

/* The file that holds bytes [p, p + n) of one of g's mappings (a tensor:
 * its data and size): its shard index, with *path (owned by g) and the file
 * offset of p; -EINVAL when no mapping holds the whole range. */
int hs__gguf_locate(const struct hs_gguf *g, const void *p, size_t n, const char **path, uint64_t *offset);

const struct hs_gguf_kv *hs__gguf_find_kv(const struct hs_gguf *g, const char *key);
const struct hs_gguf_tensor *hs__gguf_find_tensor(const struct hs_gguf *g, const char *name);

/* Typed reads of a key; -ENOENT if absent, -EINVAL if of another type (any
 * integer type converts to u64 when the value is not negative). */
int hs__gguf_get_u64(const struct hs_gguf *g, const char *key, uint64_t *v);
int hs__gguf_get_f32(const struct hs_gguf *g, const char *key, float *v);
int hs__gguf_get_str(const struct hs_gguf *g, const char *key, struct hs_gguf_str *v);
/* A string array element (i < arr_n); the walk is linear in i. */
int hs__gguf_get_arr_str(const struct hs_gguf_kv *kv, uint64_t i, struct hs_gguf_str *v);

const char *hs__gguf_vtype_name(int type);

#endif
