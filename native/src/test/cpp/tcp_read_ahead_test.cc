// The read-ahead of the TCP links (host/tcp_frames.h LinkReader): bytes come out in order
// whatever the sizes asked for, and a ring or log-N rank whose next collective arrived with
// the one before finishes it from the buffer instead of waiting on a socket that has nothing
// more to say.
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"
#include "hardening_test_support.h"
#include "host/tcp_frames.h"
#include "host/tcp_log_n.h"
#include "host/tcp_ring.h"

namespace {

using hardening::TestFailure;
using npg::host::AbortSignal;
using npg::host::BlockHeader;
using npg::host::Deadline;
using npg::host::GatherArgs;
using npg::host::LinkReader;
using npg::host::TcpBruck;
using npg::host::TcpRing;
using npg::host::UniqueFd;

struct SocketPair {
  UniqueFd near;  // the side under test
  UniqueFd far;   // the side the test writes and reads
};

SocketPair socket_pair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) throw TestFailure("socketpair");
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t k = write(fd, bytes.data() + done, bytes.size() - done);
    if (k <= 0) throw TestFailure("write to the test socket failed");
    done += static_cast<size_t>(k);
  }
}

void test_a_reader_hands_out_bytes_in_order_whatever_the_sizes_asked() {
  SocketPair link = socket_pair();
  const std::vector<uint8_t> sent = random_bytes(3 * LinkReader::kBufferBytes + 77, 1);
  write_all(link.far.get(), sent);
  LinkReader reader;
  std::vector<uint8_t> got(sent.size());
  std::mt19937_64 rng(2);
  size_t at = 0;
  bool saw_buffered = false;
  while (at < got.size()) {
    // Small and large asks, some of them at least the buffer (read in place).
    const uint64_t want =
        std::min<uint64_t>(got.size() - at, rng() % 3 == 0 ? LinkReader::kBufferBytes + rng() % 999 : 1 + rng() % 5000);
    const int64_t k = reader.read(link.near.get(), got.data() + at, want, 1);
    CHECK(k > 0 && static_cast<uint64_t>(k) <= want);
    at += static_cast<size_t>(k);
    saw_buffered = saw_buffered || reader.buffered();
  }
  CHECK(got == sent);
  CHECK(saw_buffered);
  CHECK(!reader.buffered());
  uint8_t byte = 0;
  CHECK(reader.read(link.near.get(), &byte, 1, 1) == 0);  // nothing more now
  link.far.reset();
  CHECK(reader.read(link.near.get(), &byte, 1, 1) == -1);  // the end of the stream
}

// What rank 1 of 2 sends for collective seq: its header (magic of the algorithm), its block.
std::vector<uint8_t> unit_of_rank_1(uint32_t magic, uint64_t seq, const std::vector<uint8_t>& block, uint64_t digest) {
  std::vector<uint8_t> unit(BlockHeader::kBytes);
  BlockHeader{magic, 1, seq, block.size(), digest, block.size()}.encode(unit.data());
  unit.insert(unit.end(), block.begin(), block.end());
  return unit;
}

