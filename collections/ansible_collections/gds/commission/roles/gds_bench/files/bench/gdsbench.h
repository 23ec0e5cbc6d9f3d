/* gdsbench: a gdsio-compatible load generator for GPUDirect Storage commissioning.
 * Shared types: jobs, worker threads, I/O slots and the transfer-engine
 * operations table (one source file per transfer path, as fio's engines/). */
#ifndef GDSBENCH_H
#define GDSBENCH_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hist.h"

#define GDS_VERSION "1.0"
#define GDS_SECTOR 4096u	/* O_DIRECT alignment and verify-pattern unit */
#define GDS_MAX_THREADS 4096
#define GDS_MAX_DEPTH 1024
#define GDS_MAX_JOBS 64
#define GDS_XFER_TYPES 8	/* gdsio's transfer-type numbers 0..7 (vocab.c) */
#define GDS_JOBFILE_MAX_BYTES (4u << 20)	/* the guide's job files are a few KiB */

#define EXIT_RUNTIME 1		/* I/O error, verify mismatch, missing GPU stack */
#define EXIT_USAGE 2		/* bad option or value; nothing was run */

enum io_type { IO_READ = 0, IO_WRITE = 1, IO_RANDREAD = 2, IO_RANDWRITE = 3 };

static inline int io_is_write(int t) { return t == IO_WRITE || t == IO_RANDWRITE; }
static inline int io_is_rand(int t) { return t == IO_RANDREAD || t == IO_RANDWRITE; }

struct worker;

/* One I/O in flight. buf is what the engine transfers (host or device memory);
 * host is a host-visible view used for the verify pattern (== buf for CPU types). */
struct slot {
	void *buf;
	void *host;
	uint64_t off;
	size_t len;
	int write;
	ssize_t res;		/* bytes moved, or <0 on error (engine-specific code) */
	uint64_t t_submit;	/* ns, set by the common loop */
	uint64_t t_done;	/* ns, set by queued engines when they see completion */
	size_t buf_off;		/* offset of buf inside the engine's registered region */
};

/* The benchmark's vocabulary (vocab.c): what each transfer type is, by capability flags (gdsbench
 * decides by a flag, never by a list of numbers), the I/O types and the size units. `gdsbench
 * --capabilities --json` prints it (report.c); the collection's Python copy is generated from it. */
enum engine_flags {
	ENG_GPU = 1u << 0,	/* needs the CUDA runtime and a GPU */
	ENG_CUFILE = 1u << 1,	/* goes through libcufile (path.mode from its stats) */
	ENG_ODIRECT = 1u << 2,	/* files opened with O_DIRECT (4 KiB alignment) */
	ENG_QUEUED = 1u << 3,	/* submit/reap with -B slots in flight */
	ENG_IOQUEUE = 1u << 4,	/* its ops in flight occupy cuFile's I/O queue (max_io_queue_depth) */
};

struct flag_info {
	unsigned flag;
	const char *name;	/* in --capabilities */
	const char *desc;
};

struct xfer_type {
	int xfer;		/* gdsio's number */
	const char *name;	/* gdsio's XferType label in the text line */
	const char *desc;
	unsigned flags;		/* enum engine_flags */
	int depth;		/* ENG_QUEUED: the default -B */
	const char *refused;	/* gdsio has it, gdsbench does not run it: why (NULL: runs) */
};

struct io_type_info {
	int io;			/* enum io_type */
	const char *key;	/* the JSON's io_type and the job files' rw= */
	const char *name;	/* gdsio's IoType label */
};

struct size_unit {
	char letter;		/* upper case; either case is read */
	unsigned shift;		/* 1 << shift bytes */
};

const struct xfer_type *xfer_type(int xfer);	/* NULL: no such number */
int xfer_type_count(void);
/* "0 GPUD, 5 GPUD_ASYNC, ...": the types run that have every flag of need (0: all) */
const char *xfer_type_list(unsigned need, char *buf, size_t len);
const struct io_type_info *io_type(int t);	/* NULL: no such number */
int io_type_count(void);
int io_type_find(const char *key);	/* -1: no such key */
uint64_t size_unit_mult(int c);	/* 0: not a unit letter */
const struct size_unit *size_unit_at(int i);
const struct flag_info *flag_info_at(int i);

