/* xfer_type 6, cuFile batch API (gdsio GPU_BATCH). A batch handle takes one
 * submission at a time and is free again only when every entry of it has
 * completed, so a thread keeps its -B slots in flight over a pool of handles
 * of up to -B/2 entries each, twice as many as -B needs: each reap collects
 * the entries that are done from every busy handle (not only the oldest, and
 * not only whole batches), and their slots go out again at once in an idle
 * handle while the rest of their batch is still running. It waits on the
 * oldest handle only when nothing is done anywhere. */
#ifdef HAVE_CUDA
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

#define BATCH_ERR_BASE 200000	/* -(BATCH_ERR_BASE + CUfileStatus_t) for failed entries */
#define STALL_NS (30ull * 1000000000ull)
#define WAIT_NS (1000 * 1000)	/* one wait on the oldest handle, then every handle is looked at again */

struct group {
	CUfileBatchHandle_t h;
	int setup;
	int pending;		/* entries submitted and not yet reported */
	CUfileIOParams_t *params;
	CUfileIOEvents_t *ev;
};

struct batch_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
	int gsize;		/* entries per handle */
	int ngroups;
	struct group *g;
	int *busy;		/* indexes of the handles with pending entries, oldest first */
	int nbusy;
	uint64_t progress;	/* ns: the last completion seen */
	int stalled;		/* the library stopped completing: give up, don't wait again */
};

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

static int group_setup(struct worker *w, struct group *g, int gsize)
{
	CUfileError_t fe;

	g->params = calloc((size_t)gsize, sizeof(*g->params));
	g->ev = calloc((size_t)gsize, sizeof(*g->ev));
	if (!g->params || !g->ev) {
		werr(w, "out of memory");
		return -1;
	}
	fe = cu.cuFileBatchIOSetUp(&g->h, (unsigned)gsize);
	if (fe.err != CU_FILE_SUCCESS) {
		char b[160];

		werr(w, "cuFileBatchIOSetUp(%d): %s (properties.io_batchsize limits -B/2)", gsize,
		     cufile_errstr(fe, b, sizeof(b)));
		return -1;
	}
	g->setup = 1;
	return 0;
}

static int batch_thread_init(struct worker *w)
{
	struct batch_thread *t = calloc(1, sizeof(*t));
	int depth = w->job->depth > 0 ? w->job->depth : w->job->xt->depth;

	w->priv = t;
	if (!t) {
		werr(w, "out of memory");
		return -1;
	}
	t->gsize = depth >= 2 ? (depth + 1) / 2 : 1;
	t->ngroups = 2 * ((depth + t->gsize - 1) / t->gsize);
	t->g = calloc((size_t)t->ngroups, sizeof(*t->g));
	t->busy = calloc((size_t)t->ngroups, sizeof(*t->busy));
	if (!t->g || !t->busy) {
		werr(w, "out of memory");
		return -1;
	}
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, depth) != 0 || cufile_register_buf(w) != 0)
		return -1;
	for (int i = 0; i < t->ngroups; i++)
		if (group_setup(w, &t->g[i], t->gsize) != 0)
			return -1;
	return 0;
}

/* The busy list without the handles whose entries have all been reported (idle again). */
static void drop_idle(struct batch_thread *t)
{
	int k = 0;

	for (int i = 0; i < t->nbusy; i++)
		if (t->g[t->busy[i]].pending > 0)
			t->busy[k++] = t->busy[i];
	t->nbusy = k;
}

/* The entries of handle g that are done, into done[] from *n on (at most max in all):
 * min_nr 0 with a zero timeout looks without waiting. -1 with w->err on a library error. */
