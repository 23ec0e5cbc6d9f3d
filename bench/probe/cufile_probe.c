/* cufile_probe: the smallest program that shows whether N threads of one
 * process move data through cuFile as fast as N processes. Every worker reads
 * (or writes) its own file with cuFileRead/cuFileWrite into its own
 * cudaMalloc buffer registered with cuFileBufRegister, nothing else: no
 * histogram, no verify, no job logic, so that a difference between the two
 * modes belongs to libcufile/CUDA and not to gdsbench.
 *
 *   cufile_probe -m threads|procs -n N (-D DIR | -f FILE) [-o read|write|randread|randwrite]
 *                [-b BYTES] [-s FILE_BYTES] [-T SECONDS] [-E cufile|posix] [-U] [-p NAME=VALUE]...
 *
 * -D DIR: worker k uses DIR/gdsbench.k (the files gdsbench -D writes); -f FILE:
 * every worker uses FILE (random I/O over one file). -E posix moves the same
 * bytes without libcufile: pread/pwrite with O_DIRECT into a pinned host
 * buffer and cudaMemcpyAsync on the worker's own stream, which is what
 * cuFile's compat mode does per op; it separates "one process cannot do it"
 * from "libcufile in one process cannot do it". -U leaves the GPU buffer
 * unregistered. -p sets a cuFile execution parameter (max_io_threads,
 * max_request_parallelism, min_io_threshold_size_kb, parallel_io) before
 * the driver opens.
 *
 * Processes are forked before any CUDA or cuFile call; all workers start
 * together on a process-shared barrier and stop at the same deadline. One
 * JSON line on stdout: mode, workers, op, bytes, seconds, GiB/s, IOPS, mean
 * latency, and each worker's GiB/s. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <cufile.h>

#define MAXW 256

struct wres {
	uint64_t bytes, ops, lat_ns;
	double secs;
	int failed;
	char err[200];
};

struct shared {
	pthread_barrier_t ready;	/* every worker set up */
	pthread_barrier_t go;		/* the parent stamped the deadline */
	uint64_t t_end;
	struct wres w[MAXW];
};

static struct {
	int procs, n, write, rand, posix, unreg;
	size_t bs;
	uint64_t fsize;
	double secs;
	const char *dir, *file;
} o = { .bs = 1 << 20, .secs = 5 };

static struct shared *sh;
static struct { const char *name; int is_bool; int id; size_t v; } params[8];
static int nparams;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t size_arg(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	switch (*end) {
	case 'K': case 'k': v <<= 10; break;
	case 'M': case 'm': v <<= 20; break;
	case 'G': case 'g': v <<= 30; break;
	case 0: break;
	default: fprintf(stderr, "cufile_probe: bad size %s\n", s); exit(2);
	}
	return v;
}

static int fail(struct wres *r, const char *what, int code)
{
	snprintf(r->err, sizeof(r->err), "%s: %d", what, code);
	r->failed = 1;
	return -1;
}

static int driver_open(struct wres *r)
{
	/* looked up at run time: libcufile before 1.9 has no parameter API */
	CUfileError_t (*set_b)(CUFileBoolConfigParameter_t, bool) =
		(CUfileError_t (*)(CUFileBoolConfigParameter_t, bool))dlsym(RTLD_DEFAULT, "cuFileSetParameterBool");
	CUfileError_t (*set_s)(CUFileSizeTConfigParameter_t, size_t) =
		(CUfileError_t (*)(CUFileSizeTConfigParameter_t, size_t))dlsym(RTLD_DEFAULT, "cuFileSetParameterSizeT");

	for (int i = 0; i < nparams; i++) {
		CUfileError_t e = { CU_FILE_INTERNAL_ERROR, 0 };

		if (params[i].is_bool && set_b)
			e = set_b((CUFileBoolConfigParameter_t)params[i].id, params[i].v != 0);
		else if (!params[i].is_bool && set_s)
			e = set_s((CUFileSizeTConfigParameter_t)params[i].id, params[i].v);
		if (e.err != CU_FILE_SUCCESS)
			return fail(r, params[i].name, e.err);
	}
	if (!o.posix) {
		CUfileError_t e = cuFileDriverOpen();

		if (e.err != CU_FILE_SUCCESS)
			return fail(r, "cuFileDriverOpen", e.err);
	}
	return 0;
}

/* What one worker holds: its file, GPU buffer, and (-E posix) pinned bounce and stream. */
struct wstate {
	int fd;
	uint64_t blocks;
	void *dev, *host;
	cudaStream_t st;
	CUfileHandle_t fh;
};

/* Worker k's file, GPU buffer and cuFile handle (or, -E posix, its bounce buffer and stream);
 * 0, or -1 with the reason in r. */
