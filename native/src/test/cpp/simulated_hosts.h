// Simulated hosts for tests and the benchmark: one network namespace per host, each with a
// veth pair to a bridge in this namespace and an address in a private 10.x.y.0/24 (host i
// has .(i+2), the bridge .1). A process joins host i with enter(i); ranks in one namespace
// share a host identity, ranks in different ones do not. Needs root and iproute2's `ip`.
// Names carry this process's pid; the destructor deletes the namespaces and the bridge.
#ifndef NPUGATHER_TEST_SIMULATED_HOSTS_H_
#define NPUGATHER_TEST_SIMULATED_HOSTS_H_

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace simulated {

// Runs a command line through sh, output discarded; returns its exit status.
inline int sh(const std::string& command) {
  int status = system((command + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

inline std::string sh_output(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

class SimulatedHosts {
 public:
  // Why hosts cannot be simulated here, or "" when they can.
  static std::string unavailable_reason() {
    if (geteuid() != 0) return "network namespaces need root";
    if (sh("command -v ip") != 0) return "the ip command (iproute2) is missing";
    const std::string probe = "npgsh-" + std::to_string(getpid()) + "-probe";
    const int rc = sh("ip netns add " + probe);
    sh("ip netns del " + probe);
    return rc == 0 ? "" : "ip netns add fails here";
  }

  explicit SimulatedHosts(int hosts) : tag_(std::to_string(getpid())) {
    remove_leftovers();
    std::mt19937 rng(std::random_device{}());
    const std::string used = sh_output("ip -4 -o addr show");
    for (int tries = 0; subnet_.empty() && tries < 100; ++tries) {
      std::string candidate = "10." + std::to_string(100 + rng() % 150) + "." + std::to_string(rng() % 250);
      if (used.find(candidate + ".") == std::string::npos) subnet_ = candidate;
    }
    if (subnet_.empty()) throw std::runtime_error("no free 10.x.y.0/24 subnet");
    bridge_ = "npgsb" + tag_;
    run("ip link add " + bridge_ + " type bridge");
    run("ip addr add " + subnet_ + ".1/24 dev " + bridge_);
    run("ip link set " + bridge_ + " up");
    for (int i = 0; i < hosts; ++i) {
      const std::string ns = "npgsh-" + tag_ + "-h" + std::to_string(i);
      const std::string veth = "npgsv" + tag_ + "x" + std::to_string(i);
      run("ip netns add " + ns);
      namespaces_.push_back(ns);
      run("ip link add " + veth + " type veth peer name eth0 netns " + ns);
      run("ip link set " + veth + " master " + bridge_ + " up");
      run("ip -n " + ns + " addr add " + address(i) + "/24 dev eth0");
      run("ip -n " + ns + " link set eth0 up");
      run("ip -n " + ns + " link set lo up");
    }
  }

  ~SimulatedHosts() { remove(); }

  SimulatedHosts(const SimulatedHosts&) = delete;
  SimulatedHosts& operator=(const SimulatedHosts&) = delete;

  int hosts() const { return static_cast<int>(namespaces_.size()); }
  std::string address(int i) const { return subnet_ + "." + std::to_string(i + 2); }

  // Moves the calling process (single-threaded) into host i's network namespace.
  void enter(int i) const {
    const std::string path = "/var/run/netns/" + namespaces_.at(i);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open " + path);
    const int rc = setns(fd, CLONE_NEWNET);
    close(fd);
    if (rc != 0) throw std::runtime_error("setns into " + namespaces_.at(i) + " failed");
  }

 private:
  void run(const std::string& command) {
    if (sh(command) != 0) {
      remove();
      throw std::runtime_error("failed: " + command);
    }
  }

  void remove() {
    for (const std::string& ns : namespaces_) sh("ip netns del " + ns);
    namespaces_.clear();
    if (!bridge_.empty()) sh("ip link del " + bridge_);
    bridge_.clear();
  }

  // Namespaces and bridges of earlier runs whose process is gone (killed before cleaning up).
  static void remove_leftovers() {
    const std::string list = sh_output("ip netns list");
    size_t at = 0;
    while ((at = list.find("npgsh-", at)) != std::string::npos) {
      const size_t end = list.find_first_of(" \n", at);
      const std::string name = list.substr(at, end == std::string::npos ? std::string::npos : end - at);
      at += name.size();
      const size_t dash = name.find('-', 6);
      if (dash == std::string::npos) continue;
      const std::string pid = name.substr(6, dash - 6);
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (access(("/proc/" + pid).c_str(), F_OK) == 0) continue;
      sh("ip netns del " + name);
      sh("ip link del npgsb" + pid);
    }
  }

  std::string tag_;
  std::string subnet_;
  std::string bridge_;
  std::vector<std::string> namespaces_;
};

}  // namespace simulated

#endif  // NPUGATHER_TEST_SIMULATED_HOSTS_H_
