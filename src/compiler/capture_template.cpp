#include "compiler/capture_template.h"

#include <npucache/error.h>
#include <npucache/ir/dtype.h>
#include <npucache/ir/hash.h>
#include <npucache/ir/op.h>

#include "compiler/wire.h"

#include <xxhash.h>

namespace npucache::compiler {
namespace {

constexpr uint32_t kTemplateMagic = 0x4c54504e;  // "NPTL"
constexpr uint32_t kVersion = 1;
constexpr std::size_t kMaxRank = 64;
// Smallest encodings, for the count checks.
constexpr std::size_t kMinOperand = 4 + 8 + 4 + 4;
constexpr std::size_t kMinTask = 4 + 4;

}  // namespace

std::string binding_text(const SymBindings& b) {
  std::string s;
  for (const auto& [sym, v] : b) s += (s.empty() ? "" : ",") + sym + "=" + std::to_string(v);
  return s;
}

std::string encode_template(const CaptureTemplate& t) {
  ByteWriter w;
  w.u32(kTemplateMagic);
  w.u32(kVersion);
  w.u32(static_cast<uint32_t>(t.binding.size()));
  for (const auto& [sym, v] : t.binding) {
    w.str(sym);
    w.i64(v);
  }
  w.u64(t.footprint);
  w.u32(static_cast<uint32_t>(t.pool_offset.size()));
  for (int64_t o : t.pool_offset) w.i64(o);
  w.u32(static_cast<uint32_t>(t.tasks.size()));
  for (const auto& task : t.tasks) {
    w.u32(task.op);
    w.u32(static_cast<uint32_t>(task.operands.size()));
    for (const auto& o : task.operands) {
      w.u32(o.slot);
      w.u64(o.offset);
      w.u32(o.dtype);
      w.u32(static_cast<uint32_t>(o.dims.size()));
      for (int64_t d : o.dims) w.i64(d);
    }
  }
  return w.take();
}

CaptureTemplate decode_template(std::string_view bytes) {
  if (bytes.size() > kMaxTemplateBytes)
    throw Error("capture template of " + std::to_string(bytes.size()) + " bytes is too large");
  ByteReader r(bytes, "capture template");
  if (r.u32() != kTemplateMagic) r.fail("not a capture template (magic)");
  if (const uint32_t v = r.u32(); v != kVersion) r.fail("template version " + std::to_string(v) + " is not 1");
  CaptureTemplate t;
  const std::size_t nb = r.count(4 + 8);
  for (std::size_t i = 0; i < nb; ++i) {
    std::string sym = r.str();
    const int64_t v = r.i64();
    if (sym.empty() || v < 0 || v > (int64_t{1} << 40)) r.fail("binding '" + sym + "' is invalid");
    if (!t.binding.emplace(std::move(sym), v).second) r.fail("a symbol is bound twice");
  }
  t.footprint = r.u64();
  if (t.footprint > (uint64_t{1} << 48)) r.fail("footprint " + std::to_string(t.footprint) + " is too large");
  const std::size_t nbuf = r.count(8);
  t.pool_offset.reserve(nbuf);
  for (std::size_t i = 0; i < nbuf; ++i) {
    const int64_t o = r.i64();
    if (o < -1 || o > static_cast<int64_t>(t.footprint))
      r.fail("pool offset " + std::to_string(o) + " is outside the pool");
    t.pool_offset.push_back(o);
  }
  const std::size_t nt = r.count(kMinTask);
  if (nt > kMaxTemplateTasks) r.fail(std::to_string(nt) + " tasks");
  t.tasks.reserve(nt);
  for (std::size_t i = 0; i < nt; ++i) {
    CaptureTemplate::Task task;
    task.op = r.u32();
    if (!is_op_number(task.op)) r.fail("task " + std::to_string(i) + " has op " + std::to_string(task.op));
    const std::size_t na = r.count(kMinOperand);
    for (std::size_t a = 0; a < na; ++a) {
      CaptureTemplate::Operand o;
      o.slot = r.u32();
      o.offset = r.u64();
      if (o.offset > (uint64_t{1} << 48)) r.fail("an operand offset is too large");
      o.dtype = r.u32();
      if (o.dtype > static_cast<uint32_t>(DType::boolean)) r.fail("an operand has dtype " + std::to_string(o.dtype));
      const std::size_t rank = r.count(8);
      if (rank > kMaxRank) r.fail("an operand has rank " + std::to_string(rank));
      for (std::size_t d = 0; d < rank; ++d) {
        const int64_t dim = r.i64();
        if (dim < 0 || dim > (int64_t{1} << 40)) r.fail("an operand has dim " + std::to_string(dim));
        o.dims.push_back(dim);
      }
      task.operands.push_back(std::move(o));
    }
    t.tasks.push_back(std::move(task));
  }
  if (!r.done()) r.fail("trailing bytes");
  return t;
}

std::string recapture_cause(std::string_view why) {
  static const std::pair<std::string_view, std::string_view> kCauses[] = {
      {"device memory:", "device_memory"},
      {"runtime version:", "runtime_version"},
      {"format version:", "format_version"},
      {"allocator setting pool_align:", "pool_align"},
      {"sizes:", "sizes"},
      {"the stored template is damaged", "damaged"},
      {"the stored capture template cannot be used", "mismatch"}};
  for (const auto& [prefix, cause] : kCauses)
    if (why.substr(0, prefix.size()) == prefix) return std::string(cause);
  return "other";
}

std::string encoding_fingerprint(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return Hash128{h.high64, h.low64}.hex();
}

std::string template_fingerprint(const CaptureTemplate& t) { return encoding_fingerprint(encode_template(t)); }

}  // namespace npucache::compiler
