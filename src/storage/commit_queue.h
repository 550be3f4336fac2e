// Commits made off the caller's path: entries served from the remote tier
// are committed to the local store (MethodCache::save, the one commit
// procedure) by a background thread, so a job is ready as soon as it has
// the program and its next start is local. One commit at a time, in the
// order queued, each starting a moment (200 ms) after it was queued, so it
// does not take CPU from the start that queued it; a commit's errors are
// its own to log. The queue is a
// service of the process context (process/context.h), and its thread works
// in that context: it is drained when the context flushes (at exit, or at
// the end of a scope that owns the context), before the statistics'
// counters flush, or by wait_for_commits(), which run what is queued at
// once.
#pragma once

#include "storage/uses.h"

#include <functional>

namespace npucache::storage {

void commit_later(std::function<void()> commit);
// Waits until every queued commit has run.
void wait_for_commits();

}  // namespace npucache::storage