/* The operations table of one transfer type (engine_*.c; engines.c finds them by number: a
 * build without CUDA has only the CPU ones). What the type is, its name and flags, is its
 * struct xfer_type (vocab.c). Depth-1 engines implement io(); queued engines
 * implement submit()/reap(). to_host/from_host move data between buf and host
 * for the verify pattern (NULL when buf is host memory). Return 0 or -1 with
 * w->err filled, except io() which returns bytes or <0 like pread. */
struct engine {
	int xfer;
	int (*global_init)(char *err, size_t errlen);
	void (*global_exit)(void);
	int (*thread_init)(struct worker *w);
	void (*thread_exit)(struct worker *w);
	int (*file_open)(struct worker *w);
	void (*file_close)(struct worker *w);
	ssize_t (*io)(struct worker *w, struct slot *s);
	int (*room)(struct worker *w);	/* queued: how many ops submit() takes now */
	int (*submit)(struct worker *w, struct slot **s, int n);
	int (*reap)(struct worker *w, struct slot **done, int max);
	int (*to_host)(struct worker *w, struct slot *s);
	int (*from_host)(struct worker *w, struct slot *s);
	const char *(*strerror)(ssize_t res, char *buf, size_t len);
};

const struct engine *engine_get(int xfer);

struct path_info {
	char mode[16];		/* nvfs | p2pdma | compat | posix | unknown */
	char evidence[10][400];
	int n_evidence;
	/* raw counters behind the verdict (-1 = not available) */
	long long n_nvfs, n_p2p, n_posix, n_total;
};

struct result {
	uint64_t bytes, ops, errors, verify_errors;
	uint64_t t_start, t_end;	/* ns, CLOCK_MONOTONIC */
	double cpu_s;			/* worker threads' CPU seconds in the timed window */
	struct hist hist;
	struct path_info path;
	uint64_t len_min, len_max;	/* smallest and largest I/O done (-i MIN:MAX:STEP) */
	char error[512];		/* the first worker error of the job ("" = none) */
};

/* The settings of a job, by their command-line option / job-file key, for
 * messages (config.c names them; a job file records the line of each). */
enum job_opt {
	O_XFER, O_IO, O_THREADS, O_IOSIZE, O_SIZE, O_OFFSET, O_DEPTH, O_NUMA, O_GPU, O_DIR, O_FILE,
	O_MEM, O_ALIGN, O_UNALIGNED, O_FILL, O_REFILL, O_BUFFERED, O_SKIPREG, O_NVLINK, O_SEED, O_VERIFY,
	O_RUNTIME, O_NAME, O_PEERMEM, O_COUNT
};

/* One job: the command line, or one [jobN] section of a gdsio config file. */
struct job {
	char name[64];
	int xfer;
	int io_type;
	int threads;
	int gpu;
	int numa;		/* -1: no pinning */
	uint64_t file_size;	/* per file (-D) or the region of the shared file (-f); 0 = from file */
	uint64_t io_size;	/* the I/O size; with -i MIN:MAX:STEP the largest one */
	uint64_t io_min, io_step;	/* -i MIN:MAX:STEP: each op's size is MIN + k*STEP <= io_size;
				 * io_step 0: every op is io_size */
	uint64_t align;		/* -a: random offsets are multiples of this; 0 = the I/O size */
	int unaligned;		/* -U: random offsets on 512-byte, not 4 KiB, boundaries */
	int fill_random;	/* -R: I/O buffers hold random bytes (from the seed), not the pattern */
	int refill;		/* -F: new random bytes before each write */
	int buffered;		/* -O 1: no O_DIRECT (page cache) */
	int mem_type;		/* -m: 0 cudaMalloc (the only one built in) */
	int skip_bufreg;	/* -b: no cuFileBufRegister */
	int nvlinks;		/* -p: peer access to the other GPUs */
	uint64_t offset;
	double duration;	/* seconds; 0 = one pass */
	int one_pass;		/* job file time_based=0: stop after one pass even with a runtime */
	uint64_t seed;
	int verify;
	int depth;		/* -B: ops in flight per thread (queued engines); 0 = default */
	char dir[PATH_MAX];
	char file[PATH_MAX];
	char peer_mem[PATH_MAX];	/* --peer-memory: a p2pmem/allocate file; "" = host memory */
	int file_base;		/* first per-thread file index in dir (config jobs sharing a dir) */
	char refused[PATH_MAX + 128];	/* why datafile.c refused a target at the check ("": none);
					 * the run then fails with it, opening nothing */
	const char *src;	/* job file path (NULL: command line) */
	int line;		/* job file: line of the [section] header */
	int opt_line[O_COUNT];	/* job file: line where each setting was given (0 = default) */
	const struct xfer_type *xt;	/* what xfer is (job_validate sets it) */
	const struct engine *eng;
	struct result res;
};

