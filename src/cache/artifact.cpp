#include "cache/artifact.h"

#include <npucache/version.h>

#include "cache/cache_error.h"
#include "compiler/serialize.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <unistd.h>

namespace npucache::cache {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string host_name() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::vector<std::string> parameter_names(const compiler::CompiledGraph& g) {
  std::vector<std::string> out;
  for (const Node& n : g.trace.graph.nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) out.push_back(n.target);
  return out;
}

}  // namespace

std::string now_string() {
  auto t = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  std::tm tm;
  localtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%06lld", buf, static_cast<long long>(us));
  return out;
}

ObjectRecord make_object(const compiler::CompiledGraph& g, const std::string& graph_key, bool with_program,
                         const Producer& who, const std::string* raw) {
  ObjectRecord o;
  o.graph_key = graph_key;
  o.raw = raw ? *raw : compiler::serialize_compiled(g, with_program);
  o.graph_text = lines(print_graph(g.trace.graph));
  o.attrs["with_program"] = with_program ? "true" : "false";
  o.attrs["compile_time_s"] = std::to_string(g.compile_seconds);
  std::string passes;
  for (const auto& t : g.timings) passes += (passes.empty() ? "" : "; ") + t.name + "=" + std::to_string(t.seconds * 1e3) + "ms";
  o.attrs["pass_times"] = passes;
  o.attrs["mode"] = std::string(compile_mode_name(g.config.mode));
  o.attrs["dynamic"] = g.dynamic ? "true" : "false";
  o.attrs["canonical_hash"] = canonical_hash(g.trace.graph).hex();
  o.attrs["producer_host"] = host_name();
  o.attrs["producer_pid"] = std::to_string(::getpid());
  o.attrs["producer_rank"] = std::to_string(who.global_rank);
  o.attrs["date"] = now_string();
  o.attrs["version"] = version();
  return o;
}

EntryRecord make_entry(const compiler::CompiledGraph& g, const std::string& path, const LookupKey& key,
                       const std::string& graph_key, const Producer& who, const ObjectRecord& object) {
  EntryRecord e;
  e.path = path;
  e.graph_key = graph_key;
  e.parameters = parameter_names(g);
  e.attrs = key.components;
  e.attrs["name"] = g.trace.name;
  e.attrs["date"] = now_string();
  e.attrs["version"] = version();
  e.attrs["fx"] = "None";
  e.attrs["lookup_key"] = key.hash;
  e.attrs["model_info"] = key.model_info;
  e.attrs["world_size"] = std::to_string(who.world_size);
  e.attrs["global_rank"] = std::to_string(who.global_rank);
  e.attrs["tp_rank"] = std::to_string(who.tp_rank);
  e.attrs["pp_rank"] = std::to_string(who.pp_rank);
  for (const char* k : {"compile_time_s", "pass_times", "checksum", "raw_size", "stored_size", "producer_host",
                        "producer_pid", "producer_rank", "with_program"}) {
    auto it = object.attrs.find(k);
    if (it != object.attrs.end()) e.attrs[k] = it->second;
  }
  if (!e.attrs.count("checksum")) e.attrs["checksum"] = checksum(object.raw);
  if (!e.attrs.count("raw_size")) e.attrs["raw_size"] = std::to_string(object.raw.size());
  return e;
}

std::shared_ptr<compiler::CompiledGraph> load_object(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                     bool* has_program) {
  auto g = std::make_shared<compiler::CompiledGraph>();
  try {
    *g = compiler::deserialize_compiled(o.raw, has_program);
  } catch (const Error& e) {
    throw CacheError(std::string("object ") + o.graph_key + " cannot be decoded: " + e.what());
  }
  // Rebind parameter placeholders (graph order) to this entry's names.
  std::size_t k = 0;
  for (Node& n : g->trace.graph.mutable_nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) {
      if (k >= parameters.size()) throw CacheError("entry lists fewer parameters than object " + o.graph_key + " uses");
      n.target = parameters[k++];
    }
  if (k != parameters.size()) throw CacheError("entry lists more parameters than object " + o.graph_key + " uses");
  // The program and the optimized graph keep the traced placeholder order.
  for (std::size_t j = 0; j < g->program.parameters.size() && j < parameters.size(); ++j)
    g->program.parameters[j].name = parameters[j];
  std::size_t m = 0;
  for (Node& n : g->optimized.mutable_nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input && m < parameters.size()) n.target = parameters[m++];
  return g;
}

std::string model_cache_meta(const EntryRecord& e) {
  auto get = [&](const char* k) {
    auto it = e.attrs.find(k);
    return it == e.attrs.end() ? std::string() : it->second;
  };
  return "ModelCacheMeta(name='" + get("name") + "', date='" + get("date") + "', version='" + get("version") +
         "', fx=" + get("fx") + ")";
}

}  // namespace npucache::cache
