// The cache's TemplateStore (compiler/capture_template.h): the capture
// templates of one stored program, files templates/<template_key>.<variant>.h5
// of the cache directory (template_file.h): one per program, sizes and
// variant (runtime and format version, device memory, allocator
// alignment), so other device kinds' templates are kept side by side (at
// most kMaxTemplateVariants, storage/templates.h). A load reads this
// variant's file, then the remote tier's, then an earlier build's file
// named by the template key alone (used when valid for now); when none is
// usable, `why` says what differs in the file found (an earlier build's or
// another variant's) or that it is damaged, and the caller recaptures.
//
// Thread-safe; processes coordinate through the file system (an atomic
// rewrite per save). A refused or unwritable directory makes loads miss and
// saves log once (warn_uncached).
#pragma once

#include "cache/uses.h"
#include "compiler/capture_template.h"
#include "storage/store.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace npucache::cache {

class CachedTemplates final : public compiler::TemplateStore {
 public:
  // With `remote`, a template missing from the directory is looked up in
  // the remote tier (checked like a local file, then written locally), and
  // a saved one is written there too. `open` opens the directory's store
  // (nullopt with Create::no when there is none): its caller's, so a call
  // path opens it once; by default Store::open.
  using Opener = std::function<std::optional<Store>(Create)>;
  CachedTemplates(std::string dir, std::string graph_key, std::string runtime_version,
                  std::shared_ptr<RemoteTier> remote = nullptr, Opener open = {});
  std::optional<std::string> load(const SymBindings& binding, const compiler::TemplateSettings& settings,
                                  std::string& why) override;
  void save(const SymBindings& binding, const compiler::TemplateSettings& settings, const std::string& bytes) override;
  void note(bool restored, bool recaptured, const std::string& cause) override;

 private:
  // Writes a template file under the store's writing hold, only while its
  // object is stored (false, nothing written, when it is not).
  bool keep_locally(const std::string& key, const std::string& sealed) const;
  // The remote tier's copy of a template kept locally (none without one).
  void push(const std::string& key, const std::string& sealed) const;
  std::string dir_, graph_key_, runtime_;
  std::shared_ptr<RemoteTier> remote_;
  Opener open_;
};

}  // namespace npucache::cache
