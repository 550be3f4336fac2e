#include "remote/signed_backend.h"

#include <npucache/error.h>

#include "log/log.h"
#include "remote/signing.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace npucache::remote {
namespace {

using signing::PublicKey;
using signing::SigningKey;

// Rounds a writer reads its pair back and repairs it: two racing writers
// settle in one or two. Writers in lockstep could put back their halves in
// turn for ever; a random pause before each later round, growing with the
// rounds, breaks the step.
constexpr int kSettleRounds = 16;
constexpr int kPauseStepUs = 100;

void pause_before(int round) {
  thread_local std::minstd_rand random(std::random_device{}());
  const int us = std::uniform_int_distribution<int>(0, kPauseStepUs * round)(random);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

std::string sig_key(const std::string& key) { return key + std::string(signing::kSuffix); }

bool is_sig_key(const std::string& key) { return key.ends_with(signing::kSuffix); }

// Why `value` under `key` with signature record `record` is not usable
// when `keys` are trusted; empty when it is.
std::string untrusted_because(const std::string& key, std::string_view value, std::string_view record,
                              const std::vector<PublicKey>& keys) {
  std::string why;
  const auto r = signing::decode(record, &why);
  if (!r) return why;
  if (std::find(keys.begin(), keys.end(), r->signer) == keys.end())
    return "signed by key " + r->signer.id() + " which is not trusted";
  if (!signing::verify(*r, key)) return "signature does not match the value (it was made for another key, or damaged)";
  if (signing::hash(value) != r->value_hash)
    return "signature does not match the value (the value was changed after it was signed)";
  return {};
}

class SignedBackend final : public Backend {
 public:
  SignedBackend(std::unique_ptr<Backend> inner, const Config& c) : Backend(inner->config()), inner_(std::move(inner)) {
    if (!c.signing_key_file.empty()) {
      try {
        signer_ = SigningKey::load(c.signing_key_file);
        writer_keys_.push_back(signer_->public_key());
        // A signer reads only what a key it trusts signed (at least its
        // own): an unsigned value it read and stored would be signed by
        // its next push or commit, and trusted by every reader of its key.
        verifying_ = true;
        trusted_.push_back(signer_->public_key());
      } catch (const Error& e) {
        signer_error_ = e.what();
      }
    }
    if (!c.trusted_keys_file.empty()) {
      verifying_ = true;
      try {
        const auto listed = signing::load_trusted(c.trusted_keys_file);
        trusted_.insert(trusted_.end(), listed.begin(), listed.end());  // beside its own (above)
        writer_keys_.insert(writer_keys_.end(), listed.begin(), listed.end());
      } catch (const Error& e) {
        trusted_error_ = e.what();
      }
    }
  }

  bool authenticated() const override { return verifying_; }
  std::vector<Fault> take_partial_faults() override { return inner_->take_partial_faults(); }
  Backend* wrapped() override { return inner_.get(); }

  Answer<std::string> get(const std::string& key) override {
    if (!verifying_) return inner_->get(key);
    auto got = inner_->get_many({key, sig_key(key)});
    return judge(key, std::move(got[0]), got[1]);
  }

  std::vector<Answer<std::string>> get_many(const std::vector<std::string>& keys) override {
    if (!verifying_) return inner_->get_many(keys);
    std::vector<std::string> both;
    both.reserve(2 * keys.size());
    for (const auto& k : keys) {
      both.push_back(k);
      both.push_back(sig_key(k));
    }
    auto got = inner_->get_many(both);
    std::vector<Answer<std::string>> out;
    out.reserve(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back(judge(keys[i], std::move(got[2 * i]), got[2 * i + 1]));
    return out;
  }

  Answer<bool> put(const std::string& key, std::string_view value, Overwrite overwrite) override {
    if (!signer_error_.empty())
      return Answer<bool>::failed({Failure::server, signer_error_ + "; nothing is written unsigned"});
    if (!signer_) return inner_->put(key, value, overwrite);
    auto put = inner_->put(key, value, overwrite);
    if (!put.is_hit()) return put;
    if (!put.value()) {
      // Present: kept when a key this writer trusts signed it; else replaced.
      auto got = inner_->get_many({key, sig_key(key)});
      for (const auto& a : got)
        if (a.is_failure()) return Answer<bool>::failed(a.fault());
      if (got[0].is_hit() && got[1].is_hit() &&
          untrusted_because(key, got[0].value(), got[1].value(), writer_keys_).empty())
        return Answer<bool>::hit(false);
      put = inner_->put(key, value, Overwrite::yes);
      if (!put.is_hit()) return put;
    }
    const std::string mine = signer_->sign(key, value);
    auto signed_ = inner_->put(sig_key(key), mine, Overwrite::yes);
    if (signed_.is_failure()) return Answer<bool>::failed(signed_.fault());
    settle(key, value, mine);
    return Answer<bool>::hit(true);
  }

  Answer<std::size_t> remove(const std::vector<std::string>& keys) override {
    auto removed = inner_->remove(keys);
    if (removed.is_failure()) return removed;
    std::vector<std::string> sigs;
    for (const auto& k : keys) sigs.push_back(sig_key(k));
    auto r = inner_->remove(sigs);
    if (r.is_failure()) return r;
    return removed;
  }

  Answer<std::vector<std::string>> list(const std::string& prefix) override {
    auto keys = inner_->list(prefix);
    if (keys.is_hit()) std::erase_if(keys.value(), is_sig_key);
    return keys;
  }

 private:
  // The value read for `key`, usable only with a trusted signature record.
  Answer<std::string> judge(const std::string& key, Answer<std::string> value, const Answer<std::string>& record) {
    if (!value.is_hit()) return value;  // a miss or a failure, as it is
    if (record.is_failure()) return Answer<std::string>::failed(record.fault());
    const auto untrusted = [&](const std::string& why) {
      return Answer<std::string>::failed({Failure::untrusted, key + ": " + why});
    };
    if (!trusted_error_.empty()) return untrusted(trusted_error_ + " (no key is trusted)");
    if (record.is_miss()) return untrusted("unsigned");
    if (auto why = untrusted_because(key, value.value(), record.value(), trusted_); !why.empty()) return untrusted(why);
    return value;
  }

  // Reads the pair this writer wrote back and puts back its half that a
  // racing writer replaced, until the pair is valid (see the header).
  void settle(const std::string& key, std::string_view value, const std::string& mine) {
    for (int round = 0; round < kSettleRounds; ++round) {
      if (round > 0) pause_before(round);
      auto got = inner_->get_many({key, sig_key(key)});
      if (!got[0].is_hit() || got[1].is_failure()) return;  // removed since, or the remote failed
      if (got[1].is_hit() && untrusted_because(key, got[0].value(), got[1].value(), writer_keys_).empty()) return;
      Answer<bool> put = Answer<bool>::hit(true);
      if (got[1].is_hit() && got[1].value() == mine)
        put = inner_->put(key, value, Overwrite::yes);  // our signature over another's value
      else if (got[0].value() == value)
        put = inner_->put(sig_key(key), mine, Overwrite::yes);  // our value under another's signature
      else
        return;  // neither half is ours: the writer of the last one settles it
      if (!put.is_hit()) return;
    }
    log::debug("remote key {}: its signature and value are still being replaced by other writers after {} rounds", key,
               kSettleRounds);
  }

  std::unique_ptr<Backend> inner_;
  std::unique_ptr<SigningKey> signer_;
  std::string signer_error_, trusted_error_;
  bool verifying_ = false;
  std::vector<PublicKey> trusted_;      // whose values a read uses
  std::vector<PublicKey> writer_keys_;  // whose values a write keeps: its own and the trusted
};

}  // namespace

std::unique_ptr<Backend> make_signed_backend(std::unique_ptr<Backend> inner, const Config& config) {
  // Even with no key: a host that neither signs nor verifies still lists
  // values alone (a signature record read as a table's record would be a
  // damaged value) and removes a value's record with it.
  return std::make_unique<SignedBackend>(std::move(inner), config);
}

}  // namespace npucache::remote
