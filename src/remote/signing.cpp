#include "remote/signing.h"

#include <npucache/error.h>

#include "log/log.h"
#include "process/context.h"
#include "process/once.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace npucache::remote::signing {
namespace {

static_assert(kPublicKeyBytes == crypto_sign_PUBLICKEYBYTES);
static_assert(kSignatureBytes == crypto_sign_BYTES);
static_assert(crypto_sign_SECRETKEYBYTES == 64 && crypto_sign_SEEDBYTES == 32);

constexpr std::string_view kMagic = "NPSG";
constexpr unsigned char kVersion = 1;
constexpr unsigned char kEd25519 = 1;
constexpr std::string_view kDomain{"npucache remote signature 1\0", 28};
constexpr std::string_view kPublicPrefix = "ed25519:";
constexpr std::string_view kSecretPrefix = "ed25519-secret:";
// A key file is a few lines; a trusted file a few keys. Anything larger is
// not one.
constexpr std::size_t kMaxKeyFileBytes = 1 << 20;

void init() {
  static const int rc = sodium_init();  // once; thread-safe, and idempotent in libsodium
  if (rc < 0) throw Error("libsodium could not be initialised (no source of randomness?)");
}

std::string hex(const unsigned char* p, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

int digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Exactly 2 * n hex digits into `out`.
bool unhex(std::string_view text, unsigned char* out, std::size_t n) {
  if (text.size() != 2 * n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The file's text; ConfigError naming `what` and the file otherwise.
std::string read_text(const std::string& path, const std::string& what, const std::string& fix) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ConfigError(what + " " + path + " cannot be read (" + std::strerror(errno) + "); " + fix);
  std::string text;
  text.resize(kMaxKeyFileBytes + 1);
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(f.gcount()));
  if (text.size() > kMaxKeyFileBytes)
    throw ConfigError(what + " " + path + " is larger than any key file (over 1 MiB); " + fix);
  return text;
}

// The lines of `text` without comments and blanks.
std::vector<std::pair<int, std::string_view>> lines_of(std::string_view text) {
  std::vector<std::pair<int, std::string_view>> out;
  int number = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (!line.empty()) out.emplace_back(number, line);
  }
  return out;
}

// The message a signature is over.
std::string message(std::string_view key, const Hash& h) {
  std::string m(kDomain);
  const std::uint64_t n = key.size();
  for (int i = 0; i < 8; ++i) m += static_cast<char>((n >> (8 * i)) & 0xff);
  m += key;
  m.append(reinterpret_cast<const char*>(h.data()), h.size());
  return m;
}

// Writes `text` to a new file of `mode`; false with errno when it exists
// (`exclusive`) or cannot be written.
bool write_file(const std::string& path, const std::string& text, mode_t mode, bool exclusive) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), mode);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return false;
  return true;
}

}  // namespace

std::string PublicKey::text() const { return std::string(kPublicPrefix) + hex(bytes.data(), bytes.size()); }

std::string PublicKey::id() const { return hex(bytes.data(), 8); }

std::optional<PublicKey> parse_public_key(std::string_view text) {
  text = trim(text);
  if (!text.starts_with(kPublicPrefix)) return std::nullopt;
  PublicKey k;
  if (!unhex(text.substr(kPublicPrefix.size()), k.bytes.data(), k.bytes.size())) return std::nullopt;
  return k;
}

SigningKey::SigningKey() = default;

SigningKey::~SigningKey() { sodium_memzero(secret_.data(), secret_.size()); }

std::unique_ptr<SigningKey> SigningKey::generate() {
  init();
  std::unique_ptr<SigningKey> k(new SigningKey);
  crypto_sign_keypair(k->public_.bytes.data(), k->secret_.data());
  return k;
}

std::unique_ptr<SigningKey> SigningKey::load(const std::string& path) {
  init();
  const std::string fix =
      "give the signing.key file `npucache remote keygen DIR` wrote (NPUCACHE_REMOTE_SIGNING_KEY, --signing-key)";
  std::string text = read_text(path, "signing key file", fix);
  const auto lines = lines_of(text);
  std::array<unsigned char, crypto_sign_SEEDBYTES> seed{};
  const bool ok = lines.size() == 1 && lines[0].second.starts_with(kSecretPrefix) &&
                  unhex(lines[0].second.substr(kSecretPrefix.size()), seed.data(), seed.size());
  sodium_memzero(text.data(), text.size());
  if (!ok) {
    sodium_memzero(seed.data(), seed.size());
    throw ConfigError("signing key file " + path + " holds no signing key: expected one line 'ed25519-secret:' and " +
                      "64 hex digits; " + fix);
  }
  std::unique_ptr<SigningKey> k(new SigningKey);
  crypto_sign_seed_keypair(k->public_.bytes.data(), k->secret_.data(), seed.data());
  sodium_memzero(seed.data(), seed.size());
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0 &&
      process::Context::current().get<process::Once>().first("signing key readable|" + path))
    log::warn(
        "signing key file {} may be read by other users (mode {:o}); anyone who reads it can sign values "
        "the fleet trusts: chmod 600 {}",
        path, st.st_mode & 0777, path);
  return k;
}

