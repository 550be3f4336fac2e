#include "cache/template_store.h"

#include "cache/method_cache.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "format/template_file.h"
#include "log/log.h"
#include "storage/commit_queue.h"
#include "storage/remote_tier.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "storage/templates.h"

namespace npucache::cache {
namespace {

TemplateValidity validity(const std::string& graph_key, const SymBindings& binding, const std::string& runtime,
                          const compiler::TemplateSettings& s) {
  return {graph_key, compiler::binding_text(binding), runtime, names::kFormatVersion, s.device_memory, s.pool_align};
}

}  // namespace

CachedTemplates::CachedTemplates(std::string dir, std::string graph_key, std::string runtime_version,
                                 std::shared_ptr<RemoteTier> remote, Opener open)
    : dir_(std::move(dir)),
      graph_key_(std::move(graph_key)),
      runtime_(std::move(runtime_version)),
      remote_(std::move(remote)),
      open_(std::move(open)) {
  if (!open_)
    open_ = [d = dir_](Create c) -> std::optional<Store> {
      if (c == Create::no && !Dir::exists(d)) return std::nullopt;
      return Store::open(d, c);
    };
}

std::optional<std::string> CachedTemplates::load(const SymBindings& binding, const compiler::TemplateSettings& settings,
                                                 std::string& why) {
  const TemplateValidity now = validity(graph_key_, binding, runtime_, settings);
  const std::string key = template_key(now.graph_key, now.binding);
  const std::string file = names::template_file(key);
  // The remote tier's copy, checked as a local file is, then kept locally.
  auto from_remote = [&]() -> std::optional<std::string> {
    if (!remote_) return std::nullopt;
    auto bytes = remote_->blob(BlobKind::capture_template, key, dir_);
    if (!bytes) return std::nullopt;
    try {
      TemplateRecord r = decode_template_file(*bytes, "remote capture template " + key);
      if (!template_differences(r.validity, now).empty()) return std::nullopt;
      // Kept locally after the object it goes with, which a remote hit
      // commits off the path to ready on the same queue, before this.
      commit_later([self = *this, key, kept = *bytes] {
        try {
          if (!self.keep_locally(key, kept))
            log::debug("a remote capture template was not kept locally: its object is not stored");
        } catch (const Error& e) {
          log::debug("a remote capture template was not kept locally: {}", e.what());
        }
      });
      return std::move(r.bytes);
    } catch (const Error& e) {
      remote_->failed({remote::Failure::corrupt, e.what()}, dir_, "reading a capture template");
      return std::nullopt;
    }
  };
  try {
    const std::optional<Store> store = open_(Create::no);
    if (!store) return from_remote();
    const Dir& d = store->directory();
    if (!d.stat(names::kTemplatesDir)) return from_remote();
    const Dir t = d.sub(names::kTemplatesDir, Create::no);
    auto bytes = t.read(file, kMaxTemplateFileBytes);
    if (!bytes) return from_remote();
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

void CachedTemplates::note(bool restored, bool recaptured) {
  record_captures(dir_, 0, restored ? 1 : 0, recaptured ? 1 : 0);
}

bool CachedTemplates::keep_locally(const std::string& key, const std::string& sealed) const {
  const Store store = *open_(Create::yes);
  const Writing held = store.writing();
  // Written only while its object is stored (pinned by the hold): a
  // template of an object a sweep removed since it was loaded could never
  // be used.
  if (!store.object_stat(graph_key_)) return false;
  put_template(store, key, sealed, held);
  return true;
}

void CachedTemplates::save(const SymBindings& binding, const compiler::TemplateSettings& settings,
                           const std::string& bytes) {
  refuse_in_dry_run("saving a capture template of " + graph_key_);
  record_captures(dir_, 1, 0, 0);
  try {
    TemplateRecord r;
    r.validity = validity(graph_key_, binding, runtime_, settings);
    r.fingerprint = compiler::template_fingerprint(compiler::decode_template(bytes));
    r.bytes = bytes;
    const std::string file = names::template_file(template_key(r.validity.graph_key, r.validity.binding));
    const std::string sealed = encode_template_file(r);
    if (!keep_locally(template_key(r.validity.graph_key, r.validity.binding), sealed)) {
      log::debug(
          "capture template of {} not saved: its object was removed (gc, clear or verify --repair) since "
          "it was loaded",
          graph_key_);
      return;
    }
    if (remote_)
      remote_->push_blobs(BlobKind::capture_template,
                          {{template_key(r.validity.graph_key, r.validity.binding), sealed}}, remote::Overwrite::yes,
                          dir_);
    log::debug("capture template {}/{}/{} saved ({} bytes)", dir_, names::kTemplatesDir, file, bytes.size());
  } catch (const Error& e) {
    warn_uncached(
        dir_, "templates",
        "could not save a capture template in " + dir_ + " (" + e.what() + "); the next start captures again");
  }
}

}  // namespace npucache::cache
