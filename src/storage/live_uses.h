// The entries running processes use, for gc beside them. A process's hits
// reach stats.json only when it flushes (at its end), so a gc by age or to
// fit, run while a job or a server lives, saw an entry it had loaded as
// unused since its last recorded use, and evicted it (the job went on with
// the program in memory; its next start compiled).
//
// Each process that serves a hit from a cache directory, or saves an
// entry there (its save date is its own clock's, which may be behind a
// gc's), keeps one file there, locks/uses.<host>.<pid>.<random>.lock
// (docs/FORMAT.md, "Locks"), holding its exclusive lock for as long as it
// lives, and appends the path of each entry it serves or saves (once, one
// per line; one write per new entry).
// A gc (under the sweep lock) reads every such file whose lock is held and
// takes its entries as used now; a file whose lock it can take belongs to
// a process that is gone (killed: a normal end removes its own), and a
// sweep removes it. `clear` treats them as the other lock files: a held
// one stays, in use. The lock is the liveness test, so a process of another
// pid namespace or host on a shared file system counts the same way.
#pragma once

#include "storage/uses.h"

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace npucache::storage {

class Sweeping;
class Store;

// Records that this process uses `entries` of `s` (a hit, a save):
// appended to its uses file there, made and locked on its first call for
// the store. Never fails a cache operation: a file system that fails (an
// I/O error, full) is warned about once per store, anything else logged at
// debug level; a dry run (process/dry_run.h) records nothing.
void note_live_use(const Store& s, const std::vector<std::string>& entries);

struct LiveUses {
  std::set<std::string> entries;  // entry paths some running process uses
  std::size_t processes = 0;      // uses files whose lock is held
  std::size_t removed = 0;        // files of gone processes removed (with `held`)
};
// Reads the uses files of `s`: at most kMaxUsesFiles files and the first
// kMaxUsesBytes of each (complete lines only). With `held` (a sweep), the
// files of gone processes are removed.
LiveUses live_uses(const Store& s, const Sweeping* held);

inline constexpr std::size_t kMaxUsesFiles = 4096;
inline constexpr std::size_t kMaxUsesBytes = 1 << 20;

}  // namespace npucache::storage
