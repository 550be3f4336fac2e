#include "format/bundle.h"

#include "compiler/serialize.h"
#include "compiler/wire.h"
#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/fixed_fields.h"
#include "format/keys.h"
#include "format/layout.h"
#include "format/record_wire.h"
#include "format/template_file.h"
#include "zstd/zstd_codec.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace npucache::cache {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

constexpr char kMagic[8] = {'N', 'P', 'U', 'C', 'B', 'N', 'D', 'L'};
constexpr uint32_t kVersion = 4;  // 3: npucache's own bounded encoding; 4: capture templates
constexpr uint32_t kOldestReadable = 3;
constexpr std::size_t kHeader = 36;

}  // namespace

void write_producer(ByteWriter& w, const Producer& p) {
  w.i64(p.world_size);
  w.i64(p.global_rank);
  w.i64(p.tp_rank);
  w.i64(p.pp_rank);
  w.str(p.host);
  w.i64(p.pid);
}

static int small(ByteReader& r, const char* what) {
  const int64_t v = r.i64();
  if (v < -1 || v > (int64_t{1} << 30)) r.fail(std::string(what) + " is out of range");
  return static_cast<int>(v);
}

Producer read_producer(ByteReader& r) {
  Producer p;
  p.world_size = small(r, "world_size");
  p.global_rank = small(r, "global_rank");
  p.tp_rank = small(r, "tp_rank");
  p.pp_rank = small(r, "pp_rank");
  p.host = r.str();
  p.pid = static_cast<long>(r.i64());
  return p;
}

void write_entry(ByteWriter& w, const EntryRecord& e) {
  w.str(e.path);
  w.str(e.meta.name);
  w.str(e.meta.date);
  w.str(e.meta.version);
  w.str(e.meta.fx);
  w.str(e.meta.lookup_key);
  w.str(e.meta.model_info);
  w.u32(static_cast<uint32_t>(e.meta.components.size()));
  for (const auto& [k, v] : e.meta.components) {
    w.str(k);
    w.str(v);
  }
  write_producer(w, e.meta.rank);
  w.strings(e.parameters);
  w.str(e.graph_key);
  w.str(e.object_checksum);
  w.f64(e.compile_time_s);
  w.u8(e.with_program ? 1 : 0);
}

EntryRecord read_entry(ByteReader& r) {
  EntryRecord e;
  e.path = r.str();
  e.meta.name = r.str();
  e.meta.date = r.str();
  e.meta.version = r.str();
  e.meta.fx = r.str();
  e.meta.lookup_key = r.str();
  e.meta.model_info = r.str();
  const std::size_t n = r.count(2 * sizeof(uint32_t));
  for (std::size_t i = 0; i < n; ++i) {
    std::string k = r.str();
    e.meta.components[k] = r.str();
  }
  e.meta.rank = read_producer(r);
  e.parameters = r.strings();
  e.graph_key = r.str();
  e.object_checksum = r.str();
  e.compile_time_s = r.f64();
  e.with_program = r.u8() != 0;
  return e;
}

void write_object(ByteWriter& w, const ObjectRecord& o) {
  w.str(o.graph_key);
  w.u64(o.raw.size());
  w.bytes(o.raw);
  w.strings(o.graph_text);
  const ObjectMeta& m = o.meta;
  w.str(m.checksum);
  w.u64(m.raw_size);
  w.u8(m.with_program ? 1 : 0);
  w.f64(m.compile_time_s);
  w.str(m.pass_times);
  w.str(m.mode);
  w.u8(m.dynamic ? 1 : 0);
  w.str(m.canonical_hash);
  write_producer(w, m.producer);
  w.str(m.date);
  w.str(m.version);
}