std::string SigningKey::sign(std::string_view key, std::string_view value) const {
  const Hash h = hash(value);
  const std::string m = message(key, h);
  std::string out(kMagic);
  out += static_cast<char>(kVersion);
  out += static_cast<char>(kEd25519);
  out.append(reinterpret_cast<const char*>(public_.bytes.data()), public_.bytes.size());
  out.append(reinterpret_cast<const char*>(h.data()), h.size());
  std::array<unsigned char, kSignatureBytes> sig{};
  crypto_sign_detached(sig.data(), nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(), secret_.data());
  out.append(reinterpret_cast<const char*>(sig.data()), sig.size());
  return out;
}

std::string SigningKey::secret_text() const {
  return "# npucache remote signing key " + public_.id() +
         ": keep it secret (mode 0600); its public half is signing.pub\n" + std::string(kSecretPrefix) +
         hex(secret_.data(), crypto_sign_SEEDBYTES) + "\n";
}

std::vector<PublicKey> load_trusted(const std::string& path) {
  init();
  const std::string fix =
      "list the signing.pub lines of the writers to trust, one a line (NPUCACHE_REMOTE_TRUSTED_KEYS, --trusted-keys)";
  const std::string text = read_text(path, "trusted keys file", fix);
  std::vector<PublicKey> keys;
  for (const auto& [number, line] : lines_of(text)) {
    const std::size_t space = line.find_first_of(" \t");  // a label may follow the key
    const auto k = parse_public_key(line.substr(0, space));
    // A line is quoted only as far as a public key's form shows: a secret
    // key's line (a signing.key given as trusted keys) is never printed.
    if (!k && line.starts_with(kSecretPrefix))
      throw ConfigError("trusted keys file " + path + " line " + std::to_string(number) +
                        " is a secret signing key, not a public key (is this a signing.key? its secret is not shown; "
                        "keep it private): " +
                        fix);
    if (!k)
      throw ConfigError("trusted keys file " + path + " line " + std::to_string(number) + " is not a public key ('" +
                        std::string(line.substr(0, 24)) + (line.size() > 24 ? "..." : "") +
                        "'): expected 'ed25519:' and 64 hex digits; " + fix);
    keys.push_back(*k);
  }
  if (keys.empty()) throw ConfigError("trusted keys file " + path + " holds no key; " + fix);
  return keys;
}

Hash hash(std::string_view value) {
  init();
  Hash h{};
  crypto_generichash(h.data(), h.size(), reinterpret_cast<const unsigned char*>(value.data()), value.size(), nullptr,
                     0);
  return h;
}

std::optional<Record> decode(std::string_view b, std::string* why) {
  const auto no = [&](const std::string& w) -> std::optional<Record> {
    *why = w;
    return std::nullopt;
  };
  if (b.size() < kMagic.size() + 2 || !b.starts_with(kMagic)) return no("the signature record is not one");
  if (static_cast<unsigned char>(b[4]) != kVersion)
    return no("the signature record has version " + std::to_string(static_cast<unsigned char>(b[4])) +
              ", this reader knows 1");
  if (static_cast<unsigned char>(b[5]) != kEd25519) return no("the signature record names an unknown algorithm");
  if (b.size() != kRecordBytes)
    return no("the signature record has " + std::to_string(b.size()) + " bytes, not " + std::to_string(kRecordBytes));
  Record r;
  std::size_t at = 6;
  std::memcpy(r.signer.bytes.data(), b.data() + at, kPublicKeyBytes);
  at += kPublicKeyBytes;
  std::memcpy(r.value_hash.data(), b.data() + at, kHashBytes);
  at += kHashBytes;
  std::memcpy(r.signature.data(), b.data() + at, kSignatureBytes);
  return r;
}

bool verify(const Record& r, std::string_view key) {
  init();
  const std::string m = message(key, r.value_hash);
  return crypto_sign_verify_detached(r.signature.data(), reinterpret_cast<const unsigned char*>(m.data()), m.size(),
                                     r.signer.bytes.data()) == 0;
}

PublicKey write_key_files(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw ConfigError("key directory " + dir + " cannot be made (" + std::strerror(errno) +
                      "); give a directory you may write");
  const auto k = SigningKey::generate();
  const std::string secret = dir + "/" + std::string(kSecretFile);
  std::string text = k->secret_text();
  const bool ok = write_file(secret, text, 0600, true);
  const int e = errno;
  sodium_memzero(text.data(), text.size());
  if (!ok && e == EEXIST)
    throw ConfigError(secret + " exists: a signing key is never replaced (its values would no longer verify); " +
                      "remove it first, or give another directory");
  if (!ok) throw ConfigError(secret + " cannot be written (" + std::strerror(e) + "); give a directory you may write");
  const std::string pub = dir + "/" + std::string(kPublicFile);
  if (!write_file(pub,
                  "# npucache remote signing key " + k->public_key().id() +
                      ": add this line to the readers' trusted keys file\n" + k->public_key().text() + "\n",
                  0644, false))
    throw ConfigError(pub + " cannot be written (" + std::strerror(errno) + "); give a directory you may write");
  return k->public_key();
}

}  // namespace npucache::remote::signing
