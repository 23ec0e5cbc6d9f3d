/* Argument values, job validation, and gdsio config files:
 *   [global]  xfer_type=0 rw=randread bs=4k size=500M runtime=120 ...
 *   [job1]    numa_node=0 gpu_dev_id=0 num_threads=16 directory=/mnt/... */
#include <ctype.h>
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

static int parse_seconds(const char *s, double *out)
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

/* Names of a setting on the command line and in a config file, for messages. */
enum opt { O_XFER, O_IO, O_THREADS, O_IOSIZE, O_SIZE, O_OFFSET, O_DEPTH, O_NUMA, O_GPU, O_DIR, O_FILE };
static const char *const cli_name[] = { "-x", "-I", "-w", "-i", "-s", "-o", "-B", "-n", "-d", "-D", "-f" };
static const char *const cfg_name[] = { "xfer_type", "rw", "num_threads", "bs", "size", "offset",
					"batch_size", "numa_node", "gpu_dev_id", "directory", "filename" };

#define BAD(o, ...) do { \
	int n_ = snprintf(err, errlen, "%s%s%s: ", who, who[0] ? " " : "", cfg ? cfg_name[o] : cli_name[o]); \
	if (n_ >= 0 && (size_t)n_ < errlen) snprintf(err + n_, errlen - (size_t)n_, __VA_ARGS__); \
	return -1; \
} while (0)

/* Checks one job and fills in what the files decide (size for reads). who:
 * "" on the command line, "FILE:[jobN]" for config jobs. Returns -1 with a
 * message for a usage error. */
