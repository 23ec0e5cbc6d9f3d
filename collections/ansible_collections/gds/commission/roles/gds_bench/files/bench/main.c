/* gdsbench: command line (gdsio-compatible), job files, the run, output.
 * Exit codes: 0 ok; 1 runtime failure (I/O error, verify mismatch, GPU stack
 * missing; the text line and JSON are still written when the run happened);
 * 2 usage error (bad option or value, missing target; nothing was run). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdsbench.h"
#ifdef HAVE_CUDA
#include "cuda_rt.h"
#endif

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&g_stop, 1);
}

static void print_version(void)
{
	printf("gdsbench %s (%s)\n", GDS_VERSION,
#ifdef HAVE_CUDA
	       "built with CUDA runtime and cuFile headers; libraries are loaded at run time"
#else
	       "built without CUDA: CPU transfer types only"
#endif
	);
	for (int x = 0; x < xfer_type_count(); x++)
		if (engine_get(x))
			printf("  -x %d %-15s %s\n", x, xfer_type(x)->name, xfer_type(x)->desc);
}

/* The run's jobs: the job file's, or the command line's one, checked. -1
 * with the message of a usage error. */
static int load_jobs(const struct run_opts *ro, struct job *jobs, int *njobs, char *err, size_t errlen)
{
	*njobs = 1;
	if (ro->jobfile && ro->job_opts) {
		snprintf(err, errlen, "%s: a job file cannot be combined with job options (-f -D -x -I ...)", ro->jobfile);
		return -1;
	}
	if (ro->jobfile && jobfile_parse(ro->jobfile, jobs, GDS_MAX_JOBS, njobs, err, errlen) != 0)
		return -1;
	if (!ro->jobfile && (jobs[0].xfer < 0 || jobs[0].io_type < 0)) {
		snprintf(err, errlen, "%s", jobs[0].xfer < 0 ? "-x: give a transfer type" : "-I: give an I/O type");
		return -1;
	}
	return jobs_validate(jobs, *njobs, err, errlen);
}

/* An unwritable --json target is a usage error, found before the run and
 * without creating the file (a refused run leaves nothing behind); it is
 * opened as the data files are (datafile.c): never through a link, an
 * existing one only when it is a regular file of the running user. */
static int json_target_ok(const char *json, char *err, size_t errlen)
{
	char dir[PATH_MAX], name[PATH_MAX], msg[PATH_MAX + 128];
	struct stat st;
	int dfd, fd, e;

	if (!json || !strcmp(json, "-"))
		return 0;
	if (df_split(json, dir, sizeof(dir), name, sizeof(name)) != 0) {
		snprintf(err, errlen, "--json %s: not a file name", json);
		return -1;
	}
	dfd = df_dir_open(dir, 0, msg, sizeof(msg));
	if (dfd < 0) {
		snprintf(err, errlen, "--json %s: %s", json, strerror(errno));
		return -1;
	}
	fd = df_open(dfd, name, json, O_WRONLY | O_APPEND, NULL, NULL, &st, msg, sizeof(msg));
	e = errno;
	close(dfd);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (fd == DF_REFUSED) {
		snprintf(err, errlen, "--json %s", msg);
		return -1;
	}
	if (e == ENOENT && access(dir, W_OK | X_OK) == 0)
		return 0;
	snprintf(err, errlen, "--json %s: %s", json, strerror(e == ENOENT ? errno : e));
	return -1;
}

/* --dry-run of a job whose target datafile.c refused: the run would fail, so does this */
static int dry_run_refused(const struct job *jobs, int njobs)
{
	for (int i = 0; i < njobs; i++)
		if (jobs[i].refused[0]) {
			fprintf(stderr, "gdsbench: %s%s%s\n", njobs > 1 ? jobs[i].name : "", njobs > 1 ? ": " : "",
				jobs[i].refused);
			return 1;
		}
	return 0;
}

/* The engine of each job: exit 1 when the build has none for its -x. */
static int find_engines(struct job *jobs, int njobs)
{
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];

		j->eng = engine_get(j->xfer);
		if (!j->eng) {
			fprintf(stderr,
				"gdsbench: -x %d (GPU transfer type) is not available: this gdsbench was built without "
				"the CUDA runtime and cuFile headers (rebuild with CUDA_HOME=/usr/local/cuda or the "
				"nvidia-cufile/nvidia-cuda-runtime wheels)\n",
				j->xfer);
			return -1;
		}
		if ((j->xt->flags & ENG_QUEUED) && j->depth == 0)
			j->depth = j->xt->depth;
	}
	return 0;
}

/* The run in this process or in nprocs worker processes: -1 when an engine
 * could not start (nothing ran, message printed), else 0 with *rc. */
static int run(struct job *jobs, int njobs, int nprocs, int *rc, double *cpu_s, char *err, size_t errlen)
{
	struct sigaction sa;
	struct run_place alone = { 1, 0, NULL, NULL };

	/* installed before -P forks: worker processes inherit the handlers */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	err[0] = 0;
	if (nprocs > 1) {
		*rc = run_procs(jobs, njobs, nprocs, cpu_s, err, errlen);
		if (*rc == -2 && err[0])
			fprintf(stderr, "gdsbench: %s\n", err);
		return *rc == -2 ? -1 : 0;
	}
	if (run_here(jobs, njobs, &alone, rc, cpu_s, err, errlen) != 0) {
		fprintf(stderr, "gdsbench: %s\n", err);
		return -1;
	}
	return 0;
}

