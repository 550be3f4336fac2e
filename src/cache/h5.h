// HDF5, wrapped once: RAII handles, every call checked, failures turned
// into CacheError carrying HDF5's error stack. HDF5's own error printing
// is turned off; only this layer includes <hdf5.h> (and the zstd filter).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::cache::h5 {

// Owns an hid_t and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), close_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t id() const { return id_; }
  // Closes now, reporting a failure (destructors close quietly).
  void close();

 private:
  void reset() noexcept;
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// Throws CacheError "<what> failed: <HDF5 error stack>" when rc < 0.
hid_t check(hid_t rc, const std::string& what);

Handle create_file(const std::string& path);                  // truncates
Handle open_file(const std::string& path, bool writable);
Handle open_group(hid_t loc, const std::string& path);
Handle open_dataset(hid_t loc, const std::string& path);
// Flushes every buffer of the file holding `obj` to the operating system.
void flush(hid_t obj);
// Creates the group and missing intermediate groups.
Handle create_group(hid_t loc, const std::string& path);
bool exists(hid_t loc, const std::string& path);              // every component exists
void remove(hid_t loc, const std::string& path);              // unlinks
void hard_link(hid_t loc, const std::string& target, const std::string& link);
// Names of the links in a group, in name order.
std::vector<std::string> children(hid_t loc, const std::string& path);
bool is_group(hid_t loc, const std::string& path);

void write_attr(hid_t obj, const std::string& name, const std::string& value);
std::string read_attr(hid_t obj, const std::string& name);
std::vector<std::string> attr_names(hid_t obj);

// A 1-D uint8 dataset, chunked and zstd-compressed (filter 32015).
void write_bytes(hid_t loc, const std::string& name, std::string_view bytes);
std::string read_bytes(hid_t loc, const std::string& name);
std::size_t storage_size(hid_t loc, const std::string& name);
// A 1-D dataset of fixed-length strings, one per element (lines of text).
void write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& lines);
std::vector<std::string> read_strings(hid_t loc, const std::string& name);

}  // namespace npucache::cache::h5
