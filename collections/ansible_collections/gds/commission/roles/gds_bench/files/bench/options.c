/* The options of gdsbench: one table for the command line and for gdsio job
 * files (the model is fio's options.c `struct fio_option`). Each entry names
 * the setting's short/long option, its job-file keys, its type, bounds, the
 * field it sets and its help line; the command line (options_cli), the job
 * files (jobfile.c) and the messages of the checks (config.c) all read it,
 * so one setting is parsed, bounded and named in one place. Also here: the
 * value parsers (sizes, counts, seconds, -i ranges). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gdsbench.h"
#ifdef HAVE_CUDA
#include "cuda_rt.h"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- values ---- */

/* 4096, 4K, 4k, 4KiB, 1M, 1G, 2T: binary multiples (the units of vocab.c); no sign, no fraction. */
int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end) {
		mul = size_unit_mult((unsigned char)*end++);
		if (!mul)
			return -1;
	}
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul > 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end)
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*out = (uint64_t)v * mul;
	return 0;
}

int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || v < 0 || v > 1e7 || v != v)
		return -1;
	*out = v;
	return 0;
}

/* -i / bs=: SIZE, or MIN:MAX:STEP (each op a random size MIN + k*STEP <= MAX). */
int parse_io_size(const char *s, struct job *j, char *msg, size_t len)
{
	char a[64], b[64], c[64];
	uint64_t lo, hi, st;

	if (!strchr(s, ':')) {
		if (parse_size(s, &hi) || hi == 0) {
			snprintf(msg, len, "expected a size such as 4K or 1M, or MIN:MAX:STEP");
			return -1;
		}
		j->io_size = j->io_min = hi;
		j->io_step = 0;
		return 0;
	}
	if (strlen(s) >= sizeof(a) || sscanf(s, "%63[^:]:%63[^:]:%63s", a, b, c) != 3 || strchr(c, ':') ||
	    parse_size(a, &lo) || parse_size(b, &hi) || parse_size(c, &st)) {
		snprintf(msg, len, "expected MIN:MAX:STEP sizes such as 4K:1M:4K");
		return -1;
	}
	if (lo == 0 || st == 0 || hi < lo) {
		snprintf(msg, len, "a range needs 0 < MIN <= MAX and STEP > 0");
		return -1;
	}
	if ((hi - lo) % st) {
		snprintf(msg, len, "MAX - MIN is not a multiple of STEP");
		return -1;
	}
	j->io_min = lo;
	j->io_size = hi;
	j->io_step = hi == lo ? 0 : st;
	return 0;
}

/* an I/O type by its key (read, write, randread, randwrite) or number */
static int parse_io_type(const char *v, uint64_t *out)
{
	int t = io_type_find(v);

	if (t >= 0) {
		*out = (uint64_t)t;
		return 0;
	}
	return parse_uint(v, (uint64_t)io_type_count() - 1, out);
}

/* "expected 0 (read), 1 (write), ...": a bad -I / rw= */
static void expect_io_type(char *why, size_t len)
{
	size_t o = (size_t)snprintf(why, len, "expected");

	for (int t = 0; t < io_type_count() && o < len; t++)
		o += (size_t)snprintf(why + o, len - o, "%s %d (%s)", t ? t + 1 < io_type_count() ? "," : " or" : "", t,
				      io_type(t)->key);
}

/* --cufile-param NAME=VALUE: checked (and kept for the driver) by cuda_rt.c;
 * a build without CUDA has no cuFile to set it on. */
static int set_cufile_param(const char *v, char *why, size_t len)
{
#ifdef HAVE_CUDA
	return cufile_param_add(v, why, len);
#else
	(void)v, (void)why, (void)len;
	return 0;
#endif
}

/* ---- the table ---- */

#define J(f) offsetof(struct job, f)
#define R(f) offsetof(struct run_opts, f)
#define EXPECT_SIZE "expected a size such as 1G or 500M"

/* In the order of the help. id: the job setting (enum job_opt), -1 for the
 * run's own options (they set struct run_opts and have no job-file key). */
