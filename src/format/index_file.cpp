#include "format/index_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/record_codec.h"
#include "format/view.h"
#include "h5/h5.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

// The HDF5 view: what h5dump, h5ls and h5py show.
std::string hdf5_view(const IndexFile& ix, std::size_t userblock) {
  auto guard = h5::lock();
  h5::Handle f = create_view(userblock, EnvelopeKind::index);
  const h5::Id root = f.id();
  h5::write_attr(root, "model_info", ix.model_info);
  h5::write_attr(root, "index_part", std::string(ix.seq.delta ? "delta" : "base"));
  char generation[24];
  std::snprintf(generation, sizeof generation, "%016llx", static_cast<unsigned long long>(ix.seq.generation));
  h5::write_attr(root, "generation", std::string(generation));
  h5::write_attr(root, "first_sequence", static_cast<int64_t>(ix.seq.first));
  h5::write_attr(root, "last_sequence", static_cast<int64_t>(ix.seq.last));
  if (!ix.seq.removed.empty()) h5::write_fixed_strings(root, "removed", ix.seq.removed);
  // A delta lives in deltas/, one level below the objects' directory.
  const std::string objects = std::string(ix.seq.delta ? "../" : "") + names::kObjectsDir + "/";
  for (const auto& [k, v] : ix.model) {
    if (k == component::kDynamic || k == component::kGeCache) {
      h5::write_bool_attr(root, k, v == "true");
    } else if (k == component::kParameterList) {
      // A line per parameter, compressed past 4 KiB: the list grows with
      // the model's depth.
      std::vector<std::string> lines;
      for (std::size_t at = 0; at < v.size();) {
        const std::size_t end = std::min(v.find(';', at), v.size());
        if (end > at) lines.push_back(v.substr(at, end - at));
        at = end + 1;
      }
      h5::write_strings(root, k, lines);
    } else {
      h5::write_attr(root, k, v);
    }
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
    for (const auto& n : entry_component_names())
      if (n != component::kFormatVersion) {
        auto it = e.meta.components.find(n);
        h5::write_attr(g.id(), n, it == e.meta.components.end() ? std::string() : it->second);
      }
    h5::write_attr(g.id(), "lookup_key", e.meta.lookup_key);
    h5::write_attr(g.id(), "graph_key", e.graph_key);
    h5::write_attr(g.id(), "tp_rank", int64_t{e.meta.rank.tp_rank});
    h5::write_attr(g.id(), "pp_rank", int64_t{e.meta.rank.pp_rank});
    h5::write_fixed_strings(g.id(), names::kParametersDataset, e.parameters);
    h5::external_link(g.id(), names::kModuleDataset, objects + names::object_file(e.graph_key),
                      std::string("/") + names::kModuleDataset);
  }
  return h5::image_bytes(f.id());
}

}  // namespace

std::string encode_index(const IndexFile& ix) {
  std::vector<std::string> records;
  {
    ByteWriter w;
    write_model(w, {ix.model_info, ix.model});
    records.push_back(w.take());
  }
  {
    ByteWriter w;
    write_sequence(w, ix.seq);
    records.push_back(w.take());
  }
  for (const auto& e : ix.entries) {
    ByteWriter w;
    write_entry(w, e);
    records.push_back(w.take());
  }
  const std::size_t userblock = userblock_for(records);
  return seal(EnvelopeKind::index, records, hdf5_view(ix, userblock), userblock);
}

DecodedIndex decode_index(std::string_view bytes, const std::string& what) try {
  Opened o = open_envelope(EnvelopeKind::index, bytes, what);
  DecodedIndex d;
  d.hdf5_intact = o.hdf5_intact;
  d.damaged = o.damaged_records;
  if (o.records.empty()) throw CacheError(what + " is damaged: its model record cannot be read");
  if (newer_model_record(o.records[0]))  // intact, of an encoding after this build's
    throw OtherFormat(what + " is of another npucache cache format: its model record is of encoding " +
                      std::to_string(static_cast<uint8_t>(o.records[0][1])) + " (this build reads up to " +
                      std::to_string(kModelEncoding) + ")");
  // An index of the formats before 4.0.0 (another record encoding): read
  // so that its entries are reported stale with their format version.
  d.earlier_format = is_earlier_index_record(o.records[0]);
  ModelRecord model;
  {
    ByteReader r(o.records[0], what);
    model = d.earlier_format ? read_earlier_model(r) : read_model(r);
    if (!r.done()) r.fail("its model record has trailing bytes");
  }
  d.index.model_info = model.model_info;
  d.index.model = model.components;
  std::size_t first_entry = 1;
  if (!d.earlier_format && o.records.size() > 1 && is_sequence_record(o.records[1])) {
    try {
      ByteReader r(o.records[1], what);
      d.index.seq = read_sequence(r, model);
      if (!r.done()) r.fail("its sequence record has trailing bytes");
      d.sequenced = true;
    } catch (const Error&) {
      ++d.damaged;
    }
    first_entry = 2;
  }
  std::set<std::string> paths;
  for (std::size_t i = first_entry; i < o.records.size(); ++i) {
    try {
      ByteReader r(o.records[i], what);
      EntryRecord e = d.earlier_format ? read_earlier_entry(r, model) : read_entry(r, model);
      if (!r.done()) r.fail("an entry record has trailing bytes");
      if (!paths.insert(e.path).second) throw CacheError(what + " lists entry " + e.path + " twice");
      d.index.entries.push_back(std::move(e));
    } catch (const Error&) {
      ++d.damaged;
    }
  }
  d.intact = o.records_intact && d.damaged == 0;
  // In path order (as written), so that a path is found by a binary search.
  std::sort(d.index.entries.begin(), d.index.entries.end(),
            [](const EntryRecord& a, const EntryRecord& b) { return a.path < b.path; });
  return d;
} catch (const CacheError&) {
  throw;
} catch (const Error& e) {
  throw CacheError(e.what());
}

}  // namespace npucache::format
