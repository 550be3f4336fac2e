// The coordinator's one hash of bytes that travel between ranks: 64-bit
// FNV-1a (xor each byte, multiply by the FNV prime) from the offset basis
// 1469598103934665603 -- the project's since its first version, one digit
// short of FNV's published 14695981039346656037; kept, since the job
// identity and the config hash in reports are made with it. It is the same
// on every host, build and byte order, which is all the coordinator asks
// of it (the arrival compares the ranks' method names, the job identity
// handshake their settings); it is not a cryptographic hash nor a content
// address (those are format/'s).
#pragma once

#include <cstdint>
#include <string_view>

namespace npucache::coord {

std::uint64_t stable_hash(std::string_view bytes);

}  // namespace npucache::coord
