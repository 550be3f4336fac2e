// The cache's TemplateStore (compiler/capture_template.h): the capture
// templates of one stored program, files templates/<template_key>.h5 of the
// cache directory (template_file.h). A template is looked up by the
// program's graph key and the sizes; one whose recorded validity (runtime
// and format version, device memory, allocator alignment) differs from now,
// or that is damaged, is not returned: `why` says what differs, the caller
// recaptures and its save replaces the file.
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
  std::string dir_, graph_key_, runtime_;
  std::shared_ptr<RemoteTier> remote_;
  Opener open_;
};

}  // namespace npucache::cache