static int worker_setup(int k, struct wres *r, struct wstate *w)
{
	char path[4096];
	CUfileDescr_t d;
	CUfileError_t e;

	if (o.file)
		snprintf(path, sizeof(path), "%s", o.file);
	else
		snprintf(path, sizeof(path), "%s/gdsbench.%d", o.dir, k);
	w->fd = open(path, (o.write ? O_RDWR : O_RDONLY) | O_DIRECT);
	if (w->fd < 0)
		return fail(r, "open", errno);
	if (!o.fsize) {
		struct stat sb;

		fstat(w->fd, &sb);
		o.fsize = (uint64_t)sb.st_size;
	}
	w->blocks = o.fsize / o.bs;
	if (!w->blocks)
		return fail(r, "file smaller than one block", 0);
	if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&w->dev, o.bs) != cudaSuccess)
		return fail(r, "cudaMalloc", 0);
	if (o.posix) {
		if (cudaMallocHost(&w->host, o.bs) != cudaSuccess ||
		    cudaStreamCreateWithFlags(&w->st, cudaStreamNonBlocking) != cudaSuccess)
			return fail(r, "cudaMallocHost/stream", 0);
		return 0;
	}
	memset(&d, 0, sizeof(d));
	d.handle.fd = w->fd;
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	e = cuFileHandleRegister(&w->fh, &d);
	if (e.err != CU_FILE_SUCCESS)
		return fail(r, "cuFileHandleRegister", e.err);
	if (!o.unreg && (e = cuFileBufRegister(w->dev, o.bs, 0)).err != CU_FILE_SUCCESS)
		return fail(r, "cuFileBufRegister", e.err);
	return 0;
}

/* One op at off: cuFileRead/Write, or (-E posix) pread/pwrite plus the copy compat mode does. */
static ssize_t one_op(struct wstate *w, uint64_t off)
{
	ssize_t n;

	if (!o.posix)
		return o.write ? cuFileWrite(w->fh, w->dev, o.bs, (off_t)off, 0) : cuFileRead(w->fh, w->dev, o.bs, (off_t)off, 0);
	if (o.write) {
		if (cudaMemcpyAsync(w->host, w->dev, o.bs, cudaMemcpyDeviceToHost, w->st) != cudaSuccess ||
		    cudaStreamSynchronize(w->st) != cudaSuccess)
			return -1;
		return pwrite(w->fd, w->host, o.bs, (off_t)off);
	}
	n = pread(w->fd, w->host, o.bs, (off_t)off);
	if (n > 0 && (cudaMemcpyAsync(w->dev, w->host, (size_t)n, cudaMemcpyHostToDevice, w->st) != cudaSuccess ||
		      cudaStreamSynchronize(w->st) != cudaSuccess))
		return -1;
	return n;
}

static void worker_teardown(struct wstate *w, int ok)
{
	if (w->fh)
		cuFileHandleDeregister(w->fh);
	if (w->dev && !o.posix && !o.unreg && ok)
		cuFileBufDeregister(w->dev);
	if (w->dev)
		cudaFree(w->dev);
	if (w->host)
		cudaFreeHost(w->host);
	if (w->st)
		cudaStreamDestroy(w->st);
	if (w->fd >= 0)
		close(w->fd);
}

/* One worker: set up, meet the others, move data until the deadline. */
static void worker(int k)
{
	struct wres *r = &sh->w[k];
	struct wstate w = { .fd = -1 };
	uint64_t seq = 0, rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1), t0, t;
	int ok = worker_setup(k, r, &w) == 0;

	pthread_barrier_wait(&sh->ready);
	pthread_barrier_wait(&sh->go);
	t0 = now_ns();
	while (ok && (t = now_ns()) < sh->t_end) {
		uint64_t blk;
		ssize_t n;

		if (o.rand) {
			rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
			blk = rng % w.blocks;
		} else {
			blk = seq++ % w.blocks;
		}
		n = one_op(&w, blk * o.bs);
		if (n != (ssize_t)o.bs) {
			fail(r, o.write ? "write" : "read", n < 0 ? errno : (int)n);
			break;
		}
		r->lat_ns += now_ns() - t;
		r->bytes += o.bs;
		r->ops++;
	}
	r->secs = (double)(now_ns() - t0) / 1e9;
	worker_teardown(&w, ok);
}

static void *thread_main(void *arg)
{
	worker((int)(intptr_t)arg);
	return NULL;
}

static void param(const char *spec)
{
	static const struct { const char *name; int is_bool; int id; } known[] = {
		{ "max_io_threads", 0, CUFILE_PARAM_EXECUTION_MAX_IO_THREADS },
		{ "max_request_parallelism", 0, CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM },
		{ "min_io_threshold_size_kb", 0, CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB },
		{ "max_io_queue_depth", 0, CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH },
		{ "parallel_io", 1, CUFILE_PARAM_EXECUTION_PARALLEL_IO },
	};
	const char *eq = strchr(spec, '=');

	for (size_t i = 0; eq && nparams < 8 && i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].name) == (size_t)(eq - spec) && !strncmp(spec, known[i].name, (size_t)(eq - spec))) {
			params[nparams].name = known[i].name;
			params[nparams].is_bool = known[i].is_bool;
			params[nparams].id = known[i].id;
			params[nparams++].v = !strcmp(eq + 1, "true") ? 1 : strtoull(eq + 1, NULL, 10);
			return;
		}
	fprintf(stderr, "cufile_probe: -p %s: unknown parameter\n", spec);
	exit(2);
}

