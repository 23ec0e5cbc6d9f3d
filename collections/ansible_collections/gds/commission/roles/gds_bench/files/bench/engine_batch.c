/* xfer_type 6, cuFile batch API (gdsio GPU_BATCH). A batch handle takes one
 * submission at a time, so each thread double-buffers: -B slots split over two
 * handles; while one batch is in flight the other is reaped and resubmitted,
 * keeping between -B/2 and -B I/Os queued per thread. */
#ifdef HAVE_CUDA
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

#define NGROUPS 2
#define BATCH_ERR_BASE 200000	/* -(BATCH_ERR_BASE + CUfileStatus_t) for failed entries */

struct group {
	CUfileBatchHandle_t h;
	int setup;
	int n, pending;
	struct slot **slots;
	CUfileIOParams_t *params;
	CUfileIOEvents_t *ev;
};

struct batch_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
	int gsize;
	struct group g[NGROUPS];
	int busy[NGROUPS];	/* FIFO of busy group indexes */
	int nbusy;
	int stalled;		/* the library stopped completing: give up, don't wait again */
};

#define STALL_NS (30ull * 1000000000ull)

static int batch_global_init(char *err, size_t errlen)
{
	if (gpu_global_init(1, err, errlen) != 0)
		return -1;
	if (!cu.cuFileBatchIOSetUp || !cu.cuFileBatchIOSubmit || !cu.cuFileBatchIOGetStatus ||
	    !cu.cuFileBatchIODestroy) {
		snprintf(err, errlen, "%s has no cuFile batch API: xfer_type 6 needs GDS >= 1.6", cu.cufile_path);
		return -1;
	}
	return 0;
}

static int batch_thread_init(struct worker *w)
{
	struct batch_thread *t = calloc(1, sizeof(*t));
	int depth = w->job->depth > 0 ? w->job->depth : 4;

	w->priv = t;
	if (!t) {
		werr(w, "out of memory");
		return -1;
	}
	t->gsize = depth >= NGROUPS ? (depth + NGROUPS - 1) / NGROUPS : 1;
	depth = depth >= NGROUPS ? t->gsize * NGROUPS : 1;
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, depth) != 0 || cufile_register_buf(w) != 0)
		return -1;
	for (int i = 0; i < NGROUPS && i * t->gsize < depth; i++) {
		struct group *g = &t->g[i];
		CUfileError_t fe;

		g->slots = calloc((size_t)t->gsize, sizeof(*g->slots));
		g->params = calloc((size_t)t->gsize, sizeof(*g->params));
		g->ev = calloc((size_t)t->gsize, sizeof(*g->ev));
		if (!g->slots || !g->params || !g->ev) {
			werr(w, "out of memory");
			return -1;
		}
		fe = cu.cuFileBatchIOSetUp(&g->h, (unsigned)t->gsize);
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileBatchIOSetUp(%d): %s (properties.io_batchsize limits -B/2)", t->gsize,
			     cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		g->setup = 1;
	}
	return 0;
}

static int batch_wait_group(struct worker *w, struct group *g);

static void batch_thread_exit(struct worker *w)
{
	struct batch_thread *t = w->priv;

	if (t) {
		/* drain whatever a failed run left in flight before freeing buffers */
		while (t->nbusy > 0) {
			struct group *g = &t->g[t->busy[0]];

			if ((t->stalled || batch_wait_group(w, g) != 0) && cu.cuFileBatchIOCancel)
				cu.cuFileBatchIOCancel(g->h);
			memmove(t->busy, t->busy + 1, sizeof(t->busy[0]) * (size_t)(--t->nbusy));
		}
		for (int i = 0; i < NGROUPS; i++) {
			if (t->g[i].setup)
				cu.cuFileBatchIODestroy(t->g[i].h);
			free(t->g[i].slots);
			free(t->g[i].params);
			free(t->g[i].ev);
		}
	}
	cufile_deregister_buf(w);
	gpu_slots_free(w);
	free(t);
	w->priv = NULL;
}

static int batch_room(struct worker *w)
{
	struct batch_thread *t = w->priv;
	int idle = 0;

	for (int i = 0; i < NGROUPS; i++)
		if (t->g[i].setup && t->g[i].pending == 0)
			idle++;
	return idle * t->gsize;
}