static int collect(struct worker *w, struct group *g, unsigned min_nr, long wait_ns, struct slot **done, int *n,
		   int max)
{
	struct batch_thread *t = w->priv;
	unsigned nr = (unsigned)(g->pending < max - *n ? g->pending : max - *n);
	struct timespec to = { 0, wait_ns };
	CUfileError_t fe;
	uint64_t now;

	if (!nr)
		return 0;
	fe = cu.cuFileBatchIOGetStatus(g->h, min_nr, &nr, g->ev, &to);
	if (fe.err != CU_FILE_SUCCESS) {
		char b[160];

		werr(w, "cuFileBatchIOGetStatus: %s", cufile_errstr(fe, b, sizeof(b)));
		return -1;
	}
	now = now_ns();
	for (unsigned i = 0; i < nr && g->pending > 0; i++) {
		struct slot *s = g->ev[i].cookie;

		if (!s)
			continue;
		s->t_done = now;
		s->res = g->ev[i].status == CUFILE_COMPLETE ? (ssize_t)g->ev[i].ret
							    : -(BATCH_ERR_BASE + (ssize_t)g->ev[i].status);
		done[(*n)++] = s;
		g->pending--;
		t->progress = now;
	}
	return 0;
}

/* Every entry that is done, from every busy handle; when none is, wait on the oldest handle
 * (WAIT_NS at a time, then look at all of them again), so that a batch the library never
 * completes becomes an error after STALL_NS instead of a hung benchmark. */
static int batch_reap(struct worker *w, struct slot **done, int max)
{
	struct batch_thread *t = w->priv;
	int n = 0;

	if (t->stalled)
		return -1;
	t->progress = now_ns();
	while (t->nbusy > 0) {
		for (int i = 0; i < t->nbusy; i++)
			if (collect(w, &t->g[t->busy[i]], 0, 0, done, &n, max) != 0)
				return -1;
		if (n)
			break;
		if (collect(w, &t->g[t->busy[0]], 1, WAIT_NS, done, &n, max) != 0)
			return -1;
		if (n)
			break;
		if (now_ns() - t->progress > STALL_NS) {
			werr(w, "cuFile batch stalled: %d handle(s) with entries not completed after %llu s", t->nbusy,
			     (unsigned long long)(STALL_NS / 1000000000ull));
			t->stalled = 1;
			return -1;
		}
	}
	drop_idle(t);
	return n;
}

static void batch_thread_exit(struct worker *w)
{
	struct batch_thread *t = w->priv;

	if (t && t->g) {
		/* drain whatever a failed run left in flight before freeing buffers */
		struct slot **done = calloc((size_t)(w->depth > 0 ? w->depth : 1), sizeof(*done));

		while (t->nbusy > 0 && done && batch_reap(w, done, w->depth) >= 0)
			;
		for (int i = 0; i < t->nbusy && cu.cuFileBatchIOCancel; i++)
			cu.cuFileBatchIOCancel(t->g[t->busy[i]].h);
		free(done);
		for (int i = 0; i < t->ngroups; i++) {
			if (t->g[i].setup)
				cu.cuFileBatchIODestroy(t->g[i].h);
			free(t->g[i].params);
			free(t->g[i].ev);
		}
		free(t->g);
		free(t->busy);
	}
	cufile_deregister_buf(w);
	gpu_slots_free(w);
	free(t);
	w->priv = NULL;
}

/* entries the idle handles take now */
static int batch_room(struct worker *w)
{
	struct batch_thread *t = w->priv;

	return (t->ngroups - t->nbusy) * t->gsize;
}

static int batch_submit(struct worker *w, struct slot **list, int n)
{
	struct batch_thread *t = w->priv;

	for (int gi = 0; gi < t->ngroups && n > 0; gi++) {
		struct group *g = &t->g[gi];
		int m = n < t->gsize ? n : t->gsize;
		CUfileError_t fe;

		if (g->pending)
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
		}
		fe = cu.cuFileBatchIOSubmit(g->h, (unsigned)m, g->params, 0);
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			werr(w, "cuFileBatchIOSubmit(%d): %s", m, cufile_errstr(fe, b, sizeof(b)));
			return -1;
		}
		g->pending = m;
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
