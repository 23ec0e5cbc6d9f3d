/* xfer_type 2, CPU then GPU: O_DIRECT pread into pinned host memory
 * (cudaMallocHost), then cudaMemcpyAsync to the GPU; writes the reverse
 * (gdsio XFER_CPU_GPU). The op completes when the data is in GPU memory. */
#ifdef HAVE_CUDA
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_rt.h"

struct bounce_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
	void *pinned;
	cudaStream_t stream;
};

int bounce_global_init(char *err, size_t errlen)
{
	return gpu_global_init(0, err, errlen);
}

int bounce_thread_init(struct worker *w)
{
	struct bounce_thread *t = calloc(1, sizeof(*t));
	cudaError_t e;

	w->priv = t;
	if (!t) {
		werr(w, "out of memory");
		return -1;
	}
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, 1) != 0)
		return -1;
	e = cu.cudaMallocHost(&t->pinned, (size_t)w->job->io_size);
	if (e != cudaSuccess) {
		t->pinned = NULL;
		werr(w, "cudaMallocHost(%llu): %s", (unsigned long long)w->job->io_size, cuda_errstr(e));
		return -1;
	}
	e = cu.cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		t->stream = NULL;
		werr(w, "cudaStreamCreate: %s", cuda_errstr(e));
		return -1;
	}
	return 0;
}

void bounce_thread_exit(struct worker *w)
{
	struct bounce_thread *t = w->priv;

	if (t) {
		if (t->stream)
			cu.cudaStreamDestroy(t->stream);
		if (t->pinned)
			cu.cudaFreeHost(t->pinned);
	}
	gpu_slots_free(w);
	free(t);
	w->priv = NULL;
}

/* CUDA errors are reported as -(100000 + cudaError_t) to keep them apart from errno. */
#define CUDA_ERR_BASE 100000

ssize_t bounce_io(struct worker *w, struct slot *s)
{
	struct bounce_thread *t = w->priv;
	cudaError_t e;
	ssize_t r;

	if (s->write) {
		e = cu.cudaMemcpyAsync(t->pinned, s->buf, s->len, cudaMemcpyDeviceToHost, t->stream);
		if (e == cudaSuccess)
			e = cu.cudaStreamSynchronize(t->stream);
		if (e != cudaSuccess)
			return -(CUDA_ERR_BASE + (ssize_t)e);
		r = pwrite(w->fd, t->pinned, s->len, (off_t)s->off);
		return r < 0 ? -errno : r;
	}
	r = pread(w->fd, t->pinned, s->len, (off_t)s->off);
	if (r <= 0)
		return r < 0 ? -errno : r;
	e = cu.cudaMemcpyAsync(s->buf, t->pinned, (size_t)r, cudaMemcpyHostToDevice, t->stream);
	if (e == cudaSuccess)
		e = cu.cudaStreamSynchronize(t->stream);
	return e == cudaSuccess ? r : -(CUDA_ERR_BASE + (ssize_t)e);
}

const char *bounce_strerror(ssize_t res, char *buf, size_t len)
{
	if (-res >= CUDA_ERR_BASE)
		snprintf(buf, len, "CUDA: %s", cuda_errstr((cudaError_t)(-res - CUDA_ERR_BASE)));
	else
		snprintf(buf, len, "%s", strerror((int)-res));
	return buf;
}

const struct engine engine_cpugpu = {
	.xfer = 2,
	.name = "CPU_GPU",
	.desc = "CPU then GPU: O_DIRECT into pinned host memory, cudaMemcpyAsync to the GPU",
	.flags = ENG_GPU | ENG_ODIRECT,
	.global_init = bounce_global_init,
	.thread_init = bounce_thread_init,
	.thread_exit = bounce_thread_exit,
	.io = bounce_io,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = bounce_strerror,
};
#endif
