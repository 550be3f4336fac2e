#include "format/profile_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "format/view.h"
#include "h5/h5.h"

#include <npucache/error.h>

#include <map>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

// Far above any input path or method name.
constexpr std::size_t kMaxProfileText = 4096;

}  // namespace

std::string encode_profile_record(const ProfileRecord& r) {
  ByteWriter w;
  w.str(r.model_info);
  w.str(r.method);
  w.str(r.dim.input);
  w.i64(r.dim.dim);
  return w.take();
}

ProfileRecord decode_profile_record(std::string_view body, const std::string& what) try {
  ByteReader r(body, what);
  ProfileRecord p;
  auto text = [&](const char* field) {
    std::string s = r.str();
    if (s.empty() || s.size() > kMaxProfileText) r.fail(std::string("a record's ") + field + " is empty or too long");
    return s;
  };
  p.model_info = text("model_info");
  if (!names::valid_name(p.model_info)) r.fail("a record names an invalid model_info '" + p.model_info + "'");
  p.method = text("method");
  if (!names::valid_name(p.method)) r.fail("a record names an invalid method '" + p.method + "'");
  p.dim.input = text("input path");
  p.dim.dim = r.i64();
  if (p.dim.dim < 0 || p.dim.dim >= kMaxProfileDim) r.fail("a record names dim " + std::to_string(p.dim.dim));
  if (!r.done()) r.fail("a record has trailing bytes");
  return p;
} catch (const CacheError&) {
  throw;
} catch (const Error& e) {
  throw CacheError(e.what());
}

std::string encode_profiles(const std::vector<ProfileRecord>& records) {
  if (records.size() > kMaxProfileRecords)
    throw CacheError("the dynamic-shape profiles hold " + std::to_string(records.size()) +
                     " dims, more than a file holds");
  std::vector<std::string> bodies;
  std::map<std::string, std::vector<std::string>> lines;  // model_info -> its dims
  for (const auto& r : records) {
    bodies.push_back(encode_profile_record(r));
    lines[r.model_info].push_back(r.method + ": " + r.dim.input + " dim " + std::to_string(r.dim.dim));
  }
  const std::size_t userblock = userblock_for(bodies);
  std::string image;
  {
    auto guard = h5::lock();
    h5::Handle f = create_view(userblock, EnvelopeKind::profile);
    h5::write_attr(f.id(), "dims", static_cast<int64_t>(records.size()));
    for (const auto& [model_info, ls] : lines) {
      h5::Handle g = h5::create_group(f.id(), model_info);
      h5::write_strings(g.id(), names::kProfileDataset, ls);
    }
    image = h5::image_bytes(f.id());
  }
  return seal(EnvelopeKind::profile, bodies, std::move(image), userblock);
}

std::vector<ProfileRecord> decode_profiles(std::string_view file, const std::string& what) {
  if (file.size() > kMaxProfileFileBytes)
    throw CacheError(what + " is " + std::to_string(file.size()) + " bytes, too large");
  const Opened o = open_envelope(EnvelopeKind::profile, file, what);
  if (!o.records_intact)
    throw CacheError(what + " is damaged: its records fail their checksums (" + std::to_string(o.damaged_records) +
                     " unreadable)");
  if (!o.hdf5_intact) throw CacheError(what + " is damaged: its HDF5 part fails its checksum");
  if (o.records.size() > kMaxProfileRecords)
    throw CacheError(what + " is damaged: it holds " + std::to_string(o.records.size()) + " records");
  std::vector<ProfileRecord> out;
  out.reserve(o.records.size());
  for (const auto& body : o.records) out.push_back(decode_profile_record(body, what));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace npucache::format
