/* Internal error reporting shared by every folder of the library: a leaf with
 * no dependencies, so topology/, planner/ and cpu_kernels/ may use it too. */
#ifndef HS_ERROR_H
#define HS_ERROR_H

#include <errno.h>

/* Records a one-line message for hs_last_error() and returns -err, so that a
 * failing path reads `return hs__error(EIO, "%s: ...", path);`. */
int hs__error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A public entry point's NULL argument: records "<fn>: <arg> is NULL" and
 * returns -EINVAL.  HS_NEED(arg, ret) returns ret (the function's error
 * value: -EINVAL, NULL, ...) after recording it, so that every public call
 * checks its handles and out-pointers in one line each. */
int hs__null_arg(const char *fn, const char *arg);
#define HS_NEED(arg, ret)                                 \
	do {                                              \
		if (!(arg)) {                             \
			(void)hs__null_arg(__func__, #arg); \
			return ret;                       \
		}                                         \
	} while (0)

/* Clears the thread's message (a call that succeeds leaves it as it was). */
void hs__error_clear(void);

/* Input values that must be finite (hidden states, gating weights):
 * rows x cols floats, row-major.  0, or -EINVAL with a message naming
 * `what`, the row and the column of the first NaN or Inf. */
int hs__check_finite(const float *v, long rows, long cols, const char *what);

/* A thread count a caller asked for: 0 (the default) or 1 .. 4 x the
 * online CPUs (more workers than that only share cores); -EINVAL naming
 * `what` and the limit otherwise. */
int hs__check_threads(int threads, const char *what);
/* That limit: 4 x the online CPUs. */
int hs__max_threads(void);

/* Internal invariants only, never for input checks: a broken invariant is a
 * bug in hotset, so it aborts with the place where it broke. */
#define HS_ASSERT(cond) ((cond) ? (void)0 : hs__assert_fail(#cond, __FILE__, __LINE__))
_Noreturn void hs__assert_fail(const char *what, const char *file, int line);

#endif
