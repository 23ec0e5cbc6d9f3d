/* Run-time loading of the CUDA runtime and libcufile, and the buffer/handle
 * helpers the GPU engines share. Built only when the headers were found. */
#ifdef HAVE_CUDA
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cuda_rt.h"

#ifndef GDS_CUDA_LIBDIR
#define GDS_CUDA_LIBDIR ""
#endif
#ifndef GDS_CUFILE_LIBDIR
#define GDS_CUFILE_LIBDIR GDS_CUDA_LIBDIR
#endif

#define STR_(x) #x
#define XSTR(x) STR_(x)

struct cuapi cu;
int g_cufile_stats_level = 3;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

/* Try $GDSBENCH_CUDA_LIBDIR / $GDSBENCH_CUFILE_LIBDIR, else the build-time
 * directory (the headers' own libraries), then the dynamic loader's path. */
static void *open_lib(const char *dir, const char *const *names, char *used, size_t usedlen)
{
	char path[PATH_MAX];

	for (int pass = 0; pass < 2; pass++) {
		for (const char *const *n = names; *n; n++) {
			void *h;

			if (pass == 0) {
				if (!dir[0])
					continue;
				if (strchr(*n, '*')) {
					glob_t g;

					snprintf(path, sizeof(path), "%s/%s", dir, *n);
					if (glob(path, 0, NULL, &g) != 0)
						continue;
					h = NULL;
					for (size_t i = 0; i < g.gl_pathc && !h; i++) {
						h = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL);
						if (h)
							snprintf(used, usedlen, "%s", g.gl_pathv[i]);
					}
					globfree(&g);
					if (h)
						return h;
					continue;
				}
				snprintf(path, sizeof(path), "%s/%s", dir, *n);
			} else {
				if (strchr(*n, '*'))
					continue;
				snprintf(path, sizeof(path), "%s", *n);
			}
			h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
			if (h) {
				snprintf(used, usedlen, "%s", path);
				return h;
			}
		}
	}
	return NULL;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	size_t n = strlen(name);

	/* headers may rename (cuFileDriverClose -> _v2) ahead of the library */
	if (!p && n > 3 && strcmp(name + n - 3, "_v2") == 0) {
		char base[128];

		snprintf(base, sizeof(base), "%.*s", (int)(n - 3), name);
		p = dlsym(h, base);
	}
	return p;
}

static int cuda_load(char *err, size_t errlen)
{
	static const char *const names[] = { "libcudart.so", "libcudart.so.[0-9]*",
					      "libcudart.so.13", "libcudart.so.12", NULL };
	void *h;

	if (cu.cuda_loaded)
		return 0;
	h = open_lib(getenv("GDSBENCH_CUDA_LIBDIR") ? getenv("GDSBENCH_CUDA_LIBDIR") : GDS_CUDA_LIBDIR, names,
		     cu.cudart_path, sizeof(cu.cudart_path));
	if (!h) {
		snprintf(err, errlen, "GPU transfer types need the CUDA runtime: libcudart could not be loaded (%s)",
			 dlerror());
		return -1;
	}
#define CU_LOAD(f) \
	if (!(*(void **)&cu.f = sym(h, XSTR(f)))) { \
		snprintf(err, errlen, "%s lacks %s", cu.cudart_path, XSTR(f)); \
		return -1; \
	}
	CUDA_FUNCS(CU_LOAD)
#undef CU_LOAD
#define CU_LOAD_OPT(f) *(void **)&cu.f = sym(h, XSTR(f));
	CUDA_OPT_FUNCS(CU_LOAD_OPT)
#undef CU_LOAD_OPT
	cu.cuda_loaded = 1;
	return 0;
}

