#include "format/envelope.h"

#include "compiler/wire.h"
#include "format/cache_error.h"

#include <xxhash.h>

#include <cstring>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

constexpr std::size_t kEnvelopeHeader = 56;
constexpr uint32_t kEnvelopeVersion = 1;
constexpr std::size_t kRecordHead = sizeof(uint32_t) + sizeof(uint64_t);

const char* magic(EnvelopeKind k) {
  switch (k) {
    case EnvelopeKind::index: return "NPUCIDX1";
    case EnvelopeKind::object: return "NPUCOBJ1";
    case EnvelopeKind::tuning: return "NPUCTUN1";
    case EnvelopeKind::profile: return "NPUCPRF1";
    case EnvelopeKind::capture_template: return "NPUCTPL1";
    case EnvelopeKind::compiled_region: return "NPUCRGN1";
  }
  return "NPUC????";
}

uint64_t hash(std::string_view b) { return XXH3_64bits(b.data(), b.size()); }

}  // namespace

const char* kind_name(EnvelopeKind k) {
  switch (k) {
    case EnvelopeKind::index: return "index";
    case EnvelopeKind::object: return "object";
    case EnvelopeKind::tuning: return "tuning";
    case EnvelopeKind::profile: return "profile";
    case EnvelopeKind::capture_template: return "template";
    case EnvelopeKind::compiled_region: return "region";
  }
  return "unknown";
}

std::size_t userblock_for(const std::vector<std::string>& records) {
  std::size_t need = kEnvelopeHeader;
  for (const auto& r : records) need += kRecordHead + r.size();
  std::size_t u = 512;
  while (u < need) u *= 2;
  return u;
}

std::string seal(EnvelopeKind kind, const std::vector<std::string>& records, std::string hdf5_image,
                 std::size_t userblock) {
  ByteWriter rec;
  for (const auto& r : records) {
    rec.u32(static_cast<uint32_t>(r.size()));
    rec.u64(hash(r));
    rec.bytes(r);
  }
  const std::string body = rec.take();
  if (kEnvelopeHeader + body.size() > userblock)
    throw CacheError("internal: the userblock of " + std::to_string(userblock) + " bytes cannot hold the records");
  // HDF5 gives the image of a file made with a userblock without the
  // userblock itself (its superblock records the offset): it goes after ours.
  const std::string_view hdf5 = hdf5_image;
  ByteWriter h;
  h.bytes(std::string_view(magic(kind), 8));
  h.u32(kEnvelopeVersion);
  h.u32(static_cast<uint32_t>(userblock));
  h.u64(body.size());
  // Over the whole rest of the userblock (records and zero padding), so a
  // damaged byte anywhere in it is found.
  std::string region(userblock - kEnvelopeHeader, '\0');
  std::memcpy(region.data(), body.data(), body.size());
  h.u64(hash(region));
  h.u64(hdf5.size());
  h.u64(hash(hdf5));
  h.u64(hash(h.data()));
  std::string out(userblock, '\0');
  std::memcpy(out.data(), h.data().data(), kEnvelopeHeader);
  std::memcpy(out.data() + kEnvelopeHeader, body.data(), body.size());
  out += hdf5_image;
  return out;
}

bool has_magic(EnvelopeKind kind, std::string_view head) {
  return head.size() >= 8 && std::memcmp(head.data(), magic(kind), 8) == 0;
}

std::size_t envelope_userblock(std::string_view head) {
  if (head.size() < 16) return 0;
  ByteReader h(head.substr(12, 4), "a file header");
  return h.u32();
}

Opened open_envelope(EnvelopeKind kind, std::string_view file, const std::string& what) {
  auto damaged = [&](const std::string& why) -> CacheError {
    return CacheError(what + " is damaged or not npucache's: " + why);
  };
  if (file.size() < kEnvelopeHeader + 512) throw damaged("it is " + std::to_string(file.size()) + " bytes, too short");
  if (std::memcmp(file.data(), magic(kind), 8) != 0) throw damaged("its header has the wrong magic");
  ByteReader h(file.substr(8, kEnvelopeHeader - 8), what);
  const uint32_t version = h.u32(), userblock = h.u32();
  const uint64_t rec_len = h.u64(), rec_sum = h.u64(), hdf5_len = h.u64(), hdf5_sum = h.u64(), head_sum = h.u64();
  if (head_sum != hash(file.substr(0, 48))) throw damaged("its header fails its checksum");
  if (version > kEnvelopeVersion)  // an intact header of a later envelope: a later format's file
    throw OtherFormat(what + " is of another npucache cache format: envelope version " + std::to_string(version) +
                      " (this build reads " + std::to_string(kEnvelopeVersion) + ")");
  if (version != kEnvelopeVersion) throw damaged("envelope version " + std::to_string(version) + " is not supported");
  Opened o;
  o.userblock = userblock;
  if (o.userblock < 512 || (o.userblock & (o.userblock - 1)) != 0 || o.userblock > file.size() ||
      rec_len > o.userblock - kEnvelopeHeader)
    throw damaged("its header's sizes are inconsistent");
  o.hdf5 = file.substr(o.userblock);
  o.hdf5_intact = o.hdf5.size() == hdf5_len && hash(o.hdf5) == hdf5_sum;
  const std::string_view rec = file.substr(kEnvelopeHeader, static_cast<std::size_t>(rec_len));
  const bool all = hash(file.substr(kEnvelopeHeader, o.userblock - kEnvelopeHeader)) == rec_sum;
  // Record by record, each against its own checksum.
  ByteReader r(rec, what);
  while (r.remaining() >= kRecordHead) {
    const uint32_t len = r.u32();
    const uint64_t sum = r.u64();
    if (len > r.remaining()) {
      ++o.damaged_records;  // the rest cannot be framed
      break;
    }
    const std::string_view body = r.bytes(len);
    if (hash(body) == sum)
      o.records.emplace_back(body);
    else
      ++o.damaged_records;
  }
  const std::size_t at = rec.size() - r.remaining();
  if (at != rec.size() && o.damaged_records == 0) ++o.damaged_records;
  o.records_intact = all && o.damaged_records == 0;
  return o;
}

}  // namespace npucache::format
