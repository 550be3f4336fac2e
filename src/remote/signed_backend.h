// Signed publishing: a Backend over another that signs what it writes and
// uses only what a trusted key signed (docs/GUIDE.md, "Signed publishing";
// the record's form: signing.h, docs/FORMAT.md). The factory (backend.cpp)
// puts it over the URL's backend when Config::signing_key_file or
// Config::trusted_keys_file is set.
//
// The signature of the value of key K lives in its own record under
// K + "#sig" (signing::kSuffix), never inside the value: readers that do
// not look for it never see it, and no value changes.
//
// Writer (a signing key set): put(K, v) writes v, then K#sig. When
// Overwrite::no finds K present, the value is kept if a key this writer
// trusts (its own or a trusted one) signed it; otherwise (unsigned, another
// fleet's, changed) v replaces it and is signed. After writing, the writer
// reads the pair back and puts back whichever half of its own pair another
// writer replaced meanwhile, until the pair is one writer's (a bounded
// number of rounds, with random pauses after the first so that writers in
// lockstep fall out of it): writers that race on one key end with a
// consistent pair, the last writer's. remove(K) removes K#sig too; list() never answers a #sig
// key.
//
// Reader (trusted keys set): get(K) reads K and K#sig in one get_many; a
// value whose record is missing, malformed, by a key not trusted, or does
// not match the key and the value is a failure of kind Failure::untrusted
// whose detail says which ("unsigned", "signed by key <id> which is not
// trusted", "signature does not match the value (...)"). Such values are
// never removed (they may be another fleet's). get_many reads every value
// and its record in one round trip. authenticated() is true. A process
// also trusts its own signing key, and a process with a signing key is a
// reader of this kind even without a trusted keys file (it trusts its own
// key alone): an unsigned value it took would be signed by its next write
// of that key (a push, another process's adopted object), so a planted
// value would come out signed by the fleet's key. When the trusted keys
// file cannot be read at construction, every value read is untrusted (fail
// closed). Without either key, records are not read and values pass as
// they are.
#pragma once

#include "remote/backend.h"

#include <memory>

namespace npucache::remote {

// `inner` signed and checked as `config` says (its signing_key_file and
// trusted_keys_file). With neither set, values pass as they are, but
// listings still leave out signature records and a removal takes a value's
// record with it, so hosts without keys share a remote with signing
// writers (backend.h: make_backend always puts this layer on). Never throws for
// a key file (resolve_remote checked them before): when the signing key
// cannot be read every write fails (kind server, naming the file), when
// the trusted keys file cannot be read every read value is untrusted.
std::unique_ptr<Backend> make_signed_backend(std::unique_ptr<Backend> inner, const Config& config);

}  // namespace npucache::remote