static int cufile_load(char *err, size_t errlen)
{
	static const char *const names[] = { "libcufile.so.0", "libcufile.so", "libcufile.so.[0-9]*", NULL };
	void *h;

	if (cu.cufile_loaded)
		return 0;
	h = open_lib(getenv("GDSBENCH_CUFILE_LIBDIR") ? getenv("GDSBENCH_CUFILE_LIBDIR") : GDS_CUFILE_LIBDIR, names,
		     cu.cufile_path, sizeof(cu.cufile_path));
	if (!h) {
		snprintf(err, errlen, "cuFile transfer types need libcufile: it could not be loaded (%s)", dlerror());
		return -1;
	}
#define CU_LOAD(f) \
	if (!(*(void **)&cu.f = sym(h, XSTR(f)))) { \
		snprintf(err, errlen, "%s lacks %s", cu.cufile_path, XSTR(f)); \
		return -1; \
	}
	CUFILE_FUNCS(CU_LOAD)
#undef CU_LOAD
#define CU_LOAD_OPT(f) *(void **)&cu.f = sym(h, XSTR(f));
	CUFILE_OPT_FUNCS(CU_LOAD_OPT)
#undef CU_LOAD_OPT
	cu.cufile_loaded = 1;
	return 0;
}

/* ---- cuFile parameters (cufile.json "execution"/"properties" keys) ---- */

struct cparam {
	const char *name;
	int is_bool;
	int id;
};

static const struct cparam cparams[] = {
	{ "max_io_threads", 0, CUFILE_PARAM_EXECUTION_MAX_IO_THREADS },
	{ "max_io_queue_depth", 0, CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH },
	{ "max_request_parallelism", 0, CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM },
	{ "min_io_threshold_size_kb", 0, CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB },
	{ "io_batchsize", 0, CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE },
	{ "parallel_io", 1, CUFILE_PARAM_EXECUTION_PARALLEL_IO },
	{ "use_poll_mode", 1, CUFILE_PARAM_PROPERTIES_USE_POLL_MODE },
};
#define NCPARAMS (sizeof(cparams) / sizeof(cparams[0]))

static struct { const struct cparam *p; size_t v; } pending[16];
static int npending;
static char param_note[200];

int cufile_param_add(const char *spec, char *err, size_t errlen)
{
	const char *eq = strchr(spec, '=');
	char *end;
	unsigned long long v;

	if (!eq || npending >= 16)
		goto bad;
	for (size_t i = 0; i < NCPARAMS; i++) {
		if (strlen(cparams[i].name) != (size_t)(eq - spec) || strncmp(spec, cparams[i].name, (size_t)(eq - spec)))
			continue;
		if (cparams[i].is_bool && (!strcmp(eq + 1, "true") || !strcmp(eq + 1, "false"))) {
			v = eq[1] == 't';
		} else {
			v = strtoull(eq + 1, &end, 10);
			if (!eq[1] || *end || (cparams[i].is_bool && v > 1))
				goto bad;
		}
		pending[npending].p = &cparams[i];
		pending[npending++].v = (size_t)v;
		return 0;
	}
bad:
	{
		size_t o = (size_t)snprintf(err, errlen, "expected NAME=VALUE, NAME one of");

		for (size_t i = 0; i < NCPARAMS && o < errlen; i++)
			o += (size_t)snprintf(err + o, errlen - o, " %s", cparams[i].name);
	}
	return -1;
}

static void apply_params(void)
{
	size_t o = 0;

	param_note[0] = 0;
	for (int i = 0; i < npending; i++) {
		const struct cparam *p = pending[i].p;
		CUfileError_t e = { CU_FILE_INTERNAL_ERROR, 0 };

		if (p->is_bool && cu.cuFileSetParameterBool)
			e = cu.cuFileSetParameterBool((CUFileBoolConfigParameter_t)p->id, pending[i].v != 0);
		else if (!p->is_bool && cu.cuFileSetParameterSizeT)
			e = cu.cuFileSetParameterSizeT((CUFileSizeTConfigParameter_t)p->id, pending[i].v);
		if (o < sizeof(param_note))
			o += (size_t)snprintf(param_note + o, sizeof(param_note) - o, "%s%s=%zu%s", o ? " " : "",
					      p->name, pending[i].v, e.err == CU_FILE_SUCCESS ? "" : "(refused)");
	}
}

