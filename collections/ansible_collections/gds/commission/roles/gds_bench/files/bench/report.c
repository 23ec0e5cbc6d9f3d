/* Output: the gdsio text line and the JSON record (docs/benchmark.md). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "gdsbench.h"

const char *io_type_name(int t)
{
	return io_type(t) ? io_type(t)->name : "?";
}

static const char *io_type_key(int t)
{
	return io_type(t) ? io_type(t)->key : "?";
}

static double elapsed_s(const struct result *r)
{
	return r->t_end > r->t_start ? (double)(r->t_end - r->t_start) / 1e9 : 0.0;
}

static uint64_t dataset_bytes(const struct job *j)
{
	return j->dir[0] ? (uint64_t)j->threads * j->file_size : j->file_size;
}

static int all_same_io(const struct job *jobs, int n)
{
	for (int i = 1; i < n; i++)
		if (jobs[i].io_type != jobs[0].io_type)
			return 0;
	return 1;
}

static int all_same_xfer(const struct job *jobs, int n)
{
	for (int i = 1; i < n; i++)
		if (jobs[i].xfer != jobs[0].xfer)
			return 0;
	return 1;
}

/* The I/O size of the line: the size given, or with -i MIN:MAX:STEP the mean
 * size of the ops done (the line keeps gdsio's one integer). */
static uint64_t line_io_size(const struct job *j, const struct result *r)
{
	return j->io_step && r->ops ? r->bytes / r->ops : j->io_size;
}

/* gdsio's result line, byte for byte:
 * IoType: READ XferType: GPUD Threads: 8 DataSetSize: 818796544/4096000(KiB)
 * IOSize: 1024(KiB) Throughput: 6.524658 GiB/sec, Avg_Latency: 1197.370995 usecs
 * ops: 799606 total_time 119.679102 secs */
static void one_line(FILE *out, const char *prefix, const char *io, const char *xfer, int threads,
		     uint64_t dataset, uint64_t io_size, const struct result *r)
{
	double el = elapsed_s(r);

	fprintf(out,
		"%sIoType: %s XferType: %s Threads: %d DataSetSize: %llu/%llu(KiB) IOSize: %llu(KiB) "
		"Throughput: %.6f GiB/sec, Avg_Latency: %.6f usecs ops: %llu total_time %.6f secs\n",
		prefix, io, xfer, threads, (unsigned long long)(r->bytes / 1024), (unsigned long long)(dataset / 1024),
		(unsigned long long)(io_size / 1024),
		el > 0 ? (double)r->bytes / el / (1024.0 * 1024.0 * 1024.0) : 0.0, hist_mean(&r->hist) / 1000.0,
		(unsigned long long)r->ops, el);
}

static int any_range(const struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		if (jobs[i].io_step)
			return 1;
	return 0;
}

/* The run's line first, exactly as gdsio prints it for a job file (the
 * aggregate); with several jobs, then one line per job, "NAME: " + the same
 * format, so that a parser taking the first or the only "IoType:" line gets
 * the total as from gdsio. */
void report_line(FILE *out, struct job *jobs, int njobs, struct result *agg)
{
	uint64_t ds = 0;
	int threads = 0;

	for (int i = 0; i < njobs; i++) {
		ds += dataset_bytes(&jobs[i]);
		threads += jobs[i].threads;
	}
	one_line(out, "", all_same_io(jobs, njobs) ? io_type_name(jobs[0].io_type) : "MIXED",
		 all_same_xfer(jobs, njobs) ? jobs[0].xt->name : "MIXED", threads, ds,
		 any_range(jobs, njobs) && agg->ops ? agg->bytes / agg->ops : jobs[0].io_size, agg);
	for (int i = 0; njobs > 1 && i < njobs; i++) {
		char prefix[80];

		snprintf(prefix, sizeof(prefix), "%s: ", jobs[i].name);
		one_line(out, prefix, io_type_name(jobs[i].io_type), jobs[i].xt->name, jobs[i].threads,
			 dataset_bytes(&jobs[i]), line_io_size(&jobs[i], &jobs[i].res), &jobs[i].res);
	}
	fflush(out);
}

