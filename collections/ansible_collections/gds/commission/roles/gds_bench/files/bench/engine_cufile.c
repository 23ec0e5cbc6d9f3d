/* xfer_type 0, GPU direct: cuFileRead/cuFileWrite between the file and a
 * cudaMalloc buffer registered with cuFileBufRegister (gdsio XFER_GPU_DIRECT).
 * Whether the bytes really went storage->GPU (nvidia-fs, P2PDMA) or through
 * cuFile's POSIX compat path is decided from cuFile's own counters (pathmode.c). */
#ifdef HAVE_CUDA
#include <errno.h>
#include <stdlib.h>

#include "cuda_rt.h"

struct cufile_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
};

static int cufile_global_init(char *err, size_t errlen)
{
	return gpu_global_init(1, err, errlen);
}

static int cufile_thread_init(struct worker *w)
{
	w->priv = calloc(1, sizeof(struct cufile_thread));
	if (!w->priv) {
		werr(w, "out of memory");
		return -1;
	}
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, 1) != 0)
		return -1;
	return cufile_register_buf(w);
}

static void cufile_thread_exit(struct worker *w)
{
	cufile_deregister_buf(w);
	gpu_slots_free(w);
	free(w->priv);
	w->priv = NULL;
}

static ssize_t cufile_io(struct worker *w, struct slot *s)
{
	struct cufile_thread *t = w->priv;
	ssize_t r = s->write ? cu.cuFileWrite(w->fh, t->base.dev, s->len, (off_t)s->off, (off_t)s->buf_off)
			     : cu.cuFileRead(w->fh, t->base.dev, s->len, (off_t)s->off, (off_t)s->buf_off);

	return r == -1 ? -errno : r;
}

const struct engine engine_cufile = {
	.xfer = 0,
	.global_init = cufile_global_init,
	.global_exit = gpu_global_exit,
	.thread_init = cufile_thread_init,
	.thread_exit = cufile_thread_exit,
	.file_open = cufile_register_fd,
	.file_close = cufile_deregister_fd,
	.io = cufile_io,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = cufile_io_strerror,
};
#endif
