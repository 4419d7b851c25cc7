/* Sequence state files (seq-state.h).  Little-endian, as the machines
 * hotset runs on:
 *
 *   header (64 bytes): magic "HSSEQST\0", u32 version (1), u32 header bytes
 *     (64), u64 model id, u32 KV type (ggml id), u32 bytes of one cell's K
 *     (or V), i32 layers, i32 next position, i32 lost_below, i32 tokens,
 *     u32 sections, 12 bytes zero
 *   i32 token ids [tokens]
 *   sections: u32 kind, i32 layer, u64 body bytes, body
 *     kind 1 (attention KV): i32 n, i32 positions[n] ascending, then per
 *       cell its K row and its V row (cell bytes each)
 *     kinds 2.. are for the states of other layer kinds (recurrent layers):
 *       this version writes none and refuses to read them
 *
 * A file is checked whole (pass 1) before the sequence is touched (pass 2
 * reads it again and puts the cells in). */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/jsonio.h"
#include "cpu_kernels/formats.h"
#include "model/gguf.h"
#include "model/model.h"
#include "runtime/seq-state.h"

#define MAGIC "HSSEQST"
#define STATE_VERSION 1
#define HEADER_BYTES 64
#define KIND_KV 1
#define CHUNK 4096 /* cells read or written at a time: bounds the host buffer */

struct header {
	char magic[8];
	uint32_t version, header_bytes;
	uint64_t model_id;
	uint32_t kv_type, cell_bytes;
	int32_t n_layers, n_pos, lost_below, n_tokens;
	uint32_t n_sections;
	uint8_t zero[12];
};
_Static_assert(sizeof(struct header) == HEADER_BYTES, "the header is 64 bytes");

struct section {
	uint32_t kind;
	int32_t layer;
	uint64_t bytes;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The model's identity: its sizes, then every tensor's name, shape, type
 * and first 32 bytes (two files of one architecture and shape with other
 * weights differ there; reading one page per tensor costs nothing). */
static uint64_t model_id(const struct hs_fwd *f)
{
	const struct hs_gguf *g = hs__model_gguf(f->rt->m);
	const struct hs_hparams *hp = f->hp;
	const char *arch = hs_model_info(f->rt->m)->arch;
	int32_t sizes[] = { hp->n_vocab,  hp->n_embd, hp->n_layers,   hp->n_head,     hp->n_head_kv,
			    hp->head_dim, hp->n_rot,  hp->swa_window, hp->n_ctx_train };
	uint64_t h = fnv(0xcbf29ce484222325ull, arch, strlen(arch) + 1);

	h = fnv(h, sizes, sizeof sizes);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct hs_gguf_tensor *t = &g->tensors[i];
		int32_t shape[2 + HS_GGUF_MAX_DIMS] = { t->type, t->n_dims };
		for (int d = 0; d < t->n_dims && d < HS_GGUF_MAX_DIMS; d++)
			shape[2 + d] = (int32_t)t->ne[d];
		h = fnv(h, t->name, strlen(t->name) + 1);
		h = fnv(h, shape, sizeof shape);
		h = fnv(h, t->data, t->size < 32 ? t->size : 32);
	}
	return h;
}

/* ---- writing ------------------------------------------------------------------ */