struct worker {
	struct job *job;
	const struct engine *eng;
	int idx;		/* thread index within the job */
	int fd;
	int dirfd;		/* the file's directory (datafile.c opens the file relative to it) */
	int created;		/* this worker created the file (removed if no I/O starts) */
	struct stat st;		/* the file opened: verify and removal check it is still this one */
	char path[PATH_MAX];	/* for messages */
	char name[PATH_MAX];	/* the file in dirfd */
	void *fh;		/* engine file handle (cuFile) */
	void *priv;		/* engine thread state */
	int depth;
	struct slot *slots;
	/* offsets: sequential ops walk [seq_base, +seq_len), random ops pick
	 * from [rnd_base, +rnd_len) */
	uint64_t seq_base, seq_len, rnd_base, rnd_len, seq_pos;
	uint64_t rng;
	uint64_t fill_rng;	/* -R/-F buffer contents */
	uint64_t pass_bytes;	/* one-pass mode: bytes to move */
	uint64_t issued;	/* bytes of ops prepared so far */
	uint64_t deadline;	/* ns; 0 = one pass */
	/* results */
	struct hist hist;
	uint64_t bytes, ops, errors, verify_errors, t_end, cpu_ns;
	uint64_t len_min, len_max;
	uint64_t first_bad_off;
	char err[512];
	int failed;
};