/* ---- a small JSON writer ---- */

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void jnum(FILE *f, double v)
{
	/* JSON has no inf/nan */
	if (v != v || v > 1e300 || v < -1e300)
		fputs("null", f);
	else
		fprintf(f, "%.6f", v);
}

static long ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? n : 1;
}

static void json_path(FILE *f, const struct path_info *pi, const char *ind)
{
	fprintf(f, "%s\"path\": {\"mode\": ", ind);
	jstr(f, pi->mode);
	fputs(", \"evidence\": [", f);
	for (int i = 0; i < pi->n_evidence; i++) {
		if (i)
			fputs(", ", f);
		jstr(f, pi->evidence[i]);
	}
	fputs("]", f);
	if (pi->n_total >= 0 || pi->n_posix >= 0)
		fprintf(f, ", \"counters\": {\"ops\": %lld, \"nvfs\": %lld, \"p2p\": %lld, \"posix\": %lld}",
			pi->n_total, pi->n_nvfs, pi->n_p2p, pi->n_posix);
	fputs("}", f);
}

/* The contract keys, then extras. ind: indentation of the keys. */
static void json_record(FILE *f, const char *ind, int io_type, int mixed_io, int xfer, int mixed_xfer,
			int threads, uint64_t io_size, const struct result *r, double cpu_s)
{
	double el = elapsed_s(r);
	const struct hist *h = &r->hist;

	fprintf(f, "%s\"io_type\": ", ind);
	jstr(f, mixed_io ? "mixed" : io_type_key(io_type));
	if (mixed_xfer)
		fprintf(f, ",\n%s\"xfer_type\": \"mixed\"", ind);
	else
		fprintf(f, ",\n%s\"xfer_type\": %d", ind, xfer);
	fprintf(f, ",\n%s\"threads\": %d,\n%s\"io_size_bytes\": %llu,\n%s\"bytes\": %llu,\n%s\"ops\": %llu", ind,
		threads, ind, (unsigned long long)io_size, ind, (unsigned long long)r->bytes, ind,
		(unsigned long long)r->ops);
	fprintf(f, ",\n%s\"elapsed_s\": ", ind);
	jnum(f, el);
	fprintf(f, ",\n%s\"throughput_gib_s\": ", ind);
	jnum(f, el > 0 ? (double)r->bytes / el / (1024.0 * 1024.0 * 1024.0) : 0.0);
	fprintf(f, ",\n%s\"iops\": ", ind);
	jnum(f, el > 0 ? (double)r->ops / el : 0.0);
	fprintf(f, ",\n%s\"lat_us\": {\"mean\": ", ind);
	jnum(f, hist_mean(h) / 1000.0);
	fputs(", \"p50\": ", f);
	jnum(f, hist_percentile(h, 50.0) / 1000.0);
	fputs(", \"p90\": ", f);
	jnum(f, hist_percentile(h, 90.0) / 1000.0);
	fputs(", \"p99\": ", f);
	jnum(f, hist_percentile(h, 99.0) / 1000.0);
	fputs(", \"p999\": ", f);
	jnum(f, hist_percentile(h, 99.9) / 1000.0);
	fputs(", \"max\": ", f);
	jnum(f, h->count ? (double)h->max_ns / 1000.0 : 0.0);
	fputs(", \"min\": ", f);
	jnum(f, h->count ? (double)h->min_ns / 1000.0 : 0.0);
	fputs("}", f);
	fprintf(f, ",\n%s\"cpu_util_pct\": ", ind);
	jnum(f, el > 0 ? cpu_s / el / (double)ncpus() * 100.0 : 0.0);
	fprintf(f, ",\n%s\"cpu_cores_used\": ", ind);
	jnum(f, el > 0 ? cpu_s / el : 0.0);
	fprintf(f, ",\n%s\"errors\": %llu,\n%s\"verify_errors\": %llu,\n", ind, (unsigned long long)r->errors,
		ind, (unsigned long long)r->verify_errors);
	json_path(f, &r->path, ind);
}

