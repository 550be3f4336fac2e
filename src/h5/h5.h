// HDF5, wrapped once: RAII handles, every call checked, failures turned
// into CacheError carrying HDF5's error stack; HDF5's own error printing
// turned off. Only this layer's sources include <hdf5.h> (and the zstd
// filter): this header names HDF5's handle and status types by their
// widths (h5.cpp checks they are HDF5's), so the layers above compile
// without HDF5's or MPI's include paths.
//
// Files are built and read as in-memory images (the core driver): the
// store writes the bytes itself through its safe directory operations and
// hands HDF5 only bytes whose checksum it has verified, so a damaged file
// never reaches HDF5's parser.
//
// Thread safety: the HDF5 build npucache uses is not thread-safe; every use
// holds h5::lock() (a process-wide recursive mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npucache::h5 {

// HDF5's Id and Status, and kInvalidId.
using Id = int64_t;
using Status = int;
inline constexpr Id kInvalidId = -1;

std::unique_lock<std::recursive_mutex> lock();

// Initialises the HDF5 library now. HDF5 registers its shutdown with
// atexit when it initialises, so whatever must still use HDF5 at exit (the
// background commits, commit_queue.h) is made after this call: exit
// handlers run in reverse order of registration.
void init();

// Owns an HDF5 id and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = Status (*)(Id);
  Handle() = default;
  Handle(Id id, Closer closer) : id_(id), close_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = kInvalidId; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = kInvalidId;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Id id() const { return id_; }
  // Closes now, reporting a failure (destructors close quietly).
  void close();

 private:
  void reset() noexcept;
  Id id_ = kInvalidId;
  Closer close_ = nullptr;
};

// Throws CacheError "<what> failed: <HDF5 error stack>" when rc < 0.
Id check(Id rc, const std::string& what);

// A new file in memory made for a userblock of `userblock` bytes (a power
// of two >= 512) that the caller puts in front of its image.
Handle create_image(std::size_t userblock);
// The file's image, without the userblock.
std::string image_bytes(Id file);
// A read-only file over `bytes` (copied).
Handle open_image(std::string_view bytes);

Handle open_group(Id loc, const std::string& path);
Handle open_dataset(Id loc, const std::string& path);
// Creates the group and missing intermediate groups.
Handle create_group(Id loc, const std::string& path);
bool exists(Id loc, const std::string& path);  // every component exists
// Names of the links in a group, in name order.
std::vector<std::string> children(Id loc, const std::string& path);
bool is_group(Id loc, const std::string& path);

// Attributes: strings are variable-length UTF-8, integers 64-bit, reals
// 64-bit, booleans an enum {FALSE, TRUE} (h5py reads it as bool). Readers
// check the stored type and throw CacheError for another.
void write_attr(Id obj, const std::string& name, const std::string& value);
void write_attr(Id obj, const std::string& name, int64_t value);
void write_attr(Id obj, const std::string& name, double value);
void write_bool_attr(Id obj, const std::string& name, bool value);
std::string read_string_attr(Id obj, const std::string& name);
int64_t read_int_attr(Id obj, const std::string& name);
bool has_attr(Id obj, const std::string& name);
// A fixed-length string attribute (as format 1 wrote them), its padding
// dropped; "" when there is none or it is not a string. Never throws.
std::string read_fixed_string_attr(Id obj, const std::string& name);

// A 1-D uint8 dataset, chunked and zstd-compressed (filter 32015).
void write_bytes(Id loc, const std::string& name, std::string_view bytes);
// Throws CacheError when the dataset is larger than `cap` bytes.
std::string read_bytes(Id loc, const std::string& name, std::size_t cap);
// The bytes of a dataset of `size` bytes written by write_bytes, found in
// the file image without opening it: a dataset of one chunk is stored as
// one zstd frame of exactly `size` bytes of content. Each such frame in the
// image (the first four) is decompressed and offered to `accept` (which
// checks it against what the caller knows of the bytes, e.g. their content
// hash) until it takes one; nullopt when none is taken or the dataset spans several
// chunks (then read_bytes reads it). Opening an HDF5 file costs more than
// reading its bytes; this is the warm load's read. No HDF5 call is made.
std::optional<std::string> find_single_chunk(std::string_view image, std::size_t size,
                                             const std::function<bool(const std::string&)>& accept);
std::size_t storage_size(Id loc, const std::string& name);
// A 1-D dataset of strings (lines of text), fixed-length: the longest
// line's length, NULLPAD, and zstd-compressed (chunked) when the padded
// lines exceed 4 KiB. Not variable-length strings: those live in global-heap
// collections that grow by reallocation, and in a file image every
// outgrown collection stays behind as dead space (twice the text's size).
void write_strings(Id loc, const std::string& name, const std::vector<std::string>& lines);
// The same (the name the index's small lists, an entry's parameter names,
// have always used).
void write_fixed_strings(Id loc, const std::string& name, const std::vector<std::string>& lines);
// Either kind.
std::vector<std::string> read_strings(Id loc, const std::string& name);

// A link named `link` to object `target_path` of the file `target_file`
// (resolved by HDF5 tools relative to the linking file's directory).
void external_link(Id loc, const std::string& link, const std::string& target_file, const std::string& target_path);
// The (file, path) an external link names.
std::pair<std::string, std::string> read_external_link(Id loc, const std::string& link);

}  // namespace npucache::h5