int hs__seq_state_save(struct hs_fwd *f, int seq, const struct hs_seq_head *h, const int32_t *tokens, const char *path)
{
	const size_t cb = hs__fwd_cell_bytes(f);
	const int L = f->hp->n_layers;
	struct hs_fwd_cells held = { 0 }, cells = { 0 };
	struct header hd = { .version = STATE_VERSION,
			     .header_bytes = HEADER_BYTES,
			     .model_id = model_id(f),
			     .kv_type = (uint32_t)f->kv_type,
			     .cell_bytes = (uint32_t)cb,
			     .n_layers = L,
			     .n_pos = h->n_pos,
			     .lost_below = h->lost_below,
			     .n_tokens = h->n_tokens,
			     .n_sections = (uint32_t)L };
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 6);
	int rc = 0, err = 0;
	FILE *fp = NULL;

	memcpy(hd.magic, MAGIC, sizeof MAGIC);
	if (!tmp)
		return hs__error(ENOMEM, "%s: out of memory", path);
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".part", 6);
	if (!(fp = fopen(tmp, "wb"))) {
		rc = hs__error(EIO, "%s: cannot create: %s", tmp, strerror(errno));
		goto out_free;
	}
	if (fwrite(&hd, sizeof hd, 1, fp) != 1 ||
	    (h->n_tokens && fwrite(tokens, sizeof *tokens, h->n_tokens, fp) != (size_t)h->n_tokens))
		err = errno ? errno : EIO;
	for (int l = 0; l < L && !err && !rc; l++) {
		/* the positions first (the section's count), then the rows in chunks */
		if ((rc = hs__fwd_cells_get(f, l, seq, 0, h->n_pos, 0, &held)))
			break;
		const int n = held.n;
		const int32_t *pos = held.pos;
		struct section sec = { KIND_KV, l, 4 + (uint64_t)n * (4 + 2 * cb) };
		if (fwrite(&sec, sizeof sec, 1, fp) != 1 || fwrite(&n, sizeof n, 1, fp) != 1 ||
		    (n && fwrite(pos, sizeof *pos, n, fp) != (size_t)n))
			err = errno ? errno : EIO;
		for (int i = 0; i < n && !err && !rc; i += CHUNK) {
			int j = n - i > CHUNK ? i + CHUNK : n;
			if ((rc = hs__fwd_cells_get(f, l, seq, pos[i], pos[j - 1] + 1, 1, &cells)))
				break;
			HS_ASSERT(cells.n == j - i);
			for (int k = 0; k < cells.n && !err; k++)
				if (fwrite(cells.k + k * cb, cb, 1, fp) != 1 ||
				    fwrite(cells.v + k * cb, cb, 1, fp) != 1)
					err = errno ? errno : EIO;
		}
	}
	if ((err = hs__finish_file(fp, err, tmp, rc ? NULL : path)) && !rc)
		rc = hs__error(EIO, "%s: %s", path, strerror(err));
out_free:
	hs__fwd_cells_free(&held);
	hs__fwd_cells_free(&cells);
	free(tmp);
	return rc;
}

/* ---- reading ------------------------------------------------------------------ */

struct reader {
	FILE *fp;
	const char *path;
	uint64_t left; /* bytes of the file not read yet */
};

static int get(struct reader *r, void *p, uint64_t bytes, const char *what)
{
	if (bytes > r->left)
		return hs__error(EIO, "%s: truncated: %s needs %llu bytes, %llu left", r->path, what,
				 (unsigned long long)bytes, (unsigned long long)r->left);
	if (bytes && fread(p, bytes, 1, r->fp) != 1)
		return hs__error(EIO, "%s: read error in %s", r->path, what);
	r->left -= bytes;
	return 0;
}

/* A cell's K or V row holds only finite values (and Q8_0 scales). */
static int row_finite(int type, const uint8_t *p, size_t bytes)
{
	if (type == HS_TYPE_F32) {
		for (size_t i = 0; i + 4 <= bytes; i += 4) {
			float x;
			memcpy(&x, p + i, 4);
			if (!isfinite(x))
				return 0;
		}
		return 1;
	}
	const size_t step =
		type == HS_TYPE_Q8_0 ? hs__type_row_bytes(HS_TYPE_Q8_0, 32) : 2; /* the scale leads a block */
	for (size_t i = 0; i + 2 <= bytes; i += step) {
		uint16_t x;
		memcpy(&x, p + i, 2);
		if ((x & 0x7c00) == 0x7c00)
			return 0;
	}
	return 1;
}

/* One pass over the sections: checks every field (pass 1), or puts the
 * cells into seq (apply). */