/* Effective execution settings, as evidence next to the figures. */
void cufile_param_evidence(struct path_info *pi)
{
	char b[256];
	size_t o = 0;

	if (!cu.cuFileGetParameterSizeT)
		return;
	for (size_t i = 0; i < NCPARAMS && o < sizeof(b); i++) {
		size_t v = 0;
		bool bv = false;
		CUfileError_t e;

		if (cparams[i].is_bool) {
			if (!cu.cuFileGetParameterBool)
				continue;
			e = cu.cuFileGetParameterBool((CUFileBoolConfigParameter_t)cparams[i].id, &bv);
			v = bv;
		} else {
			e = cu.cuFileGetParameterSizeT((CUFileSizeTConfigParameter_t)cparams[i].id, &v);
		}
		if (e.err == CU_FILE_SUCCESS)
			o += (size_t)snprintf(b + o, sizeof(b) - o, "%s%s=%zu", o ? " " : "", cparams[i].name, v);
	}
	if (pi->n_evidence < 10)
		snprintf(pi->evidence[pi->n_evidence++], sizeof(pi->evidence[0]), "cuFile settings: %.200s%s%.150s", b,
			 param_note[0] ? "; set by --cufile-param: " : "", param_note);
}

/* Batch entries the library queues at once (execution.max_io_queue_depth). */
size_t cufile_queue_limit(void)
{
	size_t v = 0;

	if (cu.cuFileGetParameterSizeT &&
	    cu.cuFileGetParameterSizeT(CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH, &v).err == CU_FILE_SUCCESS && v)
		return v;
	return 128;
}

const char *cuda_errstr(cudaError_t e)
{
	return cu.cudaGetErrorString ? cu.cudaGetErrorString(e) : "CUDA error";
}

const char *cufile_errstr(CUfileError_t e, char *buf, size_t len)
{
	if (e.err == CU_FILE_CUDA_DRIVER_ERROR)
		snprintf(buf, len, "%s (CUDA driver error %d)", cufileop_status_error(e.err), (int)e.cu_err);
	else
		snprintf(buf, len, "%s (%d)", cufileop_status_error(e.err), (int)e.err);
	return buf;
}

/* cuFileRead/Write: -1 with errno, or minus a CUfileOpError code. */
const char *cufile_io_strerror(ssize_t res, char *buf, size_t len)
{
	long long c = -(long long)res;

	if (c > CUFILEOP_BASE_ERR)
		snprintf(buf, len, "cuFile: %s (%lld)", cufileop_status_error((CUfileOpError)c), c);
	else
		snprintf(buf, len, "%s", strerror((int)c));
	return buf;
}

int gpu_global_init(int need_cufile, char *err, size_t errlen)
{
	int rc = -1;
	cudaError_t ce;
	CUfileError_t fe;

	pthread_mutex_lock(&init_mu);
	if (cuda_load(err, errlen) != 0)
		goto out;
	if (!cu.ndev) {
		ce = cu.cudaGetDeviceCount(&cu.ndev);
		if (ce != cudaSuccess || cu.ndev <= 0) {
			snprintf(err, errlen, "no usable GPU: cudaGetDeviceCount: %s",
				 ce != cudaSuccess ? cuda_errstr(ce) : "0 devices");
			cu.ndev = 0;
			goto out;
		}
	}
	if (need_cufile && !cu.cufile_open) {
		if (cufile_load(err, errlen) != 0)
			goto out;
		apply_params();
		fe = cu.cuFileDriverOpen();
		if (fe.err != CU_FILE_SUCCESS) {
			char b[160];

			snprintf(err, errlen, "cuFileDriverOpen: %s", cufile_errstr(fe, b, sizeof(b)));
			goto out;
		}
		cu.cufile_open = 1;
		/* Per-GPU counters (level 3) tell which path each op took: nvfs,
		 * p2p or posix. That is the evidence behind path.mode. */
		if (g_cufile_stats_level > 0 && cu.cuFileSetStatsLevel && cu.cuFileStatsStart) {
			if (cu.cuFileSetStatsLevel(g_cufile_stats_level).err == CU_FILE_SUCCESS &&
			    cu.cuFileStatsStart().err == CU_FILE_SUCCESS) {
				cu.stats_level = g_cufile_stats_level;
				if (cu.cuFileStatsReset)
					cu.cuFileStatsReset();
			}
		}
	}
	rc = 0;
out:
	pthread_mutex_unlock(&init_mu);
	return rc;
}

