// Strangers against the host backend's listeners while a real communicator forms: idle,
// garbage, slowloris and flood connections to the root's bootstrap listener and to the
// ranks' ring listeners. Every case must form the communicator, gather every byte right,
// and take at most its undisturbed time plus a small constant.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>

#include "support/host_test_support.h"

namespace {

using namespace npgtest;

constexpr int kRanks = 3;
constexpr double kAllowedExtraMs = 1500;  // scheduling on a loaded 2-core machine included

uint16_t root_port(const std::vector<uint8_t>& info) {
  // magic(4) version(4) id(16) secret(16) family(2) port(2) addr(16)
  return static_cast<uint16_t>(info[42] | (info[43] << 8));
}

int connect_loopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Loopback ports this process listens on (its sockets in /proc/self/net/tcp).
std::set<uint16_t> own_listening_ports() {
  std::set<std::string> inodes;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      char target[64] = {};
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      std::string t(target, n > 0 ? static_cast<size_t>(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    closedir(dir);
  }
  std::set<uint16_t> ports;
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || inodes.count(inode) == 0) continue;
    ports.insert(static_cast<uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
  }
  return ports;
}

// Stranger connections of one kind, opened and fed from a thread until stopped.
class Attacker {
 public:
  enum class Kind { kIdle, kGarbage, kSlowloris, kFlood };
  Attacker(Kind kind, std::function<std::set<uint16_t>()> targets) : kind_(kind), targets_(std::move(targets)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Attacker() {
    stop_.store(true);
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int64_t connections() const { return opened_.load(); }

 private:
  void run() {
    std::set<uint16_t> attacked;
    while (!stop_.load()) {
      for (uint16_t port : targets_()) {
        // Idle, garbage and slowloris connections are opened in a batch per listener;
        // the flood keeps opening and closing connections.
        if (kind_ != Kind::kFlood && attacked.count(port)) continue;
        attacked.insert(port);
        for (int i = 0; i < (kind_ == Kind::kFlood ? 4 : 64) && !stop_.load(); ++i) open_one(port);
      }
      if (kind_ == Kind::kSlowloris) {
        for (int fd : fds_) send(fd, "N", 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // a frame that never ends
      }
      if (kind_ == Kind::kFlood) {
        for (int fd : fds_) close(fd);
        fds_.clear();
      }
      sleep_ms(kind_ == Kind::kFlood ? 1 : 20);
    }
  }
  void open_one(uint16_t port) {
    int fd = connect_loopback(port);
    if (fd < 0) return;
    opened_.fetch_add(1);
    if (kind_ == Kind::kGarbage) {
      static const char kJunk[] = "NPGF\\x08\\0\\0\\0\\xff\\xff\\0\\0 GET / HTTP/1.1\\r\\n\\r\\n";
      send(fd, kJunk, sizeof(kJunk), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    fds_.push_back(fd);
  }

  Kind kind_;
  std::function<std::set<uint16_t>()> targets_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> opened_{0};
  std::vector<int> fds_;
  std::thread thread_;
};

// Forms a kRanks communicator over the TCP ring (the last rank joins late, so the ring
// listeners of the others stand open meanwhile), gathers once; returns the late rank's
// milliseconds from its init call to the end of the gather.
double form_and_gather(const std::vector<uint8_t>& info, int64_t late_ms) {
  std::atomic<double> late_rank_ms{0};
  run_ranks(kRanks, [&](int rank) {
    if (rank == kRanks - 1) sleep_ms(late_ms);
    auto t0 = Clock::now();
    npg_comm_t comm = init_rank(rank, kRanks, info, NPG_FLAG_FORCE_TCP, 20000);
    gather_and_verify(comm, rank, kRanks, 65536, 7);
    if (rank == kRanks - 1) late_rank_ms.store(ms_since(t0));
    CHECK_OK(npg_comm_destroy(comm));
  });
  return late_rank_ms.load();
}

double undisturbed_ms() {
  double best = 1e9;
  for (int i = 0; i < 2; ++i) best = std::min(best, form_and_gather(make_root_info(), 300));
  return best;
}

void expect_listeners_withstand(Attacker::Kind kind, bool ring_listeners) {
  const double baseline = undisturbed_ms();
  auto info = make_root_info();
  const uint16_t bootstrap = root_port(info);
  std::set<uint16_t> before = own_listening_ports();
  before.erase(bootstrap);
  double ms;
  int64_t connections;
  {
    Attacker attacker(kind, [&] {
      if (!ring_listeners) return std::set<uint16_t>{bootstrap};
      std::set<uint16_t> ring;
      for (uint16_t p : own_listening_ports())
        if (p != bootstrap && before.count(p) == 0) ring.insert(p);
      return ring;
    });
    ms = form_and_gather(info, 300);
    connections = attacker.connections();
  }
  printf("  %s listeners: %lld stranger connections; formed and gathered in %.0f ms (undisturbed %.0f ms)\n",
         ring_listeners ? "ring" : "bootstrap", static_cast<long long>(connections), ms, baseline);
  CHECK(connections > 0);
  CHECK(ms < baseline + kAllowedExtraMs);
}

void test_idle_connections_do_not_delay_the_bootstrap() { expect_listeners_withstand(Attacker::Kind::kIdle, false); }
void test_garbage_connections_do_not_delay_the_bootstrap() {
  expect_listeners_withstand(Attacker::Kind::kGarbage, false);
}
void test_slowloris_connections_do_not_delay_the_bootstrap() {
  expect_listeners_withstand(Attacker::Kind::kSlowloris, false);
}
void test_a_connection_flood_does_not_delay_the_bootstrap() {
  expect_listeners_withstand(Attacker::Kind::kFlood, false);
}
void test_idle_connections_do_not_delay_the_ring() { expect_listeners_withstand(Attacker::Kind::kIdle, true); }
void test_garbage_connections_do_not_delay_the_ring() { expect_listeners_withstand(Attacker::Kind::kGarbage, true); }
void test_slowloris_connections_do_not_delay_the_ring() {
  expect_listeners_withstand(Attacker::Kind::kSlowloris, true);
}
void test_a_connection_flood_does_not_delay_the_ring() { expect_listeners_withstand(Attacker::Kind::kFlood, true); }

const TestCase kTests[] = {
    {"idle_connections_do_not_delay_the_bootstrap", test_idle_connections_do_not_delay_the_bootstrap},
    {"garbage_connections_do_not_delay_the_bootstrap", test_garbage_connections_do_not_delay_the_bootstrap},
    {"slowloris_connections_do_not_delay_the_bootstrap", test_slowloris_connections_do_not_delay_the_bootstrap},
    {"a_connection_flood_does_not_delay_the_bootstrap", test_a_connection_flood_does_not_delay_the_bootstrap},
    {"idle_connections_do_not_delay_the_ring", test_idle_connections_do_not_delay_the_ring},
    {"garbage_connections_do_not_delay_the_ring", test_garbage_connections_do_not_delay_the_ring},
    {"slowloris_connections_do_not_delay_the_ring", test_slowloris_connections_do_not_delay_the_ring},
    {"a_connection_flood_does_not_delay_the_ring", test_a_connection_flood_does_not_delay_the_ring},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
