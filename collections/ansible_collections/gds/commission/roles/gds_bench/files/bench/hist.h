/* Log-linear latency histogram (HdrHistogram-like), one per worker thread.
 * Values are nanoseconds. Below 128 ns every value has its own bucket; above,
 * each power of two is split into 64 linear buckets, so a bucket is never wider
 * than 1/64 (1.6 %) of its value. 2688 buckets cover 0 .. 2^47 ns (39 hours). */
#ifndef GDSBENCH_HIST_H
#define GDSBENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MAX_MSB 46
#define HIST_BUCKETS ((HIST_MAX_MSB - HIST_SUB_BITS + 2) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t min_ns;
	uint64_t max_ns;
	uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_merge(struct hist *dst, const struct hist *src);
/* p in [0, 100]; returns nanoseconds (bucket midpoint clamped to min/max). */
double hist_percentile(const struct hist *h, double p);
double hist_mean(const struct hist *h);
uint64_t hist_bucket_low(unsigned b);
uint64_t hist_bucket_width(unsigned b);

static inline unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	if (msb > HIST_MAX_MSB) {
		msb = HIST_MAX_MSB;
		v = (2ull << HIST_MAX_MSB) - 1;
	}
	shift = msb - HIST_SUB_BITS;
	return (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

static inline void hist_add(struct hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->count++;
	h->sum_ns += v;
	if (v < h->min_ns)
		h->min_ns = v;
	if (v > h->max_ns)
		h->max_ns = v;
}

#endif