static void json_job_extras(FILE *f, const char *ind, const struct job *j)
{
	fprintf(f, ",\n%s\"name\": ", ind);
	jstr(f, j->name);
	fprintf(f, ",\n%s\"xfer_name\": ", ind);
	jstr(f, j->xt->name);
	fprintf(f, ",\n%s\"gpu\": %d,\n%s\"numa_node\": %d,\n%s\"file_size\": %llu,\n%s\"offset\": %llu", ind,
		j->gpu, ind, j->numa, ind, (unsigned long long)j->file_size, ind, (unsigned long long)j->offset);
	fprintf(f, ",\n%s\"dataset_bytes\": %llu", ind, (unsigned long long)dataset_bytes(j));
	fprintf(f, ",\n%s\"target\": ", ind);
	jstr(f, j->dir[0] ? j->dir : j->file);
	fprintf(f, ",\n%s\"target_kind\": \"%s\"", ind, j->dir[0] ? "directory" : "file");
	fprintf(f, ",\n%s\"peer_memory\": ", ind);
	if (j->peer_mem[0])
		jstr(f, j->peer_mem);
	else
		fputs("null", f);
	fprintf(f, ",\n%s\"duration_s\": ", ind);
	jnum(f, j->duration);
	fprintf(f, ",\n%s\"seed\": %llu,\n%s\"verify\": %s", ind, (unsigned long long)j->seed, ind,
		j->verify ? "true" : "false");
	if (j->xt->flags & ENG_QUEUED)
		fprintf(f, ",\n%s\"iodepth\": %d", ind, j->depth);
	fprintf(f, ",\n%s\"io_size_min\": %llu,\n%s\"io_size_step\": %llu", ind, (unsigned long long)j->io_min, ind,
		(unsigned long long)j->io_step);
	fprintf(f, ",\n%s\"io_size_done\": {\"min\": %llu, \"max\": %llu}", ind,
		(unsigned long long)j->res.len_min, (unsigned long long)j->res.len_max);
	fprintf(f, ",\n%s\"align\": %llu,\n%s\"unaligned\": %s,\n%s\"fill_random\": %s,\n%s\"refill\": %s",
		ind, (unsigned long long)j->align, ind, j->unaligned ? "true" : "false", ind,
		j->fill_random ? "true" : "false", ind, j->refill ? "true" : "false");
	fprintf(f, ",\n%s\"buffered\": %s,\n%s\"mem_type\": %d,\n%s\"skip_bufregister\": %s,\n%s\"nvlinks\": %s",
		ind, j->buffered ? "true" : "false", ind, j->mem_type, ind, j->skip_bufreg ? "true" : "false", ind,
		j->nvlinks ? "true" : "false");
	if (j->src)
		fprintf(f, ",\n%s\"line\": %d", ind, j->line);
}

/* ---- --capabilities --json: the vocabulary (vocab.c) and the job-file keys (options.c) ---- */

static void json_flags(FILE *f, unsigned fl)
{
	const struct flag_info *fi;
	int n = 0;

	fputc('[', f);
	for (int i = 0; (fi = flag_info_at(i)); i++)
		if (fl & fi->flag)
			fprintf(f, "%s\"%s\"", n++ ? ", " : "", fi->name);
	fputc(']', f);
}

static void json_xfer_types(FILE *f)
{
	const struct flag_info *fi;

	fputs("  \"flags\": {", f);
	for (int i = 0; (fi = flag_info_at(i)); i++) {
		fprintf(f, "%s\n    \"%s\": ", i ? "," : "", fi->name);
		jstr(f, fi->desc);
	}
	fputs("\n  },\n  \"xfer_types\": [", f);
	for (int i = 0; i < xfer_type_count(); i++) {
		const struct xfer_type *x = xfer_type(i);

		fprintf(f, "%s\n    {\"number\": %d, \"name\": ", i ? "," : "", x->xfer);
		jstr(f, x->name);
		fputs(", \"desc\": ", f);
		jstr(f, x->desc);
		fputs(", \"flags\": ", f);
		json_flags(f, x->flags);
		if (x->depth)
			fprintf(f, ", \"depth\": %d", x->depth);
		if (x->refused) {
			fputs(", \"refused\": ", f);
			jstr(f, x->refused);
		}
		fputc('}', f);
	}
	fputs("\n  ],\n", f);
}

