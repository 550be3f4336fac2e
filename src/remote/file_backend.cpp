// The file backend (backend.h, file:///path): a directory shared by the
// hosts (NFS, a cluster file system) as the remote, as ccache's file
// storage. One file per key, named by the key with '/', '%', '.', control
// and non-ASCII bytes written as %xx, so a name maps back to its key and a
// prefix of keys is a prefix of names. A name longer than kChunk bytes is
// cut into kChunk-byte pieces, each but the last a directory named by the
// piece and a '%' (no file name ends so), so any key fits a file system's
// 255-byte names.
//
// Writes are atomic and safe for concurrent writers on several hosts: the
// value goes to a temporary file of its own (".tmp.<host>.<pid>.<n>", which
// no key names and listing skips), then rename() replaces the key's file
// (Overwrite::yes) or link() publishes it only where no file is
// (Overwrite::no: the file system decides which writer was first). A reader
// opens a whole file, never a part. Nothing is synced: a value cut by a
// crash fails its checks (remote_value.h) and is removed by the reader.
//
// Failures: a directory that is missing or not one is `refused` (latched,
// as a connection failure: the job skips the remote from then on); no
// space or quota is `full`; any other error is `server`, naming the path
// and the system's message.
#include "remote/backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>

namespace npucache::remote {
namespace {

// A file descriptor, closed once.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now, reporting the error a deferred write may only show here (NFS).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// A directory stream, closed once.
class DirStream {
 public:
  explicit DirStream(const std::string& path) : d_(::opendir(path.c_str())) {}
  ~DirStream() {
    if (d_) ::closedir(d_);
  }
  DirStream(const DirStream&) = delete;
  DirStream& operator=(const DirStream&) = delete;
  DIR* get() const { return d_; }