/* shared by every layer (util.c) */
extern atomic_int g_stop;	/* SIGINT/SIGTERM: finish the ops in flight and report */
uint64_t now_ns(void);
void werr(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Data files, target directories and the --json file (datafile.c): the one
 * place that opens, creates and removes them. Links in the last component are
 * never followed; an existing file must be a regular file of the running user
 * (or the file this run created: ours); a new one is created with O_EXCL. */
#define DF_OK 0
#define DF_ERRNO (-1)		/* a plain failure, errno set and err filled */
#define DF_REFUSED (-2)		/* the rule refused it: err names the path and why */
/* a descriptor of directory dir (O_PATH); nofollow: its last component must
 * not be a link (a -D target). DF_ERRNO (missing, not a directory) or
 * DF_REFUSED with err */
int df_dir_open(const char *dir, int nofollow, char *err, size_t len);
/* path as its directory and last component; -1 when it has none or they do not fit */
int df_split(const char *path, char *dir, size_t dlen, char *name, size_t nlen);
/* what is at dirfd/name, not following a link: DF_OK (a regular file of ours,
 * st filled), DF_ERRNO (errno ENOENT: nothing there) or DF_REFUSED, with err */
int df_stat(int dirfd, const char *name, const char *shown, struct stat *st, char *err, size_t len);
/* dirfd/name opened with flags (access mode, O_DIRECT; O_CREAT: create it
 * with O_EXCL when missing, *created set). With ours, it must still be that
 * file. A descriptor, or DF_ERRNO / DF_REFUSED with err; st: the file opened */
int df_open(int dirfd, const char *name, const char *shown, int flags, const struct stat *ours, int *created,
	    struct stat *st, char *err, size_t len);
/* remove dirfd/name only while it is still the regular file ours: 0, or -1 */
int df_unlink(int dirfd, const char *name, const struct stat *ours);

/* verify pattern (pattern.c) */
void pattern_init(void);
void pattern_fill(void *buf, size_t len, uint64_t off);
void pattern_stamp(void *buf, size_t len, uint64_t off);
uint64_t pattern_check(const void *buf, size_t len, uint64_t off, uint64_t *first_bad);

/* Where the workers of a run execute. Worker k (counted over all jobs) runs
 * in this process when nprocs <= 1 or k % nprocs == index. With nprocs > 1,
 * the run calls gate(ctx, ok, &t_start) once this process's threads are set
 * up (ok: all of them): it waits for the common start of all processes, sets
 * t_start, and returns -1 when another process failed (nobody starts I/O).
 * The I/O loop knows nothing else of -P: procs.c supplies the gate. */
struct run_place {
	int nprocs;
	int index;
	int (*gate)(void *ctx, int ok, uint64_t *t_start);
	void *ctx;
};

/* the run: threads, the I/O loop, verify (worker.c) */
#define RUN_ERRORS_SEE_ABOVE "the run had errors (see above)"
int run_worker_here(const struct run_place *pl, int k);
/* 0, or -1 with err (worker errors already printed: RUN_ERRORS_SEE_ABOVE);
 * *cpu_s: this process's CPU seconds in the timed window */
int run_jobs(struct job *jobs, int njobs, const struct run_place *pl, double *cpu_s, char *err, size_t errlen);
void job_file_path(const struct job *j, int idx, char *out, size_t len);
/* the directory and name of thread idx's file (-1: the -f path has no file name) */
int job_file_place(const struct job *j, int idx, char *dir, size_t dlen, char *name, size_t nlen);

/* the run in this process with its engines, and -P worker processes (procs.c) */
/* engines' global setup, the run, path evidence, teardown. Returns -1 with err
 * when an engine could not start (nothing ran); else 0 with *run_rc and
 * *cpu_s from run_jobs (err: its message) */
int run_here(struct job *jobs, int njobs, const struct run_place *pl, int *run_rc, double *cpu_s, char *err,
	     size_t errlen);
/* the run over nprocs forked processes, results merged into jobs[].res;
 * 0 ok, -1 run errors, -2 an engine could not start (messages printed) */
int run_procs(struct job *jobs, int njobs, int nprocs, double *cpu_s, char *err, size_t errlen);
/* worker processes when -P is not given: one per thread for large sequential
 * cuFile I/O (ENG_CUFILE, I/O size >= PROCS_DEFAULT_MIN_IO), else 1 */
#define PROCS_DEFAULT_MIN_IO (256u << 10)
int procs_default(const struct job *jobs, int njobs, int total_threads);

/* path.mode / path.evidence (pathmode.c) */
void path_begin(struct job *jobs, int njobs);
void path_finish(struct job *jobs, int njobs);
int path_mode_rank(const char *mode);	/* unknown < posix < compat < p2pdma < nvfs */
/* one job's evidence from n worker processes (of nprocs): counters summed,
 * any compat op makes the mode compat, else the least direct mode wins */
void path_merge(struct path_info *out, const struct path_info *in, int n, int nprocs);

/* output (report.c) */
const char *io_type_name(int t);
/* --capabilities --json: the vocabulary and the job-file keys with their bounds */
int report_capabilities(FILE *f);
void report_line(FILE *out, struct job *jobs, int njobs, struct result *agg);
/* --dry-run: {"dry_run": true, "jobs": [...]} with each job's settings */
int report_plan(FILE *f, const struct job *jobs, int njobs);
/* "error" (a string) is written when error is non-empty: the reason of a failed run */
int report_json(const char *dest, struct job *jobs, int njobs, struct result *agg, double cpu_s, int nprocs,
		int exit_code, const char *error, char *err, size_t errlen);

/* The options: one table for the command line and job files (options.c) */
enum opt_type {
	OPT_PATH,	/* char[PATH_MAX]: a target path */
	OPT_NAME,	/* char[64]: a job's name */
	OPT_INT,	/* int in [min, max] */
	OPT_U64,	/* uint64_t in [min, max] */
	OPT_SIZE,	/* uint64_t, 4K, 1M, ... in [min, max] */
	OPT_IOSIZE,	/* SIZE or MIN:MAX:STEP into io_size, io_min, io_step */
	OPT_SECONDS,	/* double, 0..1e7 */
	OPT_IOTYPE,	/* int: 0..3 or read, write, randread, randwrite */
	OPT_FLAG,	/* int: a bare option on the command line, 0 or 1 in a job file */
	OPT_NOT,	/* int = !value (time_based=0 sets one_pass) */
	OPT_STR,	/* const char *: the argument itself */
	OPT_SET,	/* int = 1, no value */
	OPT_CALL,	/* --cufile-param: checked and kept by cuda_rt.c */
	OPT_HELP,
	OPT_VERSION,
	OPT_CAPABILITIES,	/* --capabilities: the vocabulary as JSON */
};

/* The run's own options (command line only) */
struct run_opts {
	const char *json;	/* --json FILE ("-": stdout) */
	const char *jobfile;	/* the lone argument */
	int dry_run;
	int nprocs;		/* -P; 0: the default */
	int cufile_stats;	/* --cufile-stats, default 3 */
	int version;
	int capabilities;	/* --capabilities */
	int job_opts;		/* job options given on the command line */
};

struct gds_option {
	int id;			/* the job setting (enum job_opt); -1: the run's own (struct run_opts) */
	int val;		/* getopt's: the short option, > 255 long only, 0 job files only */
	const char *lopt;	/* long option, or NULL */
	const char *keys;	/* job-file keys, '|' between aliases (the first names it); NULL: none */
	enum opt_type type;
	size_t off;		/* offsetof the field in struct job (id >= 0) or struct run_opts */
	uint64_t min, max;
	const char *expect;	/* why a bad value is refused */
	const char *arg;	/* the value in the help */
	const char *help;	/* '\n' between lines */
};

#define GDS_OPT_MAX 40
#define OPTS_EXIT_OK (-1)	/* options_cli printed the help or wants the version: exit 0 */
int opt_count(void);
const struct gds_option *opt_at(int i);
int opt_find_key(const char *key);	/* the entry of a job-file key, -1: unknown */
const char *opt_name(int id, int jobfile, char *buf, size_t len);
/* one value into its field; v NULL for a command-line flag; -1 with why */
int opt_set(const struct gds_option *o, struct job *j, struct run_opts *ro, const char *v, char *why, size_t len);
void job_defaults(struct job *j);
/* the command line into j and ro: 0, OPTS_EXIT_OK, or EXIT_USAGE (message printed) */
int options_cli(int argc, char **argv, struct job *j, struct run_opts *ro);
void options_usage(FILE *f);
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int parse_size(const char *s, uint64_t *out);
int parse_uint(const char *s, uint64_t max, uint64_t *out);
int parse_seconds(const char *s, double *out);
/* SIZE or MIN:MAX:STEP into j->io_size/io_min/io_step; -1 with a reason in msg */
int parse_io_size(const char *s, struct job *j, char *msg, size_t len);

/* job checks (config.c) */
/* checks one job, fills in what the files decide (size for reads); -1 with
 * the message of a usage error, naming the option (or FILE:LINE and key) */
int job_validate(struct job *j, char *err, size_t errlen);
/* every job, then what they add up to (file numbers in shared directories,
 * the data set): -1 with the message of a usage error */
int jobs_validate(struct job *jobs, int njobs, char *err, size_t errlen);
/* "-D" on the command line, "directory" for a job file */
const char *job_opt_name(const struct job *j, enum job_opt o);

/* gdsio job files: [global] and [jobN] sections of key=value (jobfile.c).
 * Each job starts from the defaults, then [global], then its own section.
 * Errors name the file and line. */
int jobfile_parse(const char *path, struct job *jobs, int max, int *njobs, char *err, size_t errlen);

#endif