static void json_io_types(FILE *f)
{
	fputs("  \"io_types\": [", f);
	for (int i = 0; i < io_type_count(); i++) {
		const struct io_type_info *t = io_type(i);

		fprintf(f, "%s\n    {\"number\": %d, \"key\": \"%s\", \"name\": \"%s\", \"write\": %s, \"random\": %s}",
			i ? "," : "", t->io, t->key, t->name, io_is_write(t->io) ? "true" : "false",
			io_is_rand(t->io) ? "true" : "false");
	}
	fputs("\n  ],\n", f);
}

static void json_sizes(FILE *f)
{
	const struct size_unit *u;

	fputs("  \"sizes\": {\"units\": {", f);
	for (int i = 0; (u = size_unit_at(i)); i++)
		fprintf(f, "%s\"%c\": %llu", i ? ", " : "", u->letter, (unsigned long long)(1ull << u->shift));
	fprintf(f, "}, \"unit_suffixes\": [\"i\", \"B\"], \"case_sensitive\": false, \"max\": %lld, "
		"\"range\": \"MIN:MAX:STEP\"},\n", (long long)INT64_MAX);
}

/* one job-file key: its name, aliases, value type, option letter and bounds */
static void json_job_key(FILE *f, const struct gds_option *o)
{
	static const char *const types[] = {
		[OPT_PATH] = "path", [OPT_NAME] = "name", [OPT_INT] = "int", [OPT_U64] = "int",
		[OPT_SIZE] = "size", [OPT_IOSIZE] = "iosize", [OPT_SECONDS] = "seconds", [OPT_IOTYPE] = "io_type",
		[OPT_FLAG] = "bool", [OPT_NOT] = "bool",
	};
	const char *k = o->keys, *bar;

	fprintf(f, "{\"key\": \"%.*s\", \"aliases\": [", (int)strcspn(k, "|"), k);
	for (bar = strchr(k, '|'); bar; bar = strchr(bar + 1, '|'))
		fprintf(f, "%s\"%.*s\"", bar == strchr(k, '|') ? "" : ", ", (int)strcspn(bar + 1, "|"), bar + 1);
	fprintf(f, "], \"type\": \"%s\"", o->type < sizeof(types) / sizeof(types[0]) && types[o->type]
		? types[o->type] : "other");
	if (o->val > 0 && o->val < 256)
		fprintf(f, ", \"option\": \"-%c\"", o->val);
	if (o->type == OPT_INT || o->type == OPT_U64 || o->type == OPT_SIZE)
		fprintf(f, ", \"min\": %llu, \"max\": %llu", (unsigned long long)o->min, (unsigned long long)o->max);
	fputc('}', f);
}

int report_capabilities(FILE *f)
{
	int n = 0;

	fputs("{\n  \"tool\": \"gdsbench\",\n  \"version\": \"" GDS_VERSION "\",\n", f);
	json_xfer_types(f);
	json_io_types(f);
	json_sizes(f);
	fputs("  \"job_keys\": [", f);
	for (int i = 0; i < opt_count(); i++)
		if (opt_at(i)->keys) {
			fputs(n++ ? ",\n    " : "\n    ", f);
			json_job_key(f, opt_at(i));
		}
	fputs("\n  ]\n}\n", f);
	fflush(f);
	return ferror(f) ? -1 : 0;
}

/* --dry-run: the jobs as parsed and checked, nothing run. */
int report_plan(FILE *f, const struct job *jobs, int njobs)
{
	fputs("{\n  \"tool\": \"gdsbench\",\n  \"version\": \"" GDS_VERSION "\",\n  \"dry_run\": true,\n  \"jobs\": [", f);
	for (int i = 0; i < njobs; i++) {
		const struct job *j = &jobs[i];

		fputs(i ? ", {\n" : "{\n", f);
		fprintf(f, "    \"io_type\": \"%s\",\n    \"xfer_type\": %d,\n    \"threads\": %d,\n"
			"    \"io_size_bytes\": %llu", io_type_key(j->io_type), j->xfer, j->threads,
			(unsigned long long)j->io_size);
		json_job_extras(f, "    ", j);
		fputs("\n  }", f);
	}
	fputs("]\n}\n", f);
	fflush(f);
	return ferror(f) ? -1 : 0;
}

