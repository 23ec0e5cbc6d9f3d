/* The benchmark's vocabulary, one table each: the transfer types (gdsio's numbers) with their
 * capability flags, the I/O types and the size units. The rest of gdsbench decides by these
 * tables (a flag, never a list of numbers, as fio's engines carry flags), and
 * `gdsbench --capabilities --json` prints them (report.c); the collection's Python copy
 * (plugins/module_utils/measure/gdsbench_vocab.py) is generated from that output (`make
 * capabilities` at the repository root). Every build has the whole vocabulary, with or without
 * CUDA: which types a build can run is engines.c's business. */
#include <ctype.h>
#include <string.h>

#include "gdsbench.h"

static const struct flag_info flags[] = {
	{ ENG_GPU, "gpu", "needs the CUDA runtime and a GPU; its buffers are GPU memory" },
	{ ENG_CUFILE, "cufile", "goes through libcufile: the I/O path (path.mode) comes from cuFile's statistics" },
	{ ENG_ODIRECT, "odirect", "files opened with O_DIRECT (4 KiB alignment); without it the page cache serves" },
	{ ENG_QUEUED, "queued", "keeps -B ops in flight per thread (submit and reap)" },
	{ ENG_IOQUEUE, "cufile_queue", "its ops in flight occupy cuFile's I/O queue (execution.max_io_queue_depth, per process)" },
};

/* indexed by gdsio's number; an entry with refused set is gdsio's but not run here */
static const struct xfer_type xfer_types[] = {
	{ 0, "GPUD", "GPU direct: cuFileRead/cuFileWrite, registered cudaMalloc buffers",
	  ENG_GPU | ENG_CUFILE | ENG_ODIRECT, 0, NULL },
	{ 1, "CPUONLY", "CPU only: O_DIRECT pread/pwrite, 4 KiB-aligned host buffers", ENG_ODIRECT, 0, NULL },
	{ 2, "CPU_GPU", "CPU then GPU: O_DIRECT into pinned host memory, cudaMemcpyAsync to the GPU",
	  ENG_GPU | ENG_ODIRECT, 0, NULL },
	{ 3, "CPU_ASYNC_GPU", "CPU then GPU through managed memory", 0, 0,
	  "is not supported (managed memory); use 2, 4 or a cuFile type" },
	{ 4, "CPU_CACHED_GPU", "page cache then GPU: buffered pread into pinned host memory, cudaMemcpyAsync",
	  ENG_GPU, 0, NULL },
	{ 5, "GPUD_ASYNC", "GPU direct, cuFile stream API: cuFileReadAsync/WriteAsync on -B registered streams",
	  ENG_GPU | ENG_CUFILE | ENG_ODIRECT | ENG_QUEUED, 8, NULL },
	{ 6, "GPU_BATCH", "GPU direct, cuFile batch API: -B entries per thread in batches on several handles",
	  ENG_GPU | ENG_CUFILE | ENG_ODIRECT | ENG_QUEUED | ENG_IOQUEUE, 4, NULL },
	{ 7, "GPU_BATCH_STREAM", "cuFile batch API on a CUDA stream", 0, 0,
	  "is not supported; use 6 (batch) or 5 (stream)" },
};

_Static_assert(sizeof(xfer_types) / sizeof(xfer_types[0]) == GDS_XFER_TYPES, "one entry per number");

static const struct io_type_info io_types[] = {
	{ IO_READ, "read", "READ" },
	{ IO_WRITE, "write", "WRITE" },
	{ IO_RANDREAD, "randread", "RANDREAD" },
	{ IO_RANDWRITE, "randwrite", "RANDWRITE" },
};

/* binary multiples; a unit may be followed by i and then B, in either case (4K, 4KiB, 4kb) */
static const struct size_unit size_units[] = {
	{ 'K', 10 }, { 'M', 20 }, { 'G', 30 }, { 'T', 40 },
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const struct xfer_type *xfer_type(int xfer)
{
	return xfer >= 0 && xfer < COUNT(xfer_types) ? &xfer_types[xfer] : NULL;
}

int xfer_type_count(void)
{
	return COUNT(xfer_types);
}

/* "0 GPUD, 5 GPUD_ASYNC, ...": the types gdsbench runs that have every flag of need, for messages */
const char *xfer_type_list(unsigned need, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (int i = 0; i < COUNT(xfer_types) && o < len; i++)
		if (!xfer_types[i].refused && (xfer_types[i].flags & need) == need)
			o += (size_t)snprintf(buf + o, len - o, "%s%d %s", o ? ", " : "", i, xfer_types[i].name);
	return buf;
}

const struct io_type_info *io_type(int t)
{
	return t >= 0 && t < COUNT(io_types) ? &io_types[t] : NULL;
}

int io_type_count(void)
{
	return COUNT(io_types);
}

int io_type_find(const char *key)
{
	for (int i = 0; i < COUNT(io_types); i++)
		if (!strcmp(key, io_types[i].key))
			return i;
	return -1;
}

/* the multiplier of a unit letter (either case), 0 when it is none */
uint64_t size_unit_mult(int c)
{
	for (int i = 0; i < COUNT(size_units); i++)
		if (toupper(c) == size_units[i].letter)
			return 1ull << size_units[i].shift;
	return 0;
}

const struct flag_info *flag_info_at(int i)
{
	return i >= 0 && i < COUNT(flags) ? &flags[i] : NULL;
}

const struct size_unit *size_unit_at(int i)
{
	return i >= 0 && i < COUNT(size_units) ? &size_units[i] : NULL;
}
