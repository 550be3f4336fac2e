#include "format/tuning_file.h"

#include "compiler/wire.h"
#include "format/cache_error.h"
#include "format/envelope.h"
#include "format/names.h"
#include "format/view.h"
#include "h5/h5.h"

#include <npucache/error.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
using compiler::TuningRecord;
namespace {

// Far above any real signature, runtime or configuration text.
constexpr std::size_t kMaxTuningText = 64 * 1024;
// Far above the candidates autotune compares.
constexpr int64_t kMaxCandidates = 4096;

}  // namespace

std::string encode_tuning_record(const TuningRecord& r) {
  ByteWriter w;
  w.str(r.runtime);
  w.str(r.key);
  w.str(r.entry.chosen);
  w.f64(r.entry.best_us);
  w.f64(r.entry.default_us);
  w.i64(r.entry.candidates);
  w.str(r.entry.timed_on);
  return w.take();
}

TuningRecord decode_tuning_record(std::string_view body, const std::string& what) try {
  ByteReader r(body, what);
  TuningRecord t;
  auto text = [&](const char* field, bool may_be_empty) {
    std::string s = r.str();
    if (s.size() > kMaxTuningText) r.fail(std::string("its ") + field + " is " + std::to_string(s.size()) + " bytes");
    if (s.empty() && !may_be_empty) r.fail(std::string("a record has an empty ") + field);
    return s;
  };
  t.runtime = text("runtime", false);
  t.key = text("signature", false);
  t.entry.chosen = text("chosen configuration", false);
  t.entry.best_us = r.f64();
  t.entry.default_us = r.f64();
  if (!std::isfinite(t.entry.best_us) || !std::isfinite(t.entry.default_us) || t.entry.best_us < 0 ||
      t.entry.default_us < 0)
    r.fail("a record has an invalid time");
  const int64_t n = r.i64();
  if (n < 0 || n > kMaxCandidates) r.fail("a record claims " + std::to_string(n) + " candidates");
  t.entry.candidates = static_cast<int>(n);
  t.entry.timed_on = text("timed_on note", true);
  if (!r.done()) r.fail("a record has trailing bytes");
  return t;
} catch (const CacheError&) {
  throw;
} catch (const Error& e) {
  throw CacheError(e.what());
}

namespace {

std::string fmt_us(double us) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", us);
  return b;
}

// An HDF5 link name for a runtime: no '/', not "." (the runtime attribute
// spells it exactly); unique among the file's groups.
std::string group_name(const std::string& runtime, std::set<std::string>& used) {
  std::string g = runtime;
  for (char& c : g)
    if (c == '/') c = '_';
  if (g.empty() || g == "." || g == "..") g = "runtime " + g;
  std::string u = g;
  for (int i = 2; !used.insert(u).second; ++i) u = g + " #" + std::to_string(i);
  return u;
}

}  // namespace

std::string encode_tuning(const std::vector<TuningRecord>& records) {
  if (records.size() > kMaxTuningRecords)
    throw CacheError("the tuning table has " + std::to_string(records.size()) + " decisions, more than a file holds");
  std::vector<std::string> bodies;
  bodies.reserve(records.size());
  std::map<std::string, std::vector<std::string>> lines;  // runtime -> its decisions
  for (const auto& r : records) {
    bodies.push_back(encode_tuning_record(r));
    std::string line = r.key + " | " + r.entry.chosen + " | best " + fmt_us(r.entry.best_us) + " us | default " +
                       fmt_us(r.entry.default_us) + " us | " + std::to_string(r.entry.candidates) + " candidates";
    if (!r.entry.timed_on.empty()) line += " | " + r.entry.timed_on;
    lines[r.runtime].push_back(std::move(line));
  }
  const std::size_t userblock = userblock_for(bodies);
  std::string image;
  {
    auto guard = h5::lock();
    h5::Handle f = create_view(userblock, EnvelopeKind::tuning);
    const h5::Id root = f.id();
    h5::write_attr(root, "decisions", static_cast<int64_t>(records.size()));
    std::set<std::string> used;
    for (const auto& [runtime, ls] : lines) {
      h5::Handle g = h5::create_group(root, group_name(runtime, used));
      h5::write_attr(g.id(), "runtime", runtime);
      h5::write_strings(g.id(), names::kTuningDataset, ls);
    }
    image = h5::image_bytes(f.id());
  }
  return seal(EnvelopeKind::tuning, bodies, std::move(image), userblock);
}

std::vector<TuningRecord> decode_tuning(std::string_view file, const std::string& what) {
  if (file.size() > kMaxTuningFileBytes)
    throw CacheError(what + " is " + std::to_string(file.size()) + " bytes, too large");
  const Opened o = open_envelope(EnvelopeKind::tuning, file, what);
  if (!o.records_intact)
    throw CacheError(what + " is damaged: its records fail their checksums (" + std::to_string(o.damaged_records) +
                     " unreadable)");
  if (!o.hdf5_intact) throw CacheError(what + " is damaged: its HDF5 part fails its checksum");
  if (o.records.size() > kMaxTuningRecords)
    throw CacheError(what + " is damaged: it holds " + std::to_string(o.records.size()) + " records");
  std::vector<TuningRecord> out;
  out.reserve(o.records.size());
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& body : o.records) {
    out.push_back(decode_tuning_record(body, what));
    if (!seen.insert({out.back().runtime, out.back().key}).second)
      throw CacheError(what + " is damaged: the decision for '" + out.back().key + "' appears twice");
  }
  return out;
}

}  // namespace npucache::format
