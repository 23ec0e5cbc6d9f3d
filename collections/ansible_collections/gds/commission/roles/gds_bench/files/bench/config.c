/* Job validation, shared by the command line (main.c) and gdsio job files
 * (jobfile.c): the values are parsed by the option table (options.c), the
 * checks here are about a job as a whole and the machine. */
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "gdsbench.h"

/* Names of a setting in messages (the option table's): a few at a time,
 * as one message may name two */
const char *job_opt_name(const struct job *j, enum job_opt o)
{
	static char names[4][32];
	static int next;

	next = (next + 1) % 4;
	return opt_name(o, j->src != NULL, names[next], sizeof(names[next]));
}

/* "-i: ..." on the command line; "FILE:LINE: [job1] bs: ..." for a job file
 * (the line where the key was given, else the job's section header). */
static void bad(const struct job *j, enum job_opt o, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void bad(const struct job *j, enum job_opt o, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->src)
		n = snprintf(err, errlen, "%s:%d: [%s] %s: ", j->src, j->opt_line[o] ? j->opt_line[o] : j->line,
			     j->name, job_opt_name(j, o));
	else
		n = snprintf(err, errlen, "%s: ", job_opt_name(j, o));
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static uint64_t dataset_bytes(const struct job *j)
{
	return j->dir[0] ? (uint64_t)j->threads * j->file_size : j->file_size;
}

/* The size of the file system that holds path (or would hold it: its
 * directory); -1 when unknown (some network and FUSE file systems say 0). */
static int fs_bytes(const char *path, uint64_t *out)
{
	struct statvfs v;
	char parent[PATH_MAX];
	char *slash;

	if (statvfs(path, &v) != 0) {
		snprintf(parent, sizeof(parent), "%s", path);
		slash = strrchr(parent, '/');
		if (slash == parent)
			slash[1] = 0;	/* "/f": the root */
		else if (slash)
			*slash = 0;
		if (statvfs(slash ? parent : ".", &v) != 0)
			return -1;
	}
	if (!v.f_blocks || !v.f_frsize || __builtin_mul_overflow((uint64_t)v.f_blocks, (uint64_t)v.f_frsize, out))
		return -1;
	return 0;
}

#define BAD(o, ...) do { bad(j, o, err, errlen, __VA_ARGS__); return -1; } while (0)

/* A target datafile.c refuses: the job is kept, its file sizes unread, and
 * the run fails with why before it opens anything (worker.c) */
static int refuse(struct job *j, const char *why)
{
	snprintf(j->refused, sizeof(j->refused), "%s", why);
	return 0;
}

/* The transfer type (what it is: j->xt) and the I/O type: known, and run by gdsbench. */
static int check_types(struct job *j, char *err, size_t errlen)
{
	char list[256];

	j->xt = xfer_type(j->xfer);
	if (!j->xt)
		BAD(O_XFER, "%d is not a transfer type (%s)", j->xfer, xfer_type_list(0, list, sizeof(list)));
	if (j->xt->refused)
		BAD(O_XFER, "%d (%s) %s", j->xfer, j->xt->name, j->xt->refused);
	if (!io_type(j->io_type)) {
		size_t o = 0;

		for (int t = 0; t < io_type_count() && o < sizeof(list); t++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%d %s", t ? ", " : "", t, io_type(t)->key);
		BAD(O_IO, "%d is not an I/O type (%s)", j->io_type, list);
	}
	if (j->threads < 1 || j->threads > GDS_MAX_THREADS)
		BAD(O_THREADS, "%d threads: give 1..%d", j->threads, GDS_MAX_THREADS);
	return 0;
}

/* The I/O size (or -i range) and the offset, against what O_DIRECT or verify needs. */
static int check_io_size(struct job *j, int odirect, char *err, size_t errlen)
{
	if (j->io_size == 0)
		BAD(O_IOSIZE, "the I/O size must be > 0");
	if (j->io_size > (1ull << 30))
		BAD(O_IOSIZE, "%llu bytes: at most 1 GiB per I/O", (unsigned long long)j->io_size);
	if (!j->io_min || j->io_min > j->io_size)
		j->io_min = j->io_size;
	if ((odirect || j->verify) &&
	    (j->io_size % GDS_SECTOR || j->io_min % GDS_SECTOR || j->io_step % GDS_SECTOR))
		BAD(O_IOSIZE, "%llu bytes is not a multiple of 4 KiB, which %s needs",
		    (unsigned long long)(j->io_size % GDS_SECTOR ? j->io_size
					 : j->io_min % GDS_SECTOR ? j->io_min : j->io_step),
		    odirect ? "O_DIRECT" : "verify");
	if ((odirect || j->verify) && j->offset % GDS_SECTOR)
		BAD(O_OFFSET, "%llu is not a multiple of 4 KiB, which %s needs", (unsigned long long)j->offset,
		    odirect ? "O_DIRECT" : "verify");
	return 0;
}

/* Random offsets (-a, -U) and buffer contents (-R, -F): what each applies to, what verify allows. */
static int check_offsets_and_fill(struct job *j, int odirect, char *err, size_t errlen)
{
	if (j->align) {
		if (!io_is_rand(j->io_type))
			BAD(O_ALIGN, "the alignment of random offsets applies to random I/O (randread, randwrite) only");
		if (j->unaligned)
			BAD(O_ALIGN, "%s and %s both set the alignment of random offsets; give one",
			    job_opt_name(j, O_ALIGN), job_opt_name(j, O_UNALIGNED));
		if ((odirect || j->verify) && j->align % GDS_SECTOR)
			BAD(O_ALIGN, "%llu is not a multiple of 4 KiB, which %s needs (%s gives 512-byte offsets)",
			    (unsigned long long)j->align, odirect ? "O_DIRECT" : "verify",
			    job_opt_name(j, O_UNALIGNED));
		if (j->align > (1ull << 30))
			BAD(O_ALIGN, "%llu bytes: at most 1 GiB", (unsigned long long)j->align);
	}
	if (j->unaligned) {
		if (!io_is_rand(j->io_type))
			BAD(O_UNALIGNED, "unaligned offsets apply to random I/O (randread, randwrite) only");
		if (j->verify)
			BAD(O_UNALIGNED, "unaligned offsets cannot be verified (the pattern is per 4 KiB sector); drop %s",
			    job_opt_name(j, O_VERIFY));
	}
	if (j->refill) {
		if (!io_is_write(j->io_type))
			BAD(O_REFILL, "refilling the buffer before each write applies to writes (write, randwrite) only");
		j->fill_random = 1;
	}
	if (j->fill_random && j->verify)
		BAD(j->refill ? O_REFILL : O_FILL, "random buffer contents cannot be verified; drop %s or %s",
		    job_opt_name(j, j->refill ? O_REFILL : O_FILL), job_opt_name(j, O_VERIFY));
	return 0;
}

/* What only some transfer types take (by their flags: memory types the cuFile ones, -B the
 * queued ones), the GPU and the NUMA node. */
static int check_engine_options(struct job *j, char *err, size_t errlen)
{
	char list[256];

	if (j->mem_type < 0 || j->mem_type > 4)
		BAD(O_MEM, "%d is not a memory type (0 cudaMalloc, 1 cuMem, 2 cudaMallocHost, 3 malloc, 4 mmap)",
		    j->mem_type);
	if (j->mem_type && !(j->xt->flags & ENG_CUFILE))
		BAD(O_MEM, "memory types apply to the cuFile transfer types (%s) only, as in gdsio",
		    xfer_type_list(ENG_CUFILE, list, sizeof(list)));
	if (j->mem_type == 1)
		BAD(O_MEM, "1 (cuMem, the CUDA driver's virtual memory API) is not built into gdsbench; use 0, 2, 3 or 4");
	if (j->depth < 0 || j->depth > GDS_MAX_DEPTH)
		BAD(O_DEPTH, "%d: give 1..%d", j->depth, GDS_MAX_DEPTH);
	if (j->depth && !(j->xt->flags & ENG_QUEUED))
		BAD(O_DEPTH, "ops in flight per thread apply to the queued transfer types (%s) only",
		    xfer_type_list(ENG_QUEUED, list, sizeof(list)));
	if (j->gpu < 0)
		BAD(O_GPU, "%d is not a GPU index", j->gpu);
	if (j->peer_mem[0] && j->xfer != 1)
		BAD(O_PEERMEM, "peer memory is the buffer of xfer 1 (CPU only, O_DIRECT) only; the GPU types use their GPU's");
	if (j->peer_mem[0] && j->buffered)
		BAD(O_PEERMEM, "peer memory needs O_DIRECT (-O 0): the page cache cannot copy into it");
	if (j->peer_mem[0] && access(j->peer_mem, R_OK | W_OK) != 0)
		BAD(O_PEERMEM, "%s: %s (a published provider has /sys/bus/pci/devices/BDF/p2pmem/allocate)",
		    j->peer_mem, strerror(errno));
	if (j->numa >= 0) {
		char p[96];

		snprintf(p, sizeof(p), "/sys/devices/system/node/node%d", j->numa);
		if (access(p, F_OK) != 0)
			BAD(O_NUMA, "NUMA node %d does not exist on this machine (%s)", j->numa, p);
	}
	if (!j->dir[0] && !j->file[0]) {
		if (j->src)
			BAD(O_DIR, "the job has neither a directory nor a filename");
		BAD(O_FILE, "give a target: -D directory or -f file");
	}
	if (j->dir[0] && j->file[0])
		BAD(O_DIR, "%s and %s cannot be used together", job_opt_name(j, O_DIR), job_opt_name(j, O_FILE));
	return 0;
}

/* -D: the smallest of the threads' files (UINT64_MAX: none, a write makes them), or -1 with a
 * usage error; 0 and j->refused set when datafile.c refuses one. */
static int dir_smallest(struct job *j, int write, uint64_t *smallest, char *err, size_t errlen)
{
	char msg[PATH_MAX + 128];
	struct stat st;
	int dfd = df_dir_open(j->dir, 1, msg, sizeof(msg));

	*smallest = UINT64_MAX;
	if (dfd == DF_REFUSED)
		return refuse(j, msg);
	if (dfd < 0)
		BAD(O_DIR, "%s", msg);
	for (int t = 0; t < j->threads; t++) {
		char path[PATH_MAX], name[32];
		int rc;

		job_file_path(j, t, path, sizeof(path));
		snprintf(name, sizeof(name), "gdsbench.%d", j->file_base + t);
		rc = df_stat(dfd, name, path, &st, msg, sizeof(msg));
		if (rc == DF_OK && !(write && !j->file_size && (uint64_t)st.st_size <= j->offset)) {
			if ((uint64_t)st.st_size < *smallest)
				*smallest = (uint64_t)st.st_size;
			continue;
		}
		if (rc != DF_REFUSED && rc != DF_OK && write && j->file_size)
			continue;	/* missing: the run makes it (another error: the run names it) */
		close(dfd);
		if (rc == DF_REFUSED)
			return refuse(j, msg);
		if (write)
			BAD(O_SIZE, "writes need a file size (-s) unless every thread's file exists");
		BAD(O_DIR, "%s (-D reads use the files of an earlier write run with at least as many threads, as gdsio does)",
		    msg);
	}
	close(dfd);
	return 0;
}

/* -D: every thread's file, looked at through datafile.c as the run opens them; the size a read
 * or a rewrite of existing files takes from them. */
static int check_dir_target(struct job *j, int write, char *err, size_t errlen)
{
	uint64_t smallest;

	if (dir_smallest(j, write, &smallest, err, errlen) != 0 || j->refused[0])
		return j->refused[0] ? 0 : -1;
	if (write && j->file_size == 0) {
		/* rewriting existing files: their (smallest) size */
		j->file_size = smallest - j->offset;
	} else if (!write) {
		if (smallest <= j->offset)
			BAD(O_SIZE, "the files in %s are not larger than the offset %llu", j->dir,
			    (unsigned long long)j->offset);
		if (j->file_size == 0)
			j->file_size = smallest - j->offset;
		else if (j->offset + j->file_size > smallest)
			BAD(O_SIZE, "%llu bytes from offset %llu exceeds the smallest file in %s (%llu bytes); write them first",
			    (unsigned long long)j->file_size, (unsigned long long)j->offset, j->dir,
			    (unsigned long long)smallest);
	}
	return 0;
}

/* -f: the shared file (its directory followed: links above the target are the user's). */
static int check_file_target(struct job *j, int write, char *err, size_t errlen)
{
	char parent[PATH_MAX], name[PATH_MAX], msg[PATH_MAX + 128];
	struct stat st;
	int pfd, rc, e;

	if (df_split(j->file, parent, sizeof(parent), name, sizeof(name)) != 0)
		BAD(O_FILE, "%s is not a file name", j->file);
	pfd = df_dir_open(parent, 0, msg, sizeof(msg));
	if (pfd < 0 && write)
		BAD(O_FILE, "%s: the directory %s does not exist", j->file, parent);
	if (pfd < 0)
		BAD(O_FILE, "%s: %s", j->file, strerror(errno));
	rc = df_stat(pfd, name, j->file, &st, msg, sizeof(msg));
	e = errno;
	close(pfd);
	if (rc == DF_REFUSED)
		return refuse(j, msg);
	if (rc == DF_OK) {
		if (j->file_size == 0) {
			if ((uint64_t)st.st_size <= j->offset)
				BAD(O_SIZE, "%s is not larger than the offset; give -s", j->file);
			j->file_size = (uint64_t)st.st_size - j->offset;
		} else if (!write && j->offset + j->file_size > (uint64_t)st.st_size) {
			BAD(O_SIZE, "%llu bytes from offset %llu exceeds %s (%llu bytes)",
			    (unsigned long long)j->file_size, (unsigned long long)j->offset, j->file,
			    (unsigned long long)st.st_size);
		}
	} else if (!write || e != ENOENT) {
		BAD(O_FILE, "%s", msg);
	} else if (j->file_size == 0) {
		BAD(O_SIZE, "writing a new file needs a file size (-s)");
	}
	return 0;
}

/* The region against the I/O size and the threads, and sizes no file can have, refused before
 * the run creates anything: a file offset is an off_t (at most 2^63-1), the data set (threads x
 * size for -D) is reported in the same 63 bits, and a write must fit the file system. Each value
 * is at most 2^63-1 (the option table), so the sum cannot wrap. */
static int check_region(struct job *j, int write, char *err, size_t errlen)
{
	uint64_t fs;

	if (j->file_size < j->io_size)
		BAD(O_SIZE, "%llu bytes is smaller than the I/O size %llu", (unsigned long long)j->file_size,
		    (unsigned long long)j->io_size);
	if (j->file[0] && j->file_size / j->io_size < (uint64_t)j->threads)
		BAD(O_THREADS, "%d threads share %s: it holds only %llu I/Os of %llu bytes", j->threads, j->file,
		    (unsigned long long)(j->file_size / j->io_size), (unsigned long long)j->io_size);
	if (j->offset + j->file_size > (uint64_t)INT64_MAX)
		BAD(O_SIZE, "%llu bytes from offset %llu end past the largest file offset (2^63-1)",
		    (unsigned long long)j->file_size, (unsigned long long)j->offset);
	if (j->dir[0] && j->file_size > (uint64_t)INT64_MAX / (uint64_t)j->threads)
		BAD(O_SIZE, "%d files of %llu bytes are more than 2^63-1 bytes", j->threads,
		    (unsigned long long)j->file_size);
	if (write && fs_bytes(j->dir[0] ? j->dir : j->file, &fs) == 0 && dataset_bytes(j) > fs)
		BAD(O_SIZE, "%llu bytes to write do not fit in the file system of %s (%llu bytes)",
		    (unsigned long long)dataset_bytes(j), j->dir[0] ? j->dir : j->file, (unsigned long long)fs);
	return 0;
}

/* Checks one job and fills in what the files decide (size for reads). Returns -1 with a
 * message for a usage error. The files are looked at through datafile.c, as the run opens
 * them: a target it refuses (a link, not a regular file, another user's) is not a usage error
 * but a failed run, with the reason in the JSON record (j->refused). */
int job_validate(struct job *j, char *err, size_t errlen)
{
	int odirect, write = io_is_write(j->io_type);

	j->refused[0] = 0;
	if (check_types(j, err, errlen) != 0)
		return -1;
	odirect = (j->xt->flags & ENG_ODIRECT) && !j->buffered;
	if (check_io_size(j, odirect, err, errlen) != 0 || check_offsets_and_fill(j, odirect, err, errlen) != 0 ||
	    check_engine_options(j, err, errlen) != 0)
		return -1;
	if ((j->dir[0] ? check_dir_target(j, write, err, errlen) : check_file_target(j, write, err, errlen)) != 0)
		return -1;
	return j->refused[0] ? 0 : check_region(j, write, err, errlen);
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

int jobs_validate(struct job *jobs, int njobs, char *err, size_t errlen)
{
	uint64_t total = 0;

	assign_file_bases(jobs, njobs);
	for (int i = 0; i < njobs; i++)
		if (job_validate(&jobs[i], err, errlen) != 0)
			return -1;
	for (int i = 0; i < njobs; i++) {
		const struct job *j = &jobs[i];

		if (dataset_bytes(j) > (uint64_t)INT64_MAX - total)
			BAD(O_SIZE, "the data sets of the jobs up to this one add up to more than 2^63-1 bytes");
		total += dataset_bytes(j);
	}
	return 0;
}
