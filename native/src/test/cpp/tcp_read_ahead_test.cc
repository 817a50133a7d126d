// The read-ahead of the TCP links (host/tcp_frames.h LinkReader): bytes come out in order
// whatever the sizes asked for; a ring or log-N rank whose next collective arrived with the one
// before finishes it from the buffer instead of waiting on a socket that has nothing more to
// say; and bytes the ring read into the wrong place (a disagreement) go back into the stream.
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"
#include "host/tcp_frames.h"
#include "host/tcp_log_n.h"
#include "host/tcp_ring.h"
#include "support/test_harness.h"

namespace {

using npg::host::AbortSignal;
using npg::host::BlockHeader;
using npg::host::Deadline;
using npg::host::GatherArgs;
using npg::host::LinkReader;
using npg::host::TcpBruck;
using npg::host::TcpRing;
using npg::host::UniqueFd;
using npgtest::TestFailure;

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

// One collective of rank 0 with rank 1 (played by the test).
struct Round {
  size_t mine;      // rank 0's block
  size_t theirs;    // rank 1's block as sent
  size_t expected;  // rank 1's block as rank 0 expects it (a disagreement when not theirs)
  int written;      // rounds whose units rank 1 writes before rank 0 starts this one
};

// Rank 0 of 2 over `left` (from rank 1) and `right` (to rank 1). Rank 1 is ahead: the units of
// the first two rounds wait in the socket before rank 0 starts, and the first has no bytes, so
// rank 0's first read takes in the second round too. The third, a disagreement larger than the
// reader's buffer (the ring reads its bytes where it expects them, then gives them back), comes
// with the fourth, which must stay in step; the fifth is large and agreed. gather runs one
// collective and throws its verdict.
void check_rank_1_ahead(uint32_t magic, SocketPair& left, SocketPair& right,
                        const std::function<void(const GatherArgs&, const Deadline&)>& gather) {
  const Round rounds[] = {
      {200, 0, 0, 2}, {700, 1000, 1000, 0}, {100, 20000, 17000, 2}, {50, 3000, 3000, 0}, {60, 50000, 50000, 1}};
  const size_t count = sizeof(rounds) / sizeof(rounds[0]);
  std::vector<std::vector<uint8_t>> mine, theirs;
  for (size_t i = 0; i < count; ++i) {
    mine.push_back(random_bytes(rounds[i].mine, 10 + i));
    theirs.push_back(random_bytes(rounds[i].theirs, 20 + i));
  }
  size_t written = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t seq = i + 1;
    for (size_t end = written + static_cast<size_t>(rounds[i].written); written < end; ++written) {
      const uint64_t sent[2] = {rounds[written].mine, rounds[written].theirs};
      write_all(left.far.get(), unit_of_rank_1(magic, written + 1, theirs[written], npg::host::counts_digest(2, sent)));
    }
    const std::vector<uint8_t>& block = mine[i];
    const uint64_t counts[2] = {block.size(), rounds[i].expected};
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
    if (rounds[i].theirs != rounds[i].expected) {
      try {
        gather(args, Deadline::after_ms(3000));
        throw TestFailure("round " + std::to_string(seq) + ": the disagreement went unnoticed");
      } catch (const npg::Error& e) {
        CHECK(e.code() == NPG_INVALID_USAGE);
      }
      continue;
    }
    gather(args, Deadline::after_ms(3000));
    std::vector<uint8_t> expected = block;
    expected.insert(expected.end(), theirs[i].begin(), theirs[i].end());
    CHECK(recv == expected);
  }
  // Rank 0 sent its own units to rank 1, in order.
  size_t total = 0;
  for (const Round& r : rounds) total += BlockHeader::kBytes + r.mine;
  std::vector<uint8_t> out(total);
  size_t at = 0;
  while (at < out.size()) {
    ssize_t k = read(right.far.get(), out.data() + at, out.size() - at);
    CHECK(k > 0);
    at += static_cast<size_t>(k);
  }
  at = 0;
  for (size_t i = 0; i < count; ++i) {
    const BlockHeader h = BlockHeader::decode(out.data() + at);
    CHECK(h.magic == magic && h.seq == i + 1 && h.rank == 0 && h.following == mine[i].size());
    at += BlockHeader::kBytes;
    CHECK(std::equal(mine[i].begin(), mine[i].end(), out.begin() + static_cast<std::ptrdiff_t>(at)));
    at += mine[i].size();
  }
}

void test_a_ring_stays_in_step_with_a_peer_that_runs_ahead() {
  SocketPair left = socket_pair();
  SocketPair right = socket_pair();
  AbortSignal abort;
  std::unique_ptr<TcpRing> ring = TcpRing::adopt(0, 2, std::move(left.near), std::move(right.near), abort);
  check_rank_1_ahead(TcpRing::kHeaderMagic, left, right,
                     [&](const GatherArgs& args, const Deadline& deadline) { ring->all_gather_v(args, deadline); });
  ring->close();
}

void test_log_n_stays_in_step_with_a_peer_that_runs_ahead() {
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
    npg::host::judge_layout(headers.data(), args, 2);
    args.write_own_block();
  });
  CHECK(bruck.close() == 0);
}

const npgtest::TestCase kTests[] = {
    {"a_reader_hands_out_bytes_in_order_whatever_the_sizes_asked",
     test_a_reader_hands_out_bytes_in_order_whatever_the_sizes_asked},
    {"a_ring_stays_in_step_with_a_peer_that_runs_ahead", test_a_ring_stays_in_step_with_a_peer_that_runs_ahead},
    {"log_n_stays_in_step_with_a_peer_that_runs_ahead", test_log_n_stays_in_step_with_a_peer_that_runs_ahead},
};

}  // namespace

int main(int argc, char** argv) { return npgtest::run_tests(argc, argv, kTests); }
