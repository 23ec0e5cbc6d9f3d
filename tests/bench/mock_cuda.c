/* A host-memory stand-in for libcudart and libcufile, built as both
 * libcudart.so and libcufile.so.0 for the tests: "device" memory is plain
 * memory, cuFile I/O is pread/pwrite, streams and batches complete at once,
 * and the level-3 stats count every op as a POSIX (compat) op. It lets the
 * GPU engines' logic (queues, slots, verify, path evidence) run under the
 * sanitizers on a machine without a GPU. Compiled against the real headers.
 *
 * MOCK_HOLD=N: a slow op in every thread. The first batch a thread submits on
 * the first batch handle it set up, and the first async op it enqueues, report
 * completion only after the thread submitted N more batches (ops); the data
 * moves at once. Waiting on that op (cuFileBatchIOGetStatus with min_nr > 0,
 * cudaStreamSynchronize) while another batch or stream of the thread has
 * completions to collect is an error: an engine that blocks on its oldest op
 * while later ones are done fails instead of running slowly. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <cufile.h>

/* Built twice: -DMOCK_CUDART -> libcudart.so, -DMOCK_CUFILE -> libcufile.so.0 */
/* a stream, seen by both libraries (the engine passes it from one to the other) */
struct mstream {
	int held;		/* MOCK_HOLD: its op is done but not reported yet */
	int unseen;		/* an op completed that no query or synchronize has reported */
};

static int hold_ops(void)
{
	const char *h = getenv("MOCK_HOLD");

	return h ? atoi(h) : 0;
}

#ifdef MOCK_CUDART
/* the streams this thread created (MOCK_HOLD: who else has completions) */
static __thread struct mstream *tl_streams[64];
static __thread int tl_nstreams;

cudaError_t cudaGetDeviceCount(int *n) { *n = getenv("MOCK_NO_GPU") ? 0 : 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaMalloc(void **p, size_t n)
{
	return posix_memalign(p, 4096, n ? n : 1) ? cudaErrorMemoryAllocation : cudaSuccess;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
	(void)k;
	memcpy(d, s, n);
	return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
	(void)st;
	return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
	struct mstream *m = calloc(1, sizeof(*m));

	(void)f;
	*s = (cudaStream_t)m;
	if (m && tl_nstreams < 64)
		tl_streams[tl_nstreams++] = m;
	return m ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	for (int i = 0; i < tl_nstreams; i++)
		if (tl_streams[i] == (struct mstream *)s)
			tl_streams[i] = tl_streams[--tl_nstreams];
	free(s);
	return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	struct mstream *m = (struct mstream *)s;

	if (m && m->held) {
		for (int i = 0; i < tl_nstreams; i++)
			if (tl_streams[i] != m && tl_streams[i]->unseen)
				return cudaErrorNotReady;	/* blocked on the oldest while others are done */
		m->held = 0;
	}
	if (m)
		m->unseen = 0;
	return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s)
{
	struct mstream *m = (struct mstream *)s;

	if (m && m->held)
		return cudaErrorNotReady;
	if (m)
		m->unseen = 0;
	return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "mock CUDA error"; }
/* fio's libcufile engine calls it: fio built against these stand-ins runs too */
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorMock"; }
cudaError_t cudaDeviceGetPCIBusId(char *b, int len, int d) { (void)d; snprintf(b, (size_t)len, "0000:00:00.0"); return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }

#endif

#ifdef MOCK_CUFILE
#include <fcntl.h>

static atomic_ullong posix_reads, posix_writes;
static const CUfileError_t OK = { CU_FILE_SUCCESS, 0 };
struct mfh { int fd; };
static int nvfs_mode;	/* MOCK_NVFS: count ops as nvidia-fs ops */

/* MOCK_NVFS=1: every process counts nvfs ops. MOCK_NVFS_BUT_ONE=PATH: the
 * first process to create PATH counts compat ops, every other one nvfs ops
 * (gdsbench -P must then still call the run compat). */
CUfileError_t cuFileDriverOpen(void)
{
	const char *one = getenv("MOCK_NVFS_BUT_ONE");

	nvfs_mode = getenv("MOCK_NVFS") != NULL;
	if (one) {
		int fd = open(one, O_CREAT | O_EXCL | O_WRONLY, 0644);

		nvfs_mode = fd < 0;
		if (fd >= 0)
			close(fd);
	}
	return OK;
}
/* the header may rename cuFileDriverClose to cuFileDriverClose_v2 */
CUfileError_t cuFileDriverClose(void) { return OK; }
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *p)
{
	memset(p, 0, sizeof(*p));
	p->nvfs.dcontrolflags = 1u << CU_FILE_ALLOW_COMPAT_MODE;
	return OK;
}
CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *d)
{
	struct mfh *h;

	if (getenv("MOCK_REGISTER_FAIL")) {
		CUfileError_t e = { CU_FILE_IO_NOT_SUPPORTED, 0 };

		return e;
	}
	/* as libcufile 1.15 on the H100 machine: a descriptor whose status flags hold O_NOFOLLOW
	 * (or O_NONBLOCK) is "unsupported file open flags" (5019) */
	if (fcntl(d->handle.fd, F_GETFL) & (O_NOFOLLOW | O_NONBLOCK)) {
		CUfileError_t e = { CU_FILE_INVALID_FILE_OPEN_FLAG, 0 };

		return e;
	}
	h = malloc(sizeof(*h));
	h->fd = d->handle.fd;
	*fh = h;
	return OK;
}
void cuFileHandleDeregister(CUfileHandle_t fh) { free(fh); }
/* MOCK_BUFREG_FAIL: buffer registration fails (what -b skips) */
CUfileError_t cuFileBufRegister(const void *p, size_t n, int f)
{
	CUfileError_t e = { CU_FILE_INVALID_VALUE, 0 };

	(void)p;
	(void)n;
	(void)f;
	return getenv("MOCK_BUFREG_FAIL") ? e : OK;
}
CUfileError_t cuFileBufDeregister(const void *p) { (void)p; return OK; }

ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size, off_t off, off_t boff)
{
	ssize_t r = pread(((struct mfh *)fh)->fd, (char *)base + boff, size, off);

	posix_reads++;
	return r;
}

ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size, off_t off, off_t boff)
{
	ssize_t r = pwrite(((struct mfh *)fh)->fd, (const char *)base + boff, size, off);

	posix_writes++;
	return r;
}