void gpu_global_exit(void)
{
	if (cu.cufile_open) {
		cu.cuFileDriverClose();
		cu.cufile_open = 0;
	}
}

int gpu_bind(struct worker *w)
{
	cudaError_t e;

	if (w->job->gpu >= cu.ndev) {
		werr(w, "-d %d: this node has %d GPU(s)", w->job->gpu, cu.ndev);
		return -1;
	}
	e = cu.cudaSetDevice(w->job->gpu);
	if (e != cudaSuccess) {
		werr(w, "cudaSetDevice(%d): %s", w->job->gpu, cuda_errstr(e));
		return -1;
	}
	/* -p: peer access to every GPU that allows it (NVLink or PCIe P2P) */
	for (int d = 0; w->job->nvlinks && d < cu.ndev; d++) {
		int can = 0;

		if (d == w->job->gpu)
			continue;
		if (!cu.cudaDeviceCanAccessPeer || !cu.cudaDeviceEnablePeerAccess) {
			werr(w, "-p: %s lacks cudaDeviceEnablePeerAccess", cu.cudart_path);
			return -1;
		}
		if (cu.cudaDeviceCanAccessPeer(&can, w->job->gpu, d) != cudaSuccess || !can)
			continue;
		e = cu.cudaDeviceEnablePeerAccess(d, 0);
		if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
			werr(w, "cudaDeviceEnablePeerAccess(GPU %d -> %d): %s", w->job->gpu, d, cuda_errstr(e));
			return -1;
		}
	}
	return 0;
}

/* -m: the I/O buffer in host memory for the cuFile types (2 cudaMallocHost,
 * 3 malloc, 4 mmap) or on the GPU (0 cudaMalloc). */
static int mem_is_host(const struct worker *w)
{
	return w->job->mem_type >= 2;
}

static cudaError_t buf_alloc(struct worker *w, void **p, size_t len)
{
	switch (w->job->mem_type) {
	case 2:
		return cu.cudaMallocHost(p, len);
	case 3:
		return posix_memalign(p, GDS_SECTOR, len) ? cudaErrorMemoryAllocation : cudaSuccess;
	case 4:
		*p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return *p == MAP_FAILED ? (*p = NULL, cudaErrorMemoryAllocation) : cudaSuccess;
	default:
		return cu.cudaMalloc(p, len);
	}
}

static void buf_free(struct worker *w, void *p, size_t len)
{
	switch (w->job->mem_type) {
	case 2:
		cu.cudaFreeHost(p);
		break;
	case 3:
		free(p);
		break;
	case 4:
		munmap(p, len);
		break;
	default:
		cu.cudaFree(p);
	}
}

/* The staging copy is pinned and copied on its own stream with an explicit
 * synchronise: a cudaMemcpy from pageable memory may return before the DMA
 * lands, and the engines' streams (non-blocking) do not wait for it. */
int gpu_slots_alloc(struct worker *w, int depth)
{
	struct gpu_base *g = w->priv;
	size_t io = (size_t)w->job->io_size;
	cudaError_t e;

	w->depth = depth;
	g->len = io * (size_t)depth;
	w->slots = calloc((size_t)depth, sizeof(*w->slots));
	if (!w->slots) {
		werr(w, "out of memory");
		return -1;
	}
	e = cu.cudaMallocHost(&g->staging, g->len);
	if (e != cudaSuccess) {
		g->staging = NULL;
		werr(w, "cudaMallocHost(%zu): %s", g->len, cuda_errstr(e));
		return -1;
	}
	e = cu.cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		g->copy = NULL;
		werr(w, "cudaStreamCreate: %s", cuda_errstr(e));
		return -1;
	}
	e = buf_alloc(w, &g->dev, g->len);
	if (e != cudaSuccess) {
		static const char *const how[] = { "cudaMalloc", "cuMem", "cudaMallocHost", "malloc", "mmap" };

		g->dev = NULL;
		werr(w, "%s(%zu) for GPU %d: %s", how[w->job->mem_type], g->len, w->job->gpu, cuda_errstr(e));
		return -1;
	}
	if (mem_is_host(w))
		memset(g->dev, 0, g->len);
	else
		cu.cudaMemset(g->dev, 0, g->len);
	for (int i = 0; i < depth; i++) {
		w->slots[i].buf = (char *)g->dev + (size_t)i * io;
		w->slots[i].host = (char *)g->staging + (size_t)i * io;
		w->slots[i].buf_off = (size_t)i * io;
	}
	return 0;
}