static const struct gds_option table[] = {
	{ O_FILE, 'f', NULL, "filename", OPT_PATH, J(file), 0, 0, "expected a path", "FILE",
	  "one file shared by all threads (split into per-thread regions)" },
	{ O_DIR, 'D', NULL, "directory", OPT_PATH, J(dir), 0, 0, "expected a path", "DIR",
	  "one file per thread, DIR/gdsbench.N (reads need an earlier write run)" },
	{ O_XFER, 'x', NULL, "xfer_type", OPT_INT, J(xfer), 0, 100, "expected a transfer type number", "XFER",
	  "transfer type (gdsbench --version: those of this build):" },
	{ O_IO, 'I', NULL, "rw", OPT_IOTYPE, J(io_type), 0, 0, NULL, "IOTYPE", "I/O type:" },
	{ O_THREADS, 'w', NULL, "num_threads", OPT_INT, J(threads), 1, GDS_MAX_THREADS,
	  "expected a thread count of 1.." STR(GDS_MAX_THREADS), "N", "threads (default 1)" },
	{ O_SIZE, 's', NULL, "size", OPT_SIZE, J(file_size), 1, INT64_MAX, EXPECT_SIZE, "SIZE",
	  "file size per thread file (-D) or region of the shared file (-f)" },
	{ O_IOSIZE, 'i', NULL, "bs", OPT_IOSIZE, J(io_size), 0, 0, NULL, "SIZE",
	  "I/O size (default 1M); a multiple of 4K for O_DIRECT types; or MIN:MAX:STEP:\n"
	  "each I/O a random size MIN + k*STEP up to MAX (e.g. 4K:1M:4K)" },
	{ O_OFFSET, 'o', NULL, "start_offset|offset", OPT_SIZE, J(offset), 0, INT64_MAX, "expected a size", "SIZE",
	  "start offset in the file(s) (default 0)" },
	{ O_ALIGN, 'a', NULL, "alignment_size", OPT_SIZE, J(align), 1, INT64_MAX,
	  "expected an alignment size such as 4K", "SIZE",
	  "random I/O: offsets are multiples of SIZE (default: the I/O size)" },
	{ O_UNALIGNED, 'U', NULL, "unaligned_random", OPT_FLAG, J(unaligned), 0, 1, "expected 0 or 1", NULL,
	  "random I/O: offsets on 512-byte boundaries, not 4 KiB ones" },
	{ O_FILL, 'R', NULL, "fill_random", OPT_FLAG, J(fill_random), 0, 1, "expected 0 or 1", NULL,
	  "fill the I/O buffers with random bytes (from -k) instead of the\nverify pattern" },
	{ O_REFILL, 'F', NULL, "refill_buffer", OPT_FLAG, J(refill), 0, 1, "expected 0 or 1", NULL,
	  "refill the buffer with new random bytes before each write (implies -R)" },
	{ O_BUFFERED, 'O', NULL, "buffered", OPT_INT, J(buffered), 0, 1, "expected 0 (O_DIRECT) or 1 (buffered)",
	  "0|1", "1: buffered I/O (no O_DIRECT, through the page cache); 0: O_DIRECT (default)" },
	{ O_MEM, 'm', NULL, "mem_type", OPT_INT, J(mem_type), 0, 4,
	  "expected a memory type 0..4 (0 cudaMalloc, 1 cuMem, 2 cudaMallocHost, 3 malloc, 4 mmap)", "TYPE",
	  "buffer memory of the cuFile types (0, 5, 6): 0 cudaMalloc (default),\n"
	  "2 cudaMallocHost, 3 malloc, 4 mmap (1 cuMem is not built in)" },
	{ O_SKIPREG, 'b', NULL, "skip_bufregister", OPT_FLAG, J(skip_bufreg), 0, 1, "expected 0 or 1", NULL,
	  "cuFile types: do not register the buffers (cuFileBufRegister); CPU types ignore it" },
	{ O_NVLINK, 'p', NULL, "enable_nvlinks", OPT_FLAG, J(nvlinks), 0, 1, "expected 0 or 1", NULL,
	  "GPU types: enable peer access from the job's GPU to the others (NVLink)" },
	{ O_PEERMEM, 262, "peer-memory", "peer_memory", OPT_PATH, J(peer_mem), 0, 0, "expected a path", "FILE",
	  "xfer 1 (CPU only): the I/O buffer is peer memory mapped from FILE, a PCI\n"
	  "device's /sys/bus/pci/devices/BDF/p2pmem/allocate (Linux P2PDMA, 6.2+):\n"
	  "O_DIRECT moves the data between the drive and that device, never through\n"
	  "host memory; a pair the kernel refuses fails with its error" },
	{ O_RUNTIME, 'T', NULL, "runtime", OPT_SECONDS, J(duration), 0, 0, "expected seconds", "SECONDS",
	  "run for this long, wrapping around; default: one pass" },
	{ O_RUNTIME, 0, NULL, "time_based", OPT_NOT, J(one_pass), 0, 1, "expected 0 or 1", NULL,
	  "0: stop after one pass even with a runtime" },
	{ O_GPU, 'd', NULL, "gpu_dev_id", OPT_INT, J(gpu), 0, 4095, "expected a GPU index", "GPU",
	  "GPU index (default 0)" },
	{ O_NUMA, 'n', NULL, "numa_node", OPT_INT, J(numa), 0, 4095, "expected a NUMA node number", "NODE",
	  "pin threads and their buffers to this NUMA node" },
	{ O_SEED, 'k', NULL, "random_seed|seed", OPT_U64, J(seed), 0, UINT64_MAX, "expected a number", "SEED",
	  "random seed for randread/randwrite offsets, I/O sizes and -R data (default 1)" },
	{ O_VERIFY, 'V', NULL, "do_verify", OPT_FLAG, J(verify), 0, 1, "expected 0 or 1", NULL,
	  "verify: reads check the pattern (offset-stamped 4K sectors) that\n"
	  "gdsbench writes; writes are read back and checked after the run" },
	{ O_DEPTH, 'B', NULL, "io_depth|iodepth|batch_size", OPT_INT, J(depth), 1, GDS_MAX_DEPTH,
	  "expected 1.." STR(GDS_MAX_DEPTH), "N",
	  "I/Os in flight per thread for xfer 5 (streams, default 8)\nand 6 (batches of up to N/2, default 4)" },
	{ O_NAME, 0, NULL, "name", OPT_NAME, J(name), 0, 0, "expected a name", NULL,
	  "[global]: names the run; a job: its name" },
	{ -1, 'P', "procs", NULL, OPT_INT, R(nprocs), 1, GDS_MAX_THREADS,
	  "expected a number of worker processes, 1.." STR(GDS_MAX_THREADS), "N",
	  "run the threads in N worker processes (an extension, gdsio has\n"
	  "none): each process opens its own CUDA context and cuFile driver (as\n"
	  "fio's default one process per job); I/O, text line and JSON are the\n"
	  "same, merged over the processes. Default: one process per thread\n"
	  "(at most the online CPUs) for sequential cuFile types (0, 5, 6) with -i 256K or more,\n"
	  "where threads of one cuFile instance move less; else 1" },
	{ -1, 256, "json", NULL, OPT_STR, R(json), 0, 0, NULL, "FILE",
	  "write the JSON record to FILE ('-' = stdout; the text line then goes to stderr)" },
	{ -1, 257, "dry-run", NULL, OPT_SET, R(dry_run), 0, 1, NULL, NULL,
	  "parse and check the options or job file as a run would, print the jobs\n"
	  "as JSON ({\"dry_run\": true, \"jobs\": [...]}) and run nothing" },
	{ -1, 258, "cufile-stats", NULL, OPT_INT, R(cufile_stats), 0, 3, "expected 0..3", "N",
	  "cuFile stats level used for path evidence (default 3, 0 = off)" },
	{ -1, 259, "cufile-param", NULL, OPT_CALL, 0, 0, 0, NULL, "NAME=VALUE",
	  "set a cuFile execution/properties parameter before the\n"
	  "driver opens (max_io_threads, max_io_queue_depth, parallel_io, ...);\n"
	  "the effective values are listed in path.evidence" },
	{ -1, 'h', "help", NULL, OPT_HELP, 0, 0, 0, NULL, NULL, "this help" },
	{ -1, 260, "version", NULL, OPT_VERSION, 0, 0, 0, NULL, NULL, "version and built-in transfer types" },
	{ -1, 261, "capabilities", NULL, OPT_CAPABILITIES, 0, 0, 0, NULL, NULL,
	  "what gdsbench knows, as JSON on stdout: transfer types with their flags,\n"
	  "I/O types, size units, job-file keys and their bounds (any build)" },
};
#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))
_Static_assert(sizeof(table) / sizeof(table[0]) <= GDS_OPT_MAX, "raise GDS_OPT_MAX");

