#include "host_identity.h"

#include <unistd.h>

#include <fstream>

namespace npg {
namespace host {

std::string host_identity() {
  std::string id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!(boot >> boot_id)) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    boot_id = std::string("host:") + host;  // no procfs: fall back to the host name
  }
  id = boot_id;
  for (const char* ns : {"net", "mnt", "pid", "ipc"}) {
    char link[128] = {};
    std::string path = std::string("/proc/self/ns/") + ns;
    ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
    id += "|";
    id += n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string(ns) + ":?";
  }
  if (id.size() > kMaxIdentityChars) id.resize(kMaxIdentityChars);
  return id;
}

}  // namespace host
}  // namespace npg
