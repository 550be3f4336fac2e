// The job identity handshake: before any collective of the model or the
// coordinator, the ranks of a job check that they were started with the
// same settings (subcommand, model and a hash of its config, tp/pp/dp,
// mode, options). Ranks that disagree would otherwise meet in collectives
// of different shapes (MPI_ERR_TRUNCATE) or quietly mix modes.
//
// The common case costs one all-reduce of 16 bytes: the maximum of the
// identity's hash and of its complement gives the largest and the smallest
// hash; equal means every rank has the same identity. Only when they differ
// are the identities all-gathered, so every rank can name the ranks and the
// fields that differ, and every rank throws the same JobMismatch: the
// error is agreed, no rank is left in a collective, and the job can end
// with MPI_Finalize instead of an abort.
#pragma once

#include <npucache/error.h>

#include "coord/hash.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npucache::coord {

struct JobField {
  std::string name;  // as the user gave it: "--pp"; "command" is the subcommand
  std::string value;
};
using JobIdentity = std::vector<JobField>;

// Every rank of the job has this error, with the same message.
class JobMismatch : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// Collective over MPI_COMM_WORLD, bounded by `timeout_s` (TimeoutError
// naming the ranks that did not take part, such as a rank running another
// program). Throws JobMismatch when the identities differ.
void agree_job_identity(const JobIdentity& mine, double timeout_s);

// "ranks 0, 1 have --pp 1, ranks 2, 3 have --pp 2", for every field that
// differs ("rank 3 runs `npucache generate`, ranks 0-2 run `npucache
// warmup`" when the subcommands differ, and nothing else then); empty when
// the identities are equal. Pure, for tests.
std::string describe_mismatch(const std::vector<JobIdentity>& identities);

// The identity as bytes (one "name=value" per line) and its hash (the
// coordinator's one hash, coord/hash.h).
std::string encode(const JobIdentity& id);
JobIdentity decode(const std::string& bytes);
inline std::uint64_t identity_hash(const std::string& encoded) { return stable_hash(encoded); }

}  // namespace npucache::coord