int opt_count(void)
{
	return NTABLE;
}

const struct gds_option *opt_at(int i)
{
	return i >= 0 && i < NTABLE ? &table[i] : NULL;
}

static int keys_have(const char *keys, const char *k)
{
	size_t n = strlen(k);

	while (keys) {
		const char *bar = strchr(keys, '|');
		size_t len = bar ? (size_t)(bar - keys) : strlen(keys);

		if (len == n && !strncmp(keys, k, n))
			return 1;
		keys = bar ? bar + 1 : NULL;
	}
	return 0;
}

int opt_find_key(const char *key)
{
	for (int i = 0; i < NTABLE; i++)
		if (table[i].keys && keys_have(table[i].keys, key))
			return i;
	return -1;
}

/* "-x" / "--json": an option as messages name it (the short form if any) */
static const char *cli_name(const struct gds_option *o, char *buf, size_t len)
{
	if (o->val < 256)
		snprintf(buf, len, "-%c", o->val);
	else
		snprintf(buf, len, "--%s", o->lopt);
	return buf;
}

/* A job setting as messages name it: "-x" on the command line, "xfer_type"
 * (its first key) in a job file */
const char *opt_name(int id, int jobfile, char *buf, size_t len)
{
	for (int i = 0; i < NTABLE; i++) {
		const struct gds_option *o = &table[i];

		if (o->id == id && jobfile && o->keys) {
			snprintf(buf, len, "%.*s", (int)strcspn(o->keys, "|"), o->keys);
			return buf;
		}
		if (o->id == id && !jobfile && o->val)
			return cli_name(o, buf, len);
	}
	snprintf(buf, len, "?");
	return buf;
}

