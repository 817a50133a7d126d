// Simulated libhccl.so over the shared engine of fake_collective.h: the control block is named
// in the root info (or derived from the rank table file). Test-only; see fake_cann.h.
#include <ctype.h>
#include <stdio.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "fake_collective.h"

namespace fake_cann {
namespace {

constexpr char kRootMagic[] = "NPGFAKEHCCL1";
constexpr size_t kRootInfoBytes = 4108;
// SYS_MAX_COUNT of hicann/hccl src/common/hccl_common.h, checked by every collective.
constexpr uint64_t kSysMaxCount = 0x7FFFFFFFF;
constexpr Vendor kHccl = {"simulated HCCL", kHcclSuccess,  kHcclEPara,    kHcclEPtr,
                          kHcclEInternal,   kHcclETimeout, kHcclERuntime, kSysMaxCount};

constexpr int kHcclENotFound = 6;
constexpr int kHcclEUnavail = 7;

std::atomic<int> g_all_gather_v_calls{0};
std::atomic<int> g_destroy_refusals{0};
std::atomic<int> g_calls_inside{0};  // threads inside HcclAllGather(V), any communicator
std::mutex g_handles_mutex;
std::map<int, void*>* g_handles = new std::map<int, void*>();  // the last communicator made per rank

// Counts the calling thread inside an operation call, on top of the communicator's InCall.
struct Inside {
  Inside() { ++g_calls_inside; }
  ~Inside() { --g_calls_inside; }
};

#ifndef FAKE_CANN_COLLECTIVES_ONLY
int remember(int rc, uint32_t rank, void** comm) {
  if (rc == kHcclSuccess) {
    std::lock_guard<std::mutex> lock(g_handles_mutex);
    (*g_handles)[static_cast<int>(rank)] = *comm;
  }
  return rc;
}
#endif

#ifndef FAKE_CANN_COLLECTIVES_ONLY
// Enough JSON for a rank table: objects, arrays, strings (no escapes beyond \" and \\),
// numbers and literals; a parse failure is HCCL_E_PARA, as in HCOMM's SalParseInformation.
struct Json {
  enum Kind { kOther, kNumber, kString, kArray, kObject } kind = kOther;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
  const Json* member(const char* key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

bool parse_json(const std::string& s, size_t& at, Json* out, int depth = 0) {
  auto space = [&] {
    while (at < s.size() && isspace(static_cast<unsigned char>(s[at]))) ++at;
  };
  auto string_body = [&](std::string* text) {
    for (++at; at < s.size() && s[at] != '"'; ++at) {
      if (s[at] == '\\' && ++at >= s.size()) return false;
      *text += s[at];
    }
    return at++ < s.size();
  };
  space();
  if (at >= s.size() || depth > 32) return false;
  const char c = s[at];
  if (c == '{' || c == '[') {
    out->kind = c == '{' ? Json::kObject : Json::kArray;
    const char close = c == '{' ? '}' : ']';
    ++at;
    space();
    if (at < s.size() && s[at] == close) return ++at, true;
    for (;;) {
      std::string key;
      if (out->kind == Json::kObject) {
        space();
        if (at >= s.size() || s[at] != '"' || !string_body(&key)) return false;
        space();
        if (at >= s.size() || s[at++] != ':') return false;
      }
      Json item;
      if (!parse_json(s, at, &item, depth + 1)) return false;
      if (out->kind == Json::kObject)
        out->members.emplace_back(key, std::move(item));
      else
        out->items.push_back(std::move(item));
      space();
      if (at < s.size() && s[at] == ',') {
        ++at;
        continue;
      }
      return at < s.size() && s[at++] == close;
    }
  }
  if (c == '"') {
    out->kind = Json::kString;
    return string_body(&out->text);
  }
  const size_t start = at;
  while (at < s.size() && (isalnum(static_cast<unsigned char>(s[at])) || strchr("+-.", s[at]) != nullptr)) ++at;
  out->text = s.substr(start, at - start);
  out->kind = !out->text.empty() && (isdigit(static_cast<unsigned char>(c)) || c == '-') ? Json::kNumber : Json::kOther;
  return at > start;
}

// One field as HCOMM's TopoInfoRanktableParser::GetJsonProperty reads it: missing is
// HCCL_E_NOT_FOUND (an error unless optional), anything but a string HCCL_E_PARA.
int string_property(const Json& obj, const char* name, bool optional, std::string* value) {
  const Json* v = obj.member(name);
  if (v == nullptr) {
    if (!optional)
      set_recent_error((std::string("simulated HCCL: json object has no property called ") + name).c_str());
    return kHcclENotFound;
  }
  if (v->kind != Json::kString) {
    set_recent_error(
        (std::string("simulated HCCL: json object property value of Name[") + name + "] is not string!").c_str());
    return kHcclEPara;
  }
  *value = v->text;
  return kHcclSuccess;
}

// SalStrToULong: decimal digits only.
bool decimal(const std::string& text, uint32_t* value) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *value = static_cast<uint32_t>(atol(text.c_str()));
  return true;
}

int table_error(int code, const std::string& text) {
  set_recent_error(("simulated HCCL: " + text).c_str());
  return code;
}

// Checks a rank table as HCCL's parser of versions 1.0 and 1.2 does (HCOMM's CfgGetClusterInfo
// and TopoinfoRanktableConcise): returns the number of ranks, or an HCCL error.
int check_rank_table(const std::string& text, uint32_t rank, uint32_t* ranks) {
  Json root;
  size_t at = 0;
  if (!parse_json(text, at, &root) || root.kind != Json::kObject) return table_error(kHcclEPara, "not valid JSON");
  std::string value;
  int rc = string_property(root, "version", false, &value);
  if (rc != kHcclSuccess) return rc;
  if (value != "1.0" && value != "1.2") return table_error(kHcclENotSupport, "version[" + value + "] is not support");
  rc = string_property(root, "status", false, &value);
  if (rc != kHcclSuccess) return rc;
  if (value != "completed") return table_error(kHcclEPara, "status is not completed");
  const Json* servers = root.member("server_list");
  if (servers == nullptr || servers->kind != Json::kArray || servers->items.empty()) {
    return table_error(kHcclEPara, "server_list missing or empty");
  }
  rc = string_property(root, "server_count", true, &value);
  if (rc == kHcclSuccess) {
    uint32_t count = 0;
    if (!decimal(value, &count)) return table_error(kHcclEPara, "server_count[" + value + "] is invalid");
    if (count != servers->items.size()) return table_error(kHcclEPara, "serverList size neq server num");
  } else if (rc != kHcclENotFound) {
    return rc;  // optional, but a string when present
  }
  std::vector<uint32_t> devices;  // by rank id
  for (const Json& server : servers->items) {
    rc = string_property(server, "server_id", false, &value);
    if (rc != kHcclSuccess) return rc;
    if (value.empty() || value.size() > 64) return table_error(kHcclEPara, "serverId[" + value + "] is invalid");
    const Json* list = server.member("device");
    if (list == nullptr || list->kind != Json::kArray || list->items.empty()) {
      return table_error(kHcclEPara, "deviceList size is zero");
    }
    for (const Json& device : list->items) {
      std::string rank_id, device_id;
      uint32_t id = 0, phy = 0;
      if ((rc = string_property(device, "rank_id", false, &rank_id)) != kHcclSuccess) return rc;
      if ((rc = string_property(device, "device_id", false, &device_id)) != kHcclSuccess) return rc;
      if (!decimal(device_id, &phy)) return table_error(kHcclEPara, "device_id[" + device_id + "] is invalid");
      if (!decimal(rank_id, &id)) return table_error(kHcclEPara, "rankid[" + rank_id + "] is invalid");
      if (id >= devices.size()) devices.resize(id + 1, UINT32_MAX);
      devices[id] = phy;
    }
  }
  if (rank >= devices.size() || devices[rank] == UINT32_MAX) {
    return table_error(kHcclEPara, "rankId[" + std::to_string(rank) + "] is invalid");
  }
  if (devices[rank] != static_cast<uint32_t>(current_device())) {
    return table_error(kHcclEUnavail, "ranktable config devId[" + std::to_string(devices[rank]) + "],but local devId[" +
                                          std::to_string(current_device()) + "]");
  }
  *ranks = static_cast<uint32_t>(devices.size());
  return kHcclSuccess;
}
#endif  // FAKE_CANN_COLLECTIVES_ONLY
std::atomic<int> g_all_gather_v_refusals{0};

#if !defined(FAKE_CANN_MINIMAL) && !defined(FAKE_CANN_COMM_MANAGEMENT_ONLY)
// HcclAllGatherV's topology rule (HCCL's HcclAllGatherV doc): Atlas A3 and 300I Duo on one
// server only, Atlas A2 only with as many ranks on every server, Ascend 950 always, the Atlas
// training series never. The servers come from NPUGATHER_FAKE_CANN_SERVERS.
bool all_gather_v_supported(int n) {
  std::map<int, int> ranks_per_server;
  const std::string servers = env("NPUGATHER_FAKE_CANN_SERVERS");
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    int server = 0;
    if (at < servers.size()) {
      server = atoi(servers.c_str() + at);
      size_t comma = servers.find(',', at);
      at = comma == std::string::npos ? servers.size() : comma + 1;
    }
    ++ranks_per_server[server];
  }
  const char* soc_env = getenv("NPUGATHER_FAKE_CANN_SOC");
  const std::string soc = soc_env != nullptr ? soc_env : "Ascend910B1";
  auto starts = [&soc](const char* p) { return soc.rfind(p, 0) == 0; };
  if (starts("Ascend950")) return true;
  if (starts("Ascend910_93") || starts("Ascend310P")) return ranks_per_server.size() == 1;
  if (starts("Ascend910B")) {
    for (const auto& e : ranks_per_server)
      if (e.second != ranks_per_server.begin()->second) return false;
    return true;
  }
  return false;
}
#endif

}  // namespace
}  // namespace fake_cann

