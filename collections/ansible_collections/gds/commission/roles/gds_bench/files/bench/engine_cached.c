/* xfer_type 4, page cache then GPU: buffered (no O_DIRECT) pread into pinned
 * host memory, then cudaMemcpyAsync (gdsio XFER_CPU_CACHED_GPU, two copies).
 * The bounce mechanics are cuda_rt.c's (shared with -x 2); this file opens
 * without O_DIRECT. */
#ifdef HAVE_CUDA
#include "cuda_rt.h"

const struct engine engine_cached = {
	.xfer = 4,
	.global_init = bounce_global_init,
	.thread_init = bounce_thread_init,
	.thread_exit = bounce_thread_exit,
	.io = bounce_io,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = bounce_strerror,
};
#endif
