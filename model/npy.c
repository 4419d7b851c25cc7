/* NumPy .npy files of float32, C order: the exchange format of
 * `hotset run-layer` with a user's own NumPy or PyTorch code. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotset.h"
#include "base/error.h"
#include "base/jsonio.h"

#define MAX_HEADER 65536

/* Value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof pat, "'%s'", key);
	p = strstr(h, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (isspace((unsigned char)*p))
		p++;
	if (*p++ != ':')
		return NULL;
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

static int parse_header(const char *path, const char *h, int64_t *rows, int64_t *cols)
{
	const char *d = dict_value(h, "descr"), *f = dict_value(h, "fortran_order"), *s = dict_value(h, "shape");
	int64_t dims[3];
	int nd = 0;

	if (!d || !f || !s)
		return hs__error(EIO, "%s: .npy header lacks %s", path, !d ? "'descr'" : !f ? "'fortran_order'" : "'shape'");
	if (strncmp(d, "'<f4'", 5) != 0) {
		const char *end = strchr(d + 1, '\'');
		return hs__error(EIO, "%s: dtype %.*s, but float32 little-endian ('<f4') is needed", path,
				 end ? (int)(end - d + 1) : 8, d);
	}
	if (strncmp(f, "False", 5) != 0)
		return hs__error(EIO, "%s: Fortran-ordered array; save it C-ordered (np.ascontiguousarray)", path);
	if (*s++ != '(')
		return hs__error(EIO, "%s: unreadable shape in .npy header", path);
	for (;;) {
		char *end;
		while (isspace((unsigned char)*s))
			s++;
		if (*s == ')')
			break;
		if (nd == 3)
			return hs__error(EIO, "%s: array has more than 2 dimensions ([n, n_embd] needed)", path);
		errno = 0;
		long long v = strtoll(s, &end, 10);
		if (end == s || errno || v < 0)
			return hs__error(EIO, "%s: unreadable shape in .npy header", path);
		dims[nd++] = v;
		s = end;
		while (isspace((unsigned char)*s))
			s++;
		if (*s == ',')
			s++;
		else if (*s != ')')
			return hs__error(EIO, "%s: unreadable shape in .npy header", path);
	}
	if (nd == 1) {
		*rows = 1;
		*cols = dims[0];
	} else if (nd == 2) {
		*rows = dims[0];
		*cols = dims[1];
	} else {
		return hs__error(EIO, "%s: array has %d dimensions ([n, n_embd] or [n_embd] needed)", path, nd);
	}
	if (*cols > 0 && *rows > INT64_MAX / 4 / *cols)
		return hs__error(EIO, "%s: shape (%lld, %lld) is too large", path, (long long)*rows, (long long)*cols);
	return 0;
}

int hs_npy_read_f32(const char *path, float **data, int64_t *rows, int64_t *cols)
{
	unsigned char pre[12];
	char *header = NULL;
	size_t hlen, pre_len;
	struct stat st;
	FILE *f;
	int rc;

	HS_NEED(data, -EINVAL);
	*data = NULL;
	HS_NEED(path, -EINVAL);
	HS_NEED(rows, -EINVAL);
	HS_NEED(cols, -EINVAL);
	f = fopen(path, "rb");
	if (!f)
		return hs__error(errno == ENOENT ? ENOENT : EIO, "%s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = hs__error(EIO, "%s: not a regular file", path);
		goto out_close;
	}
	if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
		rc = hs__error(EIO, "%s: not a .npy file (no \\x93NUMPY magic)", path);
		goto out_close;
	}
	if (pre[6] == 1) {
		hlen = pre[8] | (size_t)pre[9] << 8;
		pre_len = 10;
	} else if (pre[6] == 2 || pre[6] == 3) {
		if (fread(pre + 10, 1, 2, f) != 2) {
			rc = hs__error(EIO, "%s: truncated .npy header", path);
			goto out_close;
		}
		hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
		pre_len = 12;
	} else {
		rc = hs__error(EIO, "%s: .npy format version %d (1, 2 and 3 are read)", path, pre[6]);
		goto out_close;
	}
	if (hlen > MAX_HEADER) {
		rc = hs__error(EIO, "%s: .npy header of %zu bytes (at most %d)", path, hlen, MAX_HEADER);
		goto out_close;
	}
	header = malloc(hlen + 1);
	if (!header) {
		rc = hs__error(ENOMEM, "%s: out of memory", path);
		goto out_close;
	}
	if (fread(header, 1, hlen, f) != hlen) {
		rc = hs__error(EIO, "%s: truncated .npy header", path);
		goto out_close;
	}
	header[hlen] = '\0';
	if ((rc = parse_header(path, header, rows, cols)))
		goto out_close;
	uint64_t want = (uint64_t)*rows * (uint64_t)*cols * 4, have = (uint64_t)st.st_size - pre_len - hlen;
	if (have != want) {
		rc = hs__error(EIO, "%s: %s: %llu data bytes for shape (%lld, %lld), %llu expected", path,
			       have < want ? "truncated" : "trailing bytes", (unsigned long long)have, (long long)*rows,
			       (long long)*cols, (unsigned long long)want);
		goto out_close;
	}
	*data = malloc(want ? want : 1);
	if (!*data) {
		rc = hs__error(ENOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)want);
		goto out_close;
	}
	if (fread(*data, 1, want, f) != want) {
		free(*data);
		*data = NULL;
		rc = hs__error(EIO, "%s: read failed", path);
		goto out_close;
	}
	rc = 0;
out_close:
	free(header);
	fclose(f);
	return rc;
}

int hs_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols)
{
	char header[128];
	int hlen;

	HS_NEED(path, -EINVAL);
	if (rows < 0 || cols < 0)
		return hs__error(EINVAL, "%s: negative shape", path);
	if (cols > 0 && rows > INT64_MAX / 4 / cols)
		return hs__error(EINVAL, "%s: shape (%lld, %lld) is over 2^63 bytes", path, (long long)rows, (long long)cols);
	if (rows * cols > 0)
		HS_NEED(data, -EINVAL);
	/* v1.0: magic, version, u16 length, then the dict padded with spaces
	 * and ended by '\n' so the data starts at a multiple of 64 bytes. */
	hlen = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
			(long long)rows, (long long)cols);
	while ((10 + hlen + 1) % 64)
		header[hlen++] = ' ';
	header[hlen++] = '\n';
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hlen, (unsigned char)(hlen >> 8) };
	struct hs_piece pieces[3] = { { pre, 10 }, { header, (size_t)hlen }, { data, 4 * (size_t)(rows * cols) } };
	return hs__write_file_atomic(path, pieces, 3, 0);
}
