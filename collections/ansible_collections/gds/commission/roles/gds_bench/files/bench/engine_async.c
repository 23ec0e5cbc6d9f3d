/* xfer_type 5, cuFile stream (async) API: cuFileReadAsync/cuFileWriteAsync on
 * -B CUDA streams per thread, one op in flight per stream, so each thread
 * keeps -B I/Os queued (gdsio XFER_GPU_DIRECT_ASYNC). Streams are registered
 * with all CU_FILE_STREAM_* fixed/aligned flags: sizes and offsets are known
 * at submit time and 4 KiB aligned, which lets cuFile skip per-op setup. A
 * reap collects every stream whose op is done, in any order, and waits on the
 * oldest only when none is: an op that finished behind a slower one goes out
 * again at once. */
#ifdef HAVE_CUDA
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

struct aslot {
	size_t size;
	off_t foff, boff;
	ssize_t bytes;
	cudaStream_t stream;
	int registered;
};

/* How op buffers are handed to cuFile (GDSBENCH_ASYNC_BUF, a diagnostic):
 * per-slot registration with a zero buffer offset (default), one registered
 * region + per-op offsets ("region"), or unregistered slot buffers ("unreg"). */
enum { BUF_SLOT, BUF_REGION, BUF_UNREG };

struct async_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
	int bufmode;
	int nreg;		/* slots registered (BUF_SLOT) */
	struct aslot *as;
	int *fifo;		/* slot indexes in flight, in submission order */
	int count;
};

static int async_global_init(char *err, size_t errlen)
{
	if (gpu_global_init(1, err, errlen) != 0)
		return -1;
	if (!cu.cuFileReadAsync || !cu.cuFileWriteAsync || !cu.cuFileStreamRegister) {
		snprintf(err, errlen, "%s has no cuFile stream API (cuFileReadAsync): xfer_type 5 needs GDS >= 1.7",
			 cu.cufile_path);
		return -1;
	}
	return 0;
}

static int async_thread_init(struct worker *w)
{
	struct async_thread *t = calloc(1, sizeof(*t));
	int depth = w->job->depth > 0 ? w->job->depth : 8;

	const char *bm = getenv("GDSBENCH_ASYNC_BUF");
	unsigned flags = CU_FILE_STREAM_FIXED_BUF_OFFSET | CU_FILE_STREAM_FIXED_FILE_OFFSET |
			 CU_FILE_STREAM_FIXED_FILE_SIZE | CU_FILE_STREAM_PAGE_ALIGNED_INPUTS;

	w->priv = t;
	if (!t) {
		werr(w, "out of memory");
		return -1;
	}
	if (getenv("GDSBENCH_ASYNC_FLAGS"))
		flags = (unsigned)strtoul(getenv("GDSBENCH_ASYNC_FLAGS"), NULL, 0);
	t->bufmode = bm && !strcmp(bm, "region") ? BUF_REGION : bm && !strcmp(bm, "unreg") ? BUF_UNREG : BUF_SLOT;
	if (w->job->skip_bufreg)
		t->bufmode = BUF_UNREG;	/* -b */
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, depth) != 0)
		return -1;
	if (t->bufmode == BUF_REGION && cufile_register_buf(w) != 0)
		return -1;
	for (int i = 0; t->bufmode == BUF_SLOT && i < depth; i++) {
		CUfileError_t fe = cu.cuFileBufRegister(w->slots[i].buf, (size_t)w->job->io_size, 0);

		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileBufRegister(slot %d): %s", i, cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		t->nreg++;
	}
	t->as = calloc((size_t)depth, sizeof(*t->as));
	t->fifo = calloc((size_t)depth, sizeof(*t->fifo));
	if (!t->as || !t->fifo) {
		werr(w, "out of memory");
		return -1;
	}
	for (int i = 0; i < depth; i++) {
		cudaError_t e = cu.cudaStreamCreateWithFlags(&t->as[i].stream, cudaStreamNonBlocking);
		CUfileError_t fe;

		if (e != cudaSuccess) {
			t->as[i].stream = NULL;
			werr(w, "cudaStreamCreate: %s", cuda_errstr(e));
			return -1;
		}
		fe = cu.cuFileStreamRegister(t->as[i].stream, flags);
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileStreamRegister: %s", cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		t->as[i].registered = 1;
	}
	return 0;
}

