/* gdsio job files, as in NVIDIA's GDS benchmarking guide and gdsio's samples:
 *
 *   [global]                      settings every job starts from
 *   name=nfs_random_read          (names the run, not a job)
 *   xfer_type=0
 *   rw=randread                   read | write | randread | randwrite
 *   bs=4k                         or MIN:MAX:STEP (bs=1M:4M:1M)
 *   size=500M
 *   runtime=120
 *   [job1]                        one job: its own threads, GPU and target
 *   numa_node=0
 *   gpu_dev_id=0
 *   num_threads=16
 *   directory=/mnt/nfs/ib0/data/0/gds_dir
 *
 * Lines starting with '#' or ';' are comments. Every error names the file and
 * the line at fault. The parser only fills struct job; checking the values
 * against the machine (files, NUMA nodes) is job_validate's. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gdsbench.h"

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

static int parse_bool(const char *v, int *out)
{
	if (!strcmp(v, "0") || !strcmp(v, "1")) {
		*out = v[0] == '1';
		return 0;
	}
	return -1;
}

/* One key=value into j; -1 with the reason in msg. */
static int set_key(struct job *j, const char *k, const char *v, int line, char *msg, size_t len)
{
	uint64_t u;
	double d;
	int b;
	enum job_opt o;

#define NEED(cond, what) do { if (!(cond)) { snprintf(msg, len, "%.60s=%.200s: %s", k, v, what); return -1; } } while (0)
#define BOOL_KEY(field) do { NEED(parse_bool(v, &b) == 0, "expected 0 or 1"); j->field = b; } while (0)
	if (!strcmp(k, "name")) {
		NEED(*v, "expected a name");
		snprintf(j->name, sizeof(j->name), "%.63s", v);
		return 0;
	} else if (!strcmp(k, "xfer_type")) {
		o = O_XFER;
		NEED(parse_uint(v, 100, &u) == 0, "expected a transfer type number");
		j->xfer = (int)u;
	} else if (!strcmp(k, "rw")) {
		o = O_IO;
		if (!strcmp(v, "read")) j->io_type = IO_READ;
		else if (!strcmp(v, "write")) j->io_type = IO_WRITE;
		else if (!strcmp(v, "randread")) j->io_type = IO_RANDREAD;
		else if (!strcmp(v, "randwrite")) j->io_type = IO_RANDWRITE;
		else NEED(0, "expected read, write, randread or randwrite");
	} else if (!strcmp(k, "bs")) {
		char why[128];

		o = O_IOSIZE;
		NEED(parse_io_size(v, j, why, sizeof(why)) == 0, why);
	} else if (!strcmp(k, "size")) {
		o = O_SIZE;
		NEED(parse_size(v, &j->file_size) == 0 && j->file_size > 0, "expected a size such as 500M or 1G");
	} else if (!strcmp(k, "start_offset") || !strcmp(k, "offset")) {
		o = O_OFFSET;
		NEED(parse_size(v, &j->offset) == 0, "expected a size");
	} else if (!strcmp(k, "runtime")) {
		o = O_RUNTIME;
		NEED(parse_seconds(v, &d) == 0, "expected seconds");
		j->duration = d;
	} else if (!strcmp(k, "time_based")) {
		o = O_RUNTIME;
		NEED(parse_bool(v, &b) == 0, "expected 0 or 1");
		j->one_pass = !b;
	} else if (!strcmp(k, "numa_node")) {
		o = O_NUMA;
		NEED(parse_uint(v, 4095, &u) == 0, "expected a NUMA node number");
		j->numa = (int)u;
	} else if (!strcmp(k, "gpu_dev_id")) {
		o = O_GPU;
		NEED(parse_uint(v, 4095, &u) == 0, "expected a GPU index");
		j->gpu = (int)u;
	} else if (!strcmp(k, "num_threads")) {
		o = O_THREADS;
		NEED(parse_uint(v, GDS_MAX_THREADS, &u) == 0 && u > 0, "expected a thread count of 1..4096");
		j->threads = (int)u;
	} else if (!strcmp(k, "directory")) {
		o = O_DIR;
		NEED(*v && strlen(v) < sizeof(j->dir), "expected a path");
		snprintf(j->dir, sizeof(j->dir), "%s", v);
	} else if (!strcmp(k, "filename")) {
		o = O_FILE;
		NEED(*v && strlen(v) < sizeof(j->file), "expected a path");
		snprintf(j->file, sizeof(j->file), "%s", v);
	} else if (!strcmp(k, "do_verify")) {
		o = O_VERIFY;
		BOOL_KEY(verify);
	} else if (!strcmp(k, "random_seed") || !strcmp(k, "seed")) {
		o = O_SEED;
		NEED(parse_uint(v, UINT64_MAX, &j->seed) == 0, "expected a number");
	} else if (!strcmp(k, "io_depth") || !strcmp(k, "iodepth") || !strcmp(k, "batch_size")) {
		o = O_DEPTH;
		NEED(parse_uint(v, GDS_MAX_DEPTH, &u) == 0 && u > 0, "expected 1..1024");
		j->depth = (int)u;
	} else if (!strcmp(k, "skip_bufregister")) {
		o = O_SKIPREG;
		BOOL_KEY(skip_bufreg);
	} else if (!strcmp(k, "enable_nvlinks")) {
		o = O_NVLINK;
		BOOL_KEY(nvlinks);
	} else if (!strcmp(k, "fill_random")) {
		o = O_FILL;
		BOOL_KEY(fill_random);
	} else if (!strcmp(k, "refill_buffer")) {
		o = O_REFILL;
		BOOL_KEY(refill);
	} else if (!strcmp(k, "unaligned_random")) {
		o = O_UNALIGNED;
		BOOL_KEY(unaligned);
	} else if (!strcmp(k, "alignment_size")) {
		o = O_ALIGN;
		NEED(parse_size(v, &j->align) == 0, "expected a size such as 4K");
	} else if (!strcmp(k, "mem_type")) {
		o = O_MEM;
		NEED(parse_uint(v, 4, &u) == 0, "expected 0..4");
		j->mem_type = (int)u;
	} else if (!strcmp(k, "buffered")) {
		o = O_BUFFERED;
		BOOL_KEY(buffered);
	} else {
		snprintf(msg, len, "unknown key '%s'", k);
		return -1;
	}
	j->opt_line[o] = line;
	return 0;
#undef BOOL_KEY
#undef NEED
}

