#include "cache/h5.h"

#include "cache/cache_error.h"
#include "cache/zstd_filter.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace npucache::cache::h5 {
namespace {

// Turns HDF5's automatic error printing off once per process.
void quiet() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

herr_t collect(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n < 4) *out += std::string(n ? "; " : "") + (e->desc ? e->desc : "") + " (" + (e->func_name ? e->func_name : "") + ")";
  return 0;
}

std::string error_stack() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "no HDF5 error details" : s;
}

constexpr std::size_t kChunk = std::size_t{4} << 20;  // 4 MiB: one chunk for most artifacts

}  // namespace

void Handle::reset() noexcept {
  if (id_ >= 0 && close_) close_(id_);
  id_ = H5I_INVALID_HID;
}

void Handle::close() {
  if (id_ >= 0 && close_) {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    check(close_(id), "closing an HDF5 object");
  }
}

hid_t check(hid_t rc, const std::string& what) {
  if (rc < 0) throw CacheError("HDF5: " + what + " failed: " + error_stack());
  return rc;
}

Handle create_file(const std::string& path) {
  quiet();
  register_zstd_filter();
  return {check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "creating " + path), H5Fclose};
}

Handle open_file(const std::string& path, bool writable) {
  quiet();
  register_zstd_filter();
  return {check(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT), "opening " + path),
          H5Fclose};
}

Handle open_group(hid_t loc, const std::string& path) {
  return {check(H5Gopen2(loc, path.c_str(), H5P_DEFAULT), "opening group " + path), H5Gclose};
}

Handle open_dataset(hid_t loc, const std::string& path) {
  return {check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), "opening dataset " + path), H5Dclose};
}

void flush(hid_t obj) { check(H5Fflush(obj, H5F_SCOPE_GLOBAL), "flushing"); }

Handle create_group(hid_t loc, const std::string& path) {
  Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.id(), 1), "H5Pset_create_intermediate_group");
  return {check(H5Gcreate2(loc, path.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), "creating group " + path),
          H5Gclose};
}

bool exists(hid_t loc, const std::string& path) {
  std::string at;
  std::size_t start = path[0] == '/' ? 1 : 0;
  if (start) at = "/";
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) {
      at += (at.empty() || at == "/" ? "" : "/") + path.substr(start, end - start);
      htri_t r = H5Lexists(loc, at.c_str(), H5P_DEFAULT);
      if (r <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
    start = end + 1;
  }
  return true;
}

void remove(hid_t loc, const std::string& path) {
  check(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), "removing " + path);
}

void hard_link(hid_t loc, const std::string& target, const std::string& link) {
  Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.id(), 1), "H5Pset_create_intermediate_group");
  check(H5Lcreate_hard(loc, target.c_str(), loc, link.c_str(), lcpl.id(), H5P_DEFAULT),
        "linking " + link + " to " + target);
}

namespace {
herr_t add_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> children(hid_t loc, const std::string& path) {
  std::vector<std::string> out;
  Handle g = open_group(loc, path);
  check(H5Literate(g.id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, add_name, &out), "listing " + path);
  return out;
}

bool is_group(hid_t loc, const std::string& path) {
  H5O_info_t info;
  if (H5Oget_info_by_name2(loc, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return info.type == H5O_TYPE_GROUP;
}

namespace {
Handle string_type(std::size_t len) {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(t.id(), std::max<std::size_t>(len, 1)), "H5Tset_size");
  check(H5Tset_strpad(t.id(), H5T_STR_NULLPAD), "H5Tset_strpad");
  return t;
}
}  // namespace

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  if (H5Aexists(obj, name.c_str()) > 0) check(H5Adelete(obj, name.c_str()), "replacing attribute " + name);
  Handle type = string_type(value.size());
  Handle space(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Handle attr(check(H5Acreate2(obj, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
                    "creating attribute " + name),
              H5Aclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  check(H5Awrite(attr.id(), type.id(), padded.data()), "writing attribute " + name);
}

std::string read_attr(hid_t obj, const std::string& name) {
  Handle attr(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "opening attribute " + name), H5Aclose);
  Handle type(check(H5Aget_type(attr.id()), "H5Aget_type"), H5Tclose);
  if (H5Tget_class(type.id()) != H5T_STRING || H5Tis_variable_str(type.id()) > 0)
    throw CacheError("attribute " + name + " is not a fixed-length string");
  std::string s(H5Tget_size(type.id()), '\0');
  Handle mem = string_type(s.size());
  check(H5Aread(attr.id(), mem.id(), s.data()), "reading attribute " + name);
  s.resize(std::strlen(s.c_str()));
  return s;
}

namespace {
herr_t add_attr(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> out;
  hsize_t idx = 0;
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, add_attr, &out), "listing attributes");
  return out;
}

void write_bytes(hid_t loc, const std::string& name, std::string_view bytes) {
  const hsize_t n = std::max<hsize_t>(bytes.size(), 1);
  Handle space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  const hsize_t chunk = std::min<hsize_t>(n, kChunk);
  check(H5Pset_chunk(dcpl.id(), 1, &chunk), "H5Pset_chunk");
  const unsigned level = 3;
  check(H5Pset_filter(dcpl.id(), kZstdFilterId, H5Z_FLAG_MANDATORY, 1, &level), "adding the zstd filter");
  Handle ds(check(H5Dcreate2(loc, name.c_str(), H5T_NATIVE_UINT8, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                  "creating dataset " + name),
            H5Dclose);
  if (!bytes.empty())
    check(H5Dwrite(ds.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), "writing " + name);
  write_attr(ds.id(), "length", std::to_string(bytes.size()));
}

std::string read_bytes(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  const std::string len_text = read_attr(ds.id(), "length");
  char* end = nullptr;
  errno = 0;
  const unsigned long long len = std::strtoull(len_text.c_str(), &end, 10);
  if (len_text.empty() || *end != '\0' || errno != 0 || len_text[0] == '-')
    throw CacheError("dataset " + name + " has a damaged length attribute '" + len_text + "'");
  Handle space(check(H5Dget_space(ds.id()), "H5Dget_space"), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  if (len > n) throw CacheError("dataset " + name + " is shorter than its recorded length");
  std::string out(static_cast<std::size_t>(n), '\0');
  check(H5Dread(ds.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + name);
  out.resize(len);
  return out;
}

std::size_t storage_size(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  return static_cast<std::size_t>(H5Dget_storage_size(ds.id()));
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& lines) {
  std::size_t width = 1;
  for (const auto& l : lines) width = std::max(width, l.size());
  std::string buf(std::max<std::size_t>(lines.size(), 1) * width, '\0');
  for (std::size_t i = 0; i < lines.size(); ++i) std::copy(lines[i].begin(), lines[i].end(), buf.begin() + static_cast<std::ptrdiff_t>(i * width));
  const hsize_t n = std::max<hsize_t>(lines.size(), 1);
  Handle type = string_type(width);
  Handle space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle ds(check(H5Dcreate2(loc, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  "creating dataset " + name),
            H5Dclose);
  check(H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "writing " + name);
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  Handle type(check(H5Dget_type(ds.id()), "H5Dget_type"), H5Tclose);
  const std::size_t width = H5Tget_size(type.id());
  Handle space(check(H5Dget_space(ds.id()), "H5Dget_space"), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  std::string buf(static_cast<std::size_t>(n) * width, '\0');
  Handle mem = string_type(width);
  check(H5Dread(ds.id(), mem.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "reading " + name);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = buf.substr(i * width, width);
    s.resize(std::strlen(s.c_str()));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace npucache::cache::h5
