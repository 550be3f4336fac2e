#include "cache/template_store.h"

#include "cache/cache_error.h"
#include "cache/layout.h"
#include "cache/method_cache.h"
#include "cache/store.h"
#include "cache/template_file.h"
#include "log/log.h"

namespace npucache::cache {
namespace {

TemplateValidity validity(const std::string& graph_key, const SymBindings& binding, const std::string& runtime,
                          const compiler::TemplateSettings& s) {
  return {graph_key, compiler::binding_text(binding), runtime, layout::kFormatVersion, s.device_memory, s.pool_align};
}

}  // namespace

CachedTemplates::CachedTemplates(std::string dir, std::string graph_key, std::string runtime_version)
    : dir_(std::move(dir)), graph_key_(std::move(graph_key)), runtime_(std::move(runtime_version)) {}

std::optional<std::string> CachedTemplates::load(const SymBindings& binding, const compiler::TemplateSettings& settings,
                                                 std::string& why) {
  const TemplateValidity now = validity(graph_key_, binding, runtime_, settings);
  const std::string file = layout::template_file(template_key(now.graph_key, now.binding));
  try {
    if (!Dir::exists(dir_)) return std::nullopt;
    const Dir d = Dir::open(dir_, Safety::cache, Create::no);
    if (!d.stat(layout::kTemplatesDir)) return std::nullopt;
    const Dir t = d.sub(layout::kTemplatesDir, Create::no);
    auto bytes = t.read(file, kMaxTemplateFileBytes);
    if (!bytes) return std::nullopt;
    TemplateRecord r = decode_template_file(*bytes, (t.path() / file).string());
    if (const auto diffs = template_differences(r.validity, now); !diffs.empty()) {
      why = diffs.front();
      for (std::size_t i = 1; i < diffs.size(); ++i) why += "; " + diffs[i];
      return std::nullopt;
    }
    return std::move(r.bytes);
  } catch (const CacheRefused& e) {
    log::debug("capture templates not read: {}", e.what());
  } catch (const CacheError& e) {
    why = std::string("the stored template is damaged (") + e.what() + ")";
  }
  return std::nullopt;
}

void CachedTemplates::save(const SymBindings& binding, const compiler::TemplateSettings& settings,
                           const std::string& bytes) {
  try {
    TemplateRecord r;
    r.validity = validity(graph_key_, binding, runtime_, settings);
    r.fingerprint = compiler::template_fingerprint(compiler::decode_template(bytes));
    r.bytes = bytes;
    const std::string file = layout::template_file(template_key(r.validity.graph_key, r.validity.binding));
    const Store store = Store::open(dir_, Create::yes);
    const Dir t = store.directory().sub(layout::kTemplatesDir, Create::yes);
    t.write(file, encode_template_file(r));
    log::debug("capture template {}/{}/{} saved ({} bytes)", dir_, layout::kTemplatesDir, file, bytes.size());
  } catch (const Error& e) {
    warn_uncached(
        dir_, "templates",
        "could not save a capture template in " + dir_ + " (" + e.what() + "); the next start captures again");
  }
}

}  // namespace npucache::cache
