/* Thread-local last-error message and errno descriptions. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "base/error.h"

static _Thread_local char last_error[512];

int hs__error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	return -err;
}

int hs__null_arg(const char *fn, const char *arg)
{
	return hs__error(EINVAL, "%s: %s is NULL", fn, arg);
}

void hs__error_clear(void)
{
	last_error[0] = '\0';
}

const char *hs_last_error(void)
{
	return last_error;
}

const char *hs_strerror(int err)
{
	switch (-err) {
	case 0: return "success";
	case EINVAL: return "invalid argument";
	case ENOMEM: return "out of memory";
	case ENODEV: return "no such device";
	case EIO: return "bad or unreadable file";
	case ENOENT: return "no such file";
	case ERANGE: return "value out of range";
	case ENOSPC: return "no space left";
	default: return err < 0 ? strerror(-err) : "not an error code";
	}
}

int hs__check_finite(const float *v, long rows, long cols, const char *what)
{
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++) {
			float x = v[r * cols + c];
			if (isfinite(x))
				continue;
			const char *kind = isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf";
			return hs__error(EINVAL, "%s: row %ld, column %ld is %s; the values must be finite", what, r, c,
					 kind);
		}
	return 0;
}

static long online_cpus(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus > 0 ? cpus : 1;
}

int hs__max_threads(void)
{
	long max = 4 * online_cpus();
	return max < 65536 ? (int)max : 65536;
}

int hs__check_threads(int threads, const char *what)
{
	if (threads < 0 || threads > hs__max_threads())
		return hs__error(EINVAL, "%s: %d threads; 0 (default) to %d (4 x %ld online CPUs)", what, threads,
				 hs__max_threads(), online_cpus());
	return 0;
}

void hs__assert_fail(const char *what, const char *file, int line)
{
	/* An internal invariant broke: this is a hotset bug, not bad input. */
	fprintf(stderr, "hotset: internal error: %s (%s:%d)\n", what, file, line);
	abort();
}
