/* The common I/O loop, shared by every transfer engine: threads, offsets,
 * timing, latency histogram, deadline, verify. Engines only move bytes, through
 * the operations table; where the workers run (-P) and when they start comes
 * in as struct run_place, so this file calls nothing above it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gdsbench.h"

/* A two-phase gate instead of barriers, so that a run where some threads
 * could not be created still finishes cleanly: phase 1 = go, 2 = may tear down. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_ready, g_finished, g_phase;
static atomic_int g_abort;	/* a worker failed its setup: nobody starts I/O */

static void gate_arrive(int *counter, int phase)
{
	pthread_mutex_lock(&g_mu);
	(*counter)++;
	pthread_cond_broadcast(&g_cv);
	while (g_phase < phase)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
}

static void gate_wait_all(int *counter, int n)
{
	pthread_mutex_lock(&g_mu);
	while (*counter < n)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
}

static void gate_open(int phase)
{
	pthread_mutex_lock(&g_mu);
	g_phase = phase;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double process_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: one multiply-xorshift chain, plenty for offsets */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The size of the next op: the I/O size, or a random MIN + k*STEP (-i MIN:MAX:STEP). */
static inline size_t next_len(struct worker *w)
{
	const struct job *j = w->job;

	if (!j->io_step)
		return (size_t)j->io_size;
	return (size_t)(j->io_min + (rng_next(&w->rng) % ((j->io_size - j->io_min) / j->io_step + 1)) * j->io_step);
}

/* Random offsets: multiples of -a (default the I/O size), 512 bytes with -U,
 * so that [off, off+len) stays inside the region. Sequential: the next bytes
 * of the thread's region, wrapping around in timed runs as gdsio does; the op
 * at the end of the region is cut to what is left. */
static inline uint64_t next_offset(struct worker *w, size_t *len)
{
	const struct job *j = w->job;

	if (io_is_rand(j->io_type)) {
		uint64_t gran = j->unaligned ? 512 : j->align ? j->align : j->io_min;
		uint64_t slots = (w->rnd_len - *len) / gran + 1;

		return w->rnd_base + (rng_next(&w->rng) % slots) * gran;
	}
	if (w->seq_pos >= w->seq_len)
		w->seq_pos = 0;
	if (*len > w->seq_len - w->seq_pos)
		*len = (size_t)(w->seq_len - w->seq_pos);
	w->seq_pos += *len;
	return w->seq_base + w->seq_pos - *len;
}

/* -R/-F buffer contents: splitmix64 words from the job's seed. */
static void fill_random(void *buf, size_t len, uint64_t *state)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = rng_next(state);

		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* ---- NUMA pinning without libnuma: the node's cpulist + set_mempolicy ---- */

static int parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b;

		if (end == s || a < 0)
			return -1;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a)
				return -1;
			s = end;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		if (*s == ',')
			s++;
	}
	return CPU_COUNT(set) ? 0 : -1;
}

static int numa_node_cpus(int node, cpu_set_t *set)
{
	char path[128], buf[4096];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	rc = parse_cpulist(buf, set);
	return rc;
}

static void pin_to_node(struct worker *w, int node)
{
	cpu_set_t set;
	unsigned long mask[16] = { 0 };

	if (numa_node_cpus(node, &set) == 0)
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	/* MPOL_PREFERRED (1): buffers allocated after this come from the node */
	if (node < (int)(sizeof(mask) * 8)) {
		mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
		if (syscall(SYS_set_mempolicy, 1, mask, sizeof(mask) * 8) != 0 && errno != ENOSYS)
			(void)w;	/* best effort: a kernel without NUMA keeps default policy */
	}
}

/* ---- files ---- */

void job_file_path(const struct job *j, int idx, char *out, size_t len)
{
	if (j->file[0])
		snprintf(out, len, "%s", j->file);
	else
		snprintf(out, len, "%s/gdsbench.%d", j->dir, j->file_base + idx);
}

int job_file_place(const struct job *j, int idx, char *dir, size_t dlen, char *name, size_t nlen)
{
	if (j->file[0])
		return df_split(j->file, dir, dlen, name, nlen);
	snprintf(dir, dlen, "%s", j->dir);
	snprintf(name, nlen, "gdsbench.%d", j->file_base + idx);
	return 0;
}