// Rank 0 of 2 over `left` (from rank 1) and `right` (to rank 1), rank 1 played by the test and
// ahead: both of its units wait in the socket before rank 0 starts the first collective, so
// rank 0's first read takes in the second collective too. gather runs one collective.
void check_rank_1_ahead(uint32_t magic, SocketPair& left, SocketPair& right,
                        const std::function<void(const GatherArgs&, const Deadline&)>& gather) {
  const std::vector<uint8_t> theirs[2] = {random_bytes(300, 3), random_bytes(1000, 4)};
  const std::vector<uint8_t> mine[2] = {random_bytes(200, 5), random_bytes(700, 6)};
  std::vector<uint8_t> both;
  for (uint64_t seq : {1, 2}) {
    const uint64_t counts[2] = {mine[seq - 1].size(), theirs[seq - 1].size()};
    const std::vector<uint8_t> unit = unit_of_rank_1(magic, seq, theirs[seq - 1], npg::host::counts_digest(2, counts));
    both.insert(both.end(), unit.begin(), unit.end());
  }
  write_all(left.far.get(), both);
  for (uint64_t seq : {1, 2}) {
    const std::vector<uint8_t>& block = mine[seq - 1];
    const uint64_t counts[2] = {block.size(), theirs[seq - 1].size()};
    const uint64_t displs[2] = {0, block.size()};
    std::vector<uint8_t> recv(counts[0] + counts[1]);
    const npg_segment_t segment{block.data(), block.size()};
    GatherArgs args;
    args.segments = &segment;
    args.segment_count = 1;
    args.send_bytes = block.size();
    args.write_own = true;
    args.recv = recv.data();
    args.counts = counts;
    args.displs = displs;
    args.seq = seq;
    args.digest = npg::host::counts_digest(2, counts);
    // Waiting on the socket instead of the buffer would end in this deadline's TIMEOUT.
    gather(args, Deadline::after_ms(3000));
    std::vector<uint8_t> expected = block;
    expected.insert(expected.end(), theirs[seq - 1].begin(), theirs[seq - 1].end());
    CHECK(recv == expected);
  }
  // Rank 0 sent its own two units to rank 1, in order.
  std::vector<uint8_t> out(2 * BlockHeader::kBytes + mine[0].size() + mine[1].size());
  size_t at = 0;
  while (at < out.size()) {
    ssize_t k = read(right.far.get(), out.data() + at, out.size() - at);
    CHECK(k > 0);
    at += static_cast<size_t>(k);
  }
  const BlockHeader first = BlockHeader::decode(out.data());
  const BlockHeader second = BlockHeader::decode(out.data() + BlockHeader::kBytes + mine[0].size());
  CHECK(first.magic == magic && first.seq == 1 && first.rank == 0 && first.following == mine[0].size());
  CHECK(second.magic == magic && second.seq == 2 && second.rank == 0 && second.following == mine[1].size());
  CHECK(std::equal(mine[0].begin(), mine[0].end(), out.begin() + BlockHeader::kBytes));
  CHECK(std::equal(mine[1].begin(), mine[1].end(), out.end() - static_cast<std::ptrdiff_t>(mine[1].size())));
}

void test_a_ring_finishes_a_collective_that_arrived_with_the_one_before() {
  SocketPair left = socket_pair();
  SocketPair right = socket_pair();
  AbortSignal abort;
  std::unique_ptr<TcpRing> ring = TcpRing::adopt(0, 2, std::move(left.near), std::move(right.near), abort);
  check_rank_1_ahead(TcpRing::kHeaderMagic, left, right,
                     [&](const GatherArgs& args, const Deadline& deadline) { ring->all_gather_v(args, deadline); });
  ring->close();
}

void test_log_n_finishes_a_collective_that_arrived_with_the_one_before() {
  SocketPair left = socket_pair();
  SocketPair right = socket_pair();
  AbortSignal abort;
  std::vector<UniqueFd> to, from;
  to.push_back(std::move(right.near));
  from.push_back(std::move(left.near));
  TcpBruck bruck(0, 2, std::move(to), std::move(from), abort);
  check_rank_1_ahead(TcpBruck::kHeaderMagic, left, right, [&](const GatherArgs& args, const Deadline& deadline) {
    std::vector<uint8_t> headers;
    bruck.exchange(args, true, headers, deadline);
    args.write_own_block();
  });
  CHECK(bruck.close() == 0);
}

const hardening::TestCase kTests[] = {
    {"a_reader_hands_out_bytes_in_order_whatever_the_sizes_asked",
     test_a_reader_hands_out_bytes_in_order_whatever_the_sizes_asked},
    {"a_ring_finishes_a_collective_that_arrived_with_the_one_before",
     test_a_ring_finishes_a_collective_that_arrived_with_the_one_before},
    {"log_n_finishes_a_collective_that_arrived_with_the_one_before",
     test_log_n_finishes_a_collective_that_arrived_with_the_one_before},
};

}  // namespace

int main(int argc, char** argv) { return hardening::run_tests(kTests, sizeof(kTests) / sizeof(kTests[0]), argc, argv); }
