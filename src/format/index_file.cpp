#include "format/index_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/keys.h"
#include "format/layout.h"
#include "format/view.h"
#include "h5/h5.h"

#include <set>

namespace npucache::cache {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

constexpr uint8_t kModelRecord = 1;
constexpr uint8_t kEntryRecord = 2;

// The entry-level components (the rest are the model's).
const std::vector<std::string>& entry_components() {
  using namespace component;
  static const auto& names =  // never destroyed: a commit draining at exit reads it
      *new const std::vector<std::string>{kMethod, kRuntimeVersion, kFormatVersion, kCodeVersion};
  return names;
}

bool is_entry_component(const std::string& k) {
  for (const auto& n : entry_components())
    if (n == k) return true;
  return false;
}

std::string encode_model(const IndexFile& ix) {
  ByteWriter w;
  w.u8(kModelRecord);
  w.str(ix.model_info);
  w.u32(static_cast<uint32_t>(ix.model.size()));
  for (const auto& [k, v] : ix.model) {
    w.str(k);
    w.str(v);
  }
  return w.take();
}

std::string encode_entry(const EntryRecord& e) {
  ByteWriter w;
  w.u8(kEntryRecord);
  w.str(e.path);
  w.str(e.meta.name);
  w.str(e.meta.date);
  w.str(e.meta.version);
  w.str(e.meta.fx);
  w.str(e.meta.lookup_key);
  for (const auto& n : entry_components()) {
    auto it = e.meta.components.find(n);
    w.str(it == e.meta.components.end() ? "" : it->second);
  }
  w.i64(e.meta.rank.world_size);
  w.i64(e.meta.rank.global_rank);
  w.i64(e.meta.rank.tp_rank);
  w.i64(e.meta.rank.pp_rank);
  w.strings(e.parameters);
  w.str(e.graph_key);
  w.str(e.object_checksum);
  w.f64(e.compile_time_s);
  w.u8(e.with_program ? 1 : 0);
  return w.take();
}

int to_int(int64_t v, ByteReader& r, const char* what) {
  if (v < 0 || v > (int64_t{1} << 30)) r.fail(std::string(what) + " is out of range");
  return static_cast<int>(v);
}

EntryRecord decode_entry(std::string_view body, const IndexFile& ix, const std::string& what) {
  ByteReader r(body, what);
  if (r.u8() != kEntryRecord) r.fail("an entry record has the wrong kind");
  EntryRecord e;
  e.path = r.str();
  if (!layout::valid_entry_path(e.path) || layout::model_info_of(e.path) != ix.model_info)
    r.fail("entry path '" + e.path + "' is not an entry of " + ix.model_info);
  e.meta.name = r.str();
  e.meta.date = r.str();
  e.meta.version = r.str();
  e.meta.fx = r.str();
  e.meta.lookup_key = r.str();
  e.meta.model_info = ix.model_info;
  e.meta.components = ix.model;
  for (const auto& n : entry_components()) e.meta.components[n] = r.str();
  e.meta.rank.world_size = to_int(r.i64(), r, "world_size");
  e.meta.rank.global_rank = to_int(r.i64(), r, "global_rank");
  e.meta.rank.tp_rank = to_int(r.i64(), r, "tp_rank");
  e.meta.rank.pp_rank = to_int(r.i64(), r, "pp_rank");
  e.parameters = r.strings();
  e.graph_key = r.str();
  if (!layout::valid_graph_key(e.graph_key)) r.fail("graph key '" + e.graph_key + "' is malformed");
  e.object_checksum = r.str();
  e.compile_time_s = r.f64();
  e.with_program = r.u8() != 0;
  if (!r.done()) r.fail("an entry record has trailing bytes");
  return e;
}

// The HDF5 view: what h5dump, h5ls and h5py show.
std::string hdf5_view(const IndexFile& ix, std::size_t userblock) {
  auto guard = h5::lock();
  h5::Handle f = create_view(userblock, EnvelopeKind::index);
  const hid_t root = f.id();
  h5::write_attr(root, "model_info", ix.model_info);
  for (const auto& [k, v] : ix.model) {
    if (k == component::kDynamic || k == component::kGeCache)
      h5::write_bool_attr(root, k, v == "true");
    else
      h5::write_attr(root, k, v);
  }
  for (const auto& e : ix.entries) {
    h5::Handle g = h5::create_group(root, "/" + e.path);
    // Each fact once: the entry's identity and validity components here,
    // the model's on the root, the artifact's (checksum, sizes, timings,
    // with_program) on its object; world size and global rank are the
    // layout group's name (world<W>global_rank<R>), the format version the
    // root's.
    h5::write_attr(g.id(), "name", e.meta.name);
    h5::write_attr(g.id(), "date", e.meta.date);
    for (const auto& n : entry_components())
      if (n != component::kFormatVersion) {
        auto it = e.meta.components.find(n);
        h5::write_attr(g.id(), n, it == e.meta.components.end() ? std::string() : it->second);
      }
    h5::write_attr(g.id(), "lookup_key", e.meta.lookup_key);
    h5::write_attr(g.id(), "graph_key", e.graph_key);
    h5::write_attr(g.id(), "tp_rank", int64_t{e.meta.rank.tp_rank});
    h5::write_attr(g.id(), "pp_rank", int64_t{e.meta.rank.pp_rank});
    h5::write_fixed_strings(g.id(), layout::kParametersDataset, e.parameters);
    h5::external_link(g.id(), layout::kModuleDataset,
                      std::string(layout::kObjectsDir) + "/" + layout::object_file(e.graph_key),
                      std::string("/") + layout::kModuleDataset);
  }
  return h5::image_bytes(f.id());
}

}  // namespace

std::string encode_index(const IndexFile& ix) {
  std::vector<std::string> records{encode_model(ix)};
  for (const auto& e : ix.entries) records.push_back(encode_entry(e));
  const std::size_t userblock = userblock_for(records);
  return seal(EnvelopeKind::index, records, hdf5_view(ix, userblock), userblock);
}

DecodedIndex decode_index(std::string_view bytes, const std::string& what) try {
  Opened o = open_envelope(EnvelopeKind::index, bytes, what);
  DecodedIndex d;
  d.hdf5_intact = o.hdf5_intact;
  d.damaged = o.damaged_records;
  if (o.records.empty()) throw CacheError(what + " is damaged: its model record cannot be read");
  {
    ByteReader r(o.records[0], what);
    if (r.u8() != kModelRecord) throw CacheError(what + " is damaged: its model record cannot be read");
    d.index.model_info = r.str();
    if (!layout::valid_name(d.index.model_info)) r.fail("model_info '" + d.index.model_info + "' is malformed");
    const std::size_t n = r.count(2 * sizeof(uint32_t));
    for (std::size_t i = 0; i < n; ++i) {
      std::string k = r.str();
      if (is_entry_component(k)) r.fail("the model record holds an entry component");
      d.index.model[k] = r.str();
    }
  }
  std::set<std::string> paths;
  for (std::size_t i = 1; i < o.records.size(); ++i) {
    try {
      EntryRecord e = decode_entry(o.records[i], d.index, what);
      if (!paths.insert(e.path).second) throw CacheError(what + " lists entry " + e.path + " twice");
      d.index.entries.push_back(std::move(e));
    } catch (const Error&) {
      ++d.damaged;
    }
  }
  d.intact = o.records_intact && d.damaged == 0;
  return d;
} catch (const CacheError&) {
  throw;
} catch (const Error& e) {
  throw CacheError(e.what());
}

}  // namespace npucache::cache
