/* path.mode and path.evidence: which path the data actually took.
 * CPU-side transfer types are "posix" by construction. For the cuFile types
 * the verdict comes from what the library itself counted during the run
 * (cuFile level-3 per-GPU stats: nvfs / p2p / posix ops), backed by the
 * driver properties and the nvidia-fs proc files. Any op that went through
 * cuFile's POSIX fallback makes the mode "compat": a compat run cannot pass
 * for GPU direct. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdsbench.h"
#ifdef HAVE_CUDA
#include "cuda_rt.h"
#endif

#define NVFS_STATS "/proc/driver/nvidia-fs/stats"
#define NVFS_VERSION "/proc/driver/nvidia-fs/version"

static long long nvfs_rd0 = -1, nvfs_wr0 = -1;

static void ev(struct path_info *pi, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ev(struct path_info *pi, const char *fmt, ...)
{
	va_list ap;

	if (pi->n_evidence >= (int)(sizeof(pi->evidence) / sizeof(pi->evidence[0])))
		return;
	va_start(ap, fmt);
	vsnprintf(pi->evidence[pi->n_evidence++], sizeof(pi->evidence[0]), fmt, ap);
	va_end(ap);
}

/* "Reads : n=123 ok=120 err=0 ..." -> the ok (or n) count; -1 if absent.
 * nvidia-fs prints per-op counts only with its IO stats enabled. */
static long long nvfs_count(const char *text, const char *label)
{
	const char *p = text;

	while ((p = strstr(p, label)) != NULL) {
		const char *eol = strchr(p, '\n'), *q;

		if (p == text || p[-1] == '\n') {
			q = strstr(p, "ok=");
			if (!q || (eol && q > eol))
				q = strstr(p, "n=");
			if (q && (!eol || q < eol))
				return strtoll(strchr(q, '=') + 1, NULL, 10);
			return -1;
		}
		p += strlen(label);
	}
	return -1;
}

static int read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return 0;
}

void path_begin(struct job *jobs, int njobs)
{
	static char buf[16384];

	(void)jobs;
	(void)njobs;
	if (read_text(NVFS_STATS, buf, sizeof(buf)) == 0) {
		nvfs_rd0 = nvfs_count(buf, "Reads");
		nvfs_wr0 = nvfs_count(buf, "Writes");
	}
}

#ifdef HAVE_CUDA
static void nvfs_evidence(struct path_info *pi)
{
	static char buf[16384];
	char ver[128] = "";

	if (access("/proc/driver/nvidia-fs", F_OK) != 0) {
		ev(pi, "/proc/driver/nvidia-fs absent: the nvidia-fs kernel module is not loaded");
		return;
	}
	if (read_text(NVFS_VERSION, ver, sizeof(ver)) == 0)
		ver[strcspn(ver, "\n")] = 0;
	if (read_text(NVFS_STATS, buf, sizeof(buf)) == 0) {
		long long rd = nvfs_count(buf, "Reads"), wr = nvfs_count(buf, "Writes");

		if (rd >= 0 && nvfs_rd0 >= 0)
			ev(pi, "nvidia-fs %s loaded; its counters moved by reads=%lld writes=%lld during the run",
			   ver[0] ? ver : "(version ?)", rd - nvfs_rd0, wr >= 0 && nvfs_wr0 >= 0 ? wr - nvfs_wr0 : -1);
		else
			ev(pi, "nvidia-fs %s loaded (per-op counters off: rw_stats_enabled=0)",
			   ver[0] ? ver : "(version ?)");
	} else {
		ev(pi, "nvidia-fs loaded, %s unreadable", NVFS_STATS);
	}
}

/* CU_FILE_P2P_SUPPORTED in CUfileFeatureFlags_t (bit 4), spelled as a
 * number because older cufile.h releases do not name it. */
#define FEATURE_P2P_BIT 4

/* What the driver says it can do (nvidia-fs version, the P2PDMA feature, compat mode allowed):
 * 1 when it answered, with *nvfs (any nvidia-fs version) and *p2p set. */
static int driver_evidence(struct path_info *pi, int *nvfs, int *p2p)
{
	CUfileDrvProps_t props;
	unsigned major, minor;

	memset(&props, 0, sizeof(props));
	if (cu.cuFileDriverGetProperties(&props).err != CU_FILE_SUCCESS)
		return 0;
	major = props.nvfs.major_version;
	minor = props.nvfs.minor_version;
	*nvfs = major || minor;
	*p2p = !!(props.fflags & (1u << FEATURE_P2P_BIT));
	ev(pi, "cuFileDriverGetProperties: nvfs version %u.%u%s, P2PDMA feature %s, allow_compat_mode %s", major, minor,
	   *nvfs ? "" : " (no nvidia-fs driver)", *p2p ? "yes" : "no",
	   props.nvfs.dcontrolflags & (1u << CU_FILE_ALLOW_COMPAT_MODE) ? "on" : "off");
	return 1;
}

/* The batch counters (level 1 inside level 3). Batch entries are not in the per-GPU counts:
 * when those saw nothing, every entry not submitted through nvidia-fs or P2PDMA (POSIX, AIO
 * or io_uring submission) counts as a compat op. */
