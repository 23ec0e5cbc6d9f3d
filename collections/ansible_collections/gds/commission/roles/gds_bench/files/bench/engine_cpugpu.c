/* xfer_type 2, CPU then GPU: O_DIRECT pread into pinned host memory
 * (cudaMallocHost), then cudaMemcpyAsync to the GPU; writes the reverse
 * (gdsio XFER_CPU_GPU). The op completes when the data is in GPU memory.
 * The bounce mechanics are cuda_rt.c's (shared with -x 4); this file opens
 * with O_DIRECT. */
#ifdef HAVE_CUDA
#include "cuda_rt.h"

const struct engine engine_cpugpu = {
	.xfer = 2,
	.global_init = bounce_global_init,
	.thread_init = bounce_thread_init,
	.thread_exit = bounce_thread_exit,
	.io = bounce_io,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = bounce_strerror,
};
#endif