static int takes_value(const struct gds_option *o)
{
	return o->type != OPT_FLAG && o->type != OPT_SET && o->type != OPT_HELP && o->type != OPT_VERSION &&
	       o->type != OPT_CAPABILITIES;
}

/* One value into its field (a job's, or the run's for id -1). v is NULL for a
 * command-line flag. -1 with the reason in why. */
int opt_set(const struct gds_option *o, struct job *j, struct run_opts *ro, const char *v, char *why, size_t len)
{
	char *dst = (char *)(o->id < 0 ? (void *)ro : (void *)j) + o->off;
	uint64_t u = 0;
	double d;

	switch (o->type) {
	case OPT_PATH:
	case OPT_NAME: {
		size_t cap = o->type == OPT_PATH ? sizeof(j->dir) : sizeof(j->name);

		if (!*v || strlen(v) >= cap) {
			snprintf(why, len, "%s of 1..%zu bytes", o->expect, cap - 1);
			return -1;
		}
		memcpy(dst, v, strlen(v) + 1);
		return 0;
	}
	case OPT_IOSIZE:
		return parse_io_size(v, j, why, len);
	case OPT_SECONDS:
		if (parse_seconds(v, &d))
			break;
		memcpy(dst, &d, sizeof(d));
		return 0;
	case OPT_SIZE:
	case OPT_U64:
		if (o->type == OPT_SIZE ? parse_size(v, &u) : parse_uint(v, UINT64_MAX, &u))
			break;
		if (u < o->min)
			break;
		if (u > o->max) {
			/* a file offset is an off_t: past 2^63-1 no file reaches */
			snprintf(why, len, "more than %llu bytes, the largest file offset", (unsigned long long)o->max);
			return -1;
		}
		memcpy(dst, &u, sizeof(u));
		return 0;
	case OPT_FLAG:
	case OPT_NOT:
	case OPT_INT:
	case OPT_IOTYPE: {
		int iv;

		if (!v && o->type == OPT_FLAG)
			u = 1;	/* a command-line flag */
		else if (o->type == OPT_IOTYPE ? parse_io_type(v, &u) : parse_uint(v, o->max, &u))
			break;
		if (u < o->min)
			break;
		iv = o->type == OPT_NOT ? !u : (int)u;
		memcpy(dst, &iv, sizeof(iv));
		return 0;
	}
	case OPT_STR:
		memcpy(dst, &v, sizeof(v));
		return 0;
	case OPT_SET: {
		int one = 1;

		memcpy(dst, &one, sizeof(one));
		return 0;
	}
	case OPT_CALL:
		return set_cufile_param(v, why, len);
	case OPT_HELP:
	case OPT_VERSION:
	case OPT_CAPABILITIES:
		return 0;
	}
	if (o->type == OPT_IOTYPE)
		expect_io_type(why, len);
	else
		snprintf(why, len, "%s", o->expect ? o->expect : "bad value");
	return -1;
}

/* ---- the command line ---- */

int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("gdsbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'gdsbench -h' for help.\n", stderr);
	return EXIT_USAGE;
}

/* the vocabulary's lines under -x and -I (vocab.c) */
static void usage_vocab(FILE *f, int id)
{
	if (id == O_XFER) {
		for (int x = 0; x < xfer_type_count(); x++)
			if (!xfer_type(x)->refused)
				fprintf(f, "\n                %d %-15s %s", x, xfer_type(x)->name, xfer_type(x)->desc);
	} else if (id == O_IO) {
		fputs("\n               ", f);
		for (int t = 0; t < io_type_count(); t++)
			fprintf(f, " %d %s%s", t, io_type(t)->key, t + 1 < io_type_count() ? "," : "");
	}
}