static void batch_counters(struct path_info *pi, const CUfileStatsLevel1_t *l1)
{
	long long all = (long long)l1->batch_total_submit_ops.ok;
	long long nv = (long long)l1->batch_nvfs_submit_ops.ok, p2 = (long long)l1->batch_p2p_submit_ops.ok;

	if (!l1->batch_submit_ops.ok && !l1->batch_posix_enqueued_ops.ok)
		return;
	ev(pi, "cuFile batch stats: entries=%llu nvfs=%llu p2p=%llu posix_enqueued=%llu aio=%llu io_uring=%llu",
	   (unsigned long long)l1->batch_total_submit_ops.ok, (unsigned long long)l1->batch_nvfs_submit_ops.ok,
	   (unsigned long long)l1->batch_p2p_submit_ops.ok, (unsigned long long)l1->batch_posix_enqueued_ops.ok,
	   (unsigned long long)l1->batch_aio_submit_ops.ok, (unsigned long long)l1->batch_iouring_submit_ops.ok);
	if (pi->n_total <= 0 && all) {
		pi->n_total = all;
		pi->n_nvfs = nv;
		pi->n_p2p = p2;
		pi->n_posix = all - nv - p2 > 0 ? all - nv - p2 : 0;
	}
}

/* Level-3 stats: per-GPU counts of ops by path, then the batch counters. The struct is read
 * into a larger zeroed buffer: newer libraries may have grown it. */
static void stats_counters(struct path_info *pi)
{
	size_t sz = sizeof(CUfileStatsLevel3_t) + 65536;
	CUfileStatsLevel3_t *st;
	long long nv = 0, p2 = 0, px = 0, tot = 0;
	unsigned n;

	if (cu.stats_level < 3 || !cu.cuFileGetStatsL3) {
		ev(pi, "cuFile stats not enabled (--cufile-stats 0 or library without the stats API)");
		return;
	}
	st = calloc(1, sz);
	if (!st || cu.cuFileGetStatsL3(st).err != CU_FILE_SUCCESS) {
		ev(pi, "cuFileGetStatsL3 failed: no per-op path counters");
		free(st);
		return;
	}
	n = st->num_gpus > 16 ? 16 : st->num_gpus;
	for (unsigned i = 0; i < n; i++) {
		const CUfilePerGpuStats_t *g = &st->per_gpu_stats[i];

		nv += (long long)(g->n_nvfs_reads + g->n_nvfs_writes);
		p2 += (long long)(g->n_p2p_reads + g->n_p2p_writes);
		px += (long long)(g->n_posix_reads + g->n_posix_writes);
		tot += (long long)(g->n_total_reads + g->n_total_writes);
	}
	pi->n_nvfs = nv;
	pi->n_p2p = p2;
	pi->n_posix = px;
	pi->n_total = tot;
	ev(pi, "cuFile per-GPU stats (level 3, %u GPU(s)): ops=%lld nvfs=%lld p2p=%lld posix=%lld", n, tot, nv, p2, px);
	batch_counters(pi, &st->detailed.basic);
	free(st);
}

/* The mode: from the op counters (any compat op makes it compat), else inferred from what
 * the driver can do at all (have_props), else unknown. */
static void path_verdict(struct path_info *pi, int have_props, int nvfs, int p2p)
{
	if (pi->n_posix > 0) {
		snprintf(pi->mode, sizeof(pi->mode), "compat");
		ev(pi, "verdict: %lld of %lld op(s) went through cuFile's compat path (POSIX I/O, bounce through host memory)",
		   pi->n_posix, pi->n_total);
	} else if (pi->n_p2p > 0 || pi->n_nvfs > 0) {
		snprintf(pi->mode, sizeof(pi->mode), "%s", pi->n_p2p > pi->n_nvfs ? "p2pdma" : "nvfs");
		ev(pi, "verdict: every counted op used %s DMA to GPU memory",
		   pi->n_p2p > pi->n_nvfs ? "PCI P2PDMA" : "nvidia-fs");
	} else if (have_props && !nvfs && !p2p) {
		snprintf(pi->mode, sizeof(pi->mode), "compat");
		ev(pi, "verdict: neither nvidia-fs nor P2PDMA is available, so cuFile can only run in compat mode");
	} else if (have_props) {
		snprintf(pi->mode, sizeof(pi->mode), "%s", nvfs ? "nvfs" : "p2pdma");
		ev(pi, "verdict inferred from driver properties only (no per-op counters): treat as unverified");
	} else {
		snprintf(pi->mode, sizeof(pi->mode), "unknown");
	}
}

static void cufile_path_probe(struct path_info *pi)
{
	int have_props, nvfs = 0, p2p = 0;

	pi->n_nvfs = pi->n_p2p = pi->n_posix = pi->n_total = -1;
	cufile_param_evidence(pi);
	if (cu.cuFileGetVersion) {
		int v = 0;

		if (cu.cuFileGetVersion(&v).err == CU_FILE_SUCCESS)
			ev(pi, "libcufile %d.%d (%s)", v / 1000, (v % 1000) / 10, cu.cufile_path);
	}
	have_props = driver_evidence(pi, &nvfs, &p2p);
	stats_counters(pi);
	path_verdict(pi, have_props, nvfs, p2p);
}
#endif