/* The options into o; the op's name (read, write, randread, randwrite). Exits 2 on a bad one. */
static const char *parse_args(int argc, char **argv)
{
	const char *op = "read";
	int c;

	while ((c = getopt(argc, argv, "m:n:D:f:o:b:s:T:E:Up:")) != -1) {
		switch (c) {
		case 'm': o.procs = !strcmp(optarg, "procs"); break;
		case 'n': o.n = atoi(optarg); break;
		case 'D': o.dir = optarg; break;
		case 'f': o.file = optarg; break;
		case 'o': op = optarg; break;
		case 'b': o.bs = (size_t)size_arg(optarg); break;
		case 's': o.fsize = size_arg(optarg); break;
		case 'T': o.secs = atof(optarg); break;
		case 'E': o.posix = !strcmp(optarg, "posix"); break;
		case 'U': o.unreg = 1; break;
		case 'p': param(optarg); break;
		default: exit(2);
		}
	}
	o.write = strstr(op, "write") != NULL;
	o.rand = !strncmp(op, "rand", 4);
	if (o.n < 1 || o.n > MAXW || (!o.dir == !o.file)) {
		fprintf(stderr, "usage: cufile_probe -m threads|procs -n N (-D DIR | -f FILE) [-o OP] [-b BYTES] "
				"[-s BYTES] [-T S] [-E cufile|posix] [-U] [-p NAME=VALUE]\n");
		exit(2);
	}
	return op;
}

/* The workers as processes (each opens its own driver after the fork) or as threads of this
 * process (one driver). -1 when this process's driver did not open. */
static int start_workers(pid_t *pid, pthread_t *tid)
{
	struct wres parent = { 0 };

	if (!o.procs) {
		if (driver_open(&parent) != 0) {
			fprintf(stderr, "cufile_probe: %s\n", parent.err);
			return -1;
		}
		for (int k = 0; k < o.n; k++)
			pthread_create(&tid[k], NULL, thread_main, (void *)(intptr_t)k);
		return 0;
	}
	for (int k = 0; k < o.n; k++) {
		pid[k] = fork();
		if (pid[k] != 0)
			continue;
		if (driver_open(&sh->w[k]) != 0) {
			pthread_barrier_wait(&sh->ready);
			pthread_barrier_wait(&sh->go);
			_exit(1);
		}
		worker(k);
		if (!o.posix)
			cuFileDriverClose();
		_exit(0);
	}
	return 0;
}

/* The JSON line; the number of workers that failed (each named on stderr). */
static int report(const char *op)
{
	uint64_t bytes = 0, ops = 0, lat = 0;
	double secs = 0;
	int failed = 0;

	printf("{\"mode\": \"%s\", \"engine\": \"%s\", \"registered\": %s, \"workers\": %d, \"op\": \"%s\", "
	       "\"io_bytes\": %zu, \"per_worker_gib_s\": [",
	       o.procs ? "procs" : "threads", o.posix ? "posix" : "cufile", o.posix || o.unreg ? "false" : "true",
	       o.n, op, o.bs);
	for (int k = 0; k < o.n; k++) {
		struct wres *r = &sh->w[k];

		bytes += r->bytes;
		ops += r->ops;
		lat += r->lat_ns;
		if (r->secs > secs)
			secs = r->secs;
		if (r->failed) {
			failed++;
			fprintf(stderr, "cufile_probe: worker %d: %s\n", k, r->err);
		}
		printf("%s%.3f", k ? ", " : "", r->secs > 0 ? (double)r->bytes / r->secs / (1 << 30) : 0.0);
	}
	printf("], \"params\": \"");
	for (int i = 0; i < nparams; i++)
		printf("%s%s=%zu", i ? " " : "", params[i].name, params[i].v);
	printf("\", \"bytes\": %llu, \"seconds\": %.3f, \"gib_s\": %.3f, \"iops\": %.0f, \"lat_us\": %.1f, "
	       "\"failed_workers\": %d}\n",
	       (unsigned long long)bytes, secs, secs > 0 ? (double)bytes / secs / (1 << 30) : 0.0,
	       secs > 0 ? (double)ops / secs : 0.0, ops ? (double)lat / (double)ops / 1e3 : 0.0, failed);
	return failed;
}

int main(int argc, char **argv)
{
	pthread_barrierattr_t ba;
	pthread_t tid[MAXW];
	pid_t pid[MAXW];
	const char *op = parse_args(argc, argv);

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->ready, &ba, (unsigned)o.n + 1);
	pthread_barrier_init(&sh->go, &ba, (unsigned)o.n + 1);
	if (start_workers(pid, tid) != 0)
		return 1;
	pthread_barrier_wait(&sh->ready);
	sh->t_end = now_ns() + (uint64_t)(o.secs * 1e9);
	pthread_barrier_wait(&sh->go);
	for (int k = 0; k < o.n; k++) {
		if (o.procs)
			waitpid(pid[k], NULL, 0);
		else
			pthread_join(tid[k], NULL);
	}
	if (!o.procs && !o.posix)
		cuFileDriverClose();
	return report(op) ? 1 : 0;
}
