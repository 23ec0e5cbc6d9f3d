/* gdsbench: command line (gdsio-compatible), job files, the run, output.
 * Exit codes: 0 ok; 1 runtime failure (I/O error, verify mismatch, GPU stack
 * missing; the text line and JSON are still written when the run happened);
 * 2 usage error (bad option or value, missing target; nothing was run). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gdsbench.h"
#ifdef HAVE_CUDA
#include "cuda_rt.h"
#endif

static void usage(FILE *f)
{
	fputs("usage: gdsbench -f FILE | -D DIR -x XFER -I IOTYPE [options]\n"
	      "       gdsbench [--json FILE] [-P N] JOBFILE.gdsio   ([global] and [jobN] sections, gdsio's format)\n"
	      "\n"
	      "  -f FILE     one file shared by all threads (split into per-thread regions)\n"
	      "  -D DIR      one file per thread, DIR/gdsbench.N (reads need an earlier write run)\n"
	      "  -x XFER     0 GPUD (cuFile), 1 CPUONLY (O_DIRECT), 2 CPU_GPU (pinned bounce),\n"
	      "              4 CPU_CACHED_GPU (page cache), 5 GPUD_ASYNC (cuFile stream API),\n"
	      "              6 GPU_BATCH (cuFile batch API)\n"
	      "  -I IOTYPE   0 read, 1 write, 2 randread, 3 randwrite\n"
	      "  -w N        threads (default 1)\n"
	      "  -s SIZE     file size per thread file (-D) or region of the shared file (-f)\n"
	      "  -i SIZE     I/O size (default 1M); a multiple of 4K for O_DIRECT types\n"
	      "  -i MIN:MAX:STEP  each I/O a random size MIN + k*STEP up to MAX (e.g. 4K:1M:4K)\n"
	      "  -o SIZE     start offset in the file(s) (default 0)\n"
	      "  -a SIZE     random I/O: offsets are multiples of SIZE (default: the I/O size)\n"
	      "  -U          random I/O: offsets on 512-byte boundaries, not 4 KiB ones\n"
	      "  -R          fill the I/O buffers with random bytes (from -k) instead of the\n"
	      "              verify pattern\n"
	      "  -F          refill the buffer with new random bytes before each write (implies -R)\n"
	      "  -O 0|1      1: buffered I/O (no O_DIRECT, through the page cache); 0: O_DIRECT (default)\n"
	      "  -m TYPE     buffer memory of the cuFile types (0, 5, 6): 0 cudaMalloc (default),\n"
	      "              2 cudaMallocHost, 3 malloc, 4 mmap (1 cuMem is not built in)\n"
	      "  -b          cuFile types: do not register the buffers (cuFileBufRegister); CPU types ignore it\n"
	      "  -p          GPU types: enable peer access from the job's GPU to the others (NVLink)\n"
	      "  -T SECONDS  run for this long, wrapping around; default: one pass\n"
	      "  -d GPU      GPU index (default 0)\n"
	      "  -n NODE     pin threads and their buffers to this NUMA node\n"
	      "  -k SEED     random seed for randread/randwrite offsets, I/O sizes and -R data (default 1)\n"
	      "  -V          verify: reads check the pattern (offset-stamped 4K sectors) that\n"
	      "              gdsbench writes; writes are read back and checked after the run\n"
	      "  -B N        I/Os in flight per thread for xfer 5 (streams, default 8)\n"
	      "              and 6 (two batches of N/2, default 4)\n"
	      "  -P, --procs N  run the threads in N worker processes (an extension, gdsio has\n"
	      "              none): each process opens its own CUDA context and cuFile driver (as\n"
	      "              fio's default one process per job); I/O, text line and JSON are the\n"
	      "              same, merged over the processes. Default: one process per thread\n"
	      "              (at most the online CPUs) for sequential -x 0 with -i 256K or more,\n"
	      "              where threads of one cuFile instance move less; else 1\n"
	      "  --json FILE write the JSON record to FILE ('-' = stdout; the text line then goes to stderr)\n"
	      "  --dry-run   parse and check the options or job file as a run would, print the jobs\n"
	      "              as JSON ({\"dry_run\": true, \"jobs\": [...]}) and run nothing\n"
	      "  --cufile-stats N  cuFile stats level used for path evidence (default 3, 0 = off)\n"
	      "  --cufile-param NAME=VALUE  set a cuFile execution/properties parameter before the\n"
	      "              driver opens (max_io_threads, max_io_queue_depth, parallel_io, ...);\n"
	      "              the effective values are listed in path.evidence\n"
	      "  -h, --help  this help;  --version  version and built-in transfer types\n"
	      "\n"
	      "Exit status: 0 ok, 1 runtime failure (I/O or verify errors), 2 usage error.\n",
	      f);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("gdsbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'gdsbench -h' for help.\n", stderr);
	return EXIT_USAGE;
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&g_stop, 1);
}

static void job_defaults(struct job *j)
{
	memset(j, 0, sizeof(*j));
	j->xfer = -1;
	j->io_type = -1;
	j->threads = 1;
	j->gpu = 0;
	j->numa = -1;
	j->io_size = j->io_min = 1u << 20;
	j->seed = 1;
}

static int parse_seconds_arg(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	v = strtod(s, &end);
	if (*end || v != v || v < 0 || v > 1e7)
		return -1;
	*out = v;
	return 0;
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
	for (int x = 0; x <= 6; x++) {
		const struct engine *e = engine_get(x);

		if (e)
			printf("  -x %d %-15s %s\n", x, e->name, e->desc);
	}
}

/* Threads of job-file jobs that share a directory get distinct file numbers. */
static void assign_file_bases(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++) {
		char ri[PATH_MAX];

		jobs[i].file_base = 0;
		if (!jobs[i].dir[0] || !realpath(jobs[i].dir, ri))
			continue;
		for (int k = 0; k < i; k++) {
			char rk[PATH_MAX];

			if (jobs[k].dir[0] && realpath(jobs[k].dir, rk) && !strcmp(ri, rk))
				jobs[i].file_base += jobs[k].threads;
		}
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
	static const struct option longopts[] = {
		{ "json", required_argument, NULL, 'J' },
		{ "cufile-stats", required_argument, NULL, 'S' },
		{ "cufile-param", required_argument, NULL, 'C' },
		{ "procs", required_argument, NULL, 'P' },
		{ "dry-run", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	static struct job jobs[GDS_MAX_JOBS];	/* static: usage-error returns leak nothing */
	const char *json = NULL, *config = NULL;
	int njobs = 1, job_opts = 0, c, rc, exit_code = 0, nprocs = 0, total_threads = 0, dry_run = 0;
	char err[PATH_MAX + 512] = "", error[PATH_MAX + 512] = "";
	struct result agg;
	struct sigaction sa;
	uint64_t u;
	double cpu_s = 0;

	for (int i = 0; i < GDS_MAX_JOBS; i++)
		job_defaults(&jobs[i]);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:D:d:n:w:s:i:x:I:T:k:o:B:P:m:a:O:URFbpVh", longopts, NULL)) != -1) {
		struct job *j = &jobs[0];

		if (strchr("fDdnwsixITkoBmaOURFbpV", c))
			job_opts++;
		switch (c) {
		case 'f':
			if (strlen(optarg) >= sizeof(j->file) || !*optarg)
				return usage_error("-f: bad path");
			snprintf(j->file, sizeof(j->file), "%s", optarg);
			break;
		case 'D':
			if (strlen(optarg) >= sizeof(j->dir) || !*optarg)
				return usage_error("-D: bad path");
			snprintf(j->dir, sizeof(j->dir), "%s", optarg);
			break;
		case 'd':
			if (parse_uint(optarg, 4095, &u))
				return usage_error("-d %s: expected a GPU index", optarg);
			j->gpu = (int)u;
			break;
		case 'n':
			if (parse_uint(optarg, 4095, &u))
				return usage_error("-n %s: expected a NUMA node number", optarg);
			j->numa = (int)u;
			break;
		case 'w':
			if (parse_uint(optarg, GDS_MAX_THREADS, &u) || u == 0)
				return usage_error("-w %s: expected a thread count of 1..%d", optarg, GDS_MAX_THREADS);
			j->threads = (int)u;
			break;
		case 's':
			if (parse_size(optarg, &j->file_size) || j->file_size == 0)
				return usage_error("-s %s: expected a size such as 1G or 500M", optarg);
			break;
		case 'i':
			if (parse_io_size(optarg, j, err, sizeof(err)) != 0)
				return usage_error("-i %s: %s", optarg, err);
			break;
		case 'a':
			if (parse_size(optarg, &j->align) || j->align == 0)
				return usage_error("-a %s: expected an alignment size such as 4K", optarg);
			break;
		case 'm':
			if (parse_uint(optarg, 4, &u))
				return usage_error("-m %s: expected a memory type 0..4 (0 cudaMalloc, 1 cuMem, "
						   "2 cudaMallocHost, 3 malloc, 4 mmap)", optarg);
			j->mem_type = (int)u;
			break;
		case 'O':
			if (parse_uint(optarg, 1, &u))
				return usage_error("-O %s: expected 0 (O_DIRECT) or 1 (buffered)", optarg);
			j->buffered = (int)u;
			break;
		case 'U':
			j->unaligned = 1;
			break;
		case 'R':
			j->fill_random = 1;
			break;
		case 'F':
			j->refill = 1;
			break;
		case 'b':
			j->skip_bufreg = 1;
			break;
		case 'p':
			j->nvlinks = 1;
			break;
		case 'o':
			if (parse_size(optarg, &j->offset))
				return usage_error("-o %s: expected a size", optarg);
			break;
		case 'x':
			if (parse_uint(optarg, 100, &u))
				return usage_error("-x %s: expected a transfer type number", optarg);
			j->xfer = (int)u;
			break;
		case 'I':
			if (parse_uint(optarg, 3, &u))
				return usage_error("-I %s: expected 0 (read), 1 (write), 2 (randread) or 3 (randwrite)",
						   optarg);
			j->io_type = (int)u;
			break;
		case 'T':
			if (parse_seconds_arg(optarg, &j->duration))
				return usage_error("-T %s: expected seconds", optarg);
			break;
		case 'k':
			if (parse_uint(optarg, UINT64_MAX, &j->seed))
				return usage_error("-k %s: expected a number", optarg);
			break;
		case 'B':
			if (parse_uint(optarg, GDS_MAX_DEPTH, &u) || u == 0)
				return usage_error("-B %s: expected 1..%d", optarg, GDS_MAX_DEPTH);
			j->depth = (int)u;
			break;
		case 'V':
			j->verify = 1;
			break;
		case 'J':
			json = optarg;
			break;
		case 'N':
			dry_run = 1;
			break;
		case 'S':
#ifdef HAVE_CUDA
			if (parse_uint(optarg, 3, &u))
				return usage_error("--cufile-stats %s: expected 0..3", optarg);
			g_cufile_stats_level = (int)u;
#endif
			break;
		case 'P':
			if (parse_uint(optarg, GDS_MAX_THREADS, &u) || u == 0)
				return usage_error("-P %s: expected a number of worker processes, 1..%d", optarg,
						   GDS_MAX_THREADS);
			nprocs = (int)u;
			break;
		case 'C':
#ifdef HAVE_CUDA
			if (cufile_param_add(optarg, err, sizeof(err)) != 0)
				return usage_error("%s", err);
#endif
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'v':
			print_version();
			return 0;
		case ':':
			return usage_error("option %s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc) {
		if (argc - optind > 1)
			return usage_error("unexpected argument '%s'", argv[optind + 1]);
		config = argv[optind];
	}

	/* gdsio refuses these before anything else */
	if (jobs[0].dir[0] && jobs[0].file[0])
		return usage_error("-D and -f cannot be used together: -D DIR gives each thread a file, -f FILE is one shared file");

	if (config) {
		struct stat st;

		if (job_opts)
			return usage_error("%s: a job file cannot be combined with job options (-f -D -x -I ...)",
					   config);
		if (stat(config, &st) != 0 || !S_ISREG(st.st_mode))
			return usage_error("%s: no such job file", config);
		if (jobfile_parse(config, jobs, GDS_MAX_JOBS, &njobs, err, sizeof(err)) != 0)
			return usage_error("%s", err);
		assign_file_bases(jobs, njobs);
		for (int i = 0; i < njobs; i++)
			if (job_validate(&jobs[i], err, sizeof(err)) != 0)
				return usage_error("%s", err);
	} else {
		if (jobs[0].xfer < 0)
			return usage_error("-x: give a transfer type");
		if (jobs[0].io_type < 0)
			return usage_error("-I: give an I/O type");
		if (job_validate(&jobs[0], err, sizeof(err)) != 0)
			return usage_error("%s", err);
	}

	for (int i = 0; i < njobs; i++)
		total_threads += jobs[i].threads;
	if (nprocs == 0)
		nprocs = procs_default(jobs, njobs, total_threads);
	if (nprocs > total_threads)
		return usage_error("-P %d: more worker processes than threads (%d); each process runs at least one",
				   nprocs, total_threads);

	/* --dry-run: the jobs as parsed and checked, to stdout; nothing is opened or run */
	if (dry_run) {
		for (int i = 0; i < njobs; i++)
			jobs[i].eng = engine_get(jobs[i].xfer);
		return report_plan(stdout, jobs, njobs) ? EXIT_RUNTIME : 0;
	}

	/* An unwritable --json target is a usage error, found before the run. */
	if (json && strcmp(json, "-") != 0) {
		FILE *jf = fopen(json, "a");

		if (!jf)
			return usage_error("--json %s: %s", json, strerror(errno));
		fclose(jf);
	}

	/* The run needs what the build and the node provide: exit 1 otherwise. */
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];

		j->eng = engine_get(j->xfer);
		if (!j->eng) {
			fprintf(stderr,
				"gdsbench: -x %d (GPU transfer type) is not available: this gdsbench was built without "
				"the CUDA runtime and cuFile headers (rebuild with CUDA_HOME=/usr/local/cuda or the "
				"nvidia-cufile/nvidia-cuda-runtime wheels)\n",
				j->xfer);
			return EXIT_RUNTIME;
		}
		if ((j->eng->flags & ENG_QUEUED) && j->depth == 0)
			j->depth = j->xfer == 6 ? 4 : 8;
	}

	/* installed before -P forks: worker processes inherit the handlers */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	err[0] = 0;
	if (nprocs > 1) {
		rc = run_procs(jobs, njobs, nprocs, &cpu_s, err, sizeof(err));
		if (rc == -2) {
			if (err[0])
				fprintf(stderr, "gdsbench: %s\n", err);
			return EXIT_RUNTIME;	/* an engine could not start: nothing ran */
		}
	} else {
		struct run_place alone = { 1, 0, NULL, NULL };

		if (run_here(jobs, njobs, &alone, &rc, &cpu_s, err, sizeof(err)) != 0) {
			fprintf(stderr, "gdsbench: %s\n", err);
			return EXIT_RUNTIME;
		}
	}
	if (rc != 0 && err[0] && strcmp(err, RUN_ERRORS_SEE_ABOVE) != 0)
		fprintf(stderr, "gdsbench: %s\n", err);

	memset(&agg, 0, sizeof(agg));
	hist_init(&agg.hist);
	agg.t_start = jobs[0].res.t_start;
	for (int i = 0; i < njobs; i++) {
		struct result *r = &jobs[i].res;

		hist_merge(&agg.hist, &r->hist);
		agg.bytes += r->bytes;
		agg.ops += r->ops;
		agg.errors += r->errors;
		agg.verify_errors += r->verify_errors;
		if (r->t_end > agg.t_end)
			agg.t_end = r->t_end;
		if (r->t_start < agg.t_start)
			agg.t_start = r->t_start;
	}
	if (rc != 0 || agg.errors || agg.verify_errors)
		exit_code = EXIT_RUNTIME;
	/* A failure not tied to an op (a thread or worker process that could not
	 * start or died) still counts: a failed run never reports errors 0
	 * without verify errors. */
	if (exit_code && !agg.errors && !agg.verify_errors)
		agg.errors = 1;
	run_error(error, sizeof(error), jobs, njobs, &agg, exit_code, err);

	report_line(json && !strcmp(json, "-") ? stderr : stdout, jobs, njobs, &agg);
	if (json && report_json(json, jobs, njobs, &agg, cpu_s, nprocs, exit_code, error, err, sizeof(err)) != 0) {
		fprintf(stderr, "gdsbench: %s\n", err);
		exit_code = EXIT_RUNTIME;
	}
	if (agg.verify_errors)
		fprintf(stderr, "gdsbench: verify FAILED: %llu bad 4KiB sector(s)\n",
			(unsigned long long)agg.verify_errors);
	return exit_code;
}
