#include "storage/templates.h"

#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"

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
      if (template_key(t.record->validity.graph_key, t.record->validity.binding) != key)
        throw CacheError(t.path + " is damaged: its name is not its content's key");
      if (with_bytes) t.raw = std::move(*bytes);
    } catch (const CacheRefused&) {
      throw;
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
    if (t.ours && (!t.record || !objects.count(t.record->validity.graph_key))) {
      remove_template(s, t.key, held);
      ++removed;
    }
  if (const auto d = templates_dir(s, Create::no)) d->remove_stale_temps();
  return removed;
}

void put_template(const Store& s, const std::string& key, const std::string& file_bytes, const StoreLock&) {
  const TemplateRecord r = decode_template_file(file_bytes, "template " + key);
  if (template_key(r.validity.graph_key, r.validity.binding) != key)
    throw CacheError("template " + key + " is not named by its content's key");
  templates_dir(s, Create::yes)->write(names::template_file(key), file_bytes);
}

}  // namespace npucache::storage
