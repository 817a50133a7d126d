// Where each rank's block lands in a gather's receive buffer, in elements: what the tests of
// every backend pass as recv_counts and recv_displs.
#ifndef NPUGATHER_TEST_SUPPORT_BLOCK_LAYOUT_H_
#define NPUGATHER_TEST_SUPPORT_BLOCK_LAYOUT_H_

#include <stdint.h>

#include <vector>

namespace npgtest {

struct Layout {
  std::vector<uint64_t> counts;
  std::vector<uint64_t> displs;
  uint64_t recv_elems = 0;  // the receive buffer's size, gaps included
};

// count elements from every rank, in rank order without gaps.
inline Layout equal_layout(int n, uint64_t count) {
  Layout l;
  for (int r = 0; r < n; ++r) {
    l.counts.push_back(count);
    l.displs.push_back(count * r);
  }
  l.recv_elems = count * n;
  return l;
}

}  // namespace npgtest

#endif  // NPUGATHER_TEST_SUPPORT_BLOCK_LAYOUT_H_
