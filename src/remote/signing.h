// Ed25519 signatures of the remote tier's values (signed_backend.h): the
// one wrapper of libsodium. Keys, their files, the signature record and the
// message it signs (docs/FORMAT.md, "Signature records").
//
// Key files are text, one item a line:
//   signing.key   "ed25519-secret:<64 hex digits>" (the 32-byte seed), mode 0600
//   signing.pub   "ed25519:<64 hex digits>" (the public key)
//   trusted file  public key lines as in signing.pub, each optionally
//                 followed by a space and a label; '#' starts a comment
// A key is named in messages by its id: the first 16 hex digits of the
// public key.
//
// A signature record (the value of key K + "#sig") is 134 bytes:
//   "NPSG" | version 1 | algorithm 1 (Ed25519) | public key (32)
//   | BLAKE2b-256 of the value (32) | Ed25519 signature (64)
// over the message "npucache remote signature 1\0" | u64 LE length of K |
// K | the value's BLAKE2b-256. The message binds the full key, so a
// signature copied to another key does not verify.
//
// Loading a file throws ConfigError naming the file, what is wrong and how
// to fix it. libsodium is initialised once, on first use, from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npucache::remote::signing {

inline constexpr std::size_t kPublicKeyBytes = 32;
inline constexpr std::size_t kHashBytes = 32;
inline constexpr std::size_t kSignatureBytes = 64;
inline constexpr std::size_t kRecordBytes = 4 + 1 + 1 + kPublicKeyBytes + kHashBytes + kSignatureBytes;
// What a signature record's key adds to the key of the value it signs.
inline constexpr std::string_view kSuffix = "#sig";
// The file names `npucache remote keygen DIR` writes.
inline constexpr std::string_view kSecretFile = "signing.key";
inline constexpr std::string_view kPublicFile = "signing.pub";

using Hash = std::array<unsigned char, kHashBytes>;

struct PublicKey {
  std::array<unsigned char, kPublicKeyBytes> bytes{};
  std::string text() const;  // "ed25519:<hex>", as in the files
  std::string id() const;    // the first 16 hex digits
  bool operator==(const PublicKey&) const = default;
};

// A signing key (the secret), wiped from memory when destroyed.
class SigningKey {
 public:
  // A new random key.
  static std::unique_ptr<SigningKey> generate();
  // Reads a signing.key file; warns (once) when others may read it.
  static std::unique_ptr<SigningKey> load(const std::string& path);
  ~SigningKey();
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  const PublicKey& public_key() const { return public_; }
  // The signature record of `value` stored under `key`.
  std::string sign(std::string_view key, std::string_view value) const;
  // The secret's file text ("ed25519-secret:<hex>\n" with a comment).
  std::string secret_text() const;

 private:
  SigningKey();
  std::array<unsigned char, 64> secret_{};  // libsodium's form: seed then public key
  PublicKey public_;
};

// The public keys of a trusted keys file (at least one).
std::vector<PublicKey> load_trusted(const std::string& path);
// One "ed25519:<hex>" public key; nullopt when `text` is not one.
std::optional<PublicKey> parse_public_key(std::string_view text);

// The BLAKE2b-256 of a value.
Hash hash(std::string_view value);

// A decoded signature record.
struct Record {
  PublicKey signer;
  Hash value_hash{};
  std::array<unsigned char, kSignatureBytes> signature{};
};
// Decodes a signature record; nullopt (with `why` set) when it is not one.
std::optional<Record> decode(std::string_view bytes, std::string* why);
// Whether `r`'s signature is its signer's over `key` and r.value_hash.
bool verify(const Record& r, std::string_view key);

// Writes DIR/signing.key (0600; an existing one is never replaced) and
// DIR/signing.pub, creating DIR (0700) when missing; the new key's public
// half. ConfigError naming the path when a file cannot be written.
PublicKey write_key_files(const std::string& dir);

}  // namespace npucache::remote::signing
