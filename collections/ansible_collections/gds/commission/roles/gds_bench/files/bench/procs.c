/* The run in this process (engine setup, run, path evidence, teardown), and
 * -P/--procs N: the same run spread over N forked worker processes.
 *
 * Why processes: in cuFile's compat mode every cuFileRead goes through the
 * library's per-process POSIX bounce-buffer pool and I/O thread pool
 * (execution.max_io_threads per GPU); fio's libcufile engine runs one process
 * per job, so each job has a cuFile instance of its own. -P gives gdsbench the
 * same shape without changing the I/O: worker k (counted over all jobs) runs
 * in process k % N with the same file, region, seed and buffers as it would
 * as a thread, so -P changes only how many cuFile/CUDA instances serve the
 * workers.
 *
 * The processes are forked before any CUDA or cuFile call (neither survives a
 * fork); each opens its own driver, runs its workers, and writes its per-job
 * results (counters, log-linear histogram, path evidence) into a MAP_SHARED
 * region. They start I/O together: each reports "set up" and waits on a
 * futex for the parent, which stamps one t_start (CLOCK_MONOTONIC is
 * system-wide) once every process is ready. The parent merges the results,
 * so the text line and the JSON are those of one run. */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gdsbench.h"
#ifdef HAVE_CUDA
#include "cuda_rt.h"
#endif

/* ---- the run in this process ---- */

#ifdef HAVE_CUDA
/* Threads of job ji that run in this process. */
static int job_threads_here(const struct run_place *pl, const struct job *jobs, int ji)
{
	int k0 = 0, n = 0;

	for (int i = 0; i < ji; i++)
		k0 += jobs[i].threads;
	for (int t = 0; t < jobs[ji].threads; t++)
		if (run_worker_here(pl, k0 + t))
			n++;
	return n;
}
#endif

int run_here(struct job *jobs, int njobs, const struct run_place *pl, int *run_rc, double *cpu_s, char *err,
	     size_t errlen)
{
	int inited[GDS_XFER_TYPES] = { 0 };
	char msg[PATH_MAX + 256];

	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];

		if (j->eng->global_init && !inited[j->xfer]) {
			if (j->eng->global_init(msg, sizeof(msg)) != 0) {
				snprintf(err, errlen, "-x %d: %s", j->xfer, msg);
				return -1;
			}
			inited[j->xfer] = 1;
		}
	}
#ifdef HAVE_CUDA
	{
		/* Batch entries of all threads of this process together stay within
		 * the library's queue (execution.max_io_queue_depth): past it
		 * submissions stall. The queue is per cuFile instance, so per process. */
		size_t limit = 0, total = 0, threads = 0;

		for (int i = 0; i < njobs; i++)
			if (jobs[i].xt->flags & ENG_IOQUEUE) {
				limit = cufile_queue_limit();
				size_t here = (size_t)job_threads_here(pl, jobs, i);

				total += here * (size_t)jobs[i].depth;
				threads += here;
			}
		if (limit && threads && total > limit) {
			int d = (int)(limit / threads) & ~1;

			if (d < 2)
				d = 2;
			if (pl->index == 0)
				fprintf(stderr, "gdsbench: -B lowered to %d per thread: %zu batch entries in flight%s would "
					"exceed cuFile's max_io_queue_depth (%zu)\n", d, total,
					pl->nprocs > 1 ? " per process" : "", limit);
			for (int i = 0; i < njobs; i++)
				if ((jobs[i].xt->flags & ENG_IOQUEUE) && jobs[i].depth > d)
					jobs[i].depth = d;
		}
	}
#endif
	pattern_init();
	path_begin(jobs, njobs);
	err[0] = 0;
	*run_rc = run_jobs(jobs, njobs, pl, cpu_s, err, errlen);
	path_finish(jobs, njobs);
	for (int x = 0; x < GDS_XFER_TYPES; x++) {
		const struct engine *e = engine_get(x);

		if (inited[x] && e && e->global_exit)
			e->global_exit();
	}
	return 0;
}

/* ---- how many processes when -P is not given ---- */

