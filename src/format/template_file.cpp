#include "format/template_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "format/view.h"
#include "h5/h5.h"

#include <npucache/error.h>
#include <npucache/ir/dtype.h>
#include <npucache/ir/hash.h>
#include <npucache/ir/op.h>

#include <xxhash.h>

#include <cstdio>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;

std::string template_key(const std::string& graph_key, const std::string& binding) {
  const std::string s = graph_key + "|" + binding;
  const XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Hash128{h.high64, h.low64}.hex();
}

std::string variant_key(const TemplateValidity& v) {
  const std::string s = v.runtime_version + "|" + v.format_version + "|" + std::to_string(v.device_memory) + "|" +
                        std::to_string(v.pool_align);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(s.data(), s.size())));
  return template_key(v.graph_key, v.binding) + "." + hex;
}

bool names_template(const std::string& key, const TemplateValidity& v) {
  return is_variant_key(key) ? key == variant_key(v) : key == template_key(v.graph_key, v.binding);
}

std::string template_key_part(const std::string& stored_key) { return stored_key.substr(0, 32); }

bool is_variant_key(const std::string& stored_key) { return stored_key.size() > 32; }

std::vector<std::string> template_listing(const compiler::CaptureTemplate& t) {
  std::vector<std::string> out;
  auto operand = [](const compiler::CaptureTemplate::Operand& o) {
    std::string dims;
    for (int64_t d : o.dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    const std::string where = o.slot == 0 ? "pool+" + std::to_string(o.offset) : "slot" + std::to_string(o.slot);
    return where + " " + std::string(dtype_name(static_cast<DType>(o.dtype))) + "[" + dims + "]";
  };
  for (std::size_t i = 0; i < t.tasks.size(); ++i) {
    const auto& task = t.tasks[i];
    std::string line = std::to_string(i) + ": " + std::string(op_name(static_cast<Op>(task.op))) + "(";
    for (std::size_t a = 0; a + 1 < task.operands.size(); ++a) line += (a ? ", " : "") + operand(task.operands[a]);
    line += ")";
    if (!task.operands.empty()) line += " -> " + operand(task.operands.back());
    out.push_back(std::move(line));
  }
  return out;
}

std::string encode_template_file(const TemplateRecord& r) {
  ByteWriter w;
  w.str(r.validity.graph_key);
  w.str(r.validity.binding);
  w.str(r.validity.runtime_version);
  w.str(r.validity.format_version);
  w.u64(r.validity.device_memory);
  w.u64(r.validity.pool_align);
  w.str(r.fingerprint);
  w.str(r.bytes);
  const std::vector<std::string> records{w.take()};
  const compiler::CaptureTemplate t = compiler::decode_template(r.bytes);
  const std::size_t userblock = userblock_for(records);
  std::string image;
  {
    auto guard = h5::lock();
    h5::Handle f = create_view(userblock, EnvelopeKind::capture_template);
    const h5::Id root = f.id();
    h5::write_attr(root, "graph_key", r.validity.graph_key);
    h5::write_attr(root, "binding", r.validity.binding);
    h5::write_attr(root, "runtime_version", r.validity.runtime_version);
    h5::write_attr(root, "footprint", static_cast<int64_t>(t.footprint));
    h5::write_attr(root, "tasks", static_cast<int64_t>(t.tasks.size()));
    h5::write_attr(root, "fingerprint", r.fingerprint);
    h5::write_strings(root, names::kTemplateTasksDataset, template_listing(t));
    image = h5::image_bytes(f.id());
  }
  return seal(EnvelopeKind::capture_template, records, std::move(image), userblock);
}

TemplateRecord decode_template_file(std::string_view file, const std::string& what) {
  if (file.size() > kMaxTemplateFileBytes)
    throw CacheError(what + " is " + std::to_string(file.size()) + " bytes, too large");
  const Opened o = open_envelope(EnvelopeKind::capture_template, file, what);
  if (!o.records_intact || o.records.size() != 1) throw CacheError(what + " is damaged: its record fails its checksum");
  if (!o.hdf5_intact) throw CacheError(what + " is damaged: its HDF5 part fails its checksum");
  try {
    ByteReader r(o.records[0], what);
    TemplateRecord t;
    t.validity.graph_key = r.str();
    t.validity.binding = r.str();
    t.validity.runtime_version = r.str();
    t.validity.format_version = r.str();
    // An intact record of a later cache format: never read further.
    if (names::later_format(t.validity.format_version))
      throw OtherFormat(what + " is of another npucache cache format: " + t.validity.format_version +
                        " (this build's is " + names::kFormatVersion + ")");
    t.validity.device_memory = r.u64();
    t.validity.pool_align = r.u64();
    t.fingerprint = r.str();
    t.bytes = r.str();
    if (!r.done()) r.fail("its record has trailing bytes");
    if (!names::valid_graph_key(t.validity.graph_key)) r.fail("its graph key is invalid");
    // The stored encoding is encode_template's own: its bytes hash to the
    // fingerprint (a non-canonical encoding of the same template does not,
    // and is refused like a changed one), with no re-encoding.
    if (compiler::encoding_fingerprint(t.bytes) != t.fingerprint) r.fail("its template does not match its fingerprint");
    const compiler::CaptureTemplate decoded = compiler::decode_template(t.bytes);
    if (compiler::binding_text(decoded.binding) != t.validity.binding)
      r.fail("its template's sizes differ from its key");
    return t;
  } catch (const CacheError&) {
    throw;
  } catch (const Error& e) {
    throw CacheError(what + " is damaged: " + e.what());
  }
}

std::vector<std::string> template_differences(const TemplateValidity& stored, const TemplateValidity& now) {
  std::vector<std::string> out;
  auto diff = [&](const char* name, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(std::string(name) + ": stored '" + a + "', now '" + b + "'");
  };
  diff("graph key", stored.graph_key, now.graph_key);
  diff("sizes", stored.binding, now.binding);
  diff("runtime version", stored.runtime_version, now.runtime_version);
  diff("format version", stored.format_version, now.format_version);
  diff("device memory", std::to_string(stored.device_memory), std::to_string(now.device_memory));
  diff("allocator setting pool_align", std::to_string(stored.pool_align), std::to_string(now.pool_align));
  return out;
}

}  // namespace npucache::format
