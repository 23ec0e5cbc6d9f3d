/* Argument values and job validation, shared by the command line (main.c)
 * and gdsio job files (jobfile.c). */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdsbench.h"

/* 4096, 4K, 4k, 4KiB, 1M, 1G, 2T: binary multiples; no sign, no fraction. */
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
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1ull << 10; end++; break;
	case 'M': mul = 1ull << 20; end++; break;
	case 'G': mul = 1ull << 30; end++; break;
	case 'T': mul = 1ull << 40; end++; break;
	default: return -1;
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

/* Names of a setting on the command line and in a job file, for messages. */
static const char *const cli_name[O_COUNT] = {
	"-x", "-I", "-w", "-i", "-s", "-o", "-B", "-n", "-d", "-D", "-f",
	"-m", "-a", "-U", "-R", "-F", "-O", "-b", "-p", "-k", "-V", "-T" };
static const char *const cfg_name[O_COUNT] = {
	"xfer_type", "rw", "num_threads", "bs", "size", "start_offset", "io_depth", "numa_node", "gpu_dev_id",
	"directory", "filename", "mem_type", "alignment_size", "unaligned_random", "fill_random",
	"refill_buffer", "buffered", "skip_bufregister", "enable_nvlinks", "random_seed", "do_verify",
	"runtime" };

const char *job_opt_name(const struct job *j, enum job_opt o)
{
	return j->src ? cfg_name[o] : cli_name[o];
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
			     j->name, cfg_name[o]);
	else
		n = snprintf(err, errlen, "%s: ", cli_name[o]);
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

#define BAD(o, ...) do { bad(j, o, err, errlen, __VA_ARGS__); return -1; } while (0)

/* Checks one job and fills in what the files decide (size for reads). Returns
 * -1 with a message for a usage error. */
int job_validate(struct job *j, char *err, size_t errlen)
{
	int odirect, write = io_is_write(j->io_type);
	struct stat st;

	if (j->xfer == 3)
		BAD(O_XFER, "3 (CPU_ASYNC_GPU, managed memory) is not supported; use 2, 4 or a cuFile type");
	if (j->xfer == 7)
		BAD(O_XFER, "7 (GPU_BATCH_STREAM) is not supported; use 6 (batch) or 5 (stream)");
	if (j->xfer < 0 || j->xfer > 6)
		BAD(O_XFER, "%d is not a transfer type (0 GPUD, 1 CPUONLY, 2 CPU_GPU, 4 CPU_CACHED_GPU, 5 GPUD_ASYNC, 6 GPU_BATCH)",
		    j->xfer);
	if (j->io_type < 0 || j->io_type > 3)
		BAD(O_IO, "%d is not an I/O type (0 read, 1 write, 2 randread, 3 randwrite)", j->io_type);
	if (j->threads < 1 || j->threads > GDS_MAX_THREADS)
		BAD(O_THREADS, "%d threads: give 1..%d", j->threads, GDS_MAX_THREADS);
	odirect = j->xfer != 4 && !j->buffered;
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
	if (j->mem_type < 0 || j->mem_type > 4)
		BAD(O_MEM, "%d is not a memory type (0 cudaMalloc, 1 cuMem, 2 cudaMallocHost, 3 malloc, 4 mmap)",
		    j->mem_type);
	if (j->mem_type && j->xfer != 0 && j->xfer != 5 && j->xfer != 6)
		BAD(O_MEM, "memory types apply to the cuFile transfer types (0, 5, 6) only, as in gdsio");
	if (j->mem_type == 1)
		BAD(O_MEM, "1 (cuMem, the CUDA driver's virtual memory API) is not built into gdsbench; use 0, 2, 3 or 4");
	if (j->depth < 0 || j->depth > GDS_MAX_DEPTH)
		BAD(O_DEPTH, "%d: give 1..%d", j->depth, GDS_MAX_DEPTH);
	if (j->depth && j->xfer != 5 && j->xfer != 6)
		BAD(O_DEPTH, "ops in flight per thread apply to xfer types 5 and 6 only");
	if (j->gpu < 0)
		BAD(O_GPU, "%d is not a GPU index", j->gpu);
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

	if (j->dir[0]) {
		uint64_t smallest = UINT64_MAX;

		if (stat(j->dir, &st) != 0)
			BAD(O_DIR, "%s: %s", j->dir, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			BAD(O_DIR, "%s is not a directory", j->dir);
		if (write && j->file_size == 0) {
			/* rewriting existing files: their (smallest) size, else -s is needed */
			for (int t = 0; t < j->threads; t++) {
				char path[PATH_MAX];

				job_file_path(j, t, path, sizeof(path));
				if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size <= j->offset)
					BAD(O_SIZE, "writes need a file size (-s) unless every thread's file exists");
				if ((uint64_t)st.st_size < smallest)
					smallest = (uint64_t)st.st_size;
			}
			j->file_size = smallest - j->offset;
		} else if (!write) {
			for (int t = 0; t < j->threads; t++) {
				char path[PATH_MAX];

				job_file_path(j, t, path, sizeof(path));
				if (stat(path, &st) != 0)
					BAD(O_DIR, "%s: %s (-D reads use the files of an earlier write run with at least as many threads, as gdsio does)",
					    path, strerror(errno));
				if (!S_ISREG(st.st_mode))
					BAD(O_DIR, "%s is not a regular file", path);
				if ((uint64_t)st.st_size < smallest)
					smallest = (uint64_t)st.st_size;
			}
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
	} else {
		if (stat(j->file, &st) == 0) {
			if (!S_ISREG(st.st_mode))
				BAD(O_FILE, "%s is not a regular file", j->file);
			if (j->file_size == 0) {
				if ((uint64_t)st.st_size <= j->offset)
					BAD(O_SIZE, "%s is not larger than the offset; give -s", j->file);
				j->file_size = (uint64_t)st.st_size - j->offset;
			} else if (!write && j->offset + j->file_size > (uint64_t)st.st_size) {
				BAD(O_SIZE, "%llu bytes from offset %llu exceeds %s (%llu bytes)",
				    (unsigned long long)j->file_size, (unsigned long long)j->offset, j->file,
				    (unsigned long long)st.st_size);
			}
		} else if (!write) {
			BAD(O_FILE, "%s: %s", j->file, strerror(errno));
		} else {
			char parent[PATH_MAX];
			char *slash;

			snprintf(parent, sizeof(parent), "%s", j->file);
			slash = strrchr(parent, '/');
			if (slash == parent)
				slash[1] = 0;
			else if (slash)
				*slash = 0;
			else
				snprintf(parent, sizeof(parent), ".");
			if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
				BAD(O_FILE, "%s: the directory %s does not exist", j->file, parent);
			if (j->file_size == 0)
				BAD(O_SIZE, "writing a new file needs a file size (-s)");
		}
	}
	if (j->file_size < j->io_size)
		BAD(O_SIZE, "%llu bytes is smaller than the I/O size %llu", (unsigned long long)j->file_size,
		    (unsigned long long)j->io_size);
	if (j->file[0] && j->file_size / j->io_size < (uint64_t)j->threads)
		BAD(O_THREADS, "%d threads share %s: it holds only %llu I/Os of %llu bytes", j->threads, j->file,
		    (unsigned long long)(j->file_size / j->io_size), (unsigned long long)j->io_size);
	return 0;
}