/* In cuFile's compat mode (no nvidia-fs, no P2PDMA) every op of a process
 * goes through that process's one cuFile instance (its POSIX bounce-buffer
 * pool, I/O threads and locks) and its one CUDA context. bench/probe/cufile_probe
 * (the lab's), the bare cuFileRead loop, moved 1.37x more with 8 processes than
 * with 8 threads of one process on 1 MiB sequential reads (1.27x on writes);
 * more I/O threads, parallel_io off or unregistered buffers did not help the
 * threads (bench/RESULTS.md section 9). So a job of large sequential I/O
 * through libcufile (ENG_CUFILE: the synchronous, stream and batch APIs alike,
 * since all three share the process's instance) runs one process per thread
 * (capped at the online CPUs), as fio's libcufile engine does by default.
 * Small or random I/O stays in threads: there a CUDA context and a cuFile
 * instance per process cost more than they gain (4 KiB random reads:
 * 0.14x-0.3x with processes). -P 1 keeps threads for any job. */
int procs_default(const struct job *jobs, int njobs, int total_threads)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = total_threads;

	for (int i = 0; i < njobs; i++)
		if (!(jobs[i].xt->flags & ENG_CUFILE) || io_is_rand(jobs[i].io_type) ||
		    jobs[i].io_size < PROCS_DEFAULT_MIN_IO)
			return 1;
	if (cpus > 0 && n > cpus)
		n = (int)cpus;
	return n > 1 ? n : 1;
}

/* ---- worker processes ---- */

struct procs_ctl {
	atomic_int go;		/* futex word: 0 wait, 1 start */
	atomic_int failed;	/* a process could not set up: nobody starts I/O */
	uint64_t t_start;	/* written before go */
};

struct proc_out {
	atomic_int at_gate;	/* set up (or failed) and waiting for go */
	atomic_int done;	/* results below are complete */
	int init_failed;
	int rc;
	double cpu_s;
	int depth[GDS_MAX_JOBS];
	char err[PATH_MAX + 512];
};

/* What the gate of worker process p needs: the shared control block and its own slot. */
struct gate_ctx {
	struct procs_ctl *ctl;
	struct proc_out *out;
};

#define ALIGN_UP(x) (((x) + 63) & ~(size_t)63)