 private:
  DIR* d_;
};

// Bytes kept as they are in a file name; '.' is escaped too, so no name
// is ".", ".." or a temporary file's.
bool plain(unsigned char ch) { return ch >= 0x20 && ch < 0x7f && ch != '/' && ch != '%' && ch != '.'; }

// The longest piece of a name in one directory entry (with its '%': 201).
constexpr std::size_t kChunk = 200;

std::string file_name(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : key) {
    const auto ch = static_cast<unsigned char>(c);
    if (plain(ch)) {
      out += c;
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

// A name's path under the directory: its pieces, each but the last a
// directory ("<piece>%").
std::string relative_path(const std::string& name) {
  std::string out;
  std::size_t at = 0;
  for (; name.size() - at > kChunk; at += kChunk) out += name.substr(at, kChunk) + "%/";
  return out + name.substr(at);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The key a file name holds; nullopt for a name no key maps to.
std::optional<std::string> key_of(std::string_view name) {
  std::string key;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      key += name[i];
      continue;
    }
    if (i + 2 >= name.size()) return std::nullopt;
    const int hi = hex_digit(name[i + 1]), lo = hex_digit(name[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    key += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  if (file_name(key) != name) return std::nullopt;
  return key;
}

Fault sys_fault(int err, const std::string& what) {
  const Failure kind = err == ENOSPC || err == EDQUOT ? Failure::full : Failure::server;
  return {kind, what + ": " + std::strerror(err)};
}

class FileBackend final : public Backend {
 public:
  explicit FileBackend(const Config& c) : Backend(c), dir_(c.endpoint.path) {}

  Answer<std::string> get(const std::string& key) override {
    using A = Answer<std::string>;
    std::string path;
    if (auto f = path_of(key, &path)) return A::failed(*f);
    // A shared directory is writable by others: a link, a FIFO (which would
    // block the open or the read), a device or a file larger than any value
    // is planted there, never read.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.ok() && errno == ELOOP) return A::failed({Failure::corrupt, path + " is a symbolic link, not a value"});
    if (!fd.ok()) return errno == ENOENT ? A::miss() : A::failed(sys_fault(errno, "opening " + path));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return A::failed(sys_fault(errno, "reading " + path));
    if (!S_ISREG(st.st_mode)) return A::failed({Failure::corrupt, path + " is not a regular file"});
    if (static_cast<uint64_t>(st.st_size) > max_value_bytes())
      return A::failed({Failure::too_large, path + " holds " + std::to_string(st.st_size) +
                                                " bytes, more than any value (max-object " +
                                                std::to_string(config().max_object_bytes) + " bytes)"});
    std::string value(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < value.size()) {
      const ssize_t n = ::read(fd.get(), value.data() + got, value.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return A::failed(sys_fault(errno, "reading " + path));
      if (n == 0) break;  // cut short: the checks of the value refuse it
      got += static_cast<std::size_t>(n);
    }
    value.resize(got);
    return A::hit(std::move(value));
  }

  std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    std::vector<Answer<std::string>> out;
    for (const auto& k : keys) out.push_back(get(k));
    return out;
  }

  Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) override {
    using A = Answer<bool>;
    std::string path;
    if (auto f = path_of(key, &path)) return A::failed(*f);
    const std::string tmp =
        dir_ + "/.tmp." + host_ + "." + std::to_string(::getpid()) + "." + std::to_string(counter_.fetch_add(1));
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.ok()) return A::failed(sys_fault(errno, "writing " + tmp));
    struct Unlink {  // the temporary file never outlives the call
      const std::string& p;
      ~Unlink() { ::unlink(p.c_str()); }
    } unlink_tmp{tmp};
    std::size_t written = 0;
    while (written < value.size()) {
      const ssize_t n = ::write(fd.get(), value.data() + written, value.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return A::failed(sys_fault(errno, "writing " + tmp));
      written += static_cast<std::size_t>(n);
    }
    if (fd.close() != 0) return A::failed(sys_fault(errno, "writing " + tmp));
    if (auto f = make_parents(path)) return A::failed(*f);
    if (overwrite == Overwrite::yes) {
      if (::rename(tmp.c_str(), path.c_str()) != 0) return A::failed(sys_fault(errno, "writing " + path));
      return A::hit(true);
    }
    if (::link(tmp.c_str(), path.c_str()) == 0) return A::hit(true);
    if (errno == EEXIST) return A::hit(false);
    return A::failed(sys_fault(errno, "writing " + path));
  }

  Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    using A = Answer<std::size_t>;
    std::size_t removed = 0;
    for (const auto& k : keys) {
      std::string path;
      if (auto f = path_of(k, &path)) return A::failed(*f);
      if (::unlink(path.c_str()) == 0)
        ++removed;
      else if (errno != ENOENT)
        return A::failed(sys_fault(errno, "removing " + path));
    }
    return A::hit(removed);
  }

  Answer<std::vector<std::string>> list(const std::string& prefix) override {
    using A = Answer<std::vector<std::string>>;
    std::string unused;
    if (auto f = path_of(prefix, &unused, false)) return A::failed(*f);
    std::vector<std::string> keys;
    if (auto f = walk(dir_, "", file_name(prefix), keys)) return A::failed(*f);
    return A::hit(std::move(keys));
  }

 private:
  // The file of `key`, or the fault of a directory that is not there (once
  // found, every call answers it) or of a key too long for a file name.
  // The most bytes a value may hold: the largest object and its header.
  uint64_t max_value_bytes() const { return config().max_value_bytes(); }

  std::optional<Fault> path_of(const std::string& key, std::string* path, bool whole_key = true) {
    {
      std::lock_guard lock(mu_);
      if (!checked_) {
        checked_ = true;
        char h[HOST_NAME_MAX + 1] = {};
        if (::gethostname(h, sizeof h - 1) == 0) host_ = file_name(h);
        struct stat st {};
        if (::stat(dir_.c_str(), &st) != 0)
          down_ = Fault{Failure::refused, dir_ + ": " + std::strerror(errno)};
        else if (!S_ISDIR(st.st_mode))
          down_ = Fault{Failure::refused, dir_ + " is not a directory"};
        if (down_) return down_;  // reported by this call; later ones repeat it
      }
      if (down_) {
        Fault again = *down_;
        again.repeated = true;
        return again;
      }
    }
    if (whole_key && key.empty()) return Fault{Failure::server, "an empty key names no file in " + dir_};
    *path = dir_ + "/" + relative_path(file_name(key));
    return std::nullopt;
  }

  // Makes the directories of a long name's pieces.
  std::optional<Fault> make_parents(const std::string& path) {
    for (std::size_t slash = path.find('/', dir_.size() + 1); slash != std::string::npos;
         slash = path.find('/', slash + 1))
      if (::mkdir(path.substr(0, slash).c_str(), 0755) != 0 && errno != EEXIST)
        return sys_fault(errno, "making " + path.substr(0, slash));
    return std::nullopt;
  }

  // Adds the keys under `path` (whose names start with `name`) that start
  // with the name `start`.
  std::optional<Fault> walk(const std::string& path, const std::string& name, const std::string& start,
                            std::vector<std::string>& keys) {
    DirStream d(path);
    if (!d.get()) return sys_fault(errno, "listing " + path);
    errno = 0;
    while (const dirent* e = ::readdir(d.get())) {
      const std::string entry(e->d_name);
      if (entry.empty() || entry[0] == '.') continue;  // ".", "..", temporary files
      if (entry.back() == '%') {                       // a piece of longer names
        const std::string piece = name + entry.substr(0, entry.size() - 1);
        const std::size_t n = std::min(piece.size(), start.size());
        if (piece.compare(0, n, start, 0, n) == 0)
          if (auto f = walk(path + "/" + entry, piece, start, keys)) return f;
      } else {
        const std::string whole = name + entry;
        if (whole.compare(0, start.size(), start) == 0)
          if (auto k = key_of(whole)) keys.push_back(std::move(*k));
      }
      errno = 0;
    }
    if (errno != 0) return sys_fault(errno, "listing " + path);
    return std::nullopt;
  }

  std::string dir_;
  std::string host_ = "host";
  std::atomic<unsigned long long> counter_{0};
  std::mutex mu_;
  bool checked_ = false;
  std::optional<Fault> down_;
};

}  // namespace

std::unique_ptr<Backend> make_file_backend(const Config& config) { return std::make_unique<FileBackend>(config); }

}  // namespace npucache::remote