struct kv {
	int line;
	int section;	/* -1 global, else job index */
	char key[64];
	char val[PATH_MAX];
};

/* [global], or [job...]: "job" then letters, digits, '_' or '-' */
static int job_section_name(const char *s)
{
	if (strncmp(s, "job", 3) != 0)
		return 0;
	for (s += 3; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return 0;
	return 1;
}

int jobfile_parse(const char *path, struct job *jobs, int max, int *njobs, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[PATH_MAX + 128];
	struct kv *kvs = NULL;
	int nkv = 0, cap = 0, lineno = 0, section = -2, n = 0, rc = -1, global_line = 0;
	static char names[GDS_MAX_JOBS][64];
	int lines[GDS_MAX_JOBS];

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (max > GDS_MAX_JOBS)
		max = GDS_MAX_JOBS;
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
				snprintf(err, errlen, "%s:%d: malformed section header '%.200s'", path, lineno, s);
				goto out;
			}
			*e = 0;
			s++;
			if (!strcmp(s, "global")) {
				if (global_line) {
					snprintf(err, errlen, "%s:%d: a second [global] section (the first is on line %d)",
						 path, lineno, global_line);
					goto out;
				}
				global_line = lineno;
				section = -1;
				continue;
			}
			if (!job_section_name(s) || strlen(s) >= sizeof(names[0])) {
				snprintf(err, errlen, "%s:%d: unknown section [%.200s]: expected [global] or [jobN]", path,
					 lineno, s);
				goto out;
			}
			for (int i = 0; i < n; i++)
				if (!strcmp(names[i], s)) {
					snprintf(err, errlen, "%s:%d: a second [%s] section (the first is on line %d)", path,
						 lineno, s, lines[i]);
					goto out;
				}
			if (n >= max) {
				snprintf(err, errlen, "%s:%d: more than %d jobs", path, lineno, max);
				goto out;
			}
			snprintf(names[n], sizeof(names[n]), "%s", s);
			lines[n] = lineno;
			section = n++;
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected key=value, got '%.200s'", path, lineno, s);
			goto out;
		}
		if (section == -2) {
			snprintf(err, errlen, "%s:%d: '%.200s' before any section: start with [global] or [jobN]", path,
				 lineno, s);
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
		snprintf(err, errlen, "%s:%d: no [jobN] section: a job file needs at least one job", path, lineno);
		goto out;
	}
	/* Each job: defaults <- [global] <- its own section, whatever the order in the file. */
	for (int i = 0; i < n; i++) {
		struct job base = jobs[i];

		base.src = path;
		base.line = lines[i];
		snprintf(base.name, sizeof(base.name), "%s", names[i]);
		for (int pass = 0; pass < 2; pass++) {
			for (int k = 0; k < nkv; k++) {
				char msg[PATH_MAX + 300];

				if (kvs[k].section != (pass == 0 ? -1 : i))
					continue;
				if (pass == 0 && !strcmp(kvs[k].key, "name"))
					continue;	/* [global] name= names the run, not each job */
				if (set_key(&base, kvs[k].key, kvs[k].val, kvs[k].line, msg, sizeof(msg)) != 0) {
					snprintf(err, errlen, "%s:%d: %s", path, kvs[k].line, msg);
					goto out;
				}
			}
		}
		if (base.xfer < 0) {
			snprintf(err, errlen, "%s:%d: [%s] has no xfer_type (in [global] or the job)", path, lines[i],
				 names[i]);
			goto out;
		}
		if (base.io_type < 0) {
			snprintf(err, errlen, "%s:%d: [%s] has no rw (in [global] or the job)", path, lines[i], names[i]);
			goto out;
		}
		if (!base.dir[0] && !base.file[0]) {
			snprintf(err, errlen, "%s:%d: [%s] has neither directory nor filename", path, lines[i], names[i]);
			goto out;
		}
		if (base.dir[0] && base.file[0]) {
			snprintf(err, errlen, "%s:%d: [%s] has both directory (line %d) and filename (line %d): give one",
				 path, lines[i], names[i], base.opt_line[O_DIR], base.opt_line[O_FILE]);
			goto out;
		}
		jobs[i] = base;
	}
	*njobs = n;
	rc = 0;
out:
	free(kvs);
	fclose(f);
	return rc;
}
