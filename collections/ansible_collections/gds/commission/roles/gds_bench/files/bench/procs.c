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

int run_procs(struct job *jobs, int njobs, int nprocs, double *cpu_s, char *err, size_t errlen)
{
	size_t off_out = ALIGN_UP(sizeof(struct procs_ctl));
	size_t off_res = off_out + ALIGN_UP(sizeof(struct proc_out) * (size_t)nprocs);
	size_t len = off_res + sizeof(struct result) * (size_t)nprocs * (size_t)njobs;
	struct result *res;
	pid_t *pids = calloc((size_t)nprocs, sizeof(*pids)), parent = getpid();
	int *alive = calloc((size_t)nprocs, sizeof(*alive)), *status = calloc((size_t)nprocs, sizeof(*status));
	int started = 0, rc = 0, init_failed = 0, forwarded = 0;
	struct procs_ctl *ctl;
	struct proc_out *out;
	struct path_info *pis = calloc((size_t)nprocs, sizeof(*pis));
	void *m;

	*cpu_s = 0;
	m = pids && alive && status && pis ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
					   : MAP_FAILED;
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "-P %d: cannot set up the shared result region: %s", nprocs, strerror(errno));
		free(pids);
		free(alive);
		free(status);
		free(pis);
		return -2;
	}
	ctl = m;
	out = (struct proc_out *)((char *)m + off_out);
	res = (struct result *)((char *)m + off_res);

	fflush(NULL);
	for (int p = 0; p < nprocs; p++) {
		pid_t pid = fork();

		if (pid == 0)
			child_main(p, nprocs, parent, ctl, &out[p], jobs, njobs, res);	/* does not return */
		if (pid < 0) {
			snprintf(err, errlen, "-P %d: fork of worker process %d failed: %s", nprocs, p, strerror(errno));
			atomic_store(&ctl->failed, 1);
			rc = -1;
			break;
		}
		pids[p] = pid;
		alive[p] = 1;
		started++;
	}

	/* Every process set up (or gone): stamp the common start. */
	for (;;) {
		int n = 0;

		for (int p = 0; p < started; p++) {
			if (alive[p] && waitpid(pids[p], &status[p], WNOHANG) == pids[p])
				alive[p] = 0;
			if (atomic_load(&out[p].at_gate))
				n++;
			else if (!alive[p]) {
				atomic_store(&ctl->failed, 1);	/* died in its setup */
				n++;
			}
		}
		if (n == started)
			break;
		if (atomic_load(&g_stop)) {
			atomic_store(&ctl->failed, 1);
			break;
		}
		sleep_ns(1000000L);
	}
	ctl->t_start = now_ns();
	atomic_store(&ctl->go, 1);
	futex_wake_all(&ctl->go);

	for (int p = 0; p < started; p++) {
		while (alive[p]) {
			pid_t r = waitpid(pids[p], &status[p], 0);

			if (r == pids[p] || (r < 0 && errno != EINTR)) {
				alive[p] = 0;
				break;
			}
			/* SIGINT/SIGTERM to gdsbench alone: pass it on, so that the
			 * workers finish the ops in flight and report */
			if (atomic_load(&g_stop) && !forwarded) {
				signal_children(pids, alive, started, SIGTERM);
				forwarded = 1;
			}
		}
	}

	/* Merge: per job, counters and histograms summed, the latest end. */
	for (int i = 0; i < njobs; i++) {
		struct result *r = &jobs[i].res;

		memset(r, 0, sizeof(*r));
		hist_init(&r->hist);
		r->t_start = r->t_end = ctl->t_start;
	}
	for (int p = 0; p < started; p++) {
		struct proc_out *o = &out[p];

		if (o->init_failed) {
			int dup = 0;

			init_failed = 1;
			for (int q = 0; q < p; q++)
				if (out[q].init_failed && !strcmp(out[q].err, o->err))
					dup = 1;
			if (!dup)
				fprintf(stderr, "gdsbench: %s\n", o->err);
			continue;
		}
		if (!atomic_load(&o->done)) {
			char msg[200];

			if (WIFSIGNALED(status[p]))
				snprintf(msg, sizeof(msg), "worker process %d (pid %d) was killed by signal %d (%s)", p,
					 (int)pids[p], WTERMSIG(status[p]), strsignal(WTERMSIG(status[p])));
			else
				snprintf(msg, sizeof(msg), "worker process %d (pid %d) exited with status %d before reporting",
					 p, (int)pids[p], WIFEXITED(status[p]) ? WEXITSTATUS(status[p]) : -1);
			if (!err[0])
				snprintf(err, errlen, "%s", msg);	/* printed by the caller */
			else
				fprintf(stderr, "gdsbench: %s\n", msg);
			rc = -1;
			continue;
		}
		if (o->rc != 0) {
			int dup = !o->err[0] || !strcmp(o->err, RUN_ERRORS_SEE_ABOVE);

			for (int q = 0; q < p && !dup; q++)
				if (atomic_load(&out[q].done) && !strcmp(out[q].err, o->err))
					dup = 1;
			if (!dup)
				fprintf(stderr, "gdsbench: %s\n", o->err);
			rc = -1;
		}
		*cpu_s += o->cpu_s;
		for (int i = 0; i < njobs; i++) {
			const struct result *s = &res[(size_t)p * (size_t)njobs + (size_t)i];
			struct result *r = &jobs[i].res;

			hist_merge(&r->hist, &s->hist);
			r->bytes += s->bytes;
			r->ops += s->ops;
			r->errors += s->errors;
			r->verify_errors += s->verify_errors;
			r->cpu_s += s->cpu_s;
			if (s->len_min && (!r->len_min || s->len_min < r->len_min))
				r->len_min = s->len_min;
			if (s->len_max > r->len_max)
				r->len_max = s->len_max;
			if (s->t_end > r->t_end)
				r->t_end = s->t_end;
			if (s->error[0] && !r->error[0])
				snprintf(r->error, sizeof(r->error), "%s", s->error);
			if (o->depth[i] > jobs[i].depth)
				jobs[i].depth = o->depth[i];
		}
	}
	/* Path evidence: per job, over the processes that reported. */
	for (int i = 0; i < njobs && !init_failed; i++) {
		int n = 0;

		for (int p = 0; p < started; p++)
			if (atomic_load(&out[p].done))
				pis[n++] = res[(size_t)p * (size_t)njobs + (size_t)i].path;
		if (n)
			path_merge(&jobs[i].res.path, pis, n, started);
		else
			snprintf(jobs[i].res.path.mode, sizeof(jobs[i].res.path.mode), "unknown");
	}
	if (init_failed)
		rc = -2;
	else if (rc != 0 && !err[0])
		snprintf(err, errlen, "%s", RUN_ERRORS_SEE_ABOVE);
	munmap(m, len);
	free(pids);
	free(alive);
	free(status);
	free(pis);
	return rc;
}
