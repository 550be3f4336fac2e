#include "h5/h5.h"

#include <hdf5.h>

#include <type_traits>

#include <npucache/error.h>
#include "h5/zstd_filter.h"
#include "zstd/zstd_codec.h"

#include <algorithm>
#include <cstring>

namespace npucache::h5 {

static_assert(std::is_same_v<Id, hid_t> && std::is_same_v<Status, herr_t> && kInvalidId == H5I_INVALID_HID,
              "h5.h names HDF5's types by their widths");
namespace {

// Turns HDF5's automatic error printing off once per process.
void quiet() {
  init();
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

herr_t collect(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n < 4)
    *out += std::string(n ? "; " : "") + (e->desc ? e->desc : "") + " (" + (e->func_name ? e->func_name : "") + ")";
  return 0;
}

std::string error_stack() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "no HDF5 error details" : s;
}

constexpr std::size_t kChunk = std::size_t{4} << 20;  // 4 MiB: one chunk for most artifacts
constexpr std::size_t kImageIncrement = std::size_t{1} << 20;
// Strings of more bytes than this (padded) are stored compressed.
constexpr std::size_t kCompressStringsAbove = 4096;
// The most a string dataset is read into (padded): far above any text here.
constexpr std::size_t kMaxStringBytes = std::size_t{256} << 20;

Handle core_fapl() {
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  check(H5Pset_fapl_core(fapl.id(), kImageIncrement, 0), "H5Pset_fapl_core");
  return fapl;
}

Handle vlen_string_type() {
  Handle t(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(t.id(), H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(t.id(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

Handle bool_type() {
  Handle t(check(H5Tenum_create(H5T_NATIVE_INT8), "H5Tenum_create"), H5Tclose);
  int8_t v = 0;
  check(H5Tenum_insert(t.id(), "FALSE", &v), "H5Tenum_insert");
  v = 1;
  check(H5Tenum_insert(t.id(), "TRUE", &v), "H5Tenum_insert");
  return t;
}

Handle scalar_attr(hid_t obj, const std::string& name, hid_t type) {
  if (H5Aexists(obj, name.c_str()) > 0) check(H5Adelete(obj, name.c_str()), "replacing attribute " + name);
  Handle space(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  return {
      check(H5Acreate2(obj, name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT), "creating attribute " + name),
      H5Aclose};
}

Handle open_attr(hid_t obj, const std::string& name, H5T_class_t want, const char* kind) {
  Handle attr(check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "opening attribute " + name), H5Aclose);
  Handle type(check(H5Aget_type(attr.id()), "H5Aget_type"), H5Tclose);
  Handle space(check(H5Aget_space(attr.id()), "H5Aget_space"), H5Sclose);
  if (H5Tget_class(type.id()) != want || H5Sget_simple_extent_type(space.id()) != H5S_SCALAR)
    throw CacheError("attribute " + name + " is not a scalar " + kind);
  return attr;
}

}  // namespace

std::unique_lock<std::recursive_mutex> lock() {
  static std::recursive_mutex mu;
  return std::unique_lock<std::recursive_mutex>(mu);
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto l = lock();
    // No HDF5 shutdown at exit: the process context's shutdown (at exit)
    // may still write files through HDF5 (commits, statistics), and HDF5
    // holds nothing to flush (files are in-memory images).
    H5dont_atexit();
    H5open();
  });
}

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

Handle create_image(std::size_t userblock) {
  quiet();
  register_zstd_filter();
  Handle fcpl(check(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_userblock(fcpl.id(), userblock), "H5Pset_userblock");
  Handle fapl = core_fapl();
  return {check(H5Fcreate("npucache-image", H5F_ACC_TRUNC, fcpl.id(), fapl.id()), "creating a file image"), H5Fclose};
}

std::string image_bytes(hid_t file) {
  check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flushing a file image");
  const ssize_t n = H5Fget_file_image(file, nullptr, 0);
  if (n < 0) check(-1, "sizing a file image");
  std::string out(static_cast<std::size_t>(n), '\0');
  if (H5Fget_file_image(file, out.data(), out.size()) != n) check(-1, "copying a file image");
  return out;
}

Handle open_image(std::string_view bytes) {
  quiet();
  register_zstd_filter();
  Handle fapl = core_fapl();
  check(H5Pset_file_image(fapl.id(), const_cast<char*>(bytes.data()), bytes.size()), "H5Pset_file_image");
  return {check(H5Fopen("npucache-image", H5F_ACC_RDONLY, fapl.id()), "opening a file image"), H5Fclose};
}

Handle open_group(hid_t loc, const std::string& path) {
  return {check(H5Gopen2(loc, path.c_str(), H5P_DEFAULT), "opening group " + path), H5Gclose};
}

Handle open_dataset(hid_t loc, const std::string& path) {
  return {check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), "opening dataset " + path), H5Dclose};
}

Handle create_group(hid_t loc, const std::string& path) {
  Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.id(), 1), "H5Pset_create_intermediate_group");
  return {check(H5Gcreate2(loc, path.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), "creating group " + path),
          H5Gclose};
}

