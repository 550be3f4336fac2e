#include "format/bundle.h"

#include "compiler/serialize.h"
#include "compiler/wire.h"
#include "format/artifact.h"
#include "format/cache_error.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/record_codec.h"
#include "format/template_file.h"
#include "format/tuning_file.h"
#include "zstd/zstd_codec.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

constexpr char kBundleMagic[8] = {'N', 'P', 'U', 'C', 'B', 'N', 'D', 'L'};
// 3: npucache's own bounded encoding; 4: capture templates; 5: the records
// of record_codec.h (cache format 4.0.0), entries under model records; 6:
// the tuning decisions and dynamic-shape profiles after the templates (5
// is still read: its records are 6's without them); 7: a template's key may
// name its variant ("<template key>.<variant>", template_file.h), which
// builds that read 6 would reject (5 and 6 are still read: their keys are
// template keys, which 7 reads too). A bundle without variant keys is
// written as 6, which builds reading 5 to 6 import. 8: after the profiles,
// the graph keys of the objects whose regions nothing vouches for
// (Bundle::unvouched); a bundle with none is written as 6 or 7.
constexpr uint32_t kBundleVersion = 8;
constexpr uint32_t kBundleVersionWithVariants = 7;
constexpr uint32_t kBundleVersionWithoutVariants = 6;
constexpr uint32_t kOldestReadBundleVersion = 5;
constexpr std::size_t kBundleHeader = 36;

}  // namespace

std::string write_bundle(const Bundle& b) {
  // Each model once, followed by its entries (which carry only their own
  // components), in the order of their first entry.
  std::vector<std::pair<ModelRecord, std::vector<const EntryRecord*>>> models;
  std::map<std::string, std::size_t> at;
  for (const auto& e : b.entries) {
    ModelRecord m = model_of(e);
    auto [it, fresh] = at.emplace(m.model_info, models.size());
    if (fresh)
      models.push_back({std::move(m), {}});
    else if (models[it->second].first.components != m.components)
      throw CacheError("bundle rejected, nothing imported: entries of model " + m.model_info +
                       " disagree on its model components");
    models[it->second].second.push_back(&e);
  }
  ByteWriter w;
  w.u32(static_cast<uint32_t>(b.objects.size()));
  for (const auto& o : b.objects) write_object(w, o);
  w.u32(static_cast<uint32_t>(models.size()));
  for (const auto& [m, entries] : models) {
    write_model(w, m);
    w.u32(static_cast<uint32_t>(entries.size()));
    for (const EntryRecord* e : entries) write_entry(w, *e);
  }
  w.u32(static_cast<uint32_t>(b.templates.size()));
  for (const auto& [key, bytes] : b.templates) {
    w.str(key);
    w.str(bytes);
  }
  w.u32(static_cast<uint32_t>(b.tuning.size()));
  for (const auto& t : b.tuning) w.str(encode_tuning_record(t));
  w.u32(static_cast<uint32_t>(b.profiles.size()));
  for (const auto& p : b.profiles) w.str(encode_profile_record(p));
  if (!b.unvouched.empty()) {
    w.u32(static_cast<uint32_t>(b.unvouched.size()));
    for (const auto& key : b.unvouched) w.str(key);
  }
  const std::string raw = w.take();
  if (raw.size() > kMaxBundleBytes)
    throw CacheError("the bundle would hold " + std::to_string(raw.size()) + " bytes, more than a bundle may (" +
                     std::to_string(kMaxBundleBytes) + "); `npucache gc --max-size` the cache first");
  const std::string payload = zstd::compress(raw);
  ByteWriter h;
  h.bytes(std::string_view(kBundleMagic, sizeof kBundleMagic));
  const bool variants =
      std::any_of(b.templates.begin(), b.templates.end(), [](const auto& t) { return is_variant_key(t.first); });
  h.u32(!b.unvouched.empty() ? kBundleVersion : variants ? kBundleVersionWithVariants : kBundleVersionWithoutVariants);
  h.u64(payload.size());
  h.u64(raw.size());
  h.u64(XXH3_64bits(payload.data(), payload.size()));
  return h.take() + payload;
}