static int batch_submit(struct worker *w, struct slot **list, int n)
{
	struct batch_thread *t = w->priv;

	for (int gi = 0; gi < NGROUPS && n > 0; gi++) {
		struct group *g = &t->g[gi];
		int m = n < t->gsize ? n : t->gsize;
		CUfileError_t fe;

		if (!g->setup || g->pending)
			continue;
		for (int i = 0; i < m; i++) {
			struct slot *s = list[i];
			CUfileIOParams_t *p = &g->params[i];

			memset(p, 0, sizeof(*p));
			p->mode = CUFILE_BATCH;
			p->u.batch.devPtr_base = t->base.dev;
			p->u.batch.devPtr_offset = (off_t)s->buf_off;
			p->u.batch.file_offset = (off_t)s->off;
			p->u.batch.size = s->len;
			p->fh = w->fh;
			p->opcode = s->write ? CUFILE_WRITE : CUFILE_READ;
			p->cookie = s;
			g->slots[i] = s;
		}
		fe = cu.cuFileBatchIOSubmit(g->h, (unsigned)m, g->params, 0);
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileBatchIOSubmit(%d): %s", m, cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		g->n = g->pending = m;
		t->busy[t->nbusy++] = gi;
		list += m;
		n -= m;
	}
	if (n > 0) {
		werr(w, "batch engine: no idle batch handle for %d ops", n);
		return -1;
	}
	return 0;
}

/* Wait with a timeout so that a batch the library never completes becomes
 * an error after STALL_NS instead of a hung benchmark. */
static int batch_wait_group(struct worker *w, struct group *g)
{
	struct batch_thread *bt = w->priv;
	uint64_t last = now_ns();

	if (bt->stalled)
		return -1;
	while (g->pending > 0) {
		unsigned nr = (unsigned)g->pending;
		struct timespec to = { 0, 100 * 1000 * 1000 };
		CUfileError_t fe = cu.cuFileBatchIOGetStatus(g->h, 1, &nr, g->ev, &to);
		uint64_t t;

		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileBatchIOGetStatus: %s", cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		t = now_ns();
		if (nr == 0) {
			if (t - last > STALL_NS) {
				werr(w, "cuFile batch stalled: %d of %d entries not completed after %llu s",
				     g->pending, g->n, (unsigned long long)(STALL_NS / 1000000000ull));
				bt->stalled = 1;
				return -1;
			}
			continue;
		}
		last = t;
		for (unsigned i = 0; i < nr && g->pending > 0; i++) {
			struct slot *s = g->ev[i].cookie;

			if (!s)
				continue;
			s->t_done = t;
			if (g->ev[i].status == CUFILE_COMPLETE)
				s->res = (ssize_t)g->ev[i].ret;
			else
				s->res = -(BATCH_ERR_BASE + (ssize_t)g->ev[i].status);
			g->pending--;
		}
	}
	return 0;
}

/* Block until the oldest batch has completed entirely; return its slots. */
static int batch_reap(struct worker *w, struct slot **done, int max)
{
	struct batch_thread *t = w->priv;
	struct group *g;
	int n;

	if (!t->nbusy)
		return 0;
	g = &t->g[t->busy[0]];
	if (batch_wait_group(w, g) != 0)
		return -1;
	memmove(t->busy, t->busy + 1, sizeof(t->busy[0]) * (size_t)(--t->nbusy));
	n = g->n < max ? g->n : max;
	for (int i = 0; i < n; i++)
		done[i] = g->slots[i];
	g->n = 0;
	return n;
}

static const char *batch_strerror(ssize_t res, char *buf, size_t len)
{
	if (-res >= BATCH_ERR_BASE) {
		long st = (long)(-res - BATCH_ERR_BASE);

		snprintf(buf, len, "batch entry status %s (0x%lx)",
			 st == CUFILE_FAILED ? "FAILED" : st == CUFILE_INVALID ? "INVALID" :
			 st == CUFILE_CANCELED ? "CANCELED" : st == CUFILE_TIMEOUT ? "TIMEOUT" : "?", st);
		return buf;
	}
	return cufile_io_strerror(res, buf, len);
}

const struct engine engine_batch = {
	.xfer = 6,
	.global_init = batch_global_init,
	.global_exit = gpu_global_exit,
	.thread_init = batch_thread_init,
	.thread_exit = batch_thread_exit,
	.file_open = cufile_register_fd,
	.file_close = cufile_deregister_fd,
	.room = batch_room,
	.submit = batch_submit,
	.reap = batch_reap,
	.to_host = gpu_to_host,
	.from_host = gpu_from_host,
	.strerror = batch_strerror,
};
#endif
