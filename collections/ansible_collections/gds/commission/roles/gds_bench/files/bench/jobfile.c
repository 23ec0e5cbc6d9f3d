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
 * Lines starting with '#' or ';' are comments. The keys, their types and
 * bounds are the option table's (options.c), shared with the command line.
 * Every error names the file and the line at fault. The parser only fills
 * struct job; checking the values against the machine (files, NUMA nodes) is
 * job_validate's.
 *
 * Memory is bounded by the jobs, not by the lines: the file is read line by
 * line into one buffer, each value is checked as it is read, and a section
 * keeps only the last value of each key (as fio: a later line overrides).
 * The file itself is at most GDS_JOBFILE_MAX_BYTES, with GDS_MAX_JOBS jobs. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdsbench.h"

#define LINE_MAX_BYTES (PATH_MAX + 128)	/* a key and the longest path */

struct section {
	char name[64];
	int line;
	char *val[GDS_OPT_MAX];	/* the last value of each table entry given here */
	int vline[GDS_OPT_MAX];
};

struct reader {
	FILE *f;
	const char *path;
	int lineno;
	size_t bytes;
	char buf[LINE_MAX_BYTES + 1];
};

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

/* The first control character in s: C0 (a tab too unless tab_ok), DEL, and
 * the UTF-8 forms of C1 and of U+2028/U+2029 (line breaks to some readers).
 * Values are single lines of text; a control character in one is a damaged
 * or forged file. Its code goes to what. */
static const char *control_char(const char *s, int tab_ok, char *what, size_t len)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p < 0x20 && !(tab_ok && *p == '\t')) || *p == 0x7f) {
			snprintf(what, len, "0x%02x", *p);
			return (const char *)p;
		}
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			snprintf(what, len, "U+%04X", p[1]);
			return (const char *)p;
		}
		if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
			snprintf(what, len, "U+%04X", 0x2000 + (p[2] - 0x80));
			return (const char *)p;
		}
	}
	return NULL;
}

/* One line into r->buf, without its '\n'. 0, 1 at the end of the file, or
 * -1 with the error (a NUL byte, a line or a file too long, a read error). */
static int read_line(struct reader *r, char *err, size_t errlen)
{
	size_t n = 0;
	long nul = -1;
	int c;

	r->lineno++;
	while ((c = getc(r->f)) != EOF) {
		if (++r->bytes > GDS_JOBFILE_MAX_BYTES) {
			snprintf(err, errlen, "%s:%d: the file goes on past %u bytes, the limit for a job file", r->path,
				 r->lineno, GDS_JOBFILE_MAX_BYTES);
			return -1;
		}
		if (c == '\n')
			break;
		if (n == LINE_MAX_BYTES) {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes", r->path, r->lineno, LINE_MAX_BYTES);
			return -1;
		}
		if (c == 0 && nul < 0)
			nul = (long)n;
		r->buf[n++] = (char)c;
	}
	if (ferror(r->f)) {
		snprintf(err, errlen, "%s:%d: %s", r->path, r->lineno, strerror(errno));
		return -1;
	}
	if (c == EOF && n == 0)
		return 1;
	r->buf[n] = 0;
	if (r->lineno == 1 && n >= 2 && ((unsigned char)r->buf[0] == 0xff || (unsigned char)r->buf[0] == 0xfe) &&
	    ((unsigned char)r->buf[1] ^ (unsigned char)r->buf[0]) == 0x01) {
		snprintf(err, errlen, "%s:1: UTF-16 text (byte-order mark %02X %02X): save the job file as UTF-8 or ASCII",
			 r->path, (unsigned char)r->buf[0], (unsigned char)r->buf[1]);
		return -1;
	}
	if (nul >= 0) {
		snprintf(err, errlen, "%s:%d: a NUL byte at column %ld: a job file is text", r->path, r->lineno, nul + 1);
		return -1;
	}
	return 0;
}

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

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
	       : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Opens a regular file of at most GDS_JOBFILE_MAX_BYTES. O_NONBLOCK: a FIFO
 * or a device is named, never waited on. */
