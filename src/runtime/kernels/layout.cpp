// Layout kernels: reshape (copy), permute, expand, slice, concat, gather,
// embedding and cast. All but cast move elements of any dtype byte-wise.
#include "runtime/kernels/kernel_util.h"

namespace npucache::runtime::kernels {
namespace {

void copy_elem(char* dst, int64_t di, const char* src, int64_t si, std::size_t es) {
  std::memcpy(dst + di * static_cast<int64_t>(es), src + si * static_cast<int64_t>(es), es);
}

int64_t norm(int64_t dim, std::size_t rank) { return dim < 0 ? dim + static_cast<int64_t>(rank) : dim; }

void permute(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const auto& perm = l.attrs->get<std::vector<int64_t>>("perm");
  const std::size_t r = in.dims.size();
  std::vector<int64_t> istride = contiguous_strides(in.dims);
  std::vector<int64_t> pstride(r);
  for (std::size_t i = 0; i < r; ++i) pstride[i] = istride[static_cast<std::size_t>(norm(perm[i], r))];
  const std::size_t es = dtype_size(in.dtype);
  auto* src = static_cast<const char*>(in.data());
  auto* dst = static_cast<char*>(out.data());
  const int64_t n = out.numel();
  std::vector<int64_t> counter(r, 0);
  int64_t si = 0;
  if (r >= 1 && pstride[r - 1] == 1) {  // the last dim stays last: copy whole rows
    const int64_t row = out.dims[r - 1];
    const std::size_t row_bytes = static_cast<std::size_t>(row) * es;
    for (int64_t o = 0; o < n; o += row) {
      std::memcpy(dst + static_cast<std::size_t>(o) * es, src + static_cast<std::size_t>(si) * es, row_bytes);
      for (std::size_t k = r - 1; k-- > 0;) {
        ++counter[k];
        si += pstride[k];
        if (counter[k] < out.dims[k]) break;
        si -= pstride[k] * out.dims[k];
        counter[k] = 0;
      }
    }
    return;
  }
  auto walk = [&](auto elem) {
    using T = decltype(elem);
    auto* d = reinterpret_cast<T*>(dst);
    auto* sp = reinterpret_cast<const T*>(src);
    for (int64_t o = 0; o < n; ++o) {
      d[o] = sp[si];
      for (std::size_t k = r; k-- > 0;) {
        ++counter[k];
        si += pstride[k];
        if (counter[k] < out.dims[k]) break;
        si -= pstride[k] * out.dims[k];
        counter[k] = 0;
      }
    }
  };
  switch (es) {  // typed element copies (memcpy per element would be a call each)
    case 1: walk(uint8_t{}); break;
    case 2: walk(uint16_t{}); break;
    case 4: walk(uint32_t{}); break;
    default: walk(uint64_t{}); break;
  }
}

void expand(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const std::size_t es = dtype_size(in.dtype);
  auto* src = static_cast<const char*>(in.data());
  auto* dst = static_cast<char*>(out.data());
  const std::size_t r = out.dims.size();
  if (r >= 1 && !in.dims.empty() && in.dims.back() == out.dims.back() && out.dims.back() > 1) {
    // Rows are not broadcast: copy each whole row from its source row.
    const int64_t row = out.dims.back();
    std::vector<int64_t> od(out.dims.begin(), out.dims.end() - 1), id(in.dims.begin(), in.dims.end() - 1);
    for_each_broadcast<1>(od, {&id}, [&](int64_t o, const std::array<int64_t, 1>& j) {
      std::memcpy(dst + static_cast<std::size_t>(o * row) * es, src + static_cast<std::size_t>(j[0] * row) * es,
                  static_cast<std::size_t>(row) * es);
    });
    return;
  }
  for_each_broadcast<1>(out.dims, {&in.dims},
                        [&](int64_t o, const std::array<int64_t, 1>& j) { copy_elem(dst, o, src, j[0], es); });
}

// Views `dims` as [outer, dims[d], inner].
void split_at(const std::vector<int64_t>& dims, int64_t d, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= dims[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(d) + 1; i < dims.size(); ++i) inner *= dims[i];
}

void slice(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const int64_t d = norm(l.attrs->get_int("dim"), in.dims.size());
  const int64_t start = l.attrs->get<std::vector<SymExpr>>("bounds").at(0).constant();
  const int64_t len = out.dims[static_cast<std::size_t>(d)];
  const int64_t n = in.dims[static_cast<std::size_t>(d)];
  if (start < 0 || start + len > n) kernel_fail(l, "slice out of range");
  int64_t outer, inner;
  split_at(in.dims, d, outer, inner);
  const std::size_t es = dtype_size(in.dtype);
  auto* src = static_cast<const char*>(in.data());
  auto* dst = static_cast<char*>(out.data());
  const std::size_t chunk = static_cast<std::size_t>(len * inner) * es;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<std::size_t>(o) * chunk,
                src + (static_cast<std::size_t>(o * n + start) * static_cast<std::size_t>(inner)) * es, chunk);
}

void concat(const KernelLaunch& l) {
  const TensorArg& out = l.args.back();
  const int64_t d = norm(l.attrs->get_int("dim"), out.dims.size());
  int64_t outer, inner;
  split_at(out.dims, d, outer, inner);
  const std::size_t es = dtype_size(out.dtype);
  auto* dst = static_cast<char*>(out.data());
  const int64_t total = out.dims[static_cast<std::size_t>(d)];
  int64_t at = 0;
  for (std::size_t a = 0; a + 1 < l.args.size(); ++a) {
    const TensorArg& in = l.args[a];
    const int64_t len = in.dims[static_cast<std::size_t>(d)];
    auto* src = static_cast<const char*>(in.data());
    const std::size_t chunk = static_cast<std::size_t>(len * inner) * es;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + static_cast<std::size_t>((o * total + at) * inner) * es,
                  src + static_cast<std::size_t>(o) * chunk, chunk);
    at += len;
  }
}

