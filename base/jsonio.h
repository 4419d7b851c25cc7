/* Small helpers for the JSON files hotset reads and writes (profiles,
 * plans): every field checked with a message naming the file, the field
 * and the limit; files written whole or not at all. */
#ifndef HS_JSONIO_H
#define HS_JSONIO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What is being read, for messages: "<what> <path>: ..." */
struct hs_json_in {
	const char *what;
	const char *path;
};

/* Parses the file at path (what: "profile", "plan").  -ENOENT, -EIO with
 * the line and column of a syntax error. */
int hs__json_load(const char *path, const char *what, struct hs_json_in *in, json_t **root);
/* Parses text the same way (path = a name for messages). */
int hs__json_parse(const char *text, const char *what, const char *name, struct hs_json_in *in, json_t **root);

/* -EIO "<what> <path>: <ctx>.<field> <message>" */
int hs__json_bad(const struct hs_json_in *in, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Typed fields of obj; an absent field is an error only when required
 * (then *out is left as it was).  ctx names the enclosing object. */
int hs__json_int(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, int min, int max,
		 int required, int *out);
int hs__json_u64(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, int required,
		 uint64_t *out);
int hs__json_num(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, double min, double max,
		 int required, double *out);
int hs__json_str(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, char *buf, size_t n,
		 int required);

/* One piece of a file to write. */
struct hs_piece {
	const void *data;
	size_t bytes;
};
/* Finishes an output file written to tmp: flushes and closes f, then
 * renames tmp to path (path NULL: removes tmp, the output is dropped).  err
 * is the errno of a write that already failed, 0 if none.  Returns 0, or the
 * errno of the first failure (tmp is then removed). */
int hs__finish_file(FILE *f, int err, const char *tmp, const char *path);

/* Writes the pieces to "<path>.part" and renames it to path, so a reader
 * never sees half a file; with mkdirs, missing parent folders are made. */
int hs__write_file_atomic(const char *path, const struct hs_piece *pieces, int n, int mkdirs);

#endif