static void futex_wait(atomic_int *addr, int val, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	syscall(SYS_futex, (int *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(atomic_int *addr)
{
	syscall(SYS_futex, (int *)addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* The run's gate (struct run_place) in a worker process, called once its
 * threads are set up: report, wait for the common start. Returns -1 when any
 * process failed its setup. */
static int procs_gate(void *ctx, int ok, uint64_t *t_start)
{
	struct gate_ctx *g = ctx;

	if (!ok)
		atomic_store(&g->ctl->failed, 1);
	atomic_store(&g->out->at_gate, 1);
	while (!atomic_load(&g->ctl->go))
		futex_wait(&g->ctl->go, 0, 100000000L);
	*t_start = g->ctl->t_start;
	return atomic_load(&g->ctl->failed) ? -1 : 0;
}

static void sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

static void signal_children(const pid_t *pids, const int *alive, int n, int sig)
{
	for (int p = 0; p < n; p++)
		if (alive[p])
			kill(pids[p], sig);
}

static void child_main(int p, int nprocs, pid_t parent, struct procs_ctl *ctl, struct proc_out *o,
		       struct job *jobs, int njobs, struct result *res)
{
	struct gate_ctx gc = { ctl, o };
	struct run_place pl = { nprocs, p, procs_gate, &gc };
	int run_rc = 0;
	double cpu_s = 0;

	/* a worker process must not outlive the run that waits for it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(EXIT_RUNTIME);
	if (run_here(jobs, njobs, &pl, &run_rc, &cpu_s, o->err, sizeof(o->err)) != 0) {
		o->init_failed = 1;
		atomic_store(&ctl->failed, 1);
		atomic_store(&o->at_gate, 1);
		fflush(NULL);
		_exit(EXIT_RUNTIME);
	}
	o->rc = run_rc;	/* o->err: run_jobs' message, printed once by the parent */
	o->cpu_s = cpu_s;
	for (int i = 0; i < njobs; i++) {
		res[(size_t)p * (size_t)njobs + (size_t)i] = jobs[i].res;
		o->depth[i] = jobs[i].depth;
	}
	atomic_store(&o->done, 1);
	fflush(NULL);
	_exit(run_rc == 0 ? 0 : EXIT_RUNTIME);
}

/* The parent's view of a -P run: the shared region and the worker processes. */
struct procs_run {
	int nprocs, njobs, started;
	void *map;
	size_t len;
	struct procs_ctl *ctl;
	struct proc_out *out;
	struct result *res;	/* res[p * njobs + i]: process p's result of job i */
	pid_t *pids;
	int *alive, *status;
};

static void procs_free(struct procs_run *r)
{
	if (r->map && r->map != MAP_FAILED)
		munmap(r->map, r->len);
	free(r->pids);
	free(r->alive);
	free(r->status);
}

/* The MAP_SHARED region: control block, one proc_out per process, nprocs x njobs results. */
static int procs_map(struct procs_run *r, char *err, size_t errlen)
{
	size_t off_out = ALIGN_UP(sizeof(struct procs_ctl));
	size_t off_res = off_out + ALIGN_UP(sizeof(struct proc_out) * (size_t)r->nprocs);

	r->len = off_res + sizeof(struct result) * (size_t)r->nprocs * (size_t)r->njobs;
	r->pids = calloc((size_t)r->nprocs, sizeof(*r->pids));
	r->alive = calloc((size_t)r->nprocs, sizeof(*r->alive));
	r->status = calloc((size_t)r->nprocs, sizeof(*r->status));
	r->map = r->pids && r->alive && r->status
		 ? mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
	if (r->map == MAP_FAILED) {
		snprintf(err, errlen, "-P %d: cannot set up the shared result region: %s", r->nprocs, strerror(errno));
		return -1;
	}
	r->ctl = r->map;
	r->out = (struct proc_out *)((char *)r->map + off_out);
	r->res = (struct result *)((char *)r->map + off_res);
	return 0;
}

/* Fork the worker processes (before any CUDA call: neither CUDA nor cuFile survives a fork).
 * -1 when a fork failed: the ones started are told that nobody starts I/O. */
static int procs_fork(struct procs_run *r, struct job *jobs, char *err, size_t errlen)
{
	pid_t parent = getpid();

	fflush(NULL);
	for (int p = 0; p < r->nprocs; p++) {
		pid_t pid = fork();

		if (pid == 0)
			child_main(p, r->nprocs, parent, r->ctl, &r->out[p], jobs, r->njobs, r->res);	/* no return */
		if (pid < 0) {
			snprintf(err, errlen, "-P %d: fork of worker process %d failed: %s", r->nprocs, p, strerror(errno));
			atomic_store(&r->ctl->failed, 1);
			return -1;
		}
		r->pids[p] = pid;
		r->alive[p] = 1;
		r->started++;
	}
	return 0;
}

/* Every process set up (or gone, or the run interrupted): stamp the common start and open the gate. */
static void procs_start(struct procs_run *r)
{
	for (;;) {
		int n = 0;

		for (int p = 0; p < r->started; p++) {
			if (r->alive[p] && waitpid(r->pids[p], &r->status[p], WNOHANG) == r->pids[p])
				r->alive[p] = 0;
			if (atomic_load(&r->out[p].at_gate))
				n++;
			else if (!r->alive[p]) {
				atomic_store(&r->ctl->failed, 1);	/* died in its setup */
				n++;
			}
		}
		if (n == r->started)
			break;
		if (atomic_load(&g_stop)) {
			atomic_store(&r->ctl->failed, 1);
			break;
		}
		sleep_ns(1000000L);
	}
	r->ctl->t_start = now_ns();
	atomic_store(&r->ctl->go, 1);
	futex_wake_all(&r->ctl->go);
}

/* Wait for every process; SIGINT/SIGTERM to gdsbench alone is passed on, so that the workers
 * finish the ops in flight and report. */
static void procs_wait(struct procs_run *r)
{
	int forwarded = 0;

	for (int p = 0; p < r->started; p++) {
		while (r->alive[p]) {
			pid_t w = waitpid(r->pids[p], &r->status[p], 0);

			if (w == r->pids[p] || (w < 0 && errno != EINTR)) {
				r->alive[p] = 0;
				break;
			}
			if (atomic_load(&g_stop) && !forwarded) {
				signal_children(r->pids, r->alive, r->started, SIGTERM);
				forwarded = 1;
			}
		}
	}
}

/* Whether process p's message is one an earlier process already printed (or none to print). */
static int procs_err_seen(const struct procs_run *r, int p, int init)
{
	const struct proc_out *o = &r->out[p];

	if (!init && (!o->err[0] || !strcmp(o->err, RUN_ERRORS_SEE_ABOVE)))
		return 1;
	for (int q = 0; q < p; q++)
		if ((init ? r->out[q].init_failed : atomic_load(&r->out[q].done)) && !strcmp(r->out[q].err, o->err))
			return 1;
	return 0;
}

/* Process p ended without reporting (killed, or exited early): its message; -1 */
static int procs_lost(const struct procs_run *r, int p, char *err, size_t errlen)
{
	char msg[200];
	int st = r->status[p];

	if (WIFSIGNALED(st))
		snprintf(msg, sizeof(msg), "worker process %d (pid %d) was killed by signal %d (%s)", p, (int)r->pids[p],
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(msg, sizeof(msg), "worker process %d (pid %d) exited with status %d before reporting", p,
			 (int)r->pids[p], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	if (!err[0])
		snprintf(err, errlen, "%s", msg);	/* printed by the caller */
	else
		fprintf(stderr, "gdsbench: %s\n", msg);
	return -1;
}

/* Process p's results added into each job's: counters and histograms summed, the latest end. */
static void procs_add(const struct procs_run *r, int p, struct job *jobs)
{
	for (int i = 0; i < r->njobs; i++) {
		const struct result *s = &r->res[(size_t)p * (size_t)r->njobs + (size_t)i];
		struct result *d = &jobs[i].res;

		hist_merge(&d->hist, &s->hist);
		d->bytes += s->bytes;
		d->ops += s->ops;
		d->errors += s->errors;
		d->verify_errors += s->verify_errors;
		d->cpu_s += s->cpu_s;
		if (s->len_min && (!d->len_min || s->len_min < d->len_min))
			d->len_min = s->len_min;
		if (s->len_max > d->len_max)
			d->len_max = s->len_max;
		if (s->t_end > d->t_end)
			d->t_end = s->t_end;
		if (s->error[0] && !d->error[0])
			snprintf(d->error, sizeof(d->error), "%s", s->error);
		if (r->out[p].depth[i] > jobs[i].depth)
			jobs[i].depth = r->out[p].depth[i];
	}
}

/* Every process's results into jobs[].res; each message printed once. 0, -1 run errors, -2 a
 * process could not set up. */
static int procs_merge(struct procs_run *r, struct job *jobs, double *cpu_s, char *err, size_t errlen)
{
	int rc = 0, init_failed = 0;

	for (int i = 0; i < r->njobs; i++) {
		memset(&jobs[i].res, 0, sizeof(jobs[i].res));
		hist_init(&jobs[i].res.hist);
		jobs[i].res.t_start = jobs[i].res.t_end = r->ctl->t_start;
	}
	for (int p = 0; p < r->started; p++) {
		const struct proc_out *o = &r->out[p];

		if (o->init_failed) {
			init_failed = 1;
			if (!procs_err_seen(r, p, 1))
				fprintf(stderr, "gdsbench: %s\n", o->err);
			continue;
		}
		if (!atomic_load(&o->done)) {
			rc = procs_lost(r, p, err, errlen);
			continue;
		}
		if (o->rc != 0) {
			if (!procs_err_seen(r, p, 0))
				fprintf(stderr, "gdsbench: %s\n", o->err);
			rc = -1;
		}
		*cpu_s += o->cpu_s;
		procs_add(r, p, jobs);
	}
	return init_failed ? -2 : rc;
}

/* Path evidence per job, over the processes that reported (any compat process: compat). */
static void procs_paths(const struct procs_run *r, struct job *jobs, struct path_info *pis)
{
	for (int i = 0; i < r->njobs; i++) {
		int n = 0;

		for (int p = 0; p < r->started; p++)
			if (atomic_load(&r->out[p].done))
				pis[n++] = r->res[(size_t)p * (size_t)r->njobs + (size_t)i].path;
		if (n)
			path_merge(&jobs[i].res.path, pis, n, r->started);
		else
			snprintf(jobs[i].res.path.mode, sizeof(jobs[i].res.path.mode), "unknown");
	}
}

int run_procs(struct job *jobs, int njobs, int nprocs, double *cpu_s, char *err, size_t errlen)
{
	struct procs_run r = { .nprocs = nprocs, .njobs = njobs };
	struct path_info *pis = calloc((size_t)nprocs, sizeof(*pis));
	int rc, forked;

	*cpu_s = 0;
	if (!pis || procs_map(&r, err, errlen) != 0) {
		if (!pis)
			snprintf(err, errlen, "-P %d: out of memory", nprocs);
		procs_free(&r);
		free(pis);
		return -2;
	}
	forked = procs_fork(&r, jobs, err, errlen);
	procs_start(&r);
	procs_wait(&r);
	rc = procs_merge(&r, jobs, cpu_s, err, errlen);
	if (rc != -2)
		procs_paths(&r, jobs, pis);
	if (rc == 0 && forked != 0)
		rc = -1;
	if (rc == -1 && !err[0])
		snprintf(err, errlen, "%s", RUN_ERRORS_SEE_ABOVE);
	procs_free(&r);
	free(pis);
	return rc;
}
