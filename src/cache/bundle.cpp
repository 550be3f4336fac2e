#include "cache/bundle.h"

#include "cache/cache_error.h"
#include "cache/zstd_codec.h"

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/iostreams/device/array.hpp>
#include <boost/iostreams/stream.hpp>
#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <xxhash.h>

#include <cstring>
#include <sstream>

namespace boost::serialization {
template <class A>
void serialize(A& ar, npucache::cache::Producer& p, unsigned) {
  ar & p.world_size & p.global_rank & p.tp_rank & p.pp_rank & p.host & p.pid;
}
template <class A>
void serialize(A& ar, npucache::cache::ObjectMeta& m, unsigned) {
  ar & m.checksum & m.raw_size & m.stored_size & m.with_program & m.compile_time_s & m.pass_times & m.mode &
      m.dynamic & m.canonical_hash & m.producer & m.date & m.version;
}
template <class A>
void serialize(A& ar, npucache::cache::EntryMeta& m, unsigned) {
  ar & m.name & m.date & m.version & m.fx & m.lookup_key & m.model_info & m.components & m.rank;
}
template <class A>
void serialize(A& ar, npucache::cache::EntryRecord& e, unsigned) {
  ar & e.path & e.meta & e.parameters & e.graph_key & e.object;
}
template <class A>
void serialize(A& ar, npucache::cache::ObjectRecord& o, unsigned) {
  ar & o.graph_key & o.raw & o.graph_text & o.meta;
}
template <class A>
void serialize(A& ar, npucache::cache::Bundle& b, unsigned) {
  ar & b.entries & b.objects;
}
}  // namespace boost::serialization

namespace npucache::cache {
namespace {
constexpr char kMagic[8] = {'N', 'P', 'U', 'C', 'B', 'N', 'D', 'L'};
constexpr uint32_t kVersion = 2;  // 2: typed records
constexpr std::size_t kHeader = 28;

template <class T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);  // little-endian hosts only (x86-64, aarch64)
  s.append(b, sizeof b);
}
template <class T>
T get(std::string_view s, std::size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}
}  // namespace

std::string write_bundle(const Bundle& b) {
  std::ostringstream os(std::ios::binary);
  {
    boost::archive::binary_oarchive ar(os, boost::archive::no_header);
    ar << b;
  }
  const std::string payload = zstd_compress(os.str());
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, XXH3_64bits(payload.data(), payload.size()));
  return out + payload;
}

Bundle read_bundle(std::string_view bytes) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw CacheError("not an npucache bundle (bad magic); export one with `npucache export`");
  const auto version = get<uint32_t>(bytes, 8);
  if (version != kVersion)
    throw CacheError("bundle format version " + std::to_string(version) + " is not supported (this build reads " +
                     std::to_string(kVersion) + ")");
  const auto len = get<uint64_t>(bytes, 12);
  if (bytes.size() - kHeader != len)
    throw CacheError("bundle is truncated or padded: header says " + std::to_string(len) + " payload bytes, found " +
                     std::to_string(bytes.size() - kHeader));
  const std::string_view payload = bytes.substr(kHeader);
  if (XXH3_64bits(payload.data(), payload.size()) != get<uint64_t>(bytes, 20))
    throw CacheError("bundle checksum mismatch: the bundle is corrupt");
  const std::string raw = zstd_decompress(payload);
  Bundle b;
  try {
    boost::iostreams::stream<boost::iostreams::array_source> is(raw.data(), raw.size());
    boost::archive::binary_iarchive ar(is, boost::archive::no_header);
    ar >> b;
  } catch (const std::exception& e) {
    throw CacheError(std::string("bundle payload is not readable: ") + e.what());
  }
  return b;
}

}  // namespace npucache::cache