static FILE *open_jobfile(const char *path, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			snprintf(err, errlen, "%s: no such job file", path);
		else
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	else if (S_ISDIR(st.st_mode))
		snprintf(err, errlen, "%s: a directory, not a job file", path);
	else if (!S_ISREG(st.st_mode))
		snprintf(err, errlen, "%s: %s, not a job file (a job file is a regular file)", path, file_kind(st.st_mode));
	else if ((uint64_t)st.st_size > GDS_JOBFILE_MAX_BYTES)
		snprintf(err, errlen, "%s: %llu bytes; a job file may have at most %u bytes", path,
			 (unsigned long long)st.st_size, GDS_JOBFILE_MAX_BYTES);
	else if ((f = fdopen(fd, "r")) != NULL)
		return f;
	else
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	close(fd);
	return NULL;
}

/* A [section] header: a new job in secs[1..], or [global] in secs[0]. */
static int section_header(struct reader *r, char *s, struct section *secs, int *n, int max, int *cur, char *err,
			  size_t errlen)
{
	char *e = strchr(s, ']');

	if (!e || e[1] || e == s + 1) {
		snprintf(err, errlen, "%s:%d: malformed section header '%.200s'", r->path, r->lineno, s);
		return -1;
	}
	*e = 0;
	s++;
	if (!strcmp(s, "global")) {
		if (secs[0].line) {
			snprintf(err, errlen, "%s:%d: a second [global] section (the first is on line %d)", r->path,
				 r->lineno, secs[0].line);
			return -1;
		}
		secs[0].line = r->lineno;
		*cur = 0;
		return 0;
	}
	if (!job_section_name(s) || strlen(s) >= sizeof(secs[0].name)) {
		snprintf(err, errlen, "%s:%d: unknown section [%.200s]: expected [global] or [jobN]", r->path, r->lineno, s);
		return -1;
	}
	for (int i = 1; i <= *n; i++)
		if (!strcmp(secs[i].name, s)) {
			snprintf(err, errlen, "%s:%d: a second [%s] section (the first is on line %d)", r->path, r->lineno,
				 s, secs[i].line);
			return -1;
		}
	if (*n >= max) {
		snprintf(err, errlen, "%s:%d: [%s] would be job %d: a job file may have at most %d jobs", r->path,
			 r->lineno, s, *n + 1, max);
		return -1;
	}
	*cur = ++*n;
	snprintf(secs[*cur].name, sizeof(secs[*cur].name), "%s", s);
	secs[*cur].line = r->lineno;
	return 0;
}

