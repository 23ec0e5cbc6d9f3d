/* The operations table: gdsio's transfer-type numbers to engines. */
#include <stddef.h>

#include "gdsbench.h"

extern const struct engine engine_posix;
#ifdef HAVE_CUDA
extern const struct engine engine_cufile, engine_cpugpu, engine_cached, engine_async, engine_batch;
#endif

static const struct engine *const table[] = {
#ifdef HAVE_CUDA
	[0] = &engine_cufile,
	[2] = &engine_cpugpu,
	[4] = &engine_cached,
	[5] = &engine_async,
	[6] = &engine_batch,
#endif
	[1] = &engine_posix,
};

const struct engine *engine_get(int xfer)
{
	if (xfer < 0 || xfer >= (int)(sizeof(table) / sizeof(table[0])))
		return NULL;
	return table[xfer];
}

