#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

uint64_t hist_bucket_low(unsigned b)
{
	unsigned shift;

	if (b < 2 * HIST_SUB)
		return b;
	shift = b / HIST_SUB - 1;
	return (uint64_t)(b % HIST_SUB + HIST_SUB) << shift;
}

uint64_t hist_bucket_width(unsigned b)
{
	if (b < 2 * HIST_SUB)
		return 1;
	return 1ull << (b / HIST_SUB - 1);
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	if (src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum_ns / (double)h->count : 0.0;
}

double hist_percentile(const struct hist *h, double p)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0.0;
	if (p <= 0.0)
		return (double)h->min_ns;
	if (p >= 100.0)
		return (double)h->max_ns;
	/* Nearest-rank definition: the smallest value with at least p% at or below it. */
	rank = (uint64_t)((p / 100.0) * (double)h->count + 0.999999999);
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			double v = (double)hist_bucket_low(i) +
				   (double)(hist_bucket_width(i) - 1) / 2.0;

			if (v < (double)h->min_ns)
				v = (double)h->min_ns;
			if (v > (double)h->max_ns)
				v = (double)h->max_ns;
			return v;
		}
	}
	return (double)h->max_ns;
}