/* The jobs' results merged: bytes and ops summed, the widest window. */
static void aggregate(const struct job *jobs, int njobs, struct result *agg)
{
	memset(agg, 0, sizeof(*agg));
	hist_init(&agg->hist);
	agg->t_start = jobs[0].res.t_start;
	for (int i = 0; i < njobs; i++) {
		const struct result *r = &jobs[i].res;

		hist_merge(&agg->hist, &r->hist);
		agg->bytes += r->bytes;
		agg->ops += r->ops;
		agg->errors += r->errors;
		agg->verify_errors += r->verify_errors;
		if (r->t_end > agg->t_end)
			agg->t_end = r->t_end;
		if (r->t_start < agg->t_start)
			agg->t_start = r->t_start;
	}
}

/* The JSON "error" of a failed run: the first worker's error (with its job),
 * else the run's own message, else the verify summary. */
static void run_error(char *out, size_t len, const struct job *jobs, int njobs, const struct result *agg,
		      int exit_code, const char *err)
{
	out[0] = 0;
	if (!exit_code)
		return;
	for (int i = 0; i < njobs; i++)
		if (jobs[i].res.error[0]) {
			snprintf(out, len, "%s%s%s", njobs > 1 ? jobs[i].name : "", njobs > 1 ? ": " : "",
				 jobs[i].res.error);
			return;
		}
	if (err[0] && strcmp(err, RUN_ERRORS_SEE_ABOVE) != 0)
		snprintf(out, len, "%s", err);
	else if (agg->verify_errors)
		snprintf(out, len, "verify FAILED: %llu bad 4KiB sector(s)", (unsigned long long)agg->verify_errors);
	else
		snprintf(out, len, "%s", err[0] ? err : "the run failed");
}

int main(int argc, char **argv)
{
	static struct job jobs[GDS_MAX_JOBS];	/* static: usage-error returns leak nothing */
	struct run_opts ro;
	int njobs, rc, exit_code = 0, nprocs, total_threads = 0;
	char err[PATH_MAX + 512] = "", error[PATH_MAX + 512] = "";
	struct result agg;
	double cpu_s = 0;

	rc = options_cli(argc, argv, &jobs[0], &ro);
	if (rc == OPTS_EXIT_OK && ro.version)
		print_version();
	if (rc == OPTS_EXIT_OK && ro.capabilities && report_capabilities(stdout) != 0)
		return EXIT_RUNTIME;
	if (rc)
		return rc == OPTS_EXIT_OK ? 0 : rc;
	if (load_jobs(&ro, jobs, &njobs, err, sizeof(err)) != 0)
		return usage_error("%s", err);
#ifdef HAVE_CUDA
	g_cufile_stats_level = ro.cufile_stats;
#endif
	for (int i = 0; i < njobs; i++)
		total_threads += jobs[i].threads;
	nprocs = ro.nprocs ? ro.nprocs : procs_default(jobs, njobs, total_threads);
	if (nprocs > total_threads)
		return usage_error("-P %d: more worker processes than threads (%d); each process runs at least one",
				   nprocs, total_threads);

	/* --dry-run: the jobs as parsed and checked, to stdout; nothing is opened or run */
	if (ro.dry_run) {
		for (int i = 0; i < njobs; i++)
			jobs[i].eng = engine_get(jobs[i].xfer);
		if (dry_run_refused(jobs, njobs))
			return EXIT_RUNTIME;
		return report_plan(stdout, jobs, njobs) ? EXIT_RUNTIME : 0;
	}
	if (json_target_ok(ro.json, err, sizeof(err)) != 0)
		return usage_error("%s", err);
	/* The run needs what the build and the node provide: exit 1 otherwise. */
	if (find_engines(jobs, njobs) != 0 || run(jobs, njobs, nprocs, &rc, &cpu_s, err, sizeof(err)) != 0)
		return EXIT_RUNTIME;
	if (rc != 0 && err[0] && strcmp(err, RUN_ERRORS_SEE_ABOVE) != 0)
		fprintf(stderr, "gdsbench: %s\n", err);

	aggregate(jobs, njobs, &agg);
	if (rc != 0 || agg.errors || agg.verify_errors)
		exit_code = EXIT_RUNTIME;
	/* A failure not tied to an op (a thread or worker process that could not
	 * start or died) still counts: a failed run never reports errors 0
	 * without verify errors. */
	if (exit_code && !agg.errors && !agg.verify_errors)
		agg.errors = 1;
	run_error(error, sizeof(error), jobs, njobs, &agg, exit_code, err);

	report_line(ro.json && !strcmp(ro.json, "-") ? stderr : stdout, jobs, njobs, &agg);
	if (ro.json && report_json(ro.json, jobs, njobs, &agg, cpu_s, nprocs, exit_code, error, err, sizeof(err)) != 0) {
		fprintf(stderr, "gdsbench: %s\n", err);
		exit_code = EXIT_RUNTIME;
	}
	if (agg.verify_errors)
		fprintf(stderr, "gdsbench: verify FAILED: %llu bad 4KiB sector(s)\n",
			(unsigned long long)agg.verify_errors);
	return exit_code;
}
