// copy_block (core/block_copy.h): every byte arrives and nothing outside the destination is
// written, at every relative alignment of the two buffers that picks a different copy (the
// addresses nearly aliasing modulo the page, or not) and at the sizes around each threshold.
#include "core/block_copy.h"

#include <stdint.h>

#include <random>
#include <string>
#include <vector>

#include "support/test_harness.h"

namespace {

using npgtest::TestFailure;

constexpr size_t kPage = 4096;
constexpr size_t kGuard = 64;  // bytes either side of the destination that must stay untouched

// Copies len random bytes from src_offset to dst_offset (both within a page) and checks every
// byte of the destination and its guards.
void check_copy(std::mt19937_64& rng, uint64_t len, size_t src_offset, size_t dst_offset) {
  std::vector<uint8_t> src(len + 2 * kPage);
  std::vector<uint8_t> dst(len + 2 * kPage + 2 * kGuard);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (auto& b : dst) b = 0xA5;
  // Page-aligned bases, so that the offsets set the relative alignment exactly.
  auto page_up = [](uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(uintptr_t{kPage} - 1));
  };
  const uint8_t* from = page_up(src.data()) + src_offset;
  uint8_t* to = page_up(dst.data() + kGuard) + dst_offset;
  npg::copy_block(to, from, len);
  for (uint64_t i = 0; i < len; ++i) {
    if (to[i] != from[i]) {
      throw TestFailure("copy of " + std::to_string(len) + " bytes from page offset " + std::to_string(src_offset) +
                        " to " + std::to_string(dst_offset) + ": byte " + std::to_string(i) + " differs");
    }
  }
  for (size_t i = 1; i <= kGuard; ++i) {
    if (to[-static_cast<ptrdiff_t>(i)] != 0xA5 || to[len + i - 1] != 0xA5) {
      throw TestFailure("copy of " + std::to_string(len) + " bytes from page offset " + std::to_string(src_offset) +
                        " to " + std::to_string(dst_offset) + " wrote outside the destination");
    }
  }
}

void test_every_byte_arrives_at_every_distance_near_the_page() {
  std::mt19937_64 rng(1);
  const uint64_t sizes[] = {npg::kAliasedCopyMinBytes - 1, npg::kAliasedCopyMinBytes, npg::kAliasedCopyMinBytes + 63,
                            64 * 1024 + 17};
  for (uint64_t len : sizes) {
    // Distances 0 .. 129 and the page's last 64 (dst just before src): both sides of the window.
    for (size_t distance = 0; distance < kPage; distance = distance == 129 ? kPage - 64 : distance + 1) {
      const size_t src_offset = (distance * 7) % 64;  // the source's own alignment varies too
      check_copy(rng, len, src_offset, (src_offset + distance) % kPage);
    }
  }
}

void test_short_copies_arrive_whole() {
  std::mt19937_64 rng(2);
  for (uint64_t len = 0; len <= 130; ++len) {
    check_copy(rng, len, 0, 1);
    check_copy(rng, len, 3, 3);
  }
}

void test_streamed_copies_arrive_whole_at_any_alignment() {
  std::mt19937_64 rng(3);
  const uint64_t len = npg::kStreamCopyMinBytes + 61;  // a tail the 64-byte steps leave
  const size_t placements[][2] = {{0, 0}, {0, 1}, {5, 21}, {17, 9}, {100, 4095}};
  for (const auto& p : placements) check_copy(rng, len, p[0], p[1]);
}

const npgtest::TestCase kTests[] = {
    {"every_byte_arrives_at_every_distance_near_the_page", test_every_byte_arrives_at_every_distance_near_the_page},
    {"short_copies_arrive_whole", test_short_copies_arrive_whole},
    {"streamed_copies_arrive_whole_at_any_alignment", test_streamed_copies_arrive_whole_at_any_alignment},
};

}  // namespace

int main(int argc, char** argv) { return npgtest::run_tests(argc, argv, kTests); }