void path_finish(struct job *jobs, int njobs)
{
	struct path_info gpu;
	int probed = 0;

	memset(&gpu, 0, sizeof(gpu));
	for (int i = 0; i < njobs; i++) {
		struct path_info *pi = &jobs[i].res.path;
		const struct xfer_type *x = jobs[i].xt;

		memset(pi, 0, sizeof(*pi));
		pi->n_nvfs = pi->n_p2p = pi->n_posix = pi->n_total = -1;
		if (!(x->flags & ENG_CUFILE)) {
			snprintf(pi->mode, sizeof(pi->mode), "posix");
			if (x->flags & ENG_GPU)
				ev(pi, "xfer_type %d (%s) moves data through host memory by design: %s", x->xfer,
				   x->name, x->desc);
			else
				ev(pi, "xfer_type %d (%s): %s; no GPU involved", x->xfer, x->name, x->desc);
			continue;
		}
#ifdef HAVE_CUDA
		if (!probed) {
			cufile_path_probe(&gpu);
			nvfs_evidence(&gpu);
			probed = 1;
		}
		*pi = gpu;
		if (njobs > 1)
			ev(pi, "cuFile counters are process-wide: they cover every cuFile job of this run");
#else
		snprintf(pi->mode, sizeof(pi->mode), "unknown");
		(void)probed;
#endif
	}
}

/* The least direct mode wins an aggregate: a mix never reads better than its worst part. */
int path_mode_rank(const char *m)
{
	static const char *const order[] = { "unknown", "posix", "compat", "p2pdma", "nvfs" };

	for (int i = 0; i < 5; i++)
		if (strcmp(m, order[i]) == 0)
			return i;
	return 0;
}

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* -P: each worker process has its own cuFile instance and counted its own
 * ops. Sum the counters; any op through the compat path makes the job
 * compat, as in one process; otherwise the least direct process verdict. */
void path_merge(struct path_info *out, const struct path_info *in, int n, int nprocs)
{
	long long nv = 0, p2 = 0, px = 0, tot = 0;
	int have = 0, worst = 0, same = 1;

	memset(out, 0, sizeof(*out));
	out->n_nvfs = out->n_p2p = out->n_posix = out->n_total = -1;
	for (int i = 0; i < n; i++) {
		const struct path_info *p = &in[i];

		if (p->n_total >= 0 || p->n_posix >= 0) {
			have = 1;
			nv += p->n_nvfs > 0 ? p->n_nvfs : 0;
			p2 += p->n_p2p > 0 ? p->n_p2p : 0;
			px += p->n_posix > 0 ? p->n_posix : 0;
			tot += p->n_total > 0 ? p->n_total : 0;
		}
		if (path_mode_rank(p->mode) < path_mode_rank(in[worst].mode))
			worst = i;
		if (strcmp(p->mode, in[0].mode) != 0)
			same = 0;
	}
	if (have)
		ev(out, "-P %d: the threads ran in %d worker processes, each with its own CUDA context and cuFile "
		   "driver (bounce-buffer pool, I/O threads); op counts below are summed over them, other evidence "
		   "is from the first worker process that reported", nprocs, nprocs);
	else
		ev(out, "-P %d: the threads ran in %d worker processes; evidence below is from the first that reported",
		   nprocs, nprocs);
	if (n < nprocs)
		ev(out, "only %d of %d worker processes reported", n, nprocs);
	for (int k = 0; k < in[0].n_evidence; k++) {
		const char *e = in[0].evidence[k];

		if (have && (starts(e, "cuFile per-GPU stats") || starts(e, "cuFile batch stats") || starts(e, "verdict")))
			continue;
		ev(out, "%s", e);
	}
	snprintf(out->mode, sizeof(out->mode), "%s", in[worst].mode);
	if (have) {
		out->n_nvfs = nv;
		out->n_p2p = p2;
		out->n_posix = px;
		out->n_total = tot;
		ev(out, "cuFile op counts summed over %d worker processes: ops=%lld nvfs=%lld p2p=%lld posix=%lld", n,
		   tot, nv, p2, px);
		if (px > 0) {
			snprintf(out->mode, sizeof(out->mode), "compat");
			ev(out, "verdict: %lld of %lld op(s) went through cuFile's compat path (POSIX I/O, bounce through host memory)",
			   px, tot);
		} else {
			for (int k = 0; k < in[worst].n_evidence; k++)
				if (starts(in[worst].evidence[k], "verdict"))
					ev(out, "%s", in[worst].evidence[k]);
		}
	}
	if (!same) {
		char b[300];
		size_t o = (size_t)snprintf(b, sizeof(b), "worker processes differ:");

		for (int i = 0; i < n && o < sizeof(b); i++)
			o += (size_t)snprintf(b + o, sizeof(b) - o, " %d=%s", i, in[i].mode);
		ev(out, "%s", b);
	}
}