int job_validate(struct job *j, const char *who, char *err, size_t errlen)
{
	int cfg = who[0] != 0;
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
	odirect = j->xfer != 4;
	if (j->io_size == 0)
		BAD(O_IOSIZE, "the I/O size must be > 0");
	if (j->io_size > (1ull << 30))
		BAD(O_IOSIZE, "%llu bytes: at most 1 GiB per I/O", (unsigned long long)j->io_size);
	if ((odirect || j->verify) && j->io_size % GDS_SECTOR)
		BAD(O_IOSIZE, "%llu bytes is not a multiple of 4 KiB, which %s needs",
		    (unsigned long long)j->io_size, odirect ? "O_DIRECT" : "-V verify");
	if ((odirect || j->verify) && j->offset % GDS_SECTOR)
		BAD(O_OFFSET, "%llu is not a multiple of 4 KiB, which %s needs", (unsigned long long)j->offset,
		    odirect ? "O_DIRECT" : "-V verify");
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
	if (!j->dir[0] && !j->file[0])
		BAD(cfg ? O_DIR : O_FILE, "give a target: -D directory or -f file");
	if (j->dir[0] && j->file[0])
		BAD(O_DIR, "-D and -f cannot be used together");

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

/* ---- config files ---- */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static int set_key(struct job *j, const char *k, const char *v, char *msg, size_t len)
{
	uint64_t u;
	double d;

#define NEED(cond, what) do { if (!(cond)) { snprintf(msg, len, "%.60s=%.200s: %s", k, v, what); return -1; } } while (0)
	if (!strcmp(k, "name")) {
		snprintf(j->name, sizeof(j->name), "%.63s", v);
	} else if (!strcmp(k, "xfer_type")) {
		NEED(parse_uint(v, 100, &u) == 0, "expected a transfer type number");
		j->xfer = (int)u;
	} else if (!strcmp(k, "rw")) {
		if (!strcmp(v, "read")) j->io_type = IO_READ;
		else if (!strcmp(v, "write")) j->io_type = IO_WRITE;
		else if (!strcmp(v, "randread")) j->io_type = IO_RANDREAD;
		else if (!strcmp(v, "randwrite")) j->io_type = IO_RANDWRITE;
		else NEED(0, "expected read, write, randread or randwrite");
	} else if (!strcmp(k, "bs")) {
		NEED(!strchr(v, ':'), "block size ranges (start:end:step) are not supported");
		NEED(parse_size(v, &j->io_size) == 0, "expected a size such as 4k or 1M");
	} else if (!strcmp(k, "size")) {
		NEED(parse_size(v, &j->file_size) == 0, "expected a size such as 500M or 1G");
	} else if (!strcmp(k, "offset") || !strcmp(k, "start_offset")) {
		NEED(parse_size(v, &j->offset) == 0, "expected a size");
	} else if (!strcmp(k, "runtime")) {
		NEED(parse_seconds(v, &d) == 0, "expected seconds");
		j->duration = d;
	} else if (!strcmp(k, "numa_node")) {
		NEED(parse_uint(v, 4095, &u) == 0, "expected a NUMA node number");
		j->numa = (int)u;
	} else if (!strcmp(k, "gpu_dev_id")) {
		NEED(parse_uint(v, 4095, &u) == 0, "expected a GPU index");
		j->gpu = (int)u;
	} else if (!strcmp(k, "num_threads")) {
		NEED(parse_uint(v, GDS_MAX_THREADS, &u) == 0, "expected a thread count");
		j->threads = (int)u;
	} else if (!strcmp(k, "directory")) {
		NEED(strlen(v) < sizeof(j->dir), "path too long");
		snprintf(j->dir, sizeof(j->dir), "%s", v);
	} else if (!strcmp(k, "filename")) {
		NEED(strlen(v) < sizeof(j->file), "path too long");
		snprintf(j->file, sizeof(j->file), "%s", v);
	} else if (!strcmp(k, "do_verify")) {
		NEED(!strcmp(v, "0") || !strcmp(v, "1"), "expected 0 or 1");
		j->verify = v[0] == '1';
	} else if (!strcmp(k, "seed") || !strcmp(k, "random_seed")) {
		NEED(parse_uint(v, UINT64_MAX, &j->seed) == 0, "expected a number");
	} else if (!strcmp(k, "batch_size") || !strcmp(k, "iodepth")) {
		NEED(parse_uint(v, GDS_MAX_DEPTH, &u) == 0 && u > 0, "expected 1..1024");
		j->depth = (int)u;
	} else {
		snprintf(msg, len, "unknown key '%s'", k);
		return -1;
	}
	return 0;
#undef NEED
}

struct kv {
	int line;
	int section;	/* -1 global, else job index */
	char key[64];
	char val[PATH_MAX];
};

int config_parse(const char *path, struct job *jobs, int max, int *njobs, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[PATH_MAX + 128];
	struct kv *kvs = NULL;
	int nkv = 0, cap = 0, lineno = 0, section = -2, n = 0, rc = -1;
	char names[GDS_MAX_JOBS][64];

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			goto out;
		}
		s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');

			if (!e || e[1] || e == s + 1) {
				snprintf(err, errlen, "%s:%d: malformed section header '%s'", path, lineno, s);
				goto out;
			}
			*e = 0;
			if (!strcmp(s + 1, "global")) {
				section = -1;
			} else {
				if (n >= max) {
					snprintf(err, errlen, "%s:%d: more than %d jobs", path, lineno, max);
					goto out;
				}
				snprintf(names[n], sizeof(names[n]), "%.63s", s + 1);
				section = n++;
			}
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected key=value, got '%s'", path, lineno, s);
			goto out;
		}
		if (section == -2) {
			snprintf(err, errlen, "%s:%d: '%s' before any [section]", path, lineno, s);
			goto out;
		}
		*eq = 0;
		if (nkv == cap) {
			struct kv *nk = realloc(kvs, sizeof(*kvs) * (size_t)(cap ? cap * 2 : 32));

			if (!nk) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			kvs = nk;
			cap = cap ? cap * 2 : 32;
		}
		kvs[nkv].line = lineno;
		kvs[nkv].section = section;
		snprintf(kvs[nkv].key, sizeof(kvs[nkv].key), "%s", trim(s));
		snprintf(kvs[nkv].val, sizeof(kvs[nkv].val), "%s", trim(eq + 1));
		nkv++;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto out;
	}
	if (n == 0) {
		snprintf(err, errlen, "%s: no [job] section", path);
		goto out;
	}
	/* Each job: defaults <- [global] <- its own section, whatever the order in the file. */
	for (int i = 0; i < n; i++) {
		struct job base = jobs[i];

		for (int pass = 0; pass < 2; pass++) {
			for (int k = 0; k < nkv; k++) {
				char msg[PATH_MAX + 64];

				if (kvs[k].section != (pass == 0 ? -1 : i))
					continue;
				if (pass == 0 && !strcmp(kvs[k].key, "name"))
					continue;	/* [global] name= names the run, not each job */
				if (set_key(&base, kvs[k].key, kvs[k].val, msg, sizeof(msg)) != 0) {
					snprintf(err, errlen, "%s:%d: %s", path, kvs[k].line, msg);
					goto out;
				}
			}
		}
		if (!base.name[0])
			snprintf(base.name, sizeof(base.name), "%.63s", names[i]);
		jobs[i] = base;
	}
	*njobs = n;
	rc = 0;
out:
	free(kvs);
	fclose(f);
	return rc;
}
