/* Internal logging: silent unless the caller of the library asked for
 * messages with hs_log_set() (the CLI's -v does).  A message is one line
 * without a trailing newline. */
#ifndef HS_LOG_H
#define HS_LOG_H

#include "hotset.h"

/* Whether a message of this level would go anywhere (to skip building it). */
int hs__log_enabled(enum hs_log_level level);
void hs__log(enum hs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