/* The --json file through datafile.c (as main.c checked it): created with
 * O_EXCL, or an existing regular file of ours, never through a link; then emptied. */
static FILE *json_open(const char *dest, char *err, size_t errlen)
{
	char dir[PATH_MAX], name[PATH_MAX], msg[PATH_MAX + 128];
	struct stat st;
	int dfd, fd;
	FILE *f;

	if (df_split(dest, dir, sizeof(dir), name, sizeof(name)) != 0) {
		snprintf(err, errlen, "--json %s: not a file name", dest);
		return NULL;
	}
	dfd = df_dir_open(dir, 0, msg, sizeof(msg));
	if (dfd < 0) {
		snprintf(err, errlen, "--json %s: %s", dest, strerror(errno));
		return NULL;
	}
	fd = df_open(dfd, name, dest, O_WRONLY | O_CREAT, NULL, NULL, &st, msg, sizeof(msg));
	close(dfd);
	if (fd < 0) {
		snprintf(err, errlen, "--json %s", msg);
		return NULL;
	}
	if (ftruncate(fd, 0) != 0 || !(f = fdopen(fd, "w"))) {
		snprintf(err, errlen, "--json %s: %s", dest, strerror(errno));
		close(fd);
		return NULL;
	}
	return f;
}

int report_json(const char *dest, struct job *jobs, int njobs, struct result *agg, double cpu_s, int nprocs,
		int exit_code, const char *error, char *err, size_t errlen)
{
	FILE *f;
	int to_stdout = strcmp(dest, "-") == 0;
	int threads = 0, worst = 0;

	if (to_stdout) {
		f = stdout;
	} else {
		f = json_open(dest, err, errlen);
		if (!f)
			return -1;
	}
	for (int i = 0; i < njobs; i++) {
		threads += jobs[i].threads;
		if (path_mode_rank(jobs[i].res.path.mode) < path_mode_rank(jobs[worst].res.path.mode))
			worst = i;
	}
	if (njobs > 1) {
		int same = 1;

		for (int i = 1; i < njobs; i++)
			if (strcmp(jobs[i].res.path.mode, jobs[0].res.path.mode) != 0)
				same = 0;
		agg->path = jobs[worst].res.path;
		if (!same) {
			char b[256];
			size_t o = 0;

			o += (size_t)snprintf(b + o, sizeof(b) - o, "jobs differ:");
			for (int i = 0; i < njobs && o < sizeof(b); i++)
				o += (size_t)snprintf(b + o, sizeof(b) - o, " %s=%s", jobs[i].name, jobs[i].res.path.mode);
			if (agg->path.n_evidence < 10)
				snprintf(agg->path.evidence[agg->path.n_evidence++], sizeof(agg->path.evidence[0]), "%s", b);
		}
	} else {
		agg->path = jobs[0].res.path;
	}

	fputs("{\n  \"tool\": \"gdsbench\",\n  \"version\": \"" GDS_VERSION "\",\n", f);
	json_record(f, "  ", jobs[0].io_type, !all_same_io(jobs, njobs), jobs[0].xfer, !all_same_xfer(jobs, njobs),
		    threads, jobs[0].io_size, agg, cpu_s);
	if (njobs == 1) {
		json_job_extras(f, "  ", &jobs[0]);
	} else {
		fputs(",\n  \"jobs\": [", f);
		for (int i = 0; i < njobs; i++) {
			fputs(i ? ", {\n" : "{\n", f);
			json_record(f, "    ", jobs[i].io_type, 0, jobs[i].xfer, 0, jobs[i].threads, jobs[i].io_size,
				    &jobs[i].res, jobs[i].res.cpu_s);
			json_job_extras(f, "    ", &jobs[i]);
			fputs("\n  }", f);
		}
		fputs("]", f);
	}
	fprintf(f, ",\n  \"procs\": %d,\n  \"exit_code\": %d", nprocs, exit_code);
	if (error && error[0]) {
		fputs(",\n  \"error\": ", f);
		jstr(f, error);
	}
	fputs("\n}\n", f);
	if (to_stdout) {
		fflush(f);
	} else if (fclose(f) != 0) {
		snprintf(err, errlen, "--json %s: %s", dest, strerror(errno));
		return -1;
	}
	return 0;
}