int64_t load_index(const TensorArg& a, int64_t i) {
  return a.dtype == DType::i64 ? static_cast<const int64_t*>(a.data())[i] : static_cast<const int32_t*>(a.data())[i];
}

void gather(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& idx = l.args[1];
  const TensorArg& out = l.args[2];
  const std::size_t r = in.dims.size();
  const int64_t d = norm(l.attrs->get_int("dim"), r);
  std::vector<int64_t> istride = contiguous_strides(in.dims);
  const std::size_t es = dtype_size(in.dtype);
  auto* src = static_cast<const char*>(in.data());
  auto* dst = static_cast<char*>(out.data());
  std::vector<int64_t> counter(r, 0);
  const int64_t n = out.numel();
  for (int64_t o = 0; o < n; ++o) {
    int64_t si = 0;
    for (std::size_t k = 0; k < r; ++k) {
      int64_t c = counter[k];
      if (static_cast<int64_t>(k) == d) {
        c = load_index(idx, o);
        if (c < 0 || c >= in.dims[k]) kernel_fail(l, "index " + std::to_string(c) + " out of range");
      } else if (c >= in.dims[k]) {
        kernel_fail(l, "index shape exceeds the input");
      }
      si += c * istride[k];
    }
    copy_elem(dst, o, src, si, es);
    for (std::size_t k = r; k-- > 0;) {
      if (++counter[k] < idx.dims[k]) break;
      counter[k] = 0;
    }
  }
}

// Rows of ids outside [0, V) are zero: the vocabulary-parallel embedding
// relies on it (each rank holds a slice of the vocabulary).
void embedding(const KernelLaunch& l) {
  const TensorArg& w = l.args[0];
  const TensorArg& ids = l.args[1];
  const TensorArg& out = l.args[2];
  const int64_t V = w.dims[0], D = w.dims[1];
  const std::size_t row = static_cast<std::size_t>(D) * dtype_size(w.dtype);
  auto* src = static_cast<const char*>(w.data());
  auto* dst = static_cast<char*>(out.data());
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = load_index(ids, i);
    if (id >= 0 && id < V)
      std::memcpy(dst + static_cast<std::size_t>(i) * row, src + static_cast<std::size_t>(id) * row, row);
    else
      std::memset(dst + static_cast<std::size_t>(i) * row, 0, row);
  }
}

void cast(const KernelLaunch& l) {
  const TensorArg& in = l.args[0];
  const TensorArg& out = l.args[1];
  const int64_t n = in.numel();
  if (in.dtype == out.dtype) {
    std::memcpy(out.data(), in.data(), in.bytes());
    return;
  }
  if (is_floating(out.dtype) && is_floating(in.dtype)) {
    FloatIn x(in);
    FloatOut y(out);
    std::memcpy(y.data(), x.data(), static_cast<std::size_t>(n) * sizeof(float));
    y.commit();
    return;
  }
  for (int64_t i = 0; i < n; ++i) store_from_double(out, i, load_as_double(in, i));
}

}  // namespace

void layout_kernel(const KernelLaunch& l) {
  switch (l.op) {
    case Op::reshape:
      if (l.args[0].bytes() != l.args[1].bytes()) kernel_fail(l, "sizes differ");
      if (l.args[0].data() != l.args[1].data()) std::memcpy(l.args[1].data(), l.args[0].data(), l.args[0].bytes());
      return;
    case Op::permute: return permute(l);
    case Op::expand: return expand(l);
    case Op::slice: return slice(l);
    case Op::concat: return concat(l);
    case Op::gather: return gather(l);
    case Op::embedding: return embedding(l);
    case Op::cast: return cast(l);
    default: kernel_fail(l, "not a layout op");
  }
}

}  // namespace npucache::runtime::kernels
