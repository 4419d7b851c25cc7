/* The library's log: one process-wide level and sink, set by the caller.
 * Default silent, so that a program embedding hotset sees nothing it did
 * not ask for. */
#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "base/log.h"

static _Atomic int log_level = HS_LOG_NONE;
static hs_log_fn log_fn;
static void *log_ctx;

void hs_log_set(enum hs_log_level level, hs_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
	int l = (int)level;

	atomic_store(&log_level, l < HS_LOG_NONE ? HS_LOG_NONE : l > HS_LOG_DEBUG ? HS_LOG_DEBUG : l);
}

int hs__log_enabled(enum hs_log_level level)
{
	return level != HS_LOG_NONE && (int)level <= atomic_load(&log_level);
}

const char *hs_log_level_name(enum hs_log_level level)
{
	switch (level) {
	case HS_LOG_ERROR: return "error";
	case HS_LOG_WARN: return "warning";
	case HS_LOG_INFO: return "info";
	case HS_LOG_DEBUG: return "debug";
	default: return "none";
	}
}

void hs__log(enum hs_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!hs__log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, msg, log_ctx);
	else
		fprintf(stderr, "hotset: %s: %s\n", hs_log_level_name(level), msg);
}
