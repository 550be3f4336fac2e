// A capture template's file, templates/<template_key>.<variant>.h5 (docs/FORMAT.md,
// "Capture templates"): one sealed record holding what the template is
// valid for and the template itself (compiler/capture_template.h), and an
// HDF5 view for people: root attributes (graph key, binding, footprint,
// tasks, runtime) and the string dataset `tasks`, one line per task
// ("3: matmul(pool+4096 f32[4, 32], param2 f32[32, 32]) -> pool+8192").
#pragma once

#include "compiler/capture_template.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace npucache::format {

// What a template is valid for: it is replayed only where all of it holds.
struct TemplateValidity {
  std::string graph_key;  // the program
  std::string binding;    // the sizes (binding_text)
  std::string runtime_version;
  std::string format_version;
  uint64_t device_memory = 0;  // the device's memory capacity
  uint64_t pool_align = 0;     // the pool allocator's alignment
  friend bool operator==(const TemplateValidity&, const TemplateValidity&) = default;
};

struct TemplateRecord {
  TemplateValidity validity;
  std::string fingerprint;  // template_fingerprint of the template
  std::string bytes;        // encode_template
};

// A file larger than this is not read.
inline constexpr std::size_t kMaxTemplateFileBytes = std::size_t{1} << 30;

// The template key: 32 hex digits of (graph key, binding). Earlier builds of
// this cache format store one template per template key, under that name.
std::string template_key(const std::string& graph_key, const std::string& binding);
// The stored key of a template: "<template key>.<variant>", the variant 16
// hex digits of everything else a template is valid for (runtime and format
// version, device memory, pool alignment), so templates of one program and
// sizes for other devices are kept side by side (docs/FORMAT.md, "Capture
// templates"). The file name and the remote tier's record name.
std::string variant_key(const TemplateValidity& v);
// Whether `key` (a stored key of either form) names a template valid as
// `v` says: its variant key, or its template key (an earlier build's file).
bool names_template(const std::string& key, const TemplateValidity& v);
// The template key part of a stored key of either form.
std::string template_key_part(const std::string& stored_key);
bool is_variant_key(const std::string& stored_key);
std::string encode_template_file(const TemplateRecord& r);
// Validates the envelope, the record, the template's decoding and its
// fingerprint; throws CacheError naming `what` and what is wrong.
TemplateRecord decode_template_file(std::string_view file, const std::string& what);
// The differences of `stored` from `now`, in words ("device memory: stored
// 4294967296, now 8589934592"); empty when valid.
std::vector<std::string> template_differences(const TemplateValidity& stored, const TemplateValidity& now);
// The task listing of a template (readable, the HDF5 view).
std::vector<std::string> template_listing(const compiler::CaptureTemplate& t);

}  // namespace npucache::format
