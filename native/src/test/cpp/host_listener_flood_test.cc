// A sustained connection flood against the root's bootstrap listener from the ranks' own
// address (loopback), at the highest rate the flooding threads reach, while communicators
// form and gather: every formation completes, every byte right, within kAllowedExtraMs of
// the slowest quiet formation.
//
// The line it prints (connects per second, formation times quiet and under the flood) is
// what docs/operations.md quotes. Optional argument after the filter: rounds (default 12).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>

#include "support/host_test_support.h"

namespace {

using namespace npgtest;

constexpr int kRanks = 3;
constexpr int kFlooders = 4;
constexpr size_t kHeldPerFlooder = 200;
// What the flood may add to a formation: a few connect and challenge patiences
// (kFirstConnectPatienceMs, doubling) and the accept queue's wait, on top of the slowest quiet
// formation of the same run. A rank that queues behind the flood, as before admission drained
// it, costs a SYN retransmission (1 s, then 3 s).
constexpr double kAllowedExtraMs = 1200;
int rounds = 12;

uint16_t root_port(const std::vector<uint8_t>& info) {
  // magic(4) version(4) id(16) secret(16) family(2) port(2) addr(16)
  return static_cast<uint16_t>(info[42] | (info[43] << 8));
}

// Threads that connect to the current target as fast as they can: half close each
// connection at once (with a reset, so no port waits in TIME_WAIT), half hold their last
// kHeldPerFlooder silent.
class Flood {
 public:
  explicit Flood(const std::atomic<uint16_t>& port) : port_(port), start_(Clock::now()) {
    for (int i = 0; i < kFlooders; ++i) threads_.emplace_back([this, i] { run(i % 2 == 1); });
  }
  ~Flood() { stop(); }
  void stop() {
    if (stop_.exchange(true)) return;
    elapsed_ms_ = ms_since(start_);
    for (auto& t : threads_) t.join();
  }
  double connects_per_second() const { return connects_.load() * 1000.0 / elapsed_ms_; }

 private:
  void run(bool hold) {
    std::deque<int> held;
    while (!stop_.load()) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        sleep_ms(1);
        continue;
      }
      linger reset{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      timeval patience{0, 200000};  // a dropped SYN: the flood goes on with a new one
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof(patience));
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(port_.load());
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
        close(fd);
        continue;
      }
      connects_.fetch_add(1);
      if (!hold) {
        close(fd);
        continue;
      }
      held.push_back(fd);
      if (held.size() > kHeldPerFlooder) {
        close(held.front());
        held.pop_front();
      }
    }
    for (int fd : held) close(fd);
  }

  const std::atomic<uint16_t>& port_;
  Clock::time_point start_;
  double elapsed_ms_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> connects_{0};
  std::vector<std::thread> threads_;
};

// Forms a kRanks communicator on a fresh root info (its port published to the flood first),
// gathers once with every byte checked; milliseconds from the inits to the last gather's end.
double form_and_gather(std::atomic<uint16_t>* flood_port, uint64_t seed) {
  auto info = make_root_info();
  flood_port->store(root_port(info));
  sleep_ms(200);  // the flood turns to the new listener and fills whatever queue it fills
  auto t0 = Clock::now();
  run_ranks(kRanks, [&](int rank) {
    npg_comm_t comm = init_rank(rank, kRanks, info, 0, 20000);
    gather_and_verify(comm, rank, kRanks, 4096 + seed % 997, seed);
    CHECK_OK(npg_comm_destroy(comm));
  });
  return ms_since(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void test_formations_under_a_connection_flood_from_the_ranks_own_address_end_within_the_bound() {
  std::atomic<uint16_t> port{0};
  std::vector<double> quiet;
  std::vector<double> flooded;
  for (int i = 0; i < rounds; ++i) quiet.push_back(form_and_gather(&port, 100 + i));
  double rate;
  {
    auto parked = make_root_info();  // the flood's first target, until the first formation's
    port.store(root_port(parked));
    Flood flood(port);
    for (int i = 0; i < rounds; ++i) flooded.push_back(form_and_gather(&port, 200 + i));
    flood.stop();
    rate = flood.connects_per_second();
    CHECK_OK(npg_release_root_info("host", parked.data(), parked.size()));
  }
  const double bound = *std::max_element(quiet.begin(), quiet.end()) + kAllowedExtraMs;
  std::string all;
  for (double ms : flooded) all += (all.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(ms));
  printf(
      "  host bootstrap flood: %.0f connects/s from %d threads; formations of %d ranks: quiet median %.0f ms (max "
      "%.0f), under the flood median %.0f ms (max %.0f); bound %.0f ms; all: [%s]\n",
      rate, kFlooders, kRanks, median(quiet), *std::max_element(quiet.begin(), quiet.end()), median(flooded),
      *std::max_element(flooded.begin(), flooded.end()), bound, all.c_str());
  for (double ms : flooded) CHECK(ms <= bound);
}

const TestCase kTests[] = {
    {"formations_under_a_connection_flood_from_the_ranks_own_address_end_within_the_bound",
     test_formations_under_a_connection_flood_from_the_ranks_own_address_end_within_the_bound},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) rounds = std::max(1, atoi(argv[2]));
  return run_tests(argc, argv, kTests, host_run_options());
}
