// Canonical graph hash (see include/npucache/hash.h for the contract).
#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include "ir/storage_writes.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <functional>

namespace npucache {
namespace {

// Bump when the hashed encoding changes: old keys must not collide with new.
// 3: each operand carries the writes in place its storage had before the
// node reading it, and the side-effecting nodes (writes, collectives,
// sends and receives, random draws) are hashed in graph order, the order
// lowering runs them (1 hashed a read before an update and one after
// alike, and two draws or two receives in either order).
constexpr uint64_t kHashEncodingVersion = 3;

class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) {
    if (state_ == nullptr) throw Error("XXH3_createState failed (out of memory)");
    XXH3_128bits_reset(state_);
  }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void u64(uint64_t v) { XXH3_128bits_update(state_, &v, sizeof v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    XXH3_128bits_update(state_, s.data(), s.size());
  }
  Hash128 digest() const {
    XXH128_hash_t h = XXH3_128bits_digest(state_);
    return {h.high64, h.low64};
  }

 private:
  XXH3_state_t* state_;
};

class CanonicalEncoder {
 public:
  CanonicalEncoder(const Graph& g, Hasher& h) : g_(g), h_(h), index_(g.size(), -1), writes_(g) {}

  void run() {
    h_.u64(kHashEncodingVersion);
    order_ = canonical_order(g_);
    for (std::size_t i = 0; i < order_.size(); ++i)
      index_[static_cast<std::size_t>(order_[i])] = static_cast<int64_t>(i);
    h_.u64(order_.size());
    for (ValueId v : order_) encode(v);
    h_.u64(g_.outputs().size());
    for (ValueId out : g_.outputs()) h_.i64(index_[static_cast<std::size_t>(out)]);
    // The side-effecting nodes in the order they run: the numbering above
    // follows their users, not that order.
    std::vector<int64_t> ordered;
    for (std::size_t i = 0; i < g_.size(); ++i)
      if (op_info(g_.nodes()[i].op).side_effect) ordered.push_back(index_[i]);
    h_.u64(ordered.size());
    for (const int64_t i : ordered) h_.i64(i);
  }

  // The symbols met, in the order they were numbered.
  std::vector<std::string> symbols() const {
    std::vector<std::string> out(symbols_.size());
    for (const auto& [name, i] : symbols_) out[i] = name;
    return out;
  }

 private:
  std::string symbol_name(const std::string& s) {
    auto [it, inserted] = symbols_.try_emplace(s, symbols_.size());
    return "$" + std::to_string(it->second);
  }

  void expr(const SymExpr& e) {
    // A constant (most dims) hashes as the renamed form below would make
    // it -- one term of the empty monomial, none for 0 -- without
    // building it.
    if (const auto c = e.try_constant()) {
      h_.u64(*c != 0 ? 1 : 0);
      if (*c != 0) {
        h_.u64(0);
        h_.i64(*c);
      }
      return;
    }
    // Rename symbols canonically, then hash the canonical terms.
    std::map<SymExpr::Monomial, int64_t> renamed;
    for (const auto& [m, c] : e.terms()) {
      SymExpr::Monomial rm;
      for (const auto& s : m) rm.push_back(symbol_name(s));
      renamed[rm] += c;
    }
    SymExpr r = SymExpr::from_terms(std::move(renamed));
    h_.u64(r.terms().size());
    for (const auto& [m, c] : r.terms()) {
      h_.u64(m.size());
      for (const auto& s : m) h_.str(s);
      h_.i64(c);
    }
  }

  void type(const TensorType& t) {
    h_.u64(static_cast<uint64_t>(t.dtype));
    h_.u64(t.shape.size());
    for (const auto& d : t.shape) expr(d);
  }

  void attr(const AttrValue& v) {
    h_.u64(v.index());
    if (const auto* b = std::get_if<bool>(&v))
      h_.u64(*b);
    else if (const auto* i = std::get_if<int64_t>(&v))
      h_.i64(*i);
    else if (const auto* d = std::get_if<double>(&v)) {
      uint64_t bits;
      static_assert(sizeof bits == sizeof *d);
      std::memcpy(&bits, d, sizeof bits);
      h_.u64(bits);
    } else if (const auto* s = std::get_if<std::string>(&v))
      h_.str(*s);
    else if (const auto* iv = std::get_if<std::vector<int64_t>>(&v)) {
      h_.u64(iv->size());
      for (int64_t x : *iv) h_.i64(x);
    } else if (const auto* sv = std::get_if<std::vector<SymExpr>>(&v)) {
      h_.u64(sv->size());
      for (const auto& x : *sv) expr(x);
    } else if (const auto* t = std::get_if<DType>(&v))
      h_.u64(static_cast<uint64_t>(*t));
  }

  void encode(ValueId id) {
    const Node& n = g_.node(id);
    h_.u64(op_number(n.op));  // the pinned number (op.h)
    h_.u64(static_cast<uint64_t>(n.kind));
    h_.u64(n.inputs.size());
    // Each operand with the writes in place its storage had before this
    // node (ir/storage_writes.h): lowering orders a read after the writes
    // before it in graph order, so a read of a cache before its update and
    // one after it are two computations.
    for (ValueId in : n.inputs) {
      h_.i64(index_[static_cast<std::size_t>(in)]);
      h_.u64(writes_.writes_before(static_cast<std::size_t>(id), in));
    }
    h_.u64(n.attrs.items().size());
    for (const auto& [k, v] : n.attrs.items()) {
      h_.str(k);
      attr(v);
    }
    type(n.type);
  }

  const Graph& g_;
  Hasher& h_;
  std::vector<int64_t> index_;
  StorageWrites writes_;
  std::vector<ValueId> order_;
  std::map<std::string, std::size_t> symbols_;
};

}  // namespace

std::vector<std::string> canonical_symbols(const Graph& g) {
  Hasher h;
  CanonicalEncoder e(g, h);
  e.run();
  return e.symbols();
}

CanonicalNaming canonical_naming(const Graph& g) {
  Hasher h;
  CanonicalEncoder e(g, h);
  e.run();
  return {h.digest(), e.symbols()};
}

std::vector<ValueId> canonical_order(const Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<ValueId> order;
  std::vector<char> placed(nodes.size(), 0), on_stack(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == Op::placeholder) {
      order.push_back(static_cast<ValueId>(i));
      placed[i] = 1;
    }
  // Iterative DFS post-order from each root: operands before users,
  // operands in order.
  auto visit = [&](ValueId root) {
    if (placed[static_cast<std::size_t>(root)]) return;
    std::vector<std::pair<ValueId, std::size_t>> stack{{root, 0}};
    on_stack[static_cast<std::size_t>(root)] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const Node& n = g.node(v);
      if (next < n.inputs.size()) {
        const ValueId in = n.inputs[next++];
        const auto k = static_cast<std::size_t>(in);
        if (!placed[k] && !on_stack[k]) {
          on_stack[k] = 1;
          stack.push_back({in, 0});
        }
        continue;
      }
      const auto k = static_cast<std::size_t>(v);
      if (!placed[k]) {
        placed[k] = 1;
        order.push_back(v);
      }
      on_stack[k] = 0;
      stack.pop_back();
    }
  };
  for (ValueId out : g.outputs()) visit(out);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (op_info(nodes[i].op).side_effect) visit(static_cast<ValueId>(i));
  return order;
}

std::string Hash128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

Hash128 canonical_hash(const Graph& g) {
  Hasher h;
  CanonicalEncoder(g, h).run();
  return h.digest();
}

}  // namespace npucache