/* MOCK_HOLD: the thread's held op and how many it enqueued (or submitted) since */
static __thread struct mstream *tl_held_stream;
static __thread int tl_stream_hold_done, tl_stream_ops;

static void stream_enqueued(CUstream s)
{
	struct mstream *m = (struct mstream *)s;

	if (!m)
		return;
	m->unseen = 1;
	if (hold_ops() && !tl_stream_hold_done) {
		tl_stream_hold_done = 1;
		tl_held_stream = m;
		m->held = 1;
		tl_stream_ops = 0;
	} else if (tl_held_stream && ++tl_stream_ops >= hold_ops()) {
		tl_held_stream->held = 0;
		tl_held_stream = NULL;
	}
}

CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *base, size_t *size, off_t *off, off_t *boff,
			      ssize_t *done, CUstream s)
{
	*done = cuFileRead(fh, base, *size, *off, *boff);
	stream_enqueued(s);
	return OK;
}

CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *base, size_t *size, off_t *off, off_t *boff,
			       ssize_t *done, CUstream s)
{
	*done = cuFileWrite(fh, base, *size, *off, *boff);
	stream_enqueued(s);
	return OK;
}

CUfileError_t cuFileStreamRegister(CUstream s, unsigned f) { (void)s; (void)f; return OK; }
CUfileError_t cuFileStreamDeregister(CUstream s) { (void)s; return OK; }

struct mbatch { unsigned max, n, next; int held; CUfileIOEvents_t ev[]; };

/* the handles this thread set up, and MOCK_HOLD's state */
static __thread struct mbatch *tl_batches[64];
static __thread int tl_nbatches, tl_batch_hold_done, tl_batch_subs;
static __thread struct mbatch *tl_held_batch;

CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *h, unsigned nr)
{
	struct mbatch *b = calloc(1, sizeof(*b) + nr * sizeof(CUfileIOEvents_t));

	b->max = nr;
	*h = b;
	if (tl_nbatches < 64)
		tl_batches[tl_nbatches++] = b;
	return OK;
}

CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t h, unsigned nr, CUfileIOParams_t *p, unsigned flags)
{
	struct mbatch *b = h;
	CUfileError_t bad = { CU_FILE_INVALID_VALUE, 0 };

	(void)flags;
	if (b->n != b->next || nr > b->max)	/* one submission at a time, like the real one */
		return bad;
	b->n = nr;
	b->next = 0;
	for (unsigned i = 0; i < nr; i++) {
		ssize_t r = p[i].opcode == CUFILE_READ
			? cuFileRead(p[i].fh, p[i].u.batch.devPtr_base, p[i].u.batch.size, p[i].u.batch.file_offset,
				     p[i].u.batch.devPtr_offset)
			: cuFileWrite(p[i].fh, p[i].u.batch.devPtr_base, p[i].u.batch.size, p[i].u.batch.file_offset,
				      p[i].u.batch.devPtr_offset);

		b->ev[i].cookie = p[i].cookie;
		b->ev[i].status = r == (ssize_t)p[i].u.batch.size ? CUFILE_COMPLETE : CUFILE_FAILED;
		b->ev[i].ret = (size_t)r;
	}
	if (hold_ops() && !tl_batch_hold_done && tl_nbatches && b == tl_batches[0]) {
		tl_batch_hold_done = 1;
		tl_held_batch = b;
		b->held = 1;
		tl_batch_subs = 0;
	} else if (tl_held_batch && ++tl_batch_subs >= hold_ops()) {
		tl_held_batch->held = 0;
		tl_held_batch = NULL;
	}
	return OK;
}

/* Hands out completions one or two at a time, to exercise partial reaps. */
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t h, unsigned min_nr, unsigned *nr, CUfileIOEvents_t *ev,
				     struct timespec *t)
{
	struct mbatch *b = h;
	unsigned give = b->n - b->next;

	(void)t;
	if (b->held && !min_nr) {
		*nr = 0;
		return OK;
	}
	if (b->held) {
		CUfileError_t bad = { CU_FILE_INVALID_VALUE, 0 };

		for (int i = 0; i < tl_nbatches; i++)
			if (tl_batches[i] != b && tl_batches[i]->n != tl_batches[i]->next)
				return bad;	/* blocked on the oldest while others are done */
		b->held = 0;
	}
	if (give > 2)
		give = 2;
	if (give > *nr)
		give = *nr;
	memcpy(ev, &b->ev[b->next], give * sizeof(*ev));
	b->next += give;
	if (b->next == b->n)
		b->n = b->next = 0;
	*nr = give;
	return OK;
}

CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t h) { (void)h; return OK; }
void cuFileBatchIODestroy(CUfileBatchHandle_t h)
{
	for (int i = 0; i < tl_nbatches; i++)
		if (tl_batches[i] == h)
			tl_batches[i] = tl_batches[--tl_nbatches];
	if (tl_held_batch == h)
		tl_held_batch = NULL;
	free(h);
}
CUfileError_t cuFileGetVersion(int *v) { *v = 1150; return OK; }
CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t p, bool *v) { (void)p; *v = true; return OK; }
CUfileError_t cuFileSetStatsLevel(int l) { (void)l; return OK; }
CUfileError_t cuFileStatsStart(void) { return OK; }
CUfileError_t cuFileStatsReset(void) { posix_reads = posix_writes = 0; return OK; }
CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t *s) { memset(s, 0, sizeof(*s)); return OK; }
CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t *s)
{
	memset(s, 0, sizeof(*s));
	s->num_gpus = 1;
	s->per_gpu_stats[0].n_total_reads = s->per_gpu_stats[0].n_posix_reads = posix_reads;
	s->per_gpu_stats[0].n_total_writes = s->per_gpu_stats[0].n_posix_writes = posix_writes;
	if (nvfs_mode) {
		s->per_gpu_stats[0].n_nvfs_reads = posix_reads;
		s->per_gpu_stats[0].n_posix_reads = 0;
		s->per_gpu_stats[0].n_nvfs_writes = posix_writes;
		s->per_gpu_stats[0].n_posix_writes = 0;
	}
	return OK;
}
#endif