bool exists(hid_t loc, const std::string& path) {
  std::string at;
  std::size_t start = !path.empty() && path[0] == '/' ? 1 : 0;
  if (start) at = "/";
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) {
      at += (at.empty() || at == "/" ? "" : "/") + path.substr(start, end - start);
      const htri_t r = H5Lexists(loc, at.c_str(), H5P_DEFAULT);
      if (r <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
    start = end + 1;
  }
  return true;
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

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type = vlen_string_type();
  Handle attr = scalar_attr(obj, name, type.id());
  const char* p = value.c_str();
  check(H5Awrite(attr.id(), type.id(), &p), "writing attribute " + name);
}

void write_attr(hid_t obj, const std::string& name, int64_t value) {
  Handle attr = scalar_attr(obj, name, H5T_STD_I64LE);
  check(H5Awrite(attr.id(), H5T_NATIVE_INT64, &value), "writing attribute " + name);
}

void write_attr(hid_t obj, const std::string& name, double value) {
  Handle attr = scalar_attr(obj, name, H5T_IEEE_F64LE);
  check(H5Awrite(attr.id(), H5T_NATIVE_DOUBLE, &value), "writing attribute " + name);
}

void write_bool_attr(hid_t obj, const std::string& name, bool value) {
  Handle type = bool_type();
  Handle attr = scalar_attr(obj, name, type.id());
  const int8_t v = value ? 1 : 0;
  check(H5Awrite(attr.id(), type.id(), &v), "writing attribute " + name);
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t r = H5Aexists(obj, name.c_str());
  if (r < 0) H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle attr = open_attr(obj, name, H5T_STRING, "string");
  Handle type = vlen_string_type();
  Handle space(check(H5Aget_space(attr.id()), "H5Aget_space"), H5Sclose);
  char* p = nullptr;
  check(H5Aread(attr.id(), type.id(), &p), "reading attribute " + name);
  std::string out = p ? p : "";
  H5Dvlen_reclaim(type.id(), space.id(), H5P_DEFAULT, &p);
  return out;
}

