/* xfer_type 1, CPU only: O_DIRECT pread/pwrite into 4 KiB-aligned host
 * buffers (gdsio's XFER_CPU_ONLY; the same work as fio psync direct=1), or,
 * with --peer-memory, into a PCI device's p2pmem: the kernel's P2PDMA then
 * moves the data between the drive and that device, and refuses a pair it
 * cannot route (the I/O fails with its error, never a bounce). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdint.h>
#include <unistd.h>

#include "gdsbench.h"

#define HUGE_SZ (2u << 20)

/* Large I/O buffers sit in a transparent huge page: physically contiguous
 * memory makes each O_DIRECT request a few DMA segments instead of one per
 * 4 KiB page, so a 1 MiB read is not split at the device's segment limit
 * (virtio-blk: 254). Where THP is off this is just a 2 MiB-aligned buffer. */
/* A shared mapping of p2pmem/allocate hands out pages of the device's memory
 * (drivers/pci/p2pdma.c p2pmem_alloc_mmap); they return to its pool at munmap. */
static int peer_buffer(struct worker *w, size_t len)
{
	int fd = open(w->job->peer_mem, O_RDWR | O_CLOEXEC);
	void *buf;

	if (fd < 0) {
		werr(w, "cannot open peer memory %s: %s", w->job->peer_mem, strerror(errno));
		return -1;
	}
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (buf == MAP_FAILED) {
		werr(w, "cannot map %zu bytes of peer memory %s: %s", len, w->job->peer_mem, strerror(errno));
		return -1;
	}
	w->slots[0].buf = w->slots[0].host = buf;
	w->priv = (void *)(uintptr_t)len;	/* the mapping's length: munmap at exit */
	return 0;
}

static int posix_thread_init(struct worker *w)
{
	size_t io = (size_t)w->job->io_size;
	size_t align = io >= (64u << 10) ? HUGE_SZ : GDS_SECTOR;
	size_t len = (io + align - 1) / align * align;

	w->depth = 1;
	w->slots = calloc(1, sizeof(*w->slots));
	if (w->slots && w->job->peer_mem[0])
		return peer_buffer(w, (io + GDS_SECTOR - 1) / GDS_SECTOR * GDS_SECTOR);
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
	if (w->slots && w->priv)
		munmap(w->slots[0].buf, (size_t)(uintptr_t)w->priv);
	else if (w->slots)
		free(w->slots[0].buf);
	w->priv = NULL;
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