ObjectRecord read_object(ByteReader& r) {
  ObjectRecord o;
  o.graph_key = r.str();
  o.raw = std::string(r.bytes(static_cast<std::size_t>(r.u64())));
  o.graph_text = r.strings();
  ObjectMeta& m = o.meta;
  m.checksum = r.str();
  m.raw_size = r.u64();
  m.with_program = r.u8() != 0;
  m.compile_time_s = r.f64();
  m.pass_times = r.str();
  m.mode = r.str();
  m.dynamic = r.u8() != 0;
  m.canonical_hash = r.str();
  m.producer = read_producer(r);
  m.date = r.str();
  m.version = r.str();
  return o;
}

std::string write_bundle(const Bundle& b) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(b.objects.size()));
  for (const auto& o : b.objects) write_object(w, o);
  w.u32(static_cast<uint32_t>(b.entries.size()));
  for (const auto& e : b.entries) write_entry(w, e);
  w.u32(static_cast<uint32_t>(b.templates.size()));
  for (const auto& [key, bytes] : b.templates) {
    w.str(key);
    w.str(bytes);
  }
  const std::string raw = w.take();
  if (raw.size() > kMaxBundleBytes)
    throw CacheError("the bundle would hold " + std::to_string(raw.size()) + " bytes, more than a bundle may (" +
                     std::to_string(kMaxBundleBytes) + "); `npucache gc --max-size` the cache first");
  const std::string payload = zstd::compress(raw);
  std::string out(kMagic, sizeof kMagic);
  put_le<uint32_t>(out, kVersion);
  put_le<uint64_t>(out, payload.size());
  put_le<uint64_t>(out, raw.size());
  put_le<uint64_t>(out, XXH3_64bits(payload.data(), payload.size()));
  return out + payload;
}

Bundle read_bundle(std::string_view bytes) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw CacheError("not an npucache bundle (bad magic); export one with `npucache export`");
  const auto version = get_le<uint32_t>(bytes, 8);
  if (version < kOldestReadable || version > kVersion)
    throw CacheError("bundle format version " + std::to_string(version) + " is not supported (this build reads " +
                     std::to_string(kOldestReadable) + " to " + std::to_string(kVersion) +
                     "); export it again with this version");
  const auto len = get_le<uint64_t>(bytes, 12);
  const auto raw_len = get_le<uint64_t>(bytes, 20);
  if (bytes.size() - kHeader != len)
    throw CacheError("bundle is truncated or padded: header says " + std::to_string(len) + " payload bytes, found " +
                     std::to_string(bytes.size() - kHeader));
  if (raw_len > kMaxBundleBytes || raw_len > kMaxBundleRatio * len + 4096)
    throw CacheError("bundle claims " + std::to_string(raw_len) + " decoded bytes from " + std::to_string(len) +
                     ", more than a bundle can hold: it is damaged or not npucache's");
  const std::string_view payload = bytes.substr(kHeader);
  if (XXH3_64bits(payload.data(), payload.size()) != get_le<uint64_t>(bytes, 28))
    throw CacheError("bundle checksum mismatch: the bundle is corrupt");
  const std::string raw = zstd::decompress(payload, static_cast<std::size_t>(raw_len));
  if (raw.size() != raw_len)
    throw CacheError("bundle decodes to " + std::to_string(raw.size()) + " bytes, its header says " +
                     std::to_string(raw_len));
  try {
    ByteReader r(raw, "bundle");
    Bundle b;
    const std::size_t no = r.count(64);
    for (std::size_t i = 0; i < no; ++i) b.objects.push_back(read_object(r));
    const std::size_t ne = r.count(64);
    for (std::size_t i = 0; i < ne; ++i) b.entries.push_back(read_entry(r));
    if (version >= 4) {
      const std::size_t nt = r.count(8);
      for (std::size_t i = 0; i < nt; ++i) {
        std::string key = r.str();
        b.templates.emplace_back(std::move(key), r.str());
      }
    }
    if (!r.done()) r.fail("it has trailing bytes");
    return b;
  } catch (const CacheError&) {
    throw;
  } catch (const Error& e) {
    throw CacheError(e.what());
  }
}

