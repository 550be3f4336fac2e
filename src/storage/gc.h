// Keeping a store within bounds: eviction (gc) by size, age and model,
// the collection of orphaned objects, the persistent size limit a save
// enforces (enforce_limit, called by the commit of new entries), and the
// listing helpers eviction and administration share. Maintenance is the
// storage's duty, as in ccache: the command line and cache administration
// (admin/admin.h) only call it.
//
// Errors: CacheError when the directory holds no cache or cannot be read or
// written, CacheRefused for an unsafe directory; ConfigError for a bad
// argument (a size or an age that is not one, a model the cache lacks).
#pragma once

#include "format/envelope.h"
#include "format/records.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "storage/uses.h"

#include <npucache/error.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npucache::storage {

// An index of npucache's (its magic) whose entries are not all known here.
struct UnreadIndex {
  enum class Cause {
    io,            // not read now (EIO, EMFILE...)
    damaged,       // records or its header fail their checksums
    other_format,  // another cache format's (format/cache_error.h, OtherFormat)
  };
  Cause cause = Cause::damaged;
  std::string model_info;
  std::string path;
  std::string why;  // the error, naming the file
};
// Every readable entry of every index; unreadable indexes in `problems`,
// and in `unread` those of npucache's not read whole (a file that only
// shares an index's name holds no entries). The entries of an unread index
// may use any object: gc then collects none (gc below). Under a sweep
// (`held`), each index is read from its bytes (Store::index).
std::vector<EntryRecord> all_entries(const Store& s, std::vector<std::string>* problems = nullptr,
                                     std::vector<UnreadIndex>* unread = nullptr, const Sweeping* held = nullptr);
// Why gc collects no object and evicts nothing to fit while `unread` holds
// an index, with what to do about it; "" when it holds none.
std::string collection_blocked(const std::vector<UnreadIndex>& unread);
// The bytes of an object's file (0 when it cannot be read).
std::size_t file_size(const Store& s, const std::string& key);
// A file is npucache's when it starts with an envelope magic: damaged
// files of ours are removed with the rest, files that only share the name
// pattern are left alone.
bool is_our_envelope(const Dir& d, const std::string& name, EnvelopeKind kind);
// The objects no entry of `entries` uses, with their file sizes.
std::map<std::string, std::size_t> unreferenced(const Store& s, const std::vector<EntryRecord>& entries);

struct GcResult {
  std::size_t evicted_layouts = 0, evicted_entries = 0, entries = 0;
  std::size_t removed_objects = 0;
  // Of removed_objects: those no entry used before this gc (orphans: left
  // by an evicted index, a crash or a removed index file) and their bytes.
  std::size_t orphaned_objects = 0, orphaned_bytes = 0;
  std::size_t removed_templates = 0;  // of removed objects, or damaged
  // Compiled regions (regions/) damaged, or unused for longer than
  // older_than_s (storage/regions.h: its age is its last use).
  std::size_t removed_regions = 0;
  // What remains: the objects the remaining entries use, and the compiled
  // regions (a size limit bounds the two together; a later format's files
  // are not counted).
  std::size_t remaining_bytes = 0, limit = 0;
  std::size_t region_bytes = 0;
  std::vector<std::string> left;  // files kept, each "<path> (why)": named like npucache's but not, another format's
  std::vector<std::string> problems;  // indexes that could not be read (their entries are not counted)
  // Non-empty when an index of npucache's was not read whole (all_entries):
  // why no object was collected and no entry evicted to fit (the entries
  // it holds may use any object). Explicit evictions (models, older_than_s)
  // still remove their entries; compiled regions, which no entry names,
  // still go by age and to fit.
  std::string blocked;
  // Entries older than older_than_s kept because a running process uses
  // them (storage/live_uses.h), and how many processes' uses were read.
  std::vector<std::string> in_use;
  std::size_t live_processes = 0;
  // What was (with dry_run: would be) removed: entry paths and object files.
  std::vector<std::string> evicted, removed;
};
// Removes compiled regions, then whole layouts (every entry of one
// model_info and world size), each least recently used first, until the
// objects the remaining entries use and the regions fit `limit`; then
// removes objects no entry uses. A layout holding an
// entry in `keep` (just written) is never evicted, even when it alone is
// over the limit. Files named like npucache's that are not, and objects of
// a later cache format, are left (and listed in `left`), as are regions and
// templates of a later format (regions go by age only); unreadable indexes
// are skipped (and listed), and while one of npucache's is not read whole
// no object is collected and no entry evicted to fit (`blocked`).
GcResult gc(const std::string& dir, std::size_t limit, const std::vector<std::string>& keep = {});

