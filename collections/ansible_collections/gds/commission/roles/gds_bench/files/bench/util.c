/* What every layer of gdsbench shares: the clock, the stop flag that
 * SIGINT/SIGTERM set, and a worker's first error message. No dependencies
 * beyond libc, so that engines, GPU helpers and the I/O loop can all use it. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "gdsbench.h"

atomic_int g_stop;

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void werr(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->err[0])
		return;		/* keep the first (root) cause */
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
}