void options_usage(FILE *f)
{
	fputs("usage: gdsbench -f FILE | -D DIR -x XFER -I IOTYPE [options]\n"
	      "       gdsbench [--json FILE] [-P N] JOBFILE.gdsio   ([global] and [jobN] sections, gdsio's format)\n"
	      "\n",
	      f);
	for (int i = 0; i < NTABLE; i++) {
		const struct gds_option *o = &table[i];
		char head[64];
		const char *h = o->help;
		int n;

		if (!o->val)
			continue;	/* job-file keys: README.md lists them */
		if (o->val < 256)
			n = snprintf(head, sizeof(head), "-%c%s%s", o->val, o->lopt ? ", --" : "", o->lopt ? o->lopt : "");
		else
			n = snprintf(head, sizeof(head), "--%s", o->lopt);
		if (o->arg)
			snprintf(head + n, sizeof(head) - (size_t)n, " %s", o->arg);
		fprintf(f, "  %-11s %s", head, strlen(head) > 11 ? " " : "");
		for (; *h; h++)	/* continuation lines under the first */
			if (*h == '\n')
				fputs("\n              ", f);
			else
				fputc(*h, f);
		usage_vocab(f, o->id);
		fputc('\n', f);
	}
	fputs("\nExit status: 0 ok, 1 runtime failure (I/O or verify errors), 2 usage error.\n", f);
}

void job_defaults(struct job *j)
{
	memset(j, 0, sizeof(*j));
	j->xfer = -1;
	j->io_type = -1;
	j->threads = 1;
	j->numa = -1;
	j->io_size = j->io_min = 1u << 20;
	j->seed = 1;
}

/* getopt over the table into j (the command line's job) and ro. Returns 0,
 * OPTS_EXIT_OK after the help, or EXIT_USAGE after the message. */
int options_cli(int argc, char **argv, struct job *j, struct run_opts *ro)
{
	static struct option longopts[GDS_OPT_MAX + 1];
	char shortopts[2 * GDS_OPT_MAX + 2] = ":", why[PATH_MAX + 512], name[32];
	int c, nl = 0;
	size_t ns = 1;

	memset(ro, 0, sizeof(*ro));
	ro->cufile_stats = 3;
	job_defaults(j);
	for (int i = 0; i < NTABLE; i++) {
		const struct gds_option *o = &table[i];

		if (o->val && o->val < 256) {
			shortopts[ns++] = (char)o->val;
			if (takes_value(o))
				shortopts[ns++] = ':';
		}
		if (o->lopt)
			longopts[nl++] = (struct option){ o->lopt, takes_value(o) ? required_argument : no_argument,
							  NULL, o->val };
	}
	shortopts[ns] = 0;
	longopts[nl] = (struct option){ NULL, 0, NULL, 0 };
	if (argc < 2) {
		options_usage(stderr);
		return EXIT_USAGE;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct gds_option *o = NULL;

		for (int i = 0; i < NTABLE && !o; i++)
			if (table[i].val == c)
				o = &table[i];
		if (c == ':')
			return usage_error("option %s needs a value", argv[optind - 1]);
		if (!o)
			return optopt ? usage_error("unknown option '-%c'", optopt)
				      : usage_error("unknown option '%s'", argv[optind - 1]);
		if (o->type == OPT_HELP || o->type == OPT_VERSION || o->type == OPT_CAPABILITIES) {
			if (o->type == OPT_HELP)
				options_usage(stdout);
			/* main prints these: the version lists the engines, the capabilities are report.c's */
			ro->version = o->type == OPT_VERSION;
			ro->capabilities = o->type == OPT_CAPABILITIES;
			return OPTS_EXIT_OK;
		}
		if (o->id >= 0)
			ro->job_opts++;
		if (opt_set(o, j, ro, takes_value(o) ? optarg : NULL, why, sizeof(why)) != 0)
			return usage_error("%s %s: %s", cli_name(o, name, sizeof(name)), optarg, why);
	}
	if (optind < argc) {
		if (argc - optind > 1)
			return usage_error("unexpected argument '%s'", argv[optind + 1]);
		ro->jobfile = argv[optind];
	}
	/* gdsio refuses these before anything else */
	if (j->dir[0] && j->file[0])
		return usage_error("-D and -f cannot be used together: -D DIR gives each thread a file, -f FILE is one shared file");
	return 0;
}
