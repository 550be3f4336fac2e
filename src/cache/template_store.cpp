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
  const std::string key = variant_key(now), legacy = template_key(now.graph_key, now.binding);
  auto differences = [](const std::vector<std::string>& diffs) {
    std::string s = diffs.front();
    for (std::size_t i = 1; i < diffs.size(); ++i) s += "; " + diffs[i];
    return s;
  };
  // The remote tier's copy (the variant's record, or an earlier build's
  // under the template key), checked as a local file is, then kept locally
  // under the variant's name.
  auto from_remote = [&](BlobKind kind, const std::string& name) -> std::optional<std::string> {
    if (!remote_) return std::nullopt;
    auto bytes = remote_->blob(kind, name, dir_);
    if (!bytes) return std::nullopt;
    try {
      TemplateRecord r = decode_template_file(*bytes, "remote capture template " + name);
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
    std::optional<Dir> t;
    if (store && store->directory().stat(names::kTemplatesDir))
      t = store->directory().sub(names::kTemplatesDir, Create::no);
    // The local files first (no remote call when one serves): this
    // variant's file (this device and runtime), valid when its name is;
    // restoring it marks it used (its modification time: the bound on
    // variants removes the least recently used).
    if (t)
      if (auto bytes = t->read(names::template_file(key), kMaxTemplateFileBytes)) {
        TemplateRecord r = decode_template_file(*bytes, (t->path() / names::template_file(key)).string());
        if (const auto diffs = template_differences(r.validity, now); !diffs.empty()) {
          why = differences(diffs);
          return std::nullopt;
        }
        touch_template(*t, key);
        return std::move(r.bytes);
      }
    // An earlier build's file of the program and sizes: used when valid for
    // now, else it says why this one captures.
    if (t)
      if (auto bytes = t->read(names::template_file(legacy), kMaxTemplateFileBytes)) {
        try {
          TemplateRecord r = decode_template_file(*bytes, (t->path() / names::template_file(legacy)).string());
          const auto diffs = template_differences(r.validity, now);
          if (diffs.empty()) return std::move(r.bytes);
          why = differences(diffs);
        } catch (const CacheRefused&) {
          throw;
        } catch (const CacheError& e) {
          why = std::string("the stored template is damaged (") + e.what() + ")";
        }
      }
    // One remote call: the variant's record.
    if (auto r = from_remote(BlobKind::template_variant, key)) return r;
    // Why it captures: another variant's file (another device's), the most
    // recently used one only, from the names of this key alone.
    if (t && why.empty()) {
      std::vector<std::string> others = template_siblings(*store, key);
      std::erase(others, legacy);
      std::optional<std::pair<int64_t, std::string>> newest;
      for (const auto& k : others)
        if (const auto info = t->stat(names::template_file(k)))
          if (!newest || info->mtime_ns > newest->first) newest = std::make_pair(info->mtime_ns, k);
      if (newest)
        if (auto bytes = t->read(names::template_file(newest->second), kMaxTemplateFileBytes)) try {
            const TemplateRecord r =
                decode_template_file(*bytes, (t->path() / names::template_file(newest->second)).string());
            // Valid for now under another's name: planted, never used.
            if (auto diffs = template_differences(r.validity, now); !diffs.empty()) why = differences(diffs);
          } catch (const CacheRefused&) {
            throw;
          } catch (const CacheError&) {
            // another device's damaged file is not this one's reason
          }
    }
  } catch (const CacheRefused& e) {
    log::debug("capture templates not read: {}", e.what());
  } catch (const CacheError& e) {
    why = std::string("the stored template is damaged (") + e.what() + ")";
  }
  return std::nullopt;
}

void CachedTemplates::note(bool restored, bool recaptured, const std::string& cause) {
  record_captures(dir_, 0, restored ? 1 : 0, recaptured ? 1 : 0, cause);
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

void CachedTemplates::push(const std::string& key, const std::string& sealed) const {
  if (remote_) remote_->push_blobs(BlobKind::template_variant, {{key, sealed}}, remote::Overwrite::yes, dir_);
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
    const std::string key = variant_key(r.validity), file = names::template_file(key);
    const std::string sealed = encode_template_file(r);
    // Kept locally, then pushed to the remote tier: only while its object
    // is stored (a template is used only with its object), so no record
    // of a template whose object is gone is left on the remote.
    if (!keep_locally(key, sealed)) {
      // The object a remote hit brought is committed off the path to ready,
      // on the commit queue: kept after it (unless a sweep removed it).
      commit_later([self = *this, key, sealed] {
        try {
          if (!self.keep_locally(key, sealed)) {
            log::debug("capture template {} not saved: its object is not stored (gc, clear or verify --repair)", key);
            return;
          }
          self.push(key, sealed);
        } catch (const Error& e) {
          log::debug("capture template {} not saved: {}", key, e.what());
        }
      });
      return;
    }
    push(key, sealed);
    log::debug("capture template {}/{}/{} saved ({} bytes)", dir_, names::kTemplatesDir, file, bytes.size());
  } catch (const Error& e) {
    warn_uncached(
        dir_, "templates",
        "could not save a capture template in " + dir_ + " (" + e.what() + "); the next start captures again");
  }
}

}  // namespace npucache::cache