Bundle read_bundle(std::string_view bytes) {
  if (bytes.size() < kBundleHeader || std::memcmp(bytes.data(), kBundleMagic, sizeof kBundleMagic) != 0)
    throw CacheError("not an npucache bundle (bad magic); export one with `npucache export`");
  ByteReader h(bytes.substr(sizeof kBundleMagic, kBundleHeader - sizeof kBundleMagic), "bundle header");
  const uint32_t version = h.u32();
  const uint64_t len = h.u64(), raw_len = h.u64(), sum = h.u64();
  if (version < kOldestReadBundleVersion || version > kBundleVersion)
    throw CacheError("bundle format version " + std::to_string(version) + " is not supported (this build reads " +
                     std::to_string(kOldestReadBundleVersion) + " to " + std::to_string(kBundleVersion) +
                     ", cache format " + names::kFormatVersion + "): " +
                     (version < kOldestReadBundleVersion
                          ? "it was written by cache format 3.0.0 or earlier, whose entries would "
                            "only be reported stale here; export a cache made by this version"
                          : "it was written by a later version; export it again with this version"));
  if (bytes.size() - kBundleHeader != len)
    throw CacheError("bundle is truncated or padded: header says " + std::to_string(len) + " payload bytes, found " +
                     std::to_string(bytes.size() - kBundleHeader));
  if (raw_len > kMaxBundleBytes || raw_len > kMaxBundleRatio * len + 4096)
    throw CacheError("bundle claims " + std::to_string(raw_len) + " decoded bytes from " + std::to_string(len) +
                     ", more than a bundle can hold: it is damaged or not npucache's");
  const std::string_view payload = bytes.substr(kBundleHeader);
  if (XXH3_64bits(payload.data(), payload.size()) != sum)
    throw CacheError("bundle checksum mismatch: the bundle is corrupt");
  const std::string raw = zstd::decompress(payload, static_cast<std::size_t>(raw_len));
  if (raw.size() != raw_len)
    throw CacheError("bundle decodes to " + std::to_string(raw.size()) + " bytes, its header says " +
                     std::to_string(raw_len));
  try {
    ByteReader r(raw, "bundle");
    Bundle b;
    // Counts are checked against the smallest record of their kind.
    const std::size_t no = r.count(64);
    for (std::size_t i = 0; i < no; ++i) b.objects.push_back(read_object(r));  // each checked against its hash
    std::set<std::string> models;
    const std::size_t nm = r.count(2 + 2 * sizeof(uint32_t));
    for (std::size_t i = 0; i < nm; ++i) {
      const ModelRecord m = read_model(r);
      if (!models.insert(m.model_info).second) r.fail("model " + m.model_info + " appears twice");
      const std::size_t ne = r.count(64);
      for (std::size_t k = 0; k < ne; ++k) b.entries.push_back(read_entry(r, m));
    }
    const std::size_t nt = r.count(8);
    for (std::size_t i = 0; i < nt; ++i) {
      std::string key = r.str();
      b.templates.emplace_back(std::move(key), r.str());
    }
    if (version >= 6) {
      const std::size_t ntu = r.count(8);
      if (ntu > kMaxTuningRecords) r.fail(std::to_string(ntu) + " tuning decisions, more than a table may hold");
      for (std::size_t i = 0; i < ntu; ++i)
        b.tuning.push_back(decode_tuning_record(r.str(), "bundle tuning decision " + std::to_string(i + 1)));
      const std::size_t np = r.count(8);
      if (np > kMaxProfileRecords) r.fail(std::to_string(np) + " dynamic-shape dims, more than a profile may hold");
      for (std::size_t i = 0; i < np; ++i)
        b.profiles.push_back(decode_profile_record(r.str(), "bundle dynamic-shape dim " + std::to_string(i + 1)));
    }
    if (version >= 8) {
      const std::size_t nv = r.count(4);
      if (nv == 0 || nv > no) r.fail(std::to_string(nv) + " unvouched objects of " + std::to_string(no));
      for (std::size_t i = 0; i < nv; ++i)
        if (!b.unvouched.insert(r.str()).second) r.fail("an object is named unvouched twice");
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
    if (!names::valid_template_key(key)) throw bad("template key '" + key + "' is malformed");
    if (!template_keys.insert(key).second) throw bad("template " + key + " appears twice");
    TemplateRecord t;
    try {
      t = decode_template_file(bytes, "template " + key);
    } catch (const CacheError& e) {
      throw bad(e.what());
    }
    if (!names_template(key, t.validity)) throw bad("template " + key + " is not named by its content's key");
    if (std::none_of(b.objects.begin(), b.objects.end(),
                     [&](const ObjectRecord& o) { return o.graph_key == t.validity.graph_key; }))
      throw bad("template " + key + " is of object " + t.validity.graph_key + ", which the bundle does not hold");
  }
  std::map<std::string, const ObjectRecord*> objects;
  for (const auto& o : b.objects) {
    if (!names::valid_graph_key(o.graph_key)) throw bad("object key '" + o.graph_key + "' is malformed");
    if (!objects.emplace(o.graph_key, &o).second) throw bad("object " + o.graph_key + " appears twice");
  }
  for (const auto& key : b.unvouched)
    if (!objects.count(key)) throw bad("it names object '" + key + "' unvouched, which it does not hold");
  std::set<std::string> decoded;  // objects decoded with an entry's parameters
  std::set<std::string> paths;
  std::map<std::string, Components> model;  // model_info -> its model components
  for (const auto& e : b.entries) {
    if (!names::valid_entry_path(e.path)) throw bad("entry path '" + e.path + "' is not a cache entry path");
    if (names::model_info_of(e.path) != e.meta.model_info)
      throw bad("entry " + e.path + " names model " + e.meta.model_info);
    if (!paths.insert(e.path).second) throw bad("entry " + e.path + " appears twice");
    for (const auto& n : component_names())
      if (n != component::kGeCache && n != component::kConfigOptions && n != component::kParameterList &&
          !e.meta.components.count(n))
        throw bad("entry " + e.path + " lacks key component " + n);
    const Producer& r = e.meta.rank;
    constexpr int kMaxRanks = 1 << 30;
    if (r.world_size < 1 || r.world_size > kMaxRanks || r.global_rank < 0 || r.global_rank >= r.world_size ||
        r.tp_rank < 0 || r.tp_rank >= r.world_size || r.pp_rank < 0 || r.pp_rank >= r.world_size)
      throw bad("entry " + e.path + " names rank " + std::to_string(r.global_rank) + " (tp " +
                std::to_string(r.tp_rank) + ", pp " + std::to_string(r.pp_rank) + ") of a " +
                std::to_string(r.world_size) + "-rank job");
    if (const auto v = e.meta.components.find(component::kFormatVersion);
        v != e.meta.components.end() && v->second != names::kFormatVersion)
      throw bad("entry " + e.path + " was written by cache format " + v->second + " (this build reads and writes " +
                names::kFormatVersion +
                "): its program is stale for this build; export the cache again with this build, or let the job "
                "compile it");
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

}  // namespace npucache::format
