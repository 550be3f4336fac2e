#include "format/region_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "format/view.h"
#include "h5/h5.h"
#include "zstd/zstd_codec.h"

#include <npucache/error.h>
#include <npucache/ir/graph.h>
#include <npucache/ir/hash.h>

#include <xxhash.h>

#include <sstream>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;

namespace {

void check_names(const RegionValidity& v, const compiler::RegionArtifact& a) {
  if (a.key != v.region) throw VerifyError("the region's body is " + a.key + ", not " + v.region);
  if (a.config.hash().hex() != v.config) throw VerifyError("the region was compiled with another config");
}

std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

std::string region_key(const RegionValidity& v) {
  const std::string s = "region|" + v.region + "|" + v.config + "|" + v.runtime_version + "|" + v.decompositions + "|" +
                        v.dynamic + "|" + v.format_version;
  const XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Hash128{h.high64, h.low64}.hex();
}

std::string encode_region_file(const RegionValidity& v, const compiler::RegionArtifact& a) {
  check_names(v, a);
  const std::string raw = compiler::serialize_region(a);
  ByteWriter w;
  w.str(v.region);
  w.str(v.config);
  w.str(v.runtime_version);
  w.str(v.decompositions);
  w.str(v.dynamic);
  w.str(v.format_version);
  w.u64(raw.size());
  w.str(zstd::compress(raw));
  const std::vector<std::string> records{w.take()};
  const std::size_t userblock = userblock_for(records);
  std::string image;
  {
    auto guard = h5::lock();
    h5::Handle f = create_view(userblock, EnvelopeKind::compiled_region);
    const h5::Id root = f.id();
    h5::write_attr(root, "region", v.region);
    h5::write_attr(root, "region_key", region_key(v));
    h5::write_attr(root, "runtime_version", v.runtime_version);
    h5::write_attr(root, "decompositions", v.decompositions);
    h5::write_attr(root, "dynamic", v.dynamic);
    h5::write_attr(root, "mode", std::string(compile_mode_name(a.config.mode)));
    h5::write_attr(root, "steps", static_cast<int64_t>(a.compiled.program.steps.size()));
    h5::write_attr(root, "streams", static_cast<int64_t>(a.compiled.program.num_streams));
    h5::write_attr(root, "decisions", static_cast<int64_t>(a.compiled.autotune.size()));
    h5::write_strings(root, "body", text_lines(print_graph(a.body)));
    image = h5::image_bytes(f.id());
  }
  return seal(EnvelopeKind::compiled_region, records, std::move(image), userblock);
}

RegionRecord decode_region_file(std::string_view file, const std::string& what) {
  if (file.size() > kMaxRegionFileBytes)
    throw CacheError(what + " is " + std::to_string(file.size()) + " bytes, too large");
  const Opened o = open_envelope(EnvelopeKind::compiled_region, file, what);
  if (!o.records_intact || o.records.size() != 1) throw CacheError(what + " is damaged: its record fails its checksum");
  if (!o.hdf5_intact) throw CacheError(what + " is damaged: its HDF5 part fails its checksum");
  try {
    ByteReader r(o.records[0], "its record");
    RegionRecord rec;
    RegionValidity& v = rec.validity;
    v.region = r.str();
    v.config = r.str();
    v.runtime_version = r.str();
    v.decompositions = r.str();
    v.dynamic = r.str();
    v.format_version = r.str();
    // An intact record of another cache format (its program's encoding
    // may differ; no key of this build names it): never read further,
    // never called damaged. A later format's is another build's; an
    // earlier format's is stale (format/cache_error.h).
    if (names::later_format(v.format_version))
      throw OtherFormat(what + " is of another npucache cache format: " + v.format_version + " (this build's is " +
                        names::kFormatVersion + ")");
    if (v.format_version != names::kFormatVersion)
      throw StaleFormat(what + " was stored by an earlier npucache cache format: " + v.format_version +
                        " (this build's is " + names::kFormatVersion + "; it compiles its own)");
    const uint64_t raw_size = r.u64();
    const std::string frame = r.str();
    if (!r.done()) r.fail("its record has trailing bytes");
    if (raw_size > kMaxRegionBytes) r.fail("its region claims " + std::to_string(raw_size) + " bytes");
    const std::string raw = zstd::decompress(frame, raw_size);
    if (raw.size() != raw_size) r.fail("its region is not the size its record says");
    rec.artifact = compiler::deserialize_region(raw);
    check_names(v, rec.artifact);
    return rec;
  } catch (const CacheRefused&) {
    throw;
  } catch (const OtherFormat&) {
    throw;
  } catch (const StaleFormat&) {
    throw;
  } catch (const Error& e) {
    throw CacheError(what + " is damaged: " + e.what());
  }
}

}  // namespace npucache::format
