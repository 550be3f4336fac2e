#include "storage/templates.h"

#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "log/log.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace npucache::storage {
namespace {

std::optional<Dir> templates_dir(const Store& s, Create create) {
  if (create == Create::no && !s.directory().stat(names::kTemplatesDir)) return std::nullopt;
  return s.directory().sub(names::kTemplatesDir, create);
}

}  // namespace

std::vector<StoredTemplate> stored_templates(const Store& s, bool with_bytes) {
  std::vector<StoredTemplate> out;
  const auto d = templates_dir(s, Create::no);
  if (!d) return out;
  for (const auto& name : d->list()) {
    const std::string key = names::template_key_of(name);
    if (key.empty()) continue;
    StoredTemplate t;
    t.key = key;
    t.path = (d->path() / name).string();
    const auto head = d->head(name, 8);
    if (!head) continue;
    if (!has_magic(EnvelopeKind::capture_template, *head)) {
      t.ours = false;
      t.damage = t.path + " is not an npucache capture template (or its header is damaged)";
      out.push_back(std::move(t));
      continue;
    }
    try {
      auto bytes = d->read(name, kMaxTemplateFileBytes);
      if (!bytes) continue;
      t.bytes = bytes->size();
      t.record = decode_template_file(*bytes, t.path);
      if (!names_template(key, t.record->validity))
        throw CacheError(t.path + " is damaged: its name is not its content's key");
      if (with_bytes) t.raw = std::move(*bytes);
    } catch (const CacheRefused&) {
      throw;
    } catch (const format::OtherFormat& e) {
      t.record.reset();
      t.other_format = e.what();
    } catch (const IoError& e) {  // unknown, not damaged
      t.record.reset();
      t.unread = e.what();
    } catch (const CacheError& e) {
      t.record.reset();
      t.damage = e.what();
    }
    out.push_back(std::move(t));
  }
  return out;
}

void remove_template(const Store& s, const std::string& key, const Sweeping&) {
  if (const auto d = templates_dir(s, Create::no)) d->remove(names::template_file(key));
}

std::size_t sweep_templates(const Store& s, const std::set<std::string>& objects, const Sweeping& held) {
  std::size_t removed = 0;
  for (const auto& t : stored_templates(s))
    if (t.ours && t.other_format.empty() && t.unread.empty() &&
        (!t.record || !objects.count(t.record->validity.graph_key))) {
      remove_template(s, t.key, held);
      ++removed;
    }
  if (const auto d = templates_dir(s, Create::no)) d->remove_stale_temps();
  return removed;
}

namespace {

// The template keys of one templates/ folder by template key part, as one
// scan saw them, and the folder's modification time then: a miss reads
// this process's copy while the folder's time is unchanged (a name added
// or removed since changes it), so a start with thousands of templates
// lists the folder once per change, not once per miss.
struct Listing {
  std::mutex mu;
  std::string path;
  int64_t mtime_ns = -1;
  std::map<std::string, std::vector<std::string>> by_part;
};
// Never destroyed: a commit drained at exit (the commit queue's thread)
// may list templates after static destructors ran.
Listing& listing() {
  static Listing* l = new Listing;
  return *l;
}

std::map<std::string, std::vector<std::string>> scan(const Dir& d) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& name : d.list()) {
    const std::string k = names::template_key_of(name);
    if (!k.empty()) out[template_key_part(k)].push_back(k);
  }
  return out;
}

std::vector<std::string> siblings_in(const std::map<std::string, std::vector<std::string>>& by_part,
                                     const std::string& key) {
  std::vector<std::string> out;
  const auto it = by_part.find(template_key_part(key));
  if (it == by_part.end()) return out;
  for (const auto& k : it->second)
    if (k != key) out.push_back(k);
  return out;
}

// `fresh`: scanned now whatever the copy (the bound on variants counts
// what is there); else the copy while the folder is unchanged.
std::vector<std::string> siblings(const Store& s, const std::string& key, bool fresh) {
  const auto info = s.directory().stat(names::kTemplatesDir);
  if (!info) return {};
  const Dir d = s.directory().sub(names::kTemplatesDir, Create::no);
  Listing& l = listing();
  std::lock_guard lock(l.mu);
  const std::string path = d.path().string();
  if (fresh || l.path != path || l.mtime_ns != info->mtime_ns) {
    l.by_part = scan(d);
    l.path = path;
    l.mtime_ns = info->mtime_ns;
  }
  return siblings_in(l.by_part, key);
}

}  // namespace

std::vector<std::string> template_siblings(const Store& s, const std::string& key) { return siblings(s, key, false); }

void touch_template(const Dir& templates, const std::string& key) {
  const std::string name = names::template_file(key);
  if (::utimensat(templates.fd(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0)
    log::debug("capture template {} not marked used: {}", key, std::strerror(errno));
}

void put_template(const Store& s, const std::string& key, const std::string& file_bytes, const StoreLock&) {
  const TemplateRecord r = decode_template_file(file_bytes, "template " + key);
  if (!names::valid_template_key(key) || !names_template(key, r.validity))
    throw CacheError("template " + key + " is not named by its content's key");
  const Dir d = *templates_dir(s, Create::yes);
  d.write(names::template_file(key), file_bytes);
  // The bound: the least recently used (restored or written) others go (a removal under the
  // shared hold costs at most a capture: a template is never needed).
  std::vector<std::pair<int64_t, std::string>> others;
  for (const auto& k : siblings(s, key, true))
    if (const auto info = d.stat(names::template_file(k))) others.emplace_back(info->mtime_ns, k);
  if (others.size() < kMaxTemplateVariants) return;
  std::sort(others.begin(), others.end());
  for (std::size_t i = 0; i + kMaxTemplateVariants <= others.size(); ++i) {
    d.remove(names::template_file(others[i].second));
    log::info("capture template {} removed: {} variants of its program and sizes are kept (devices or runtimes)",
              others[i].second, kMaxTemplateVariants);
  }
}

}  // namespace npucache::storage
