/* Verify pattern. Every 4 KiB sector of a file written by gdsbench holds a
 * 16-byte header (magic + the sector's own file offset) and a fixed
 * pseudo-random body. The header makes a block written to or read from the
 * wrong place fail the check; the body catches corrupted data. Stamping only
 * rewrites the headers (io_size/4096 stores per op), so writes always carry the
 * pattern at no measurable cost and any later read can be verified. */
#include <string.h>

#include "gdsbench.h"

#define PATTERN_MAGIC 0x31484e4253444721ull /* "!GDSBNH1" little-endian */

static uint64_t tmpl[GDS_SECTOR / 8];

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void pattern_init(void)
{
	uint64_t x = 0x67647362656e6368ull;

	for (size_t i = 0; i < GDS_SECTOR / 8; i++)
		tmpl[i] = splitmix64(&x);
}

static inline void stamp_one(unsigned char *p, uint64_t off)
{
	uint64_t hdr[2] = { PATTERN_MAGIC, off };

	memcpy(p, hdr, sizeof(hdr));
}

/* Full fill: body template + headers. len and off need not be sector
 * aligned; only whole sectors at sector-aligned file offsets are stamped. */
void pattern_fill(void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;

	for (size_t done = 0; done < len;) {
		uint64_t pos = off + done;
		size_t in = (size_t)(pos % GDS_SECTOR);
		size_t n = GDS_SECTOR - in;

		if (n > len - done)
			n = len - done;
		memcpy(p + done, (const unsigned char *)tmpl + in, n);
		done += n;
	}
	pattern_stamp(buf, len, off);
}

void pattern_stamp(void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;

	if (off % GDS_SECTOR || len % GDS_SECTOR)
		return;
	for (size_t i = 0; i < len; i += GDS_SECTOR)
		stamp_one(p + i, off + i);
}

/* Returns the number of bad sectors; *first_bad gets the first one's file offset. */
uint64_t pattern_check(const void *buf, size_t len, uint64_t off, uint64_t *first_bad)
{
	const unsigned char *p = buf;
	uint64_t bad = 0;

	for (size_t i = 0; i + GDS_SECTOR <= len; i += GDS_SECTOR) {
		uint64_t hdr[2];

		memcpy(hdr, p + i, sizeof(hdr));
		if (hdr[0] != PATTERN_MAGIC || hdr[1] != off + i ||
		    memcmp(p + i + 16, (const unsigned char *)tmpl + 16, GDS_SECTOR - 16) != 0) {
			if (!bad && first_bad)
				*first_bad = off + i;
			bad++;
		}
	}
	return bad;
}
