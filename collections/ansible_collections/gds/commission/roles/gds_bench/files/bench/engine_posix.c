/* xfer_type 1, CPU only: O_DIRECT pread/pwrite into 4 KiB-aligned host
 * buffers (gdsio's XFER_CPU_ONLY; the same work as fio psync direct=1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdsbench.h"

#define HUGE_SZ (2u << 20)

/* Large I/O buffers sit in a transparent huge page: physically contiguous
 * memory makes each O_DIRECT request a few DMA segments instead of one per
 * 4 KiB page, so a 1 MiB read is not split at the device's segment limit
 * (virtio-blk: 254). Where THP is off this is just a 2 MiB-aligned buffer. */
static int posix_thread_init(struct worker *w)
{
	size_t io = (size_t)w->job->io_size;
	size_t align = io >= (64u << 10) ? HUGE_SZ : GDS_SECTOR;
	size_t len = (io + align - 1) / align * align;

	w->depth = 1;
	w->slots = calloc(1, sizeof(*w->slots));
	if (!w->slots || posix_memalign(&w->slots[0].buf, align, len) != 0) {
		werr(w, "cannot allocate a %zu-byte aligned buffer", io);
		return -1;
	}
	if (align == HUGE_SZ)
		madvise(w->slots[0].buf, len, MADV_HUGEPAGE);
	w->slots[0].host = w->slots[0].buf;
	return 0;
}

static void posix_thread_exit(struct worker *w)
{
	if (w->slots)
		free(w->slots[0].buf);
	free(w->slots);
	w->slots = NULL;
}

static ssize_t posix_io(struct worker *w, struct slot *s)
{
	ssize_t r = s->write ? pwrite(w->fd, s->buf, s->len, (off_t)s->off)
			     : pread(w->fd, s->buf, s->len, (off_t)s->off);

	return r < 0 ? -errno : r;
}

static const char *posix_strerror(ssize_t res, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror((int)-res));
	return buf;
}

const struct engine engine_posix = {
	.xfer = 1,
	.thread_init = posix_thread_init,
	.thread_exit = posix_thread_exit,
	.io = posix_io,
	.strerror = posix_strerror,
};