void validate_bundle(const Bundle& b, const DecodeCheck& decodes) {
  auto bad = [](const std::string& why) { return CacheError("bundle rejected, nothing imported: " + why); };
  std::set<std::string> template_keys;
  for (const auto& [key, bytes] : b.templates) {
    if (!layout::valid_graph_key(key)) throw bad("template key '" + key + "' is malformed");
    if (!template_keys.insert(key).second) throw bad("template " + key + " appears twice");
    TemplateRecord t;
    try {
      t = decode_template_file(bytes, "template " + key);
    } catch (const CacheError& e) {
      throw bad(e.what());
    }
    if (template_key(t.validity.graph_key, t.validity.binding) != key)
      throw bad("template " + key + " is not named by its content's key");
    if (std::none_of(b.objects.begin(), b.objects.end(),
                     [&](const ObjectRecord& o) { return o.graph_key == t.validity.graph_key; }))
      throw bad("template " + key + " is of object " + t.validity.graph_key + ", which the bundle does not hold");
  }
  std::map<std::string, const ObjectRecord*> objects;
  for (const auto& o : b.objects) {
    if (!layout::valid_graph_key(o.graph_key)) throw bad("object key '" + o.graph_key + "' is malformed");
    if (!objects.emplace(o.graph_key, &o).second) throw bad("object " + o.graph_key + " appears twice");
    if (o.raw.size() != o.meta.raw_size || checksum(o.raw) != o.meta.checksum)
      throw bad("object " + o.graph_key + "'s bytes fail their checksum or size");
  }
  std::set<std::string> decoded;  // objects decoded with an entry's parameters
  std::set<std::string> paths;
  std::map<std::string, Components> model;  // model_info -> its model components
  for (const auto& e : b.entries) {
    if (!layout::valid_entry_path(e.path)) throw bad("entry path '" + e.path + "' is not a cache entry path");
    if (layout::model_info_of(e.path) != e.meta.model_info)
      throw bad("entry " + e.path + " names model " + e.meta.model_info);
    if (!paths.insert(e.path).second) throw bad("entry " + e.path + " appears twice");
    for (const auto& n : component_names())
      if (n != component::kGeCache && n != component::kConfigOptions && !e.meta.components.count(n))
        throw bad("entry " + e.path + " lacks key component " + n);
    const Producer& r = e.meta.rank;
    constexpr int kMaxRanks = 1 << 30;
    if (r.world_size < 1 || r.world_size > kMaxRanks || r.global_rank < 0 || r.global_rank >= r.world_size ||
        r.tp_rank < 0 || r.tp_rank >= r.world_size || r.pp_rank < 0 || r.pp_rank >= r.world_size)
      throw bad("entry " + e.path + " names rank " + std::to_string(r.global_rank) + " (tp " +
                std::to_string(r.tp_rank) + ", pp " + std::to_string(r.pp_rank) + ") of a " +
                std::to_string(r.world_size) + "-rank job");
    const Components mc = model_components(e.meta.components);
    if (auto [m, fresh] = model.emplace(e.meta.model_info, mc); !fresh && m->second != mc)
      throw bad("entries of model " + e.meta.model_info + " disagree on its model components");
    auto it = objects.find(e.graph_key);
    if (it == objects.end()) throw bad("entry " + e.path + " uses object " + e.graph_key + ", which the bundle lacks");
    if (e.object_checksum != it->second->meta.checksum)
      throw bad("entry " + e.path + " records checksum " + e.object_checksum + ", its object has " +
                it->second->meta.checksum);
    try {
      decodes(*it->second, &e.parameters);  // decodes and validates the program
    } catch (const Error& x) {
      throw bad("entry " + e.path + ": " + x.what());
    }
    decoded.insert(e.graph_key);
  }
  for (const auto& o : b.objects) {  // an object no entry uses is decoded as stored
    if (decoded.count(o.graph_key)) continue;
    try {
      decodes(o, nullptr);
    } catch (const Error& x) {
      throw bad("object " + o.graph_key + ": " + x.what());
    }
  }
}

}  // namespace npucache::cache