std::string read_fixed_string_attr(hid_t obj, const std::string& name) {
  const hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
  if (a < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  Handle attr(a, H5Aclose);
  const hid_t t = H5Aget_type(attr.id());
  if (t < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  Handle type(t, H5Tclose);
  if (H5Tget_class(type.id()) != H5T_STRING || H5Tis_variable_str(type.id()) > 0) return "";
  std::string v(H5Tget_size(type.id()), '\0');
  if (H5Aread(attr.id(), type.id(), v.data()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  v.resize(std::strlen(v.c_str()));
  return v;
}

int64_t read_int_attr(hid_t obj, const std::string& name) {
  Handle attr = open_attr(obj, name, H5T_INTEGER, "integer");
  int64_t v = 0;
  check(H5Aread(attr.id(), H5T_NATIVE_INT64, &v), "reading attribute " + name);
  return v;
}

void write_bytes(hid_t loc, const std::string& name, std::string_view bytes) {
  const hsize_t n = bytes.size();
  Handle space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  const hsize_t chunk = std::clamp<hsize_t>(n, 1, kChunk);
  check(H5Pset_chunk(dcpl.id(), 1, &chunk), "H5Pset_chunk");
  const unsigned level = 3;
  check(H5Pset_filter(dcpl.id(), kZstdFilterId, H5Z_FLAG_MANDATORY, 1, &level), "adding the zstd filter");
  Handle ds(check(H5Dcreate2(loc, name.c_str(), H5T_NATIVE_UINT8, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                  "creating dataset " + name),
            H5Dclose);
  if (!bytes.empty())
    check(H5Dwrite(ds.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), "writing " + name);
}

std::string read_bytes(hid_t loc, const std::string& name, std::size_t cap) {
  Handle ds = open_dataset(loc, name);
  Handle space(check(H5Dget_space(ds.id()), "H5Dget_space"), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.id()) != 1) throw CacheError("dataset " + name + " is not one-dimensional");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  if (n > cap)
    throw CacheError("dataset " + name + " claims " + std::to_string(n) + " bytes, more than " + std::to_string(cap));
  std::string out(static_cast<std::size_t>(n), '\0');
  if (n > 0) check(H5Dread(ds.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "reading " + name);
  return out;
}

std::optional<std::string> find_single_chunk(std::string_view image, std::size_t size,
                                             const std::function<bool(const std::string&)>& accept) {
  if (size == 0 || size > kChunk) return std::nullopt;
  constexpr std::string_view kMagic("\x28\xb5\x2f\xfd", 4);  // a zstd frame's first bytes
  // An image holds one frame of the artifact's size: a few more are tried
  // (bytes of the HDF5 metadata that look like one), not every offset of a
  // crafted image, each of whose frames would be walked to its end and
  // decompressed. HDF5 reads the artifact otherwise.
  constexpr int kMaxCandidates = 4;
  int candidates = 0;
  for (std::size_t at = image.find(kMagic); at != std::string_view::npos; at = image.find(kMagic, at + 1)) {
    const char* p = image.data() + at;
    const std::size_t left = image.size() - at;
    if (zstd::frame_size(p, left) != size) continue;
    if (++candidates > kMaxCandidates) break;
    const std::size_t n = zstd::frame_length(p, left);
    if (n == 0) continue;
    std::string out(size, '\0');
    if (zstd::decompress_into(p, n, out.data(), out.size()) != size) continue;
    if (accept(out)) return out;
  }
  return std::nullopt;
}

std::size_t storage_size(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  return static_cast<std::size_t>(H5Dget_storage_size(ds.id()));
}

void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& lines) {
  write_fixed_strings(loc, name, lines);
}

void write_fixed_strings(hid_t loc, const std::string& name, const std::vector<std::string>& lines) {
  std::size_t width = 1;
  for (const auto& l : lines) width = std::max(width, l.size());
  std::string packed(width * lines.size(), '\0');
  for (std::size_t i = 0; i < lines.size(); ++i)
    std::memcpy(packed.data() + i * width, lines[i].data(), lines[i].size());
  const hsize_t n = lines.size();
  Handle type(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(type.id(), width), "H5Tset_size");
  check(H5Tset_strpad(type.id(), H5T_STR_NULLPAD), "H5Tset_strpad");
  check(H5Tset_cset(type.id(), H5T_CSET_UTF8), "H5Tset_cset");
  Handle space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  if (packed.size() > kCompressStringsAbove) {  // lines padded to the longest: they compress well
    const hsize_t chunk = std::clamp<hsize_t>(kChunk / width, 1, n);
    check(H5Pset_chunk(dcpl.id(), 1, &chunk), "H5Pset_chunk");
    const unsigned level = 3;
    check(H5Pset_filter(dcpl.id(), kZstdFilterId, H5Z_FLAG_MANDATORY, 1, &level), "adding the zstd filter");
  }
  Handle ds(check(H5Dcreate2(loc, name.c_str(), type.id(), space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
                  "creating dataset " + name),
            H5Dclose);
  if (n > 0) check(H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, packed.data()), "writing " + name);
}

std::vector<std::string> read_strings(hid_t loc, const std::string& name) {
  Handle ds = open_dataset(loc, name);
  Handle type = vlen_string_type();
  Handle space(check(H5Dget_space(ds.id()), "H5Dget_space"), H5Sclose);
  hsize_t n = 0;
  if (H5Sget_simple_extent_ndims(space.id()) != 1) throw CacheError("dataset " + name + " is not one-dimensional");
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  Handle stored(check(H5Dget_type(ds.id()), "H5Dget_type"), H5Tclose);
  if (H5Tget_class(stored.id()) != H5T_STRING) throw CacheError("dataset " + name + " does not hold strings");
  if (H5Tis_variable_str(stored.id()) <= 0) {
    const std::size_t width = H5Tget_size(stored.id());
    if (width == 0 || width > (std::size_t{1} << 20) || n > (hsize_t{1} << 24) ||
        width * static_cast<std::size_t>(n) > kMaxStringBytes)
      throw CacheError("dataset " + name + " has an implausible size");
    Handle mem(check(H5Tcopy(stored.id()), "H5Tcopy"), H5Tclose);
    std::string packed(width * static_cast<std::size_t>(n), '\0');
    if (n > 0) check(H5Dread(ds.id(), mem.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, packed.data()), "reading " + name);
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < n; ++i) {
      std::string line = packed.substr(i * width, width);
      line.resize(std::strlen(line.c_str()));
      out.push_back(std::move(line));
    }
    return out;
  }
  std::vector<char*> ptrs(static_cast<std::size_t>(n), nullptr);
  if (n > 0) check(H5Dread(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "reading " + name);
  std::vector<std::string> out;
  out.reserve(ptrs.size());
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  if (n > 0) H5Dvlen_reclaim(type.id(), space.id(), H5P_DEFAULT, ptrs.data());
  return out;
}

void external_link(hid_t loc, const std::string& link, const std::string& target_file, const std::string& target_path) {
  Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check(H5Pset_create_intermediate_group(lcpl.id(), 1), "H5Pset_create_intermediate_group");
  check(H5Lcreate_external(target_file.c_str(), target_path.c_str(), loc, link.c_str(), lcpl.id(), H5P_DEFAULT),
        "linking " + link + " to " + target_file + ":" + target_path);
}

std::pair<std::string, std::string> read_external_link(hid_t loc, const std::string& link) {
  H5L_info_t info;
  check(H5Lget_info(loc, link.c_str(), &info, H5P_DEFAULT), "inspecting link " + link);
  if (info.type != H5L_TYPE_EXTERNAL) throw CacheError("link " + link + " is not an external link");
  std::string buf(info.u.val_size, '\0');
  check(H5Lget_val(loc, link.c_str(), buf.data(), buf.size(), H5P_DEFAULT), "reading link " + link);
  unsigned flags = 0;
  const char* file = nullptr;
  const char* path = nullptr;
  check(H5Lunpack_elink_val(buf.data(), buf.size(), &flags, &file, &path), "unpacking link " + link);
  return {file ? file : "", path ? path : ""};
}

}  // namespace npucache::h5
