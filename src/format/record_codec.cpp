#include "format/record_codec.h"

#include "format/keys.h"
#include "format/names.h"
#include "zstd/zstd_codec.h"

#include <cmath>

namespace npucache::format {
using compiler::ByteReader;
using compiler::ByteWriter;
namespace {

constexpr uint8_t kModel = 'M';
constexpr uint8_t kEntry = 'E';
constexpr uint8_t kObject = 'O';
constexpr uint8_t kSequence = 'Q';
// The kind bytes of the index records of formats 2.0.0 and 3.0.0.
constexpr uint8_t kEarlierModel = 1;
constexpr uint8_t kEarlierEntry = 2;
// Ranks and sizes a record may name: [-1, 2^30] (-1: not in such a group).
constexpr int64_t kMaxRank = int64_t{1} << 30;

const char* record_kind_name(uint8_t k) {
  switch (k) {
    case kModel: return "model";
    case kEntry: return "entry";
    case kObject: return "object";
    case kSequence: return "sequence";
  }
  return "unknown";
}

void head(ByteWriter& w, uint8_t kind, uint8_t encoding = kRecordEncoding) {
  w.u8(kind);
  w.u8(encoding);
}

// The kind letter and encoding version: of `kind` and an encoding in
// [oldest, newest], or the record is refused naming what it is. Returns the
// encoding.
uint8_t expect(ByteReader& r, uint8_t kind, uint8_t oldest, uint8_t newest) {
  const uint8_t k = r.u8();
  if (k != kind) {
    const char* what = record_kind_name(k);
    r.fail(std::string("a record of kind ") + (std::string(what) == "unknown" ? std::to_string(k) : what) +
           " stands where a " + record_kind_name(kind) + " record belongs");
  }
  const uint8_t v = r.u8();
  const std::string name = record_kind_name(kind);
  if (v < oldest || v > newest)
    r.fail(std::string(name[0] == 'e' || name[0] == 'o' ? "an " : "a ") + name + " record of encoding " +
           std::to_string(v) + " (this build reads " + std::to_string(oldest) +
           (oldest == newest ? "" : " to " + std::to_string(newest)) + ")");
  return v;
}

// A field of names (an entry's parameter names, a model's components) as
// records of format 10.0.0 hold it: u64 its encoded size, then str a zstd
// frame of it. Names of one model repeat their prefixes
// ("layers.17.self_attn."), so the frame is a tenth of the field or less.
void write_frame(ByteWriter& w, const std::string& raw) {
  w.u64(raw.size());
  w.str(zstd::compress(raw));
}

// The field's bytes; its size is checked against kMaxCompressedField before
// anything is allocated.
std::string read_frame(ByteReader& r, const std::string& what) {
  const uint64_t size = r.u64();
  if (size > kMaxCompressedField)
    r.fail(what + " claim " + std::to_string(size) + " bytes (at most " + std::to_string(kMaxCompressedField) + ")");
  const std::string frame = r.str();
  if (size > kMaxCompressionRatio * frame.size() + 1024)
    r.fail(what + " claim " + std::to_string(size) + " bytes from a frame of " + std::to_string(frame.size()) +
           " (at most " + std::to_string(kMaxCompressionRatio) + " per byte)");
  std::string raw;
  try {
    raw = zstd::decompress(frame, static_cast<std::size_t>(size));
  } catch (const Error& e) {
    r.fail(what + " do not decompress: " + e.what());
  }
  if (raw.size() != size) r.fail(what + " are not the size the record says");
  return raw;
}

void write_parameter_names(ByteWriter& w, const std::vector<std::string>& names) {
  ByteWriter raw;
  raw.strings(names);
  write_frame(w, raw.take());
}

std::vector<std::string> read_parameter_names(ByteReader& r) {
  const std::string raw = read_frame(r, "its parameter names");
  ByteReader names(raw, "its parameter names");
  std::vector<std::string> out = names.strings();
  if (!names.done()) names.fail("they have trailing bytes");
  return out;
}

void expect(ByteReader& r, uint8_t kind) { expect(r, kind, kRecordEncoding, kRecordEncoding); }

bool flag(ByteReader& r, const char* what) {
  const uint8_t v = r.u8();
  if (v > 1) r.fail(std::string(what) + " is " + std::to_string(v) + ", not 0 or 1");
  return v == 1;
}

int rank_field(ByteReader& r, const char* what) {
  const int64_t v = r.i64();
  if (v < -1 || v > kMaxRank) r.fail(std::string(what) + " is out of range");
  return static_cast<int>(v);
}

double seconds(ByteReader& r, const char* what) {
  const double v = r.f64();
  if (!std::isfinite(v) || v < 0) r.fail(std::string(what) + " is not a time");
  return v;
}

std::string checksum_field(ByteReader& r, const char* what) {
  std::string s = r.str();
  if (!is_checksum(s)) r.fail(std::string(what) + " '" + s.substr(0, 40) + "' is not 16 hex digits");
  return s;
}

std::string graph_key_field(ByteReader& r) {
  std::string k = r.str();
  if (!names::valid_graph_key(k)) r.fail("graph key '" + k.substr(0, 40) + "' is malformed");
  return k;
}

bool is_entry_component(const std::string& k) {
  for (const auto& n : entry_component_names())
    if (n == k) return true;
  return false;
}

// The entry's components: its model's, then its own.
void bind(EntryRecord& e, const ModelRecord& model, ByteReader& r) {
  if (!names::valid_entry_path(e.path) || names::model_info_of(e.path) != model.model_info)
    r.fail("entry path '" + e.path.substr(0, 300) + "' is not an entry of " + model.model_info);
  e.meta.model_info = model.model_info;
  Components own = std::move(e.meta.components);
  e.meta.components = model.components;
  for (auto& [k, v] : own) e.meta.components[k] = std::move(v);
}

}  // namespace

const std::vector<std::string>& entry_component_names() {
  using namespace component;
  static const auto& names =  // never destroyed: a commit draining at exit reads it
      *new const std::vector<std::string>{kFormatVersion, kRuntimeVersion, kMethod, kCodeVersion};
  return names;
}

ModelRecord model_of(const EntryRecord& e) { return {e.meta.model_info, model_components(e.meta.components)}; }

bool is_checksum(std::string_view s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void write_model(ByteWriter& w, const ModelRecord& m) {
  head(w, kModel, kModelEncoding);
  w.str(m.model_info);
  ByteWriter c;
  c.u32(static_cast<uint32_t>(m.components.size()));
  for (const auto& [k, v] : m.components) {
    c.str(k);
    c.str(v);
  }
  write_frame(w, c.take());
}

ModelRecord read_model(ByteReader& r) {
  const uint8_t encoding = expect(r, kModel, kRecordEncoding, kModelEncoding);
  ModelRecord m;
  m.model_info = r.str();
  if (!names::valid_name(m.model_info)) r.fail("model_info '" + m.model_info.substr(0, 300) + "' is malformed");
  const auto components = [&](ByteReader& c) {
    const std::size_t n = c.count(2 * sizeof(uint32_t));
    std::string last;
    for (std::size_t i = 0; i < n; ++i) {
      std::string k = c.str();
      if (is_entry_component(k)) c.fail("the model record holds the entry component " + k);
      if (i > 0 && k <= last) c.fail("the model record's components are not in name order, each once");
      last = k;
      m.components[std::move(k)] = c.str();
    }
  };
  if (encoding == kRecordEncoding) {
    components(r);
  } else {
    // Every entry of the model gets the model's components: a list above
    // what a writer records is refused, not copied into each.
    const std::string raw = read_frame(r, "its model components");
    ByteReader c(raw, "its model components");
    components(c);
    if (!c.done()) c.fail("they have trailing bytes");
  }
  if (const auto it = m.components.find(component::kParameterList);
      it != m.components.end() && it->second.size() > kMaxParameterList)
    r.fail("its parameter list is " + std::to_string(it->second.size()) + " bytes (a writer records at most " +
           std::to_string(kMaxParameterList) + ")");
  return m;
}

void write_sequence(ByteWriter& w, const SequenceRecord& q) {
  head(w, kSequence);
  w.u8(q.delta ? 1 : 0);
  w.u64(q.generation);
  w.u64(q.first);
  w.u64(q.last);
  w.strings(q.removed);
}

SequenceRecord read_sequence(ByteReader& r, const ModelRecord& model) {
  expect(r, kSequence);
  SequenceRecord q;
  q.delta = flag(r, "the delta flag");
  q.generation = r.u64();
  q.first = r.u64();
  q.last = r.u64();
  if (q.delta ? (q.first == 0 || q.last < q.first) : q.first != 0) r.fail("the sequence record's range is malformed");
  if (q.last > (uint64_t{1} << 62)) r.fail("the sequence record's last number is out of range");
  q.removed = r.strings();
  if (!q.delta && !q.removed.empty()) r.fail("a base index record removes entries");
  for (const auto& p : q.removed)
    if (!names::valid_entry_path(p) || names::model_info_of(p) != model.model_info)
      r.fail("removed entry '" + p.substr(0, 300) + "' is not an entry of model " + model.model_info);
  return q;
}

bool is_sequence_record(std::string_view body) { return !body.empty() && static_cast<uint8_t>(body[0]) == kSequence; }

void write_producer(ByteWriter& w, const Producer& p) {
  w.i64(p.world_size);
  w.i64(p.global_rank);
  w.i64(p.tp_rank);
  w.i64(p.pp_rank);
  w.str(p.host);
  w.i64(p.pid);
}

Producer read_producer(ByteReader& r) {
  Producer p;
  p.world_size = rank_field(r, "world_size");
  p.global_rank = rank_field(r, "global_rank");
  p.tp_rank = rank_field(r, "tp_rank");
  p.pp_rank = rank_field(r, "pp_rank");
  p.host = r.str();
  p.pid = static_cast<long>(r.i64());
  return p;
}

void write_entry(ByteWriter& w, const EntryRecord& e) {
  head(w, kEntry, kEntryEncoding);
  w.str(e.path);
  for (const auto& n : entry_component_names()) {
    auto it = e.meta.components.find(n);
    w.str(it == e.meta.components.end() ? "" : it->second);
  }
  w.str(e.meta.name);
  w.str(e.meta.date);
  w.str(e.meta.version);
  w.str(e.meta.fx);
  w.str(e.meta.lookup_key);
  write_producer(w, e.meta.rank);
  write_parameter_names(w, e.parameters);
  w.str(e.graph_key);
  w.str(e.object_checksum);
  w.f64(e.compile_time_s);
  w.u8(e.with_program ? 1 : 0);
}

EntryRecord read_entry(ByteReader& r, const ModelRecord& model) {
  const uint8_t encoding = expect(r, kEntry, kRecordEncoding, kEntryEncoding);
  EntryRecord e;
  e.path = r.str();
  for (const auto& n : entry_component_names()) e.meta.components[n] = r.str();
  // Encoding 1 is read only for what earlier formats wrote (reported stale).
  if (encoding == kRecordEncoding && e.meta.components[component::kFormatVersion] == names::kFormatVersion)
    r.fail(std::string("an entry record of encoding 1 claims format ") + names::kFormatVersion +
           ", which writes encoding " + std::to_string(kEntryEncoding));
  bind(e, model, r);
  e.meta.name = r.str();
  e.meta.date = r.str();
  e.meta.version = r.str();
  e.meta.fx = r.str();
  e.meta.lookup_key = r.str();
  e.meta.rank = read_producer(r);
  e.parameters = encoding == kRecordEncoding ? r.strings() : read_parameter_names(r);
  e.graph_key = graph_key_field(r);
  e.object_checksum = checksum_field(r, "the object checksum");
  e.compile_time_s = seconds(r, "compile_time_s");
  e.with_program = flag(r, "with_program");
  return e;
}

void write_object_meta(ByteWriter& w, const std::string& graph_key, const ObjectMeta& m) {
  head(w, kObject);
  w.str(graph_key);
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

ObjectMeta read_object_meta(ByteReader& r, std::string& graph_key) {
  expect(r, kObject);
  ObjectMeta m;
  graph_key = graph_key_field(r);
  m.checksum = checksum_field(r, "the content hash");
  m.raw_size = r.u64();
  if (m.raw_size > kMaxArtifactBytes) r.fail("it claims " + std::to_string(m.raw_size) + " bytes");
  m.with_program = flag(r, "with_program");
  m.compile_time_s = seconds(r, "compile_time_s");
  m.pass_times = r.str();
  m.mode = r.str();
  m.dynamic = flag(r, "dynamic");
  m.canonical_hash = r.str();
  m.producer = read_producer(r);
  m.date = r.str();
  m.version = r.str();
  return m;
}

void write_object(ByteWriter& w, const ObjectRecord& o) {
  write_object_meta(w, o.graph_key, o.meta);
  w.bytes(o.raw);  // raw_size bytes (the record says how many)
  w.strings(o.graph_text);
}

ObjectRecord read_object(ByteReader& r, uint64_t max_raw_bytes) {
  ObjectRecord o;
  o.meta = read_object_meta(r, o.graph_key);
  if (o.meta.raw_size > max_raw_bytes)
    r.fail("its artifact is " + std::to_string(o.meta.raw_size) + " bytes, above the cap of " +
           std::to_string(max_raw_bytes));
  o.raw = std::string(r.bytes(static_cast<std::size_t>(o.meta.raw_size)));
  o.graph_text = r.strings();
  // Bytes from outside: checked against the content hash made with them.
  if (const std::string sum = checksum(o.raw); sum != o.meta.checksum)
    r.fail("object " + o.graph_key + "'s artifact fails its content hash (recorded " + o.meta.checksum + ", read " +
           sum + ")");
  return o;
}

bool newer_model_record(std::string_view body) {
  return body.size() >= 2 && static_cast<uint8_t>(body[0]) == kModel && static_cast<uint8_t>(body[1]) > kModelEncoding;
}

bool newer_object_record(std::string_view body) {
  return body.size() >= 2 && static_cast<uint8_t>(body[0]) == kObject &&
         static_cast<uint8_t>(body[1]) > kRecordEncoding;
}

bool is_earlier_index_record(std::string_view body) {
  return !body.empty() &&
         (static_cast<uint8_t>(body[0]) == kEarlierModel || static_cast<uint8_t>(body[0]) == kEarlierEntry);
}

ModelRecord read_earlier_model(ByteReader& r) {
  if (r.u8() != kEarlierModel) r.fail("its model record cannot be read");
  ModelRecord m;
  m.model_info = r.str();
  if (!names::valid_name(m.model_info)) r.fail("model_info '" + m.model_info.substr(0, 300) + "' is malformed");
  const std::size_t n = r.count(2 * sizeof(uint32_t));
  for (std::size_t i = 0; i < n; ++i) {
    std::string k = r.str();
    if (is_entry_component(k)) r.fail("the model record holds the entry component " + k);
    m.components[std::move(k)] = r.str();
  }
  return m;
}

EntryRecord read_earlier_entry(ByteReader& r, const ModelRecord& model) {
  using namespace component;
  if (r.u8() != kEarlierEntry) r.fail("an entry record has the wrong kind");
  EntryRecord e;
  e.path = r.str();
  e.meta.name = r.str();
  e.meta.date = r.str();
  e.meta.version = r.str();
  e.meta.fx = r.str();
  e.meta.lookup_key = r.str();
  for (const char* n : {kMethod, kRuntimeVersion, kFormatVersion, kCodeVersion}) e.meta.components[n] = r.str();
  if (e.meta.components[kFormatVersion] == names::kFormatVersion)
    r.fail("an entry of the encoding before format 4.0.0 claims format " + std::string(names::kFormatVersion));
  bind(e, model, r);
  e.meta.rank.world_size = rank_field(r, "world_size");
  e.meta.rank.global_rank = rank_field(r, "global_rank");
  e.meta.rank.tp_rank = rank_field(r, "tp_rank");
  e.meta.rank.pp_rank = rank_field(r, "pp_rank");
  e.parameters = r.strings();
  e.graph_key = graph_key_field(r);
  e.object_checksum = r.str();
  e.compile_time_s = r.f64();
  e.with_program = r.u8() != 0;
  return e;
}

}  // namespace npucache::format