static int walk(struct hs_fwd *f, int seq, struct reader *r, const struct header *hd, int apply)
{
	const size_t cb = hs__fwd_cell_bytes(f);
	const int L = f->hp->n_layers;
	struct hs_fwd_cells cells = { 0 };
	int32_t *pos = NULL;
	uint8_t *row = NULL;
	char *seen = calloc(L, 1);
	int rc = 0;

	if (!seen || !(row = malloc(2 * cb)) || !(pos = malloc(sizeof *pos * (size_t)(hd->n_pos ? hd->n_pos : 1)))) {
		rc = hs__error(ENOMEM, "%s: out of memory", r->path);
		goto out_free;
	}
	for (uint32_t k = 0; k < hd->n_sections && !rc; k++) {
		struct section sec;
		int32_t n;
		if ((rc = get(r, &sec, sizeof sec, "a section header")))
			break;
		if (sec.kind != KIND_KV) {
			rc = hs__error(ENOTSUP,
				       "%s: section %u is of kind %u (a recurrent layer's state?); this library "
				       "reads kind %d (attention KV cells) only",
				       r->path, k, sec.kind, KIND_KV);
			break;
		}
		if (sec.layer < 0 || sec.layer >= L || seen[sec.layer]) {
			rc = hs__error(EIO, "%s: section %u: layer %d (0..%d, each once)", r->path, k, sec.layer,
				       L - 1);
			break;
		}
		seen[sec.layer] = 1;
		if ((rc = get(r, &n, sizeof n, "a cell count")))
			break;
		if (n < 0 || n > hd->n_pos || sec.bytes != 4 + (uint64_t)n * (4 + 2 * cb)) {
			rc = hs__error(EIO,
				       "%s: layer %d: %d cells in %llu bytes (at most %d cells of 4 + 2 x %zu bytes)",
				       r->path, sec.layer, n, (unsigned long long)sec.bytes, hd->n_pos, cb);
			break;
		}
		if ((rc = get(r, pos, sizeof *pos * (uint64_t)n, "the positions")))
			break;
		for (int i = 0; i < n && !rc; i++)
			if (pos[i] < 0 || pos[i] >= hd->n_pos || (i && pos[i] <= pos[i - 1]))
				rc = hs__error(EIO, "%s: layer %d: cell %d holds position %d (ascending, 0..%d)",
					       r->path, sec.layer, i, pos[i], hd->n_pos - 1);
		/* a ring keeps the last n_cells positions: the older ones are read past */
		const int keep_from = hs__fwd_is_ring(f, sec.layer) ? hd->n_pos - f->kv[sec.layer].n_cells : INT_MIN;
		for (int i = 0; i < n && !rc; i += CHUNK) {
			int j = n - i > CHUNK ? i + CHUNK : n;
			if (apply && (rc = hs__fwd_cells_reserve(&cells, j - i, cb)))
				break;
			for (int c = i; c < j && !rc; c++) {
				if ((rc = get(r, row, 2 * cb, "the K and V rows")))
					break;
				if (!apply &&
				    (!row_finite(f->kv_type, row, cb) || !row_finite(f->kv_type, row + cb, cb)))
					rc = hs__error(
						EIO, "%s: layer %d: the K/V row of position %d holds a NaN or infinity",
						r->path, sec.layer, pos[c]);
				if (!apply || pos[c] < keep_from)
					continue;
				cells.pos[cells.n] = pos[c];
				memcpy(cells.k + cells.n * cb, row, cb);
				memcpy(cells.v + cells.n * cb, row + cb, cb);
				cells.n++;
			}
			if (apply && !rc && cells.n)
				rc = hs__fwd_cells_put(f, sec.layer, seq, &cells);
			cells.n = 0;
		}
	}
	for (int l = 0; l < L && !rc; l++)
		if (!seen[l])
			rc = hs__error(EIO, "%s: no section for layer %d", r->path, l);
	if (!rc && r->left)
		rc = hs__error(EIO, "%s: %llu bytes after the last section", r->path, (unsigned long long)r->left);
out_free:
	hs__fwd_cells_free(&cells);
	free(seen);
	free(row);
	free(pos);
	return rc;
}

static int open_reader(struct reader *r, const char *path)
{
	struct stat st;

	r->path = path;
	if (!(r->fp = fopen(path, "rb")))
		return hs__error(errno == ENOENT ? ENOENT : EIO, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(r->fp), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(r->fp);
		return hs__error(EIO, "%s: not a regular file", path);
	}
	r->left = (uint64_t)st.st_size;
	return 0;
}