void gpu_slots_free(struct worker *w)
{
	struct gpu_base *g = w->priv;

	if (!g)
		return;
	if (g->dev)
		buf_free(w, g->dev, g->len);
	if (g->staging)
		cu.cudaFreeHost(g->staging);
	if (g->copy)
		cu.cudaStreamDestroy(g->copy);
	g->dev = g->staging = NULL;
	g->copy = NULL;
	free(w->slots);
	w->slots = NULL;
}

int gpu_to_host(struct worker *w, struct slot *s)
{
	struct gpu_base *g = w->priv;
	cudaError_t e;

	if (mem_is_host(w)) {
		memcpy(s->host, s->buf, s->len);
		return 0;
	}
	e = cu.cudaMemcpyAsync(s->host, s->buf, s->len, cudaMemcpyDeviceToHost, g->copy);

	if (e == cudaSuccess)
		e = cu.cudaStreamSynchronize(g->copy);
	if (e != cudaSuccess) {
		werr(w, "cudaMemcpy D2H: %s", cuda_errstr(e));
		return -1;
	}
	return 0;
}

int gpu_from_host(struct worker *w, struct slot *s)
{
	struct gpu_base *g = w->priv;
	cudaError_t e;

	if (mem_is_host(w)) {
		memcpy(s->buf, s->host, (size_t)w->job->io_size);
		return 0;
	}
	e = cu.cudaMemcpyAsync(s->buf, s->host, w->job->io_size, cudaMemcpyHostToDevice, g->copy);

	if (e == cudaSuccess)
		e = cu.cudaStreamSynchronize(g->copy);
	if (e != cudaSuccess) {
		werr(w, "cudaMemcpy H2D: %s", cuda_errstr(e));
		return -1;
	}
	return 0;
}

int cufile_register_buf(struct worker *w)
{
	struct gpu_base *g = w->priv;
	CUfileError_t fe;

	if (w->job->skip_bufreg)
		return 0;	/* -b: cuFile then moves the data through its own bounce buffers */
	fe = cu.cuFileBufRegister(g->dev, g->len, 0);
	if (fe.err != CU_FILE_SUCCESS) {
		char b[160];

		werr(w, "cuFileBufRegister(%zu bytes): %s", g->len, cufile_errstr(fe, b, sizeof(b)));
		return -1;
	}
	g->registered = 1;
	return 0;
}

void cufile_deregister_buf(struct worker *w)
{
	struct gpu_base *g = w->priv;

	if (g && g->registered) {
		cu.cuFileBufDeregister(g->dev);
		g->registered = 0;
	}
}

int cufile_register_fd(struct worker *w)
{
	CUfileDescr_t d;
	CUfileHandle_t fh;
	CUfileError_t fe;
	char b[160];

	memset(&d, 0, sizeof(d));
	d.handle.fd = w->fd;
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	fe = cu.cuFileHandleRegister(&fh, &d);
	if (fe.err != CU_FILE_SUCCESS) {
		struct stat st;
		char udev[64] = "";

		/* The usual cause off DGX OS: no udev record for the block device. */
		if (fstat(w->fd, &st) == 0) {
			snprintf(udev, sizeof(udev), "/run/udev/data/b%u:%u", major(st.st_dev), minor(st.st_dev));
			if (access(udev, F_OK) == 0)
				udev[0] = 0;
		}
		werr(w, "cuFileHandleRegister %s: %s%s%s%s", w->path, cufile_errstr(fe, b, sizeof(b)),
		     udev[0] ? "; " : "", udev[0] ? udev : "",
		     udev[0] ? " is missing: cuFile needs the udev record of the file system's block device "
			       "(E:ID_FS_USAGE=filesystem, E:ID_FS_TYPE=...)" : "");
		return -1;
	}
	w->fh = fh;
	return 0;
}