static void async_thread_exit(struct worker *w)
{
	struct async_thread *t = w->priv;

	if (t && t->as) {
		for (int i = 0; i < w->depth; i++) {
			if (!t->as[i].stream)
				continue;
			cu.cudaStreamSynchronize(t->as[i].stream);	/* nothing may still write to freed memory */
			if (t->as[i].registered && cu.cuFileStreamDeregister)
				cu.cuFileStreamDeregister(t->as[i].stream);
			cu.cudaStreamDestroy(t->as[i].stream);
		}
	}
	cufile_deregister_buf(w);
	for (int i = 0; t && i < t->nreg; i++)
		cu.cuFileBufDeregister(w->slots[i].buf);
	gpu_slots_free(w);
	if (t) {
		free(t->as);
		free(t->fifo);
	}
	free(t);
	w->priv = NULL;
}

static int async_room(struct worker *w)
{
	struct async_thread *t = w->priv;

	return w->depth - t->count;
}

static int async_submit(struct worker *w, struct slot **list, int n)
{
	struct async_thread *t = w->priv;

	for (int i = 0; i < n; i++) {
		struct slot *s = list[i];
		int k = (int)(s - w->slots);
		struct aslot *a = &t->as[k];
		CUfileError_t fe;

		void *base = t->bufmode == BUF_REGION ? t->base.dev : s->buf;

		a->size = s->len;
		a->foff = (off_t)s->off;
		a->boff = t->bufmode == BUF_REGION ? (off_t)s->buf_off : 0;
		a->bytes = 0;
		fe = s->write ? cu.cuFileWriteAsync(w->fh, base, &a->size, &a->foff, &a->boff, &a->bytes, a->stream)
			      : cu.cuFileReadAsync(w->fh, base, &a->size, &a->foff, &a->boff, &a->bytes, a->stream);
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFile%sAsync: %s", s->write ? "Write" : "Read", cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		t->fifo[t->count++] = k;
	}
	return 0;
}

/* The op of fifo[i] is over (e: how its stream ended): into done[], out of the fifo. */
static void async_done(struct worker *w, int i, cudaError_t e, struct slot **done, int *n)
{
	struct async_thread *t = w->priv;
	int k = t->fifo[i];

	w->slots[k].t_done = now_ns();
	if (e != cudaSuccess) {
		werr(w, "CUDA stream: %s", cuda_errstr(e));
		w->slots[k].res = -EIO;
	} else {
		w->slots[k].res = t->as[k].bytes;
	}
	done[(*n)++] = &w->slots[k];
	memmove(t->fifo + i, t->fifo + i + 1, sizeof(*t->fifo) * (size_t)(--t->count - i));
}

/* Every op that is done, whatever its place; when none is, wait for the oldest. */
static int async_reap(struct worker *w, struct slot **done, int max)
{
	struct async_thread *t = w->priv;
	int n = 0;

	for (int i = 0; i < t->count && n < max;) {
		cudaError_t e = cu.cudaStreamQuery(t->as[t->fifo[i]].stream);

		if (e == cudaErrorNotReady)
			i++;
		else
			async_done(w, i, e, done, &n);
	}
	if (!n && t->count > 0)
		async_done(w, 0, cu.cudaStreamSynchronize(t->as[t->fifo[0]].stream), done, &n);
	return n;
}

const struct engine engine_async = {
	.xfer = 5,
	.global_init = async_global_init,
	.global_exit = gpu_global_exit,
	.thread_init = async_thread_init,
	.thread_exit = async_thread_exit,
	.file_open = cufile_register_fd,
	.file_close = cufile_deregister_fd,
	.room = async_room,
	.submit = async_submit,
	.reap = async_reap,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = cufile_io_strerror,
};
#endif