using namespace fake_cann;

extern "C" {

#ifndef FAKE_CANN_COLLECTIVES_ONLY
FAKE_CANN_EXPORT int HcclGetRootInfo(void* root_info) {
  latch_hccl_env();
  if (root_info == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  static std::atomic<int> counter{0};
  std::random_device rd;
  char name[128];
  snprintf(name, sizeof(name), "/npgfake-%d-%d-%08x", static_cast<int>(getpid()), counter.fetch_add(1), rd());
  memset(root_info, 0, kRootInfoBytes);
  memcpy(root_info, kRootMagic, sizeof(kRootMagic));
  memcpy(static_cast<char*>(root_info) + 32, name, strlen(name) + 1);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int HcclCommInitRootInfo(uint32_t n, const void* root_info, uint32_t rank, void** comm) {
  latch_hccl_env();
  if (root_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  if (memcmp(root_info, kRootMagic, sizeof(kRootMagic)) != 0) return kHcclEPara;
  std::string name(static_cast<const char*>(root_info) + 32);
  {
    static std::mutex mutex;
    static std::map<std::string, int>* attempts = new std::map<std::string, int>();
    std::unique_lock<std::mutex> lock(mutex);
    if (++(*attempts)[name + "#" + std::to_string(rank)] > 1) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(connect_timeout_ms()));
      set_recent_error(
          "simulated HCCL: the root's topology detection of this root info was erased after the "
          "first HcclCommInitRootInfo attempt: timed out waiting for it");
      return kHcclETimeout;
    }
  }
  int injected = injected_init_failure(kHccl, name, rank);
  if (injected != kHcclSuccess) return injected;
  return remember(rendezvous(kHccl, name, n, rank, comm), rank, comm);
}

FAKE_CANN_EXPORT int HcclCommInitClusterInfo(const char* cluster_info, uint32_t rank, void** comm) {
  latch_hccl_env();
  if (cluster_info == nullptr || comm == nullptr) return kHcclEPtr;
  if (current_device() < 0) return kHcclERuntime;
  std::ifstream in(cluster_info);
  if (!in) return 10;  // HCCL_E_OPEN_FILE_FAILURE
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  uint32_t n = 0;
  int checked = check_rank_table(s, rank, &n);
  if (checked != kHcclSuccess) return checked;
  char name[64];
  snprintf(name, sizeof(name), "/npgfake-rt-%016zx", std::hash<std::string>()(std::string(cluster_info) + s));
  int injected = injected_init_failure(kHccl, name, rank);
  if (injected != kHcclSuccess) return injected;
  return rendezvous(kHccl, name, n, rank, comm);
}

// HCOMM's HcclCommDestroy (op_base.cc) returns HCCL_E_AGAIN while the communicator is INUSE,
// that is while another thread is inside an operation call on it; work already queued on a
// stream does not hold it: the communicator goes, and that work is cancelled.
FAKE_CANN_EXPORT int HcclCommDestroy(void* comm) {
  if (comm != nullptr && static_cast<CommHandle*>(comm)->comm->in_call.load() > 0) {
    ++g_destroy_refusals;
    set_recent_error("simulated HCCL: [HcclCommDestroy] comm is in use, please try again later");
    return kHcclEAgain;
  }
  return destroy_comm(kHccl, comm);
}

#endif  // FAKE_CANN_COLLECTIVES_ONLY

#ifndef FAKE_CANN_COMM_MANAGEMENT_ONLY
FAKE_CANN_EXPORT int HcclAllGather(void* send, void* recv, uint64_t count, int dtype, void* comm, void* stream) {
  latch_hccl_env();
  Inside inside;
  InCall in_call(static_cast<CommHandle*>(comm));
  return enqueue_all_gather(kHccl, comm, send, recv, count, dtype, stream);
}

#ifndef FAKE_CANN_MINIMAL
FAKE_CANN_EXPORT int HcclAllGatherV(void* send, uint64_t send_count, void* recv, const void* recv_counts,
                                    const void* recv_displs, int dtype, void* comm, void* stream) {
  CommHandle* h = static_cast<CommHandle*>(comm);
  Inside inside;
  InCall in_call(h);
  int rc = check_call(kHccl, h, stream);
  if (rc != kHcclSuccess) return rc;
  if (send_count > kSysMaxCount) {
    set_recent_error("simulated HCCL: sendCount is invalid (bigger than MAX count)");
    return kHcclEPara;
  }
  const int w = width_of(dtype);
  if (w == 0 || recv_counts == nullptr || recv_displs == nullptr) return kHcclEPara;
  std::shared_ptr<Comm> c = h->comm;
  if (!all_gather_v_supported(c->n)) {
    ++g_all_gather_v_refusals;
    set_recent_error("simulated HCCL: HcclAllGatherV is not supported in this topology");
    return kHcclENotSupport;
  }
  std::vector<uint64_t> counts(static_cast<const uint64_t*>(recv_counts),
                               static_cast<const uint64_t*>(recv_counts) + c->n);
  std::vector<uint64_t> displs(static_cast<const uint64_t*>(recv_displs),
                               static_cast<const uint64_t*>(recv_displs) + c->n);
  if (send_count != counts[c->rank]) return kHcclEPara;
  if (send_count > 0 && !is_device_range(send, send_count * w)) return kHcclEPtr;
  for (int r = 0; r < c->n; ++r)
    if (counts[r] > 0 && !is_device_range(static_cast<uint8_t*>(recv) + displs[r] * w, counts[r] * w)) return kHcclEPtr;
  const uint64_t gen = ++c->generation;
  ++g_all_gather_v_calls;
  uint8_t* out = static_cast<uint8_t*>(recv);
  const uint8_t* in = static_cast<const uint8_t*>(send);
  enqueue(stream, [c, gen, in, out, send_count, w, counts, displs](const std::atomic<bool>& cancelled) {
    return gather_task(c, gen, in, send_count * w, cancelled, [&](int r, const uint8_t* src, uint64_t len) {
      if (len != counts[r] * w) return kAclErrorRtInternal;
      memmove(out + displs[r] * w, src, len);
      return kAclSuccess;
    });
  });
  return kHcclSuccess;
}

#endif  // FAKE_CANN_MINIMAL
#endif  // FAKE_CANN_COMM_MANAGEMENT_ONLY

#if !defined(FAKE_CANN_MINIMAL) && !defined(FAKE_CANN_COLLECTIVES_ONLY)
FAKE_CANN_EXPORT const char* HcclGetErrorString(int code) {
  static thread_local std::string text;
  text = "simulated HCCL error code " + std::to_string(code);
  return text.c_str();
}
#endif

FAKE_CANN_EXPORT int HcclGetRankSize(void* comm, uint32_t* size) {
  *size = static_cast<uint32_t>(static_cast<CommHandle*>(comm)->comm->n);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int HcclGetRankId(void* comm, uint32_t* rank) {
  *rank = static_cast<uint32_t>(static_cast<CommHandle*>(comm)->comm->rank);
  return kHcclSuccess;
}

FAKE_CANN_EXPORT int npgFakeCannAllGatherVCalls() { return g_all_gather_v_calls.load(); }
FAKE_CANN_EXPORT int npgFakeCannAllGatherVRefusals() { return g_all_gather_v_refusals.load(); }
FAKE_CANN_EXPORT int npgFakeCannDestroyRefusals() { return g_destroy_refusals.load(); }
FAKE_CANN_EXPORT int npgFakeCannOpCallsInside() { return g_calls_inside.load(); }
// The last HCCL communicator HcclCommInitRootInfo made for rank in this process.
FAKE_CANN_EXPORT void* npgFakeCannHcclComm(int rank) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  auto it = g_handles->find(rank);
  return it == g_handles->end() ? nullptr : it->second;
}

}  // extern "C"
