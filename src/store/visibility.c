/* SPDX-License-Identifier: BSD-2-Clause */
/* visibility.c: the rule of visibility.h, the only place it is written in
 * C. Which patterns a reader holds is the hub's business; here they are
 * only matched. */
#include "store/visibility.h"

#include "store/store.h"
#include "core/topic.h"

bool visibility_match_any(char *const *patterns, size_t n, const char *topic, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (topic_pattern_match(patterns[i], topic, len))
			return true;
	return false;
}

bool visibility_passes(const struct store_filter *f, const char *topic, size_t len, bool public)
{
	if (!f)
		return true;
	return visibility_wants(f->topics, f->ntopics, topic, len) &&
	       visibility_may_see(f->see_private, f->grants, f->ngrants, topic, len, public);
}