/* key=value: checked by the option table now, kept for the jobs. */
static int key_value(struct reader *r, char *s, struct section *sec, char *err, size_t errlen)
{
	static struct job scratch;	/* a value is checked by parsing it once */
	char *eq = strchr(s, '='), *k, *v, why[PATH_MAX + 64], what[16];
	const char *bad;
	const struct gds_option *o;
	int idx;

	if (!eq) {
		snprintf(err, errlen, "%s:%d: expected key=value, got '%.200s'", r->path, r->lineno, s);
		return -1;
	}
	if (!sec) {
		snprintf(err, errlen, "%s:%d: '%.200s' before any section: start with [global] or [jobN]", r->path,
			 r->lineno, s);
		return -1;
	}
	*eq = 0;
	k = trim(s);
	v = trim(eq + 1);
	/* the line had no control character but tabs, which only surround them */
	if ((bad = control_char(k, 0, what, sizeof(what)))) {
		snprintf(err, errlen, "%s:%d: control character %s at column %d, inside the key", r->path, r->lineno,
			 what, (int)(bad - r->buf) + 1);
		return -1;
	}
	if ((bad = control_char(v, 0, what, sizeof(what)))) {
		snprintf(err, errlen, "%s:%d: control character %s at column %d, inside the value of %.60s", r->path,
			 r->lineno, what, (int)(bad - r->buf) + 1, k);
		return -1;
	}
	idx = opt_find_key(k);
	if (idx < 0) {
		snprintf(err, errlen, "%s:%d: unknown key '%.200s'", r->path, r->lineno, k);
		return -1;
	}
	o = opt_at(idx);
	job_defaults(&scratch);
	if (opt_set(o, &scratch, NULL, v, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s:%d: %.60s=%.200s: %s", r->path, r->lineno, k, v, why);
		return -1;
	}
	free(sec->val[idx]);
	sec->val[idx] = strdup(v);
	if (!sec->val[idx]) {
		snprintf(err, errlen, "%s:%d: out of memory", r->path, r->lineno);
		return -1;
	}
	sec->vline[idx] = r->lineno;
	return 0;
}

/* A section's values into j, in table order (each was checked when read). */
static int apply(struct job *j, const struct section *sec, int global, char *err, size_t errlen)
{
	char why[PATH_MAX + 64];

	for (int i = 0; i < opt_count(); i++) {
		const struct gds_option *o = opt_at(i);

		if (!sec->val[i] || (global && o->id == O_NAME))
			continue;	/* [global] name= names the run, not each job */
		if (opt_set(o, j, NULL, sec->val[i], why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", j->src, sec->vline[i], why);
			return -1;
		}
		j->opt_line[o->id] = sec->vline[i];
	}
	return 0;
}

/* Each job: defaults <- [global] <- its own section, whatever the order in the file. */
static int build_jobs(const char *path, const struct section *secs, int n, struct job *jobs, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		const struct section *sec = &secs[i + 1];
		struct job *j = &jobs[i];

		job_defaults(j);
		j->src = path;
		j->line = sec->line;
		snprintf(j->name, sizeof(j->name), "%s", sec->name);
		if (apply(j, &secs[0], 1, err, errlen) != 0 || apply(j, sec, 0, err, errlen) != 0)
			return -1;
		if (j->xfer < 0)
			snprintf(err, errlen, "%s:%d: [%s] has no xfer_type (in [global] or the job)", path, sec->line,
				 sec->name);
		else if (j->io_type < 0)
			snprintf(err, errlen, "%s:%d: [%s] has no rw (in [global] or the job)", path, sec->line, sec->name);
		else if (!j->dir[0] && !j->file[0])
			snprintf(err, errlen, "%s:%d: [%s] has neither directory nor filename", path, sec->line, sec->name);
		else if (j->dir[0] && j->file[0])
			snprintf(err, errlen, "%s:%d: [%s] has both directory (line %d) and filename (line %d): give one",
				 path, sec->line, sec->name, j->opt_line[O_DIR], j->opt_line[O_FILE]);
		else
			continue;
		return -1;
	}
	return 0;
}

int jobfile_parse(const char *path, struct job *jobs, int max, int *njobs, char *err, size_t errlen)
{
	struct reader r = { .path = path };
	struct section *secs;
	int n = 0, cur = -1, rc = -1, got;

	if (max > GDS_MAX_JOBS)
		max = GDS_MAX_JOBS;
	r.f = open_jobfile(path, err, errlen);
	if (!r.f)
		return -1;
	secs = calloc((size_t)max + 1, sizeof(*secs));	/* [0]: [global] */
	if (!secs) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	while ((got = read_line(&r, err, errlen)) == 0) {
		char *s = r.buf, what[16];
		const char *bad;

		if (!memcmp(s, "\xef\xbb\xbf", 3)) {
			if (r.lineno > 1) {
				snprintf(err, errlen, "%s:%d: a UTF-8 byte-order mark (EF BB BF) inside the file: only "
					 "the first line may start with one", path, r.lineno);
				goto out;
			}
			s += 3;	/* a BOM at the start, as some editors write: UTF-8 text */
		}
		s = trim(s);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if ((bad = control_char(s, 1, what, sizeof(what)))) {
			snprintf(err, errlen, "%s:%d: control character %s at column %d: a job file is lines of text",
				 path, r.lineno, what, (int)(bad - r.buf) + 1);
			goto out;
		}
		if (*s == '[' ? section_header(&r, s, secs, &n, max, &cur, err, errlen)
			      : key_value(&r, s, cur < 0 ? NULL : &secs[cur], err, errlen))
			goto out;
	}
	if (got < 0)
		goto out;
	if (n == 0) {
		snprintf(err, errlen, "%s:%d: no [jobN] section: a job file needs at least one job", path, r.lineno - 1);
		goto out;
	}
	if (build_jobs(path, secs, n, jobs, err, errlen) != 0)
		goto out;
	*njobs = n;
	rc = 0;
out:
	for (int i = 0; secs && i <= max; i++)
		for (int k = 0; k < GDS_OPT_MAX; k++)
			free(secs[i].val[k]);
	free(secs);
	fclose(r.f);
	return rc;
}
