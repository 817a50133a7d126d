// Simulated hosts for tests and the benchmark: one network namespace per host, each with a
// veth pair to a bridge in this namespace and an address in a private 10.x.y.0/24 (host i
// has .(i+2), the bridge .1). A process joins host i with enter(i); ranks in one namespace
// share a host identity, ranks in different ones do not. Needs root and iproute2's `ip`.
// Names carry this process's pid and a number of their own, so that no two sets of one process
// share a name: namespaces "npgsh-<pid>-<n>-h<i>", bridge "npb<pid>g<n>", veths "npv<pid>g<n>h<i>"
// (pid, n and i in hex there: interface names have at most 15 characters). The destructor
// deletes the namespaces (their veth pairs go with them) and the bridge, and waits until the
// kernel, which removes a namespace's devices after `ip netns del` returns, has done so.
#ifndef NPUGATHER_TEST_SIMULATED_HOSTS_H_
#define NPUGATHER_TEST_SIMULATED_HOSTS_H_

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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

  explicit SimulatedHosts(int hosts) {
    static std::atomic<unsigned> made{0};
    const unsigned n = made.fetch_add(1) % 0x100;  // removed ones are gone (remove) before a reuse
    const std::string pid = std::to_string(getpid());
    ns_prefix_ = "npgsh-" + pid + "-" + std::to_string(n) + "-h";
    link_tag_ = hex(static_cast<unsigned>(getpid())) + "g" + hex(n);
    remove_leftovers();
    std::mt19937 rng(std::random_device{}());
    const std::string used = sh_output("ip -4 -o addr show");
    for (int tries = 0; subnet_.empty() && tries < 100; ++tries) {
      std::string candidate = "10." + std::to_string(100 + rng() % 150) + "." + std::to_string(rng() % 250);
      if (used.find(candidate + ".") == std::string::npos) subnet_ = candidate;
    }
    if (subnet_.empty()) throw std::runtime_error("no free 10.x.y.0/24 subnet");
    bridge_ = "npb" + link_tag_;
    run("ip link add " + bridge_ + " type bridge");
    run("ip addr add " + subnet_ + ".1/24 dev " + bridge_);
    run("ip link set " + bridge_ + " up");
    for (int i = 0; i < hosts; ++i) {
      const std::string ns = ns_prefix_ + std::to_string(i);
      const std::string veth = "npv" + link_tag_ + "h" + hex(static_cast<unsigned>(i));
      run("ip netns add " + ns);
      namespaces_.push_back(ns);
      run("ip link add " + veth + " type veth peer name eth0 netns " + ns);
      veths_.push_back(veth);
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
    if (!bridge_.empty()) sh("ip link del " + bridge_);
    std::vector<std::string> links = veths_;
    if (!bridge_.empty()) links.push_back(bridge_);
    wait_until_gone(namespaces_, links);
    namespaces_.clear();
    veths_.clear();
    bridge_.clear();
  }

  static std::string hex(unsigned v) {
    char buf[16];
    snprintf(buf, sizeof buf, "%x", v);
    return buf;
  }

  // Whether `ip -o link show` output lists an interface of this name ("7: name: <..." or
  // "7: name@peer: <...").
  static bool lists_link(const std::string& links, const std::string& name) {
    return links.find(": " + name + ":") != std::string::npos || links.find(": " + name + "@") != std::string::npos;
  }

  // Whether `ip netns list` output lists this namespace ("name" or "name (id: 3)", a line each).
  static bool lists_namespace(const std::string& list, const std::string& name) {
    for (size_t at = list.find(name); at != std::string::npos; at = list.find(name, at + 1)) {
      const bool starts = at == 0 || list[at - 1] == '\n';
      const size_t end = at + name.size();
      if (starts && (end == list.size() || list[end] == '\n' || list[end] == ' ')) return true;
    }
    return false;
  }

  // Polls until the kernel has removed the namespaces and links (its cleanup of a deleted
  // namespace runs after `ip netns del` returns, slowly on a busy machine), at most 10 s;
  // names are never reused sooner anyway.
  static void wait_until_gone(const std::vector<std::string>& namespaces, const std::vector<std::string>& links) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const std::string shown = sh_output("ip -o link show");
      const std::string listed = sh_output("ip netns list");
      std::string left;
      for (const std::string& l : links)
        if (lists_link(shown, l)) left += " " + l;
      for (const std::string& ns : namespaces)
        if (lists_namespace(listed, ns)) left += " " + ns;
      if (left.empty()) return;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
        fprintf(stderr, "simulated hosts: still present 10 s after their removal:%s\n", left.c_str());
        return;
      }
      usleep(20000);
    }
  }

  // Namespaces and bridges of earlier runs whose process is gone (killed before cleaning up).
  static void remove_leftovers() {
    const std::string list = sh_output("ip netns list");
    std::vector<std::string> removed;
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
      removed.push_back(name);
      sh("ip link del npgsb" + pid);  // the bridge of an older version
    }
    // Bridges "npb<pid>g<n>" whose process is gone.
    const std::string links = sh_output("ip -o link show type bridge");
    for (at = links.find(": npb"); at != std::string::npos; at = links.find(": npb", at + 1)) {
      const size_t begin = at + 2;
      const size_t end = links.find_first_of(":@", begin);
      if (end == std::string::npos) break;
      const std::string name = links.substr(begin, end - begin);
      const size_t g = name.find('g', 3);
      if (g == std::string::npos || g == 3) continue;
      const std::string pid_hex = name.substr(3, g - 3);
      if (pid_hex.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
      const unsigned long pid = strtoul(pid_hex.c_str(), nullptr, 16);
      if (access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0) continue;
      sh("ip link del " + name);
    }
    if (!removed.empty()) wait_until_gone(removed, {});
  }

  std::string ns_prefix_;  // namespace i is ns_prefix_ + i
  std::string link_tag_;   // "<pid>g<n>" in hex
  std::string subnet_;
  std::string bridge_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> veths_;
};

}  // namespace simulated

#endif  // NPUGATHER_TEST_SIMULATED_HOSTS_H_