/* The worker's file, through datafile.c: its directory (a -D target's last
 * component is no link), then the file relative to it, never through a link;
 * a new file with O_EXCL, which also tells whether this worker made it: one a
 * failed start made is removed again (worker_main), an existing one is left alone. */
static int open_file(struct worker *w)
{
	const struct job *j = w->job;
	int write = io_is_write(j->io_type);
	int flags = write ? (O_RDWR | O_CREAT) : O_RDONLY;
	uint64_t need = j->offset + j->file_size;
	char dir[PATH_MAX], msg[PATH_MAX + 128];

	if (j->refused[0]) {	/* found by the check before the run: nothing is opened */
		werr(w, "%s", j->refused);
		return -1;
	}
	if ((w->job->xt->flags & ENG_ODIRECT) && !j->buffered)
		flags |= O_DIRECT;
	if (job_file_place(j, w->idx, dir, sizeof(dir), w->name, sizeof(w->name)) != 0) {
		werr(w, "%s: not a file name", w->path);
		return -1;
	}
	w->dirfd = df_dir_open(dir, j->dir[0] != 0, msg, sizeof(msg));
	if (w->dirfd < 0) {
		w->dirfd = -1;
		werr(w, "%s", msg);
		return -1;
	}
	w->fd = df_open(w->dirfd, w->name, w->path, flags, NULL, &w->created, &w->st, msg, sizeof(msg));
	if (w->fd < 0) {
		int e = errno, refused = w->fd == DF_REFUSED;

		w->fd = -1;
		if (!refused && e == EINVAL && (flags & O_DIRECT))
			werr(w, "open %s with O_DIRECT: %s (the file system does not support O_DIRECT, e.g. tmpfs)",
			     w->path, strerror(e));
		else
			werr(w, "%s", msg);
		return -1;
	}
	/* Random writes into a fresh file: give it its size first so that the
	 * region exists (sparse) and a later read run finds it whole. Only the
	 * first thread of a shared file does it. */
	if (write && io_is_rand(j->io_type) && (uint64_t)w->st.st_size < need &&
	    (j->dir[0] || w->idx == 0)) {
		if (ftruncate(w->fd, (off_t)need) != 0) {
			werr(w, "ftruncate %s: %s", w->path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* ---- the loops ---- */

static void count_error(struct worker *w, struct slot *s)
{
	char buf[256];

	w->errors++;
	w->failed = 1;
	if (s->res >= 0)
		werr(w, "%s %s at offset %llu: short transfer, %zd of %zu bytes",
		     s->write ? "write" : "read", w->path, (unsigned long long)s->off, s->res, s->len);
	else
		werr(w, "%s %s at offset %llu: %s", s->write ? "write" : "read", w->path,
		     (unsigned long long)s->off,
		     w->eng->strerror ? w->eng->strerror(s->res, buf, sizeof(buf)) : strerror((int)-s->res));
}

struct wctx {
	struct worker *w;
	uint64_t *written;	/* -V writes: bit per 4 KiB sector of the random area */
	uint64_t cpu0;
};

static inline void mark_written(struct wctx *c, uint64_t off, size_t len)
{
	struct worker *w = c->w;

	for (uint64_t sec = (off - w->rnd_base) / GDS_SECTOR; len >= GDS_SECTOR; sec++, len -= GDS_SECTOR)
		c->written[sec / 64] |= 1ull << (sec % 64);
}

static inline int prepare(struct wctx *c, struct slot *s)
{
	struct worker *w = c->w;
	const struct job *j = w->job;

	s->len = next_len(w);
	s->off = next_offset(w, &s->len);
	s->write = io_is_write(j->io_type);
	w->issued += s->len;
	if (s->write && j->refill) {
		fill_random(s->host, s->len, &w->fill_rng);
		if ((w->job->xt->flags & ENG_GPU) && w->eng->from_host(w, s) != 0)
			return -1;
	} else if (s->write && !j->fill_random) {
		if (!(w->job->xt->flags & ENG_GPU)) {
			pattern_stamp(s->host, s->len, s->off);
		} else if (j->verify) {
			/* GPU buffers get the stamped pattern only under -V: an H2D
			 * copy per op would otherwise distort the measurement */
			pattern_stamp(s->host, s->len, s->off);
			if (w->eng->from_host(w, s) != 0)
				return -1;
		}
	}
	return 0;
}

static inline int complete(struct wctx *c, struct slot *s, uint64_t t_done)
{
	struct worker *w = c->w;
	const struct job *j = w->job;

	hist_add(&w->hist, t_done - s->t_submit);
	if (s->res != (ssize_t)s->len) {
		count_error(w, s);
		return -1;
	}
	w->ops++;
	w->bytes += s->len;
	if (s->len < w->len_min)
		w->len_min = s->len;
	if (s->len > w->len_max)
		w->len_max = s->len;
	if (j->verify) {
		if (s->write) {
			mark_written(c, s->off, s->len);
		} else {
			uint64_t bad, first = 0;

			if (w->eng->to_host && w->eng->to_host(w, s) != 0) {
				w->failed = 1;
				return -1;
			}
			bad = pattern_check(s->host, s->len, s->off, &first);
			if (bad) {
				if (!w->verify_errors)
					w->first_bad_off = first;
				w->verify_errors += bad;
			}
		}
	}
	return 0;
}

static void loop_sync(struct wctx *c)
{
	struct worker *w = c->w;
	struct slot *s = &w->slots[0];
	uint64_t t0, t1;

	for (;;) {
		if ((!w->deadline || w->job->one_pass) && w->issued >= w->pass_bytes)
			break;
		if (prepare(c, s) != 0) {
			w->failed = 1;
			break;
		}
		t0 = now_ns();
		s->t_submit = t0;
		s->res = w->eng->io(w, s);
		t1 = now_ns();
		if (complete(c, s, t1) != 0)
			break;
		if ((w->deadline && t1 >= w->deadline) ||
		    atomic_load_explicit(&g_stop, memory_order_relaxed))
			break;
	}
}

/* The free slots the engine takes now (room), each given its next op: how many went into
 * batch[]; *stop when an op could not be prepared or this pass is over. */
static int queue_prepare(struct wctx *c, struct slot **freel, int *nfree, struct slot **batch, int room, int *stop)
{
	struct worker *w = c->w;
	int n = 0;

	while (!*stop && *nfree > 0 && n < room) {
		struct slot *s;

		if ((!w->deadline || w->job->one_pass) && w->issued >= w->pass_bytes)
			break;
		s = freel[--*nfree];
		if (prepare(c, s) != 0) {
			w->failed = 1;
			*stop = 1;
			freel[(*nfree)++] = s;
			break;
		}
		batch[n++] = s;
	}
	return n;
}

/* The ops the engine reaped: counted, verified, their slots free again; *stop at an error,
 * the deadline or a signal. */
static void queue_complete(struct wctx *c, struct slot **done, int k, struct slot **freel, int *nfree, int *stop)
{
	struct worker *w = c->w;
	uint64_t t = now_ns();

	for (int i = 0; i < k; i++) {
		struct slot *s = done[i];

		if (complete(c, s, s->t_done ? s->t_done : t) != 0)
			*stop = 1;
		freel[(*nfree)++] = s;
	}
	if ((w->deadline && t >= w->deadline) || atomic_load_explicit(&g_stop, memory_order_relaxed))
		*stop = 1;
}

static void loop_queued(struct wctx *c)
{
	struct worker *w = c->w;
	int depth = w->depth, nfree = depth, inflight = 0, stop = 0;
	struct slot **freel = calloc((size_t)depth, sizeof(*freel));
	struct slot **batch = calloc((size_t)depth, sizeof(*batch));
	struct slot **done = calloc((size_t)depth, sizeof(*done));

	if (!freel || !batch || !done) {
		werr(w, "out of memory");
		w->failed = 1;
		goto out;
	}
	for (int i = 0; i < depth; i++)
		freel[i] = &w->slots[depth - 1 - i];
	for (;;) {
		int k, n = queue_prepare(c, freel, &nfree, batch, w->eng->room ? w->eng->room(w) : nfree, &stop);

		if (n) {
			uint64_t t0 = now_ns();

			for (int i = 0; i < n; i++) {
				batch[i]->t_submit = t0;
				batch[i]->t_done = 0;
			}
			if (w->eng->submit(w, batch, n) != 0) {
				w->failed = 1;
				w->errors += (uint64_t)n;
				break;	/* nothing of this batch is in flight */
			}
			inflight += n;
		}
		if (!inflight)
			break;
		k = w->eng->reap(w, done, depth);
		if (k < 0) {
			w->failed = 1;
			w->errors++;
			break;
		}
		queue_complete(c, done, k, freel, &nfree, &stop);
		inflight -= k;
	}
	/* after an error: let what is still queued finish before buffers go */
	while (inflight > 0) {
		int k = w->eng->reap(w, done, depth);

		if (k <= 0)
			break;
		inflight -= k;
	}
out:
	free(freel);
	free(batch);
	free(done);
}

/* -V after writes: read every block written back with plain O_DIRECT pread,
 * independent of the engine that wrote it, and check the pattern. */
static void verify_written(struct wctx *c)
{
	struct worker *w = c->w;
	const struct job *j = w->job;
	void *buf = NULL;
	char msg[PATH_MAX + 128];
	struct stat st;
	int fd;

	/* the same file again (datafile.c checks it was not replaced) */
	fd = df_open(w->dirfd, w->name, w->path, O_RDONLY | O_DIRECT, &w->st, NULL, &st, msg, sizeof(msg));
	if (fd == DF_ERRNO && errno == EINVAL)
		fd = df_open(w->dirfd, w->name, w->path, O_RDONLY, &w->st, NULL, &st, msg, sizeof(msg));
	if (fd < 0) {
		werr(w, "verify: cannot reopen: %s", msg);
		w->failed = 1;
		return;
	}
	if (posix_memalign(&buf, GDS_SECTOR, j->io_size) != 0) {
		werr(w, "verify: out of memory for %llu bytes", (unsigned long long)j->io_size);
		w->failed = 1;
		close(fd);
		return;
	}
	/* runs of written sectors, read back in pieces of up to the I/O size */
	for (uint64_t sec = 0, nsec = w->rnd_len / GDS_SECTOR; sec < nsec;) {
		uint64_t off = w->rnd_base + sec * GDS_SECTOR, first = 0, bad;
		size_t len = 0;
		ssize_t r;

		while (sec < nsec && len < j->io_size && (c->written[sec / 64] & (1ull << (sec % 64)))) {
			len += GDS_SECTOR;
			sec++;
		}
		if (!len) {
			sec++;
			continue;
		}
		r = pread(fd, buf, len, (off_t)off);
		if (r != (ssize_t)len) {
			werr(w, "verify: read back %s at %llu: %s", w->path, (unsigned long long)off,
			     r < 0 ? strerror(errno) : "short read");
			w->failed = 1;
			w->errors++;
			break;
		}
		bad = pattern_check(buf, len, off, &first);
		if (bad) {
			if (!w->verify_errors)
				w->first_bad_off = first;
			w->verify_errors += bad;
		}
	}
	free(buf);
	close(fd);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct job *j = w->job;
	struct wctx c = { .w = w };
	int ok = 1, tinit = 0, fopen_ok = 0, started;

	hist_init(&w->hist);
	w->fd = w->dirfd = -1;
	if (j->numa >= 0)
		pin_to_node(w, j->numa);
	if (open_file(w) != 0)
		ok = 0;
	if (ok && w->eng->thread_init(w) != 0)
		ok = 0;
	else if (ok)
		tinit = 1;
	if (ok && w->eng->file_open && w->eng->file_open(w) != 0)
		ok = 0;
	else if (ok)
		fopen_ok = 1;
	if (ok && j->verify && io_is_write(j->io_type)) {
		size_t words = (size_t)((w->rnd_len / GDS_SECTOR + 63) / 64);

		c.written = calloc(words ? words : 1, sizeof(uint64_t));
		if (!c.written) {
			werr(w, "out of memory for the verify map");
			ok = 0;
		}
	}
	/* Fill every buffer with the pattern once (body + headers of offset 0);
	 * writes then only restamp headers. */
	for (int i = 0; ok && i < w->depth; i++) {
		struct slot *s = &w->slots[i];

		if (j->fill_random)
			fill_random(s->host, j->io_size, &w->fill_rng);
		else
			pattern_fill(s->host, j->io_size, 0);
		if ((w->job->xt->flags & ENG_GPU) && w->eng->from_host(w, s) != 0)
			ok = 0;
	}
	if (!ok) {
		w->failed = 1;
		w->errors++;	/* a worker that could not set up is an error of the run */
		atomic_store(&g_abort, 1);
	}

	gate_arrive(&g_ready, 1);	/* main sets t_start and the deadline, then opens */

	c.cpu0 = thread_cpu_ns();
	started = ok && !atomic_load(&g_abort);
	if (started) {
		if (w->job->xt->flags & ENG_QUEUED)
			loop_queued(&c);
		else
			loop_sync(&c);
	}
	w->t_end = now_ns();
	w->cpu_ns = thread_cpu_ns() - c.cpu0;
	gate_arrive(&g_finished, 2);	/* main samples CPU time before teardown */

	if (ok && !w->failed && c.written)
		verify_written(&c);
	free(c.written);
	if (fopen_ok && w->eng->file_close)
		w->eng->file_close(w);
	if (tinit)
		w->eng->thread_exit(w);
	if (w->fd >= 0)	/* opened, or open_file failed after the open */
		close(w->fd);
	/* no I/O was started (this or another worker failed its setup): a file
	 * this worker created is still empty, and is not left behind (only while
	 * the name still holds that file: never through a link swapped in) */
	if (w->created && !started)
		df_unlink(w->dirfd, w->name, &w->st);
	if (w->dirfd >= 0)
		close(w->dirfd);
	return NULL;
}

static void setup_regions(struct job *j, struct worker *w)
{
	uint64_t blocks = j->file_size / j->io_size;

	if (j->dir[0]) {
		w->seq_base = w->rnd_base = j->offset;
		w->seq_len = w->rnd_len = blocks * j->io_size;
	} else {
		uint64_t per = blocks / (uint64_t)j->threads;

		w->seq_base = j->offset + (uint64_t)w->idx * per * j->io_size;
		w->seq_len = per * j->io_size;
		w->rnd_base = j->offset;
		w->rnd_len = blocks * j->io_size;
	}
	w->pass_bytes = w->seq_len;
	w->seq_pos = w->issued = 0;
	w->len_min = UINT64_MAX;
	w->len_max = 0;
	w->rng = j->seed ^ (0x5851f42d4c957f2dull * (uint64_t)(w->idx + 1)) ^
		 ((uint64_t)j->file_base << 32);
	/* -R data depends on the seed and the thread, not on the offsets drawn */
	w->fill_rng = ~w->rng;
}

int run_worker_here(const struct run_place *pl, int k)
{
	return pl->nprocs <= 1 || k % pl->nprocs == pl->index;
}

/* The workers this process runs (-P: worker k over all jobs with k % procs == its index),
 * each given its job, file and region. */
static int place_workers(struct job *jobs, int njobs, const struct run_place *pl, struct worker *ws)
{
	int k = 0;

	for (int i = 0, g = 0; i < njobs; i++) {
		struct job *j = &jobs[i];

		for (int t = 0; t < j->threads; t++, g++) {
			struct worker *w;

			if (!run_worker_here(pl, g))
				continue;
			if (ws) {
				w = &ws[k];
				w->job = j;
				w->eng = j->eng;
				w->idx = t;
				job_file_path(j, t, w->path, sizeof(w->path));
				setup_regions(j, w);
			}
			k++;
		}
	}
	return k;
}

/* One thread per worker; the number started (a failure aborts the run's start, with err). */
static int start_threads(struct worker *ws, pthread_t *tids, int total, char *err, size_t errlen)
{
	for (int k = 0; k < total; k++) {
		pthread_attr_t attr;
		int e;

		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 1 << 20);
		e = pthread_create(&tids[k], &attr, worker_main, &ws[k]);
		pthread_attr_destroy(&attr);
		if (e != 0) {
			snprintf(err, errlen, "could not start thread %d of %d: %s", k + 1, total, strerror(e));
			atomic_store(&g_abort, 1);
			return k;
		}
	}
	return total;
}

/* The common start once every thread is set up: with worker processes the parent's t_start
 * (the gate, -1 when another process failed), else now. *cpu0: the process's CPU time then. */
static int start_gate(const struct run_place *pl, int ok, uint64_t *t_start, double *cpu0, char *err, size_t errlen)
{
	int rc = 0;

	if (pl->nprocs > 1 && pl->gate) {
		if (pl->gate(pl->ctx, ok, t_start) != 0) {
			atomic_store(&g_abort, 1);
			if (ok) {
				snprintf(err, errlen, "no I/O was started: another worker process failed its setup "
					 "or the run was interrupted");
				rc = -1;
			}
		}
		*cpu0 = process_cpu_s();
	} else {
		*cpu0 = process_cpu_s();
		*t_start = now_ns();
	}
	return rc;
}

/* The workers' counters and histograms into their jobs' results (each error printed);
 * -1 when any worker failed. */
static int collect_results(struct job *jobs, int njobs, struct worker *ws, int made, uint64_t t_start)
{
	int rc = 0;

	for (int i = 0; i < njobs; i++) {
		memset(&jobs[i].res, 0, sizeof(jobs[i].res));
		hist_init(&jobs[i].res.hist);
		jobs[i].res.t_start = t_start;
		jobs[i].res.t_end = t_start;
	}
	for (int k = 0; k < made; k++) {
		struct worker *w = &ws[k];
		struct result *r = &w->job->res;

		hist_merge(&r->hist, &w->hist);
		r->bytes += w->bytes;
		r->ops += w->ops;
		r->errors += w->errors;
		r->verify_errors += w->verify_errors;
		r->cpu_s += (double)w->cpu_ns / 1e9;
		if (w->ops && (!r->len_min || w->len_min < r->len_min))
			r->len_min = w->len_min;
		if (w->len_max > r->len_max)
			r->len_max = w->len_max;
		if (w->t_end > r->t_end)
			r->t_end = w->t_end;
		if (w->err[0] && !r->error[0])
			snprintf(r->error, sizeof(r->error), "%s", w->err);
		if (w->err[0])
			fprintf(stderr, "gdsbench: %s%s%s\n", w->job->name[0] ? w->job->name : "",
				w->job->name[0] ? ": " : "", w->err);
		if (w->failed || w->errors)
			rc = -1;
		if (w->verify_errors)
			fprintf(stderr, "gdsbench: verify: %s: %llu bad 4KiB sector(s), first at offset %llu\n",
				w->path, (unsigned long long)w->verify_errors, (unsigned long long)w->first_bad_off);
	}
	return rc;
}

int run_jobs(struct job *jobs, int njobs, const struct run_place *pl, double *cpu_s, char *err, size_t errlen)
{
	int total = place_workers(jobs, njobs, pl, NULL), made, rc;
	struct worker *ws = calloc((size_t)total, sizeof(*ws));
	pthread_t *tids = calloc((size_t)total, sizeof(*tids));
	uint64_t t_start = 0;
	double cpu0, cpu1;

	if (!ws || !tids) {
		snprintf(err, errlen, "out of memory for %d workers", total);
		free(ws);
		free(tids);
		return -1;
	}
	g_ready = g_finished = g_phase = 0;
	atomic_store(&g_abort, 0);
	place_workers(jobs, njobs, pl, ws);
	made = start_threads(ws, tids, total, err, errlen);
	rc = made == total ? 0 : -1;

	gate_wait_all(&g_ready, made);
	if (start_gate(pl, made == total && !atomic_load(&g_abort), &t_start, &cpu0, err, errlen) != 0)
		rc = -1;
	for (int k = 0; k < made; k++)
		ws[k].deadline = ws[k].job->duration > 0 ? t_start + (uint64_t)(ws[k].job->duration * 1e9) : 0;
	gate_open(1);
	gate_wait_all(&g_finished, made);
	cpu1 = process_cpu_s();
	gate_open(2);
	for (int k = 0; k < made; k++)
		pthread_join(tids[k], NULL);

	if (collect_results(jobs, njobs, ws, made, t_start) != 0)
		rc = -1;
	*cpu_s = cpu1 - cpu0;
	if (rc != 0 && !err[0])
		snprintf(err, errlen, "%s", RUN_ERRORS_SEE_ABOVE);
	free(ws);
	free(tids);
	return rc;
}