static int read_header(struct hs_fwd *f, struct reader *r, struct header *hd, int32_t *tokens, int cap)
{
	const size_t cb = hs__fwd_cell_bytes(f);
	static const uint8_t zero[sizeof hd->zero];
	int rc;

	if (r->left < sizeof *hd || (rc = get(r, hd, sizeof *hd, "the header")) ||
	    memcmp(hd->magic, MAGIC, sizeof MAGIC))
		return hs__error(EIO, "%s: not a hotset sequence state file (no \"%s\" header)", r->path, MAGIC);
	if (hd->version != STATE_VERSION)
		return hs__error(ENOTSUP, "%s: version %u; this library reads version %d", r->path, hd->version,
				 STATE_VERSION);
	if (hd->header_bytes != HEADER_BYTES || memcmp(hd->zero, zero, sizeof zero))
		return hs__error(EIO, "%s: a header of %u bytes or with reserved bytes set (64, zero)", r->path,
				 hd->header_bytes);
	uint64_t id = model_id(f);
	if (hd->model_id != id || hd->n_layers != f->hp->n_layers)
		return hs__error(EINVAL, "%s: saved from another model (model id %016llx, this one's %016llx)", r->path,
				 (unsigned long long)hd->model_id, (unsigned long long)id);
	if (hd->kv_type != (uint32_t)f->kv_type || hd->cell_bytes != cb)
		return hs__error(EINVAL, "%s: a %s KV cache (%u bytes a cell); this context's is %s (%zu)", r->path,
				 hd->kv_type < 64 ? hs__type_name((int)hd->kv_type) : "unknown", hd->cell_bytes,
				 hs__type_name(f->kv_type), cb);
	if (hd->n_pos < 0 || hd->n_pos > f->n_ctx)
		return hs__error(EINVAL, "%s: %d positions; this context holds %d (its n_ctx)", r->path, hd->n_pos,
				 f->n_ctx);
	if (hd->lost_below < 0 || hd->lost_below > hd->n_pos || (hd->n_tokens != 0 && hd->n_tokens != hd->n_pos) ||
	    hd->n_sections != (uint32_t)f->hp->n_layers)
		return hs__error(EIO,
				 "%s: lost_below %d, %d tokens, %u sections for %d positions and %d layers "
				 "(0..positions, 0 or positions, one section a layer)",
				 r->path, hd->lost_below, hd->n_tokens, hd->n_sections, hd->n_pos, f->hp->n_layers);
	if (tokens && hd->n_tokens > cap)
		return hs__error(EINVAL, "%s: %d tokens, room for %d", r->path, hd->n_tokens, cap);
	int32_t *ids = malloc(sizeof *ids * (size_t)(hd->n_tokens ? hd->n_tokens : 1));
	if (!ids)
		return hs__error(ENOMEM, "%s: out of memory", r->path);
	if (!(rc = get(r, ids, sizeof *ids * (uint64_t)hd->n_tokens, "the tokens")))
		for (int i = 0; i < hd->n_tokens && !rc; i++)
			if (ids[i] < 0 || ids[i] >= f->hp->n_vocab)
				rc = hs__error(EIO, "%s: token %d is id %d (0..%d)", r->path, i, ids[i],
					       f->hp->n_vocab - 1);
	if (!rc && tokens)
		memcpy(tokens, ids, sizeof *ids * (size_t)hd->n_tokens);
	free(ids);
	return rc;
}

int hs__seq_state_load(struct hs_fwd *f, int seq, const char *path, struct hs_seq_head *h, int32_t *tokens, int cap,
		       int *emptied)
{
	struct reader r = { 0 };
	struct header hd;
	int rc;

	*emptied = 0;
	if ((rc = open_reader(&r, path)))
		return rc;
	const uint64_t size = r.left;
	/* pass 1: the header and every section, nothing written */
	if ((rc = read_header(f, &r, &hd, NULL, cap)) || (rc = walk(f, seq, &r, &hd, 0)))
		goto out_close;
	/* pass 2: the same bytes again (their structure checked again), into seq */
	rewind(r.fp);
	r.left = size;
	if ((rc = read_header(f, &r, &hd, tokens, cap)))
		goto out_close;
	if ((rc = hs__fwd_forget(f, seq, 0)) || (rc = walk(f, seq, &r, &hd, 1))) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", hs_last_error());
		hs__fwd_forget(f, seq, 0);
		*emptied = 1;
		rc = hs__error(-rc, "%s; sequence %d emptied", msg, seq);
		goto out_close;
	}
	*h = (struct hs_seq_head){ hd.n_pos, hd.lost_below, hd.n_tokens };
out_close:
	fclose(r.fp);
	return rc;
}