// What a gc removes, each optional; with none set it only collects orphaned
// objects (which every gc does).
struct GcOptions {
  std::optional<std::size_t> max_size;  // evict layouts down to this (above)
  // How long to wait for the store lock (writers' commits, another sweep)
  // before giving up with CacheBusy, nothing changed.
  double wait_s = kAdminWaitSeconds;
  // Evict entries last used (saved or served) longer ago, and compiled
  // regions unused (stored or taken by a compile) longer ago.
  std::optional<double> older_than_s;
  // Evict every entry of these models, each named by its class (as
  // model_info begins, "npucache.models.Decoder", or as the model_class
  // component, "npucache::models::Decoder": every pipeline stage's index)
  // or by one model_info. A name no entry has is a ConfigError listing the
  // models there.
  std::vector<std::string> models;
  // Decide what to remove, remove nothing: GcResult lists it (no exclusive
  // lock either, so running jobs do not wait).
  bool dry_run = false;
};
// The selections of `options` together (an entry any of them picks is
// evicted), then the objects no entry uses, as above; `keep` as above.
GcResult gc(const std::string& dir, const GcOptions& options, const std::vector<std::string>& keep = {});

// "90s", "30m", "12h", "7d", "2w": seconds; ConfigError naming the text for
// anything else.
double parse_age(const std::string& text);
// "64M", "1.5G", "1024", "2KiB": bytes; ConfigError (naming the text) for
// anything else, negative, NaN or too large.
std::size_t parse_size(const std::string& text);
// "12.3 MiB"
std::string format_size(std::size_t bytes);

// Whether `e` is of the model `name` (gc's and ls's --model): its class as
// model_info begins or as the model_class component, or its model_info.
bool entry_of_model(const EntryRecord& e, const std::string& name);
// The ConfigError of a --model no entry of `entries` matches (it lists the
// models there).
ConfigError no_such_model(const std::string& name, const std::string& dir, const std::vector<EntryRecord>& entries);
// When an entry was last used (saved or served): the later of stats.json's
// record and its save date (a process's uses and saves reach stats.json
// when it ends, so an entry saved again by a running or killed process
// has its old use there); a date or record more than kDateAheadSeconds
// (format/artifact.h) ahead of now is not trusted (the other alone
// counts); nullopt when neither is known.
std::optional<double> entry_time(const CacheStats& st, const EntryRecord& e);

// The size limit of a cache (process/settings.h: NPUCACHE_MAX_SIZE, the
// cache's npucache.conf, the config.json of earlier versions, the user's
// npucache.conf); `source` receives where it came from. ConfigError for a
// bad setting. The cache's files are read as its other files are (Dir::read:
// no link, none of another user or writable by others, bounded): one that
// is refused is no setting, warned about once per process.
std::optional<std::size_t> max_size(const std::string& dir, std::string* source = nullptr);
// The same where the limit is only shown or applied (stats, gc with no
// argument, a save): a bad setting is warned about once per process and no
// limit applies (`source` empty).
std::optional<std::size_t> max_size_or_warn(const std::string& dir, std::string* source = nullptr);
// Sets it in the cache's npucache.conf (and retires config.json); a refused
// npucache.conf (a link, another user's) is replaced.
void set_max_size(const std::string& dir, std::optional<std::size_t> limit);
// After a write: evicts (gc) when a limit is configured and exceeded.
void enforce_limit(const std::string& dir, const std::vector<std::string>& written);
// The same for a store its caller opened.
void enforce_limit(const Store& store, const std::vector<std::string>& written);

}  // namespace npucache::storage
