// Administration of capture templates (templates/<key>.h5): reading every
// template of a store, and removing those whose program is gone. Used by
// verify, gc, clear, stats, readable and export/import (admin.h).
#pragma once

#include "format/template_file.h"
#include "storage/store.h"
#include "storage/uses.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace npucache::storage {

struct StoredTemplate {
  std::string key;   // the file's template key
  std::string path;  // the file, for messages
  std::size_t bytes = 0;
  std::optional<TemplateRecord> record;  // unset: damaged (`damage` says how)
  std::string damage;
  bool ours = true;  // starts with the template magic (else foreign, or its header damaged)
  // Another cache format's file (format/cache_error.h, OtherFormat): not
  // damaged; gc and verify --repair leave it, clear removes it.
  std::string other_format;
  // Reading it failed (dir.h, IoError): unknown, not damaged; nothing
  // removes it for that.
  std::string unread;
  std::string raw;  // the file's bytes (with_bytes)
};

// Every file of templates/ named like a template (nothing when the folder
// is missing); one without the template magic is listed as damaged and not
// `ours` (gc and clear leave it, verify reports it).
std::vector<StoredTemplate> stored_templates(const Store& s, bool with_bytes = false);
// Removes one template file (its key).
void remove_template(const Store& s, const std::string& key, const Sweeping& held);
// Removes the templates whose graph key is not in `objects` (their program
// is gone) and the damaged ones; returns how many were removed.
std::size_t sweep_templates(const Store& s, const std::set<std::string>& objects, const Sweeping& held);
// Writes a template file exactly as given (import, a capture), after
// checking it. Keeps at most kMaxTemplateVariants files of one template key
// (program and sizes; the variants for other devices and runtimes, and an
// earlier build's file): writing one more removes the least recently
// used others (by modification time, which a restore sets), so a fleet of many device kinds,
// or a hostile one, cannot grow a program's templates without bound.
void put_template(const Store& s, const std::string& key, const std::string& file_bytes, const StoreLock& held);
inline constexpr std::size_t kMaxTemplateVariants = 4;
// The stored keys of the other files of `key`'s template key (variants and
// an earlier build's file), without reading them; from this process's copy of
// the folder's names while the folder is unchanged.
std::vector<std::string> template_siblings(const Store& s, const std::string& key);

// Marks a template file used (its modification time, now) so that the bound
// on variants removes the least recently used; never follows a link, and a
// failure is harmless (the file may go first).
void touch_template(const Dir& templates, const std::string& key);

}  // namespace npucache::storage
