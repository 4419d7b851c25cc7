/* JSON fields with limits, and whole-file writes. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/jsonio.h"

int hs__json_parse(const char *text, const char *what, const char *name, struct hs_json_in *in, json_t **root)
{
	json_error_t err;

	in->what = what;
	in->path = name;
	*root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
	if (!*root)
		return hs__error(EIO, "%s %s: not valid JSON at line %d, column %d: %s", what, name, err.line,
				 err.column, err.text);
	return 0;
}

int hs__json_load(const char *path, const char *what, struct hs_json_in *in, json_t **root)
{
	json_error_t err;

	in->what = what;
	in->path = path;
	if (access(path, R_OK) != 0)
		return hs__error(errno == ENOENT ? ENOENT : EIO, "%s %s: cannot read: %s", what, path, strerror(errno));
	*root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
	if (!*root)
		return hs__error(EIO, "%s %s: not valid JSON at line %d, column %d: %s", what, path, err.line,
				 err.column, err.text);
	return 0;
}

int hs__json_bad(const struct hs_json_in *in, const char *field, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return hs__error(EIO, "%s %s: \"%s\" %s", in->what, in->path, field, msg);
}

static json_t *field(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, int required,
		     char *name, size_t n, int *rc)
{
	snprintf(name, n, "%s%s%s", ctx, *ctx ? "." : "", key);
	*rc = 0;
	if (!json_is_object(obj)) {
		*rc = hs__json_bad(in, ctx, "is not an object");
		return NULL;
	}
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		if (required)
			*rc = hs__json_bad(in, name, "is missing");
		return NULL;
	}
	return v;
}

int hs__json_int(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, int min, int max,
		 int required, int *out)
{
	char name[96];
	int rc;
	json_t *v = field(in, obj, key, ctx, required, name, sizeof name, &rc);

	if (!v)
		return rc;
	if (!json_is_integer(v))
		return hs__json_bad(in, name, "is not an integer");
	json_int_t x = json_integer_value(v);
	if (x < min || x > max)
		return hs__json_bad(in, name, "is %lld, outside %d..%d", (long long)x, min, max);
	*out = (int)x;
	return 0;
}

int hs__json_u64(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, int required,
		 uint64_t *out)
{
	char name[96];
	int rc;
	json_t *v = field(in, obj, key, ctx, required, name, sizeof name, &rc);

	if (!v)
		return rc;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return hs__json_bad(in, name, "is not a byte count (a non-negative integer)");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int hs__json_num(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, double min, double max,
		 int required, double *out)
{
	char name[96];
	int rc;
	json_t *v = field(in, obj, key, ctx, required, name, sizeof name, &rc);

	if (!v)
		return rc;
	if (!json_is_number(v))
		return hs__json_bad(in, name, "is not a number");
	double x = json_number_value(v);
	if (!isfinite(x) || x < min || x > max)
		return hs__json_bad(in, name, "is %g, outside %g..%g", x, min, max);
	*out = x;
	return 0;
}

int hs__json_str(const struct hs_json_in *in, json_t *obj, const char *key, const char *ctx, char *buf, size_t n,
		 int required)
{
	char name[96];
	int rc;
	json_t *v = field(in, obj, key, ctx, required, name, sizeof name, &rc);

	if (!v)
		return rc;
	if (!json_is_string(v))
		return hs__json_bad(in, name, "is not a string");
	if (json_string_length(v) >= n)
		return hs__json_bad(in, name, "is longer than %zu characters", n - 1);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int make_parents(const char *path)
{
	char buf[PATH_MAX];

	if (strlen(path) >= sizeof buf)
		return hs__error(ENAMETOOLONG, "%s: path too long", path);
	strcpy(buf, path);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return hs__error(EIO, "%s: cannot create folder %s: %s", path, buf, strerror(errno));
		*s = '/';
	}
	return 0;
}

int hs__finish_file(FILE *f, int err, const char *tmp, const char *path)
{
	/* errno is read right after the call that failed: a later call (or an
	 * earlier one that succeeded) would name another cause */
	if (fflush(f) != 0 && !err) /* a file-size limit or a full disk shows here */
		err = errno ? errno : EIO;
	if (fclose(f) != 0 && !err)
		err = errno ? errno : EIO;
	if (!err && path && rename(tmp, path) != 0)
		err = errno;
	if (err || !path)
		unlink(tmp);
	return err;
}

int hs__write_file_atomic(const char *path, const struct hs_piece *pieces, int n, int mkdirs)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 6);
	int rc = 0, ok = 1;
	FILE *f;

	if (!tmp)
		return hs__error(ENOMEM, "%s: out of memory", path);
	if (mkdirs && (rc = make_parents(path)))
		goto out_free;
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".part", 6);
	f = fopen(tmp, "wb");
	if (!f) {
		rc = hs__error(EIO, "%s: cannot create: %s", path, strerror(errno));
		goto out_free;
	}
	int e = 0;
	for (int i = 0; i < n && ok; i++)
		if (fwrite(pieces[i].data, 1, pieces[i].bytes, f) != pieces[i].bytes) {
			e = errno;
			ok = 0;
		}
	if ((e = hs__finish_file(f, e, tmp, path)))
		rc = hs__error(EIO, "%s: write failed: %s", path, strerror(e));
out_free:
	free(tmp);
	return rc;
}
