// Op numbers are pinned (include/npucache/ir/op.h): serialized graphs and
// programs, fused code, capture templates and the canonical hash store an
// op by its number, so a number may never change. tests/ir/op_numbers.txt
// is the record; this test holds the enum to it and the record to being
// append-only.
#include <npucache/error.h>
#include <npucache/ir/op.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace npucache;

namespace {

struct Listed {
  std::string name;
  uint32_t number;
  std::string line;  // as written, for the fingerprint
};

std::vector<Listed> read_list() {
  std::ifstream in(OP_NUMBERS);
  EXPECT_TRUE(in) << "cannot read " << OP_NUMBERS;
  std::vector<Listed> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Listed l;
    int64_t n = -1;
    std::string rest;
    fields >> l.name >> n;
    EXPECT_TRUE(fields && n >= 0 && !(fields >> rest)) << "not `name number`: '" << line << "'";
    l.number = static_cast<uint32_t>(n);
    l.line = line;
    out.push_back(std::move(l));
  }
  return out;
}

// FNV-1a over the lines, each ended by a newline.
uint64_t fingerprint(const std::vector<Listed>& list, std::size_t count) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < count && i < list.size(); ++i)
    for (char c : list[i].line + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
  return h;
}

// The ops of cache format 7.0.0, when the numbers were pinned (placeholder
// 0 .. erf 62): their lines may never change.
constexpr std::size_t kPinnedAtFormat7 = 63;
constexpr uint64_t kFingerprintAtFormat7 = 0x6eb4d588e9ece992ull;

}  // namespace

TEST(OpNumbers, ListIsAppendOnly) {
  const auto list = read_list();
  ASSERT_GE(list.size(), kPinnedAtFormat7);
  EXPECT_EQ(fingerprint(list, kPinnedAtFormat7), kFingerprintAtFormat7)
      << "a line of the first " << kPinnedAtFormat7 << " in " << OP_NUMBERS
      << " changed: ops are renumbered or removed, never; add new ops at the end";
  std::set<std::string> names;
  std::set<uint32_t> numbers;
  for (std::size_t i = 0; i < list.size(); ++i) {
    EXPECT_TRUE(names.insert(list[i].name).second) << list[i].name << " is listed twice";
    EXPECT_TRUE(numbers.insert(list[i].number).second) << "number " << list[i].number << " is listed twice";
    // Dense and in order: each new op takes the number after the highest.
    EXPECT_EQ(list[i].number, i) << list[i].name << " should have the next number, " << i;
  }
}

TEST(OpNumbers, EveryOpHasItsListedNumber) {
  const auto list = read_list();
  EXPECT_EQ(list.size(), static_cast<std::size_t>(Op::kCount))
      << "every op is listed in " << OP_NUMBERS << ", a new one at the end";
  for (const Listed& l : list) {
    Op op{};
    ASSERT_NO_THROW(op = op_from_name(l.name)) << l.name << " is listed but is no op";
    EXPECT_EQ(op_number(op), l.number) << l.name << " changed its number";
    EXPECT_TRUE(is_op_number(l.number));
    EXPECT_EQ(op_name(static_cast<Op>(l.number)), l.name);
  }
  EXPECT_FALSE(is_op_number(static_cast<uint32_t>(Op::kCount)));
  EXPECT_THROW(op_info(Op::kCount), Error);
}

// Every op has a row whose traits fit its class (the table also checks
// this when it compiles; this is the view from outside).
TEST(OpNumbers, EveryOpHasARowFittingItsClass) {
  for (uint32_t n = 0; is_op_number(n); ++n) {
    const Op op = static_cast<Op>(n);
    const OpInfo& info = op_info(op);
    ASSERT_FALSE(info.name.empty()) << "op " << n;
    EXPECT_EQ(op_from_name(info.name), op);
    const bool elementwise = info.cls == OpClass::unary || info.cls == OpClass::binary ||
                             info.cls == OpClass::comparison || info.cls == OpClass::select;
    EXPECT_TRUE(!elementwise || info.pointwise) << info.name;
    EXPECT_TRUE(info.cls != OpClass::unary || (info.min_inputs == 1 && info.max_inputs == 1)) << info.name;
    EXPECT_TRUE(!info.fusible || (elementwise && !info.composite)) << info.name;
    EXPECT_TRUE(!info.foldable || !(info.composite || info.side_effect)) << info.name;
    EXPECT_TRUE(!info.rng || info.side_effect) << info.name;
  }
  EXPECT_EQ(op_info(Op::erf).cls, OpClass::unary);
  EXPECT_TRUE(op_info(Op::erf).floating_only && op_info(Op::erf).fusible && op_info(Op::erf).foldable);
}