void cufile_deregister_fd(struct worker *w)
{
	if (w->fh) {
		cu.cuFileHandleDeregister(w->fh);
		w->fh = NULL;
	}
}

/* ---- the host bounce of xfer 2 (O_DIRECT) and 4 (page cache): pread/pwrite
 * into pinned host memory, cudaMemcpyAsync to or from the GPU buffer ---- */

struct bounce_thread {
	struct gpu_base base;	/* first: w->priv is also a struct gpu_base * */
	void *pinned;
	cudaStream_t stream;
};

int bounce_global_init(char *err, size_t errlen)
{
	return gpu_global_init(0, err, errlen);
}

int bounce_thread_init(struct worker *w)
{
	struct bounce_thread *t = calloc(1, sizeof(*t));
	cudaError_t e;

	w->priv = t;
	if (!t) {
		werr(w, "out of memory");
		return -1;
	}
	if (gpu_bind(w) != 0 || gpu_slots_alloc(w, 1) != 0)
		return -1;
	e = cu.cudaMallocHost(&t->pinned, (size_t)w->job->io_size);
	if (e != cudaSuccess) {
		t->pinned = NULL;
		werr(w, "cudaMallocHost(%llu): %s", (unsigned long long)w->job->io_size, cuda_errstr(e));
		return -1;
	}
	e = cu.cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		t->stream = NULL;
		werr(w, "cudaStreamCreate: %s", cuda_errstr(e));
		return -1;
	}
	return 0;
}

void bounce_thread_exit(struct worker *w)
{
	struct bounce_thread *t = w->priv;

	if (t) {
		if (t->stream)
			cu.cudaStreamDestroy(t->stream);
		if (t->pinned)
			cu.cudaFreeHost(t->pinned);
	}
	gpu_slots_free(w);
	free(t);
	w->priv = NULL;
}

/* CUDA errors of the bounce copies are reported as -(100000 + cudaError_t) to keep them apart from errno. */
#define CUDA_ERR_BASE 100000

ssize_t bounce_io(struct worker *w, struct slot *s)
{
	struct bounce_thread *t = w->priv;
	cudaError_t e;
	ssize_t r;

	if (s->write) {
		e = cu.cudaMemcpyAsync(t->pinned, s->buf, s->len, cudaMemcpyDeviceToHost, t->stream);
		if (e == cudaSuccess)
			e = cu.cudaStreamSynchronize(t->stream);
		if (e != cudaSuccess)
			return -(CUDA_ERR_BASE + (ssize_t)e);
		r = pwrite(w->fd, t->pinned, s->len, (off_t)s->off);
		return r < 0 ? -errno : r;
	}
	r = pread(w->fd, t->pinned, s->len, (off_t)s->off);
	if (r <= 0)
		return r < 0 ? -errno : r;
	e = cu.cudaMemcpyAsync(s->buf, t->pinned, (size_t)r, cudaMemcpyHostToDevice, t->stream);
	if (e == cudaSuccess)
		e = cu.cudaStreamSynchronize(t->stream);
	return e == cudaSuccess ? r : -(CUDA_ERR_BASE + (ssize_t)e);
}

const char *bounce_strerror(ssize_t res, char *buf, size_t len)
{
	if (-res >= CUDA_ERR_BASE)
		snprintf(buf, len, "CUDA: %s", cuda_errstr((cudaError_t)(-res - CUDA_ERR_BASE)));
	else
		snprintf(buf, len, "%s", strerror((int)-res));
	return buf;
}

#endif
