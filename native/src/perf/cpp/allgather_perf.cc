// allgather_perf: all-gather bandwidth sweep over the NpuGather C ABI, in the
// style of nccl-tests' all_gather_perf and CANN's hccl_test.
//
// Uses only npugather.h. Any backend: host, or hccl / lccl with one NPU per rank
// (--devices, default rank r on device r). Ranks are either forked processes
// (default) or threads of this process. Rank 0 prints the table.
//
// Timing: every rank times each of its npg_all_gather calls with a steady
// clock. Before each call an 8-byte all-gather acts as a barrier, so the ranks
// start together and the untimed refill of the input does not show up as
// waiting time. After the timed loop the ranks all-gather
// their per-iteration times (as int64 nanoseconds) with the same communicator;
// the reported time is the median over iterations of the maximum over ranks.
//
// Checking: each iteration refills the input (outside the timed region) with
// a pattern that depends on the rank, the iteration and the byte offset. After
// the timed loop every byte of every rank's output is compared with the
// pattern of the last iteration; wrong byte counts are summed across ranks.
//
// Device memory: for hccl and lccl the device_bytes column is the most device memory any rank's
// gather of that size held at once (npg_comm_device_bytes); gathers larger than the device
// budget (NPUGATHER_DEVICE_BUFFER_BYTES, else half the free device memory) run in rounds.

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../test/cpp/simulated_hosts.h"
#include "npugather.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string backend = "host";
  int ranks = 2;
  bool threads = false;     // --launch threads
  bool bind_cores = false;  // --bind cores
  uint64_t min_bytes = 64ull << 10;
  uint64_t max_bytes = 64ull << 20;
  int iters = 20;
  int warmup = 5;
  std::string transport = "auto";
  std::vector<uint32_t> flags = {0};  // one communicator per --transport entry, run in turn
  std::vector<std::string> flag_names = {"auto"};
  int hosts = 0;  // --hosts: simulated hosts, rank r on host r % hosts
  int64_t timeout_ms = 60000;
  bool csv = false;
  npg_dtype_t dtype = NPG_UINT8;
  std::string dtype_name = "uint8";
  std::vector<int> devices;  // --devices; empty: rank r on device r
  bool on_devices() const { return backend != "host"; }
  // The NPU of rank (hccl, lccl), or -1 (host).
  int device_of(int rank) const {
    if (!on_devices()) return -1;
    return devices.empty() ? rank : devices[rank];
  }
};

struct DtypeName {
  const char* name;
  npg_dtype_t dtype;
};

constexpr DtypeName kDtypes[] = {
    {"int8", NPG_INT8},         {"uint8", NPG_UINT8}, {"int16", NPG_INT16},     {"float16", NPG_FLOAT16},
    {"bfloat16", NPG_BFLOAT16}, {"int32", NPG_INT32}, {"float32", NPG_FLOAT32}, {"int64", NPG_INT64},
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: allgather-perf [options]\n"
               "  --backend host|hccl|lccl  collective backend (default host); hccl and lccl\n"
               "                            need CANN (and ATB for lccl) and one NPU per rank\n"
               "  --devices LIST            NPU of each rank, comma-separated logical ids, one\n"
               "                            per rank (default rank r on device r); hccl, lccl\n"
               "  --ranks N                 number of ranks, >= 1 (default 2)\n"
               "  --launch threads|processes  one thread or one forked process per rank\n"
               "                            (default processes)\n"
               "  --min-bytes SIZE          smallest per-rank input (default 64K)\n"
               "  --max-bytes SIZE          largest per-rank input (default 64M); sizes double\n"
               "                            from min to max. SIZE is bytes with an optional\n"
               "                            K, M or G suffix (powers of 1024)\n"
               "  --iters N                 timed iterations per size (default 20)\n"
               "  --warmup N                untimed iterations per size (default 5)\n"
               "  --transport LIST          auto, tcp (flat TCP: log-N up to 256 KiB of output\n"
               "                            from 4 ranks on, else the ring), ring (TCP ring at\n"
               "                            every size), log-n (TCP Bruck at every size) or\n"
               "                            staging; or several comma-separated (e.g. tcp,auto):\n"
               "                            one communicator each, run in turn at every size,\n"
               "                            a column names each row's (default auto)\n"
               "  --hosts H                 simulate H hosts (network namespaces; root and `ip`\n"
               "                            needed): rank r runs on host r %% H; processes only\n"
               "  --bind none|cores         cores: rank r runs on the r-th allowed CPU (modulo),\n"
               "                            as mpirun --bind-to core does (default none)\n"
               "  --dtype NAME              element type: int8 uint8 int16 float16 bfloat16\n"
               "                            int32 float32 int64 (default uint8)\n"
               "  --timeout-ms N            communicator timeout (default 60000)\n"
               "  --csv                     print the table as CSV\n"
               "  --help                    print this help\n"
               "time(us) is the median over iterations of the slowest rank's time;\n"
               "algbw = ranks*size/time, busbw = algbw*(ranks-1)/ranks (GB = 1e9 bytes).\n"
               "Exit status: 0 ok, 1 wrong bytes or a failed call, 2 bad options.\n");
}

[[noreturn]] void bad_option(const std::string& option, const std::string& value, const char* allowed) {
  std::fprintf(stderr, "allgather-perf: invalid value '%s' for %s: expected %s\n", value.c_str(), option.c_str(),
               allowed);
  std::fprintf(stderr, "try 'allgather-perf --help'\n");
  std::exit(kExitUsage);
}

bool parse_int64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || !(text[0] >= '0' && text[0] <= '9')) return false;
  *out = v;
  return true;
}

// Bytes with an optional K/M/G (binary) suffix.
bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty() || !(text[0] >= '0' && text[0] <= '9')) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  int shift = 0;
  std::string rest(end);
  if (rest == "K" || rest == "k") {
    shift = 10;
  } else if (rest == "M" || rest == "m") {
    shift = 20;
  } else if (rest == "G" || rest == "g") {
    shift = 30;
  } else if (!rest.empty()) {
    return false;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(kExitOk);
    }
    if (arg == "--csv") {
      o.csv = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      std::fprintf(stderr, "allgather-perf: unexpected argument '%s'\n", arg.c_str());
      std::fprintf(stderr, "try 'allgather-perf --help'\n");
      std::exit(kExitUsage);
    }
    std::string name = arg;
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    static const char* kWithValue[] = {"--backend", "--ranks",  "--launch",    "--min-bytes",  "--max-bytes",
                                       "--iters",   "--warmup", "--transport", "--timeout-ms", "--dtype",
                                       "--devices", "--bind",   "--hosts"};
    bool known = false;
    for (const char* k : kWithValue) known = known || name == k;
    if (!known) {
      std::fprintf(stderr, "allgather-perf: unknown option '%s'\n", name.c_str());
      std::fprintf(stderr, "try 'allgather-perf --help'\n");
      std::exit(kExitUsage);
    }
    if (eq == std::string::npos) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "allgather-perf: option %s needs a value\n", name.c_str());
        std::exit(kExitUsage);
      }
      value = argv[++i];
    }
    int64_t n = 0;
    if (name == "--backend") {
      if (value != "host" && value != "hccl" && value != "lccl") bad_option(name, value, "host, hccl or lccl");
      o.backend = value;
    } else if (name == "--devices") {
      o.devices.clear();
      size_t at = 0;
      for (;;) {
        const size_t comma = value.find(',', at);
        const std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (!parse_int64(item, &n) || n < 0 || n > 65535) {
          bad_option(name, value, "comma-separated device ids >= 0, e.g. 0,1,2,3");
        }
        o.devices.push_back(static_cast<int>(n));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (name == "--ranks") {
      if (!parse_int64(value, &n) || n < 1 || n > 1024) {
        bad_option(name, value, "an integer from 1 to 1024");
      }
      o.ranks = static_cast<int>(n);
    } else if (name == "--launch") {
      if (value == "threads") {
        o.threads = true;
      } else if (value == "processes") {
        o.threads = false;
      } else {
        bad_option(name, value, "threads or processes");
      }
    } else if (name == "--bind") {
      if (value == "cores") {
        o.bind_cores = true;
      } else if (value == "none") {
        o.bind_cores = false;
      } else {
        bad_option(name, value, "none or cores");
      }
    } else if (name == "--min-bytes" || name == "--max-bytes") {
      uint64_t s = 0;
      if (!parse_size(value, &s) || s == 0 || s > (uint64_t{1} << 40)) {
        bad_option(name, value, "a size from 1 to 1024G, e.g. 4096, 64K, 64M, 1G");
      }
      (name == "--min-bytes" ? o.min_bytes : o.max_bytes) = s;
    } else if (name == "--iters") {
      if (!parse_int64(value, &n) || n < 1 || n > 1000000) {
        bad_option(name, value, "an integer from 1 to 1000000");
      }
      o.iters = static_cast<int>(n);
    } else if (name == "--warmup") {
      if (!parse_int64(value, &n) || n < 0 || n > 1000000) {
        bad_option(name, value, "an integer from 0 to 1000000");
      }
      o.warmup = static_cast<int>(n);
    } else if (name == "--transport") {
      o.flags.clear();
      o.flag_names.clear();
      size_t at = 0;
      for (;;) {
        const size_t comma = value.find(',', at);
        const std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (item == "auto") {
          o.flags.push_back(0);
        } else if (item == "tcp") {
          o.flags.push_back(NPG_FLAG_FORCE_TCP);
        } else if (item == "staging") {
          o.flags.push_back(NPG_FLAG_FORCE_STAGING);
        } else if (item == "ring") {
          o.flags.push_back(NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_RING);
        } else if (item == "log-n") {
          o.flags.push_back(NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N);
        } else {
          bad_option(name, value, "auto, tcp, staging, ring or log-n, or several of them comma-separated");
        }
        o.flag_names.push_back(item);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      o.transport = value;
    } else if (name == "--hosts") {
      if (!parse_int64(value, &n) || n < 1 || n > 64) bad_option(name, value, "an integer from 1 to 64");
      o.hosts = static_cast<int>(n);
    } else if (name == "--timeout-ms") {
      if (!parse_int64(value, &n) || n < 1) bad_option(name, value, "a positive integer");
      o.timeout_ms = n;
    } else if (name == "--dtype") {
      bool found = false;
      for (const DtypeName& d : kDtypes) {
        if (value == d.name) {
          o.dtype = d.dtype;
          o.dtype_name = d.name;
          found = true;
        }
      }
      if (!found) {
        bad_option(name, value, "int8, uint8, int16, float16, bfloat16, int32, float32 or int64");
      }
    }
  }
  if (!o.devices.empty() && !o.on_devices()) {
    std::fprintf(stderr, "allgather-perf: --devices is for backends hccl and lccl, not %s\n", o.backend.c_str());
    std::exit(kExitUsage);
  }
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.ranks) {
    std::fprintf(stderr, "allgather-perf: --devices lists %zu devices but --ranks is %d: give one device per rank\n",
                 o.devices.size(), o.ranks);
    std::exit(kExitUsage);
  }
  for (size_t i = 0; i < o.devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (o.devices[i] == o.devices[j]) {
        std::fprintf(stderr,
                     "allgather-perf: --devices names device %d twice (ranks %zu and %zu): one rank per device\n",
                     o.devices[i], j, i);
        std::exit(kExitUsage);
      }
    }
  }
  if (o.hosts > 0 && (o.threads || o.on_devices())) {
    std::fprintf(stderr, "allgather-perf: --hosts needs --launch processes and backend host\n");
    std::exit(kExitUsage);
  }
  if (o.min_bytes > o.max_bytes) {
    std::fprintf(stderr, "allgather-perf: --min-bytes (%" PRIu64 ") exceeds --max-bytes (%" PRIu64 ")\n", o.min_bytes,
                 o.max_bytes);
    std::exit(kExitUsage);
  }
  size_t width = npg_dtype_size(o.dtype);
  if (width == 0) {
    std::fprintf(stderr, "allgather-perf: the library does not know --dtype %s\n", o.dtype_name.c_str());
    std::exit(kExitUsage);
  }
  if (o.min_bytes % width != 0) {
    std::fprintf(stderr, "allgather-perf: --min-bytes %" PRIu64 " is not a multiple of the %s width (%zu)\n",
                 o.min_bytes, o.dtype_name.c_str(), width);
    std::exit(kExitUsage);
  }
  return o;
}

// ---- data pattern -----------------------------------------------------------

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t pattern_base(int rank, int iter) {
  return mix64((static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(iter));
}

// Word j of rank's input in iteration iter; byte k is byte k%8 (little end
// first) of word k/8.
inline uint64_t pattern_word(uint64_t base, uint64_t j) { return base + j * 0xD1B54A32D192ED03ull; }

inline uint8_t pattern_byte(uint64_t base, uint64_t k) {
  return static_cast<uint8_t>(pattern_word(base, k / 8) >> (8 * (k % 8)));
}

void fill_pattern(uint8_t* dst, uint64_t bytes, int rank, int iter) {
  const uint64_t base = pattern_base(rank, iter);
  const uint64_t words = bytes / 8;
  for (uint64_t j = 0; j < words; ++j) {
    uint64_t w = pattern_word(base, j);
    for (int b = 0; b < 8; ++b) dst[j * 8 + b] = static_cast<uint8_t>(w >> (8 * b));
  }
  for (uint64_t k = words * 8; k < bytes; ++k) dst[k] = pattern_byte(base, k);
}

uint64_t count_wrong(const uint8_t* got, uint64_t bytes, int rank, int iter) {
  const uint64_t base = pattern_base(rank, iter);
  const uint64_t words = bytes / 8;
  uint64_t wrong = 0;
  for (uint64_t j = 0; j < words; ++j) {
    uint64_t w = pattern_word(base, j);
    uint64_t g = 0;
    for (int b = 0; b < 8; ++b) g |= static_cast<uint64_t>(got[j * 8 + b]) << (8 * b);
    if (g != w) {
      for (int b = 0; b < 8; ++b) wrong += ((g ^ w) >> (8 * b)) & 0xff ? 1 : 0;
    }
  }
  for (uint64_t k = words * 8; k < bytes; ++k) wrong += got[k] != pattern_byte(base, k) ? 1 : 0;
  return wrong;
}

// ---- one rank -------------------------------------------------------------

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::mutex g_print_mutex;

void rank_error(int rank, const char* fmt, ...) {
  std::lock_guard<std::mutex> lock(g_print_mutex);
  std::fprintf(stderr, "allgather-perf: rank %d: ", rank);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void call_failed(int rank, const char* call, npg_result_t r) {
  rank_error(rank, "%s failed: %s: %s", call, npg_result_name(r), npg_last_error());
}

void print_header(const Options& o, const std::string& transport) {
  const char* launch = o.threads ? "threads" : "processes";
  std::printf("# allgather-perf: backend %s, ranks %d, launch %s, transport %s (requested %s), bind %s\n",
              o.backend.c_str(), o.ranks, launch, transport.c_str(), o.transport.c_str(),
              o.bind_cores ? "cores" : "none");
  if (o.hosts > 0) {
    std::printf("# simulated hosts: %d (network namespaces), rank r on host r %% %d\n", o.hosts, o.hosts);
  }
  if (o.on_devices()) {
    std::string devices;
    for (int r = 0; r < o.ranks; ++r) devices += (r == 0 ? "" : ",") + std::to_string(o.device_of(r));
    std::printf("# devices of ranks 0..%d: %s\n", o.ranks - 1, devices.c_str());
  }
  std::printf("# sizes %" PRIu64 "..%" PRIu64 " B/rank, iters %d, warmup %d, timeout %" PRId64
              " ms; time = median over iters of max over ranks\n",
              o.min_bytes, o.max_bytes, o.iters, o.warmup, o.timeout_ms);
  const bool several = o.flags.size() > 1;
  if (o.csv) {
    std::printf("size_bytes_per_rank,count,type,time_us,algbw_gbps,busbw_gbps,wrong,device_bytes%s\n",
                several ? ",transport" : "");
  } else {
    std::printf("%14s %12s %8s %12s %12s %12s %8s %14s%s\n", "size(B/rank)", "count", "type", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong", "device_bytes", several ? "  transport" : "");
  }
  std::fflush(stdout);
}

void print_row(const Options& o, uint64_t bytes, uint64_t count, double time_us, uint64_t wrong, uint64_t device_bytes,
               const char* transport) {
  double total = static_cast<double>(bytes) * o.ranks;
  double algbw = time_us > 0 ? total / (time_us * 1e3) : 0.0;  // bytes/ns == GB/s
  double busbw = algbw * (o.ranks - 1) / o.ranks;
  const std::string column = o.flags.size() > 1 ? std::string(o.csv ? "," : "  ") + transport : "";
  if (o.csv) {
    std::printf("%" PRIu64 ",%" PRIu64 ",%s,%.2f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 "%s\n", bytes, count,
                o.dtype_name.c_str(), time_us, algbw, busbw, wrong, device_bytes, column.c_str());
  } else {
    std::printf("%14" PRIu64 " %12" PRIu64 " %8s %12.2f %12.3f %12.3f %8" PRIu64 " %14" PRIu64 "%s\n", bytes, count,
                o.dtype_name.c_str(), time_us, algbw, busbw, wrong, device_bytes, column.c_str());
  }
  std::fflush(stdout);
}

// Hooks that let a failing rank stop its peers instead of leaving them to time
// out: threads abort each other's communicators; processes rely on the parent.
struct PeerAbort {
  std::mutex mutex;
  std::vector<npg_comm_t> comms;  // guarded by mutex; null once destroyed
};

// Pins the calling thread to the (rank % allowed)-th CPU it may run on.
void bind_to_core(int rank) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && count > 0; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != rank % count) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) rank_error(rank, "cannot bind to CPU %d", cpu);
    return;
  }
}

// Runs the whole sweep on one rank. Returns kExitOk or kExitFailed.
// One root info per communicator (per --transport entry).
using RootInfos = std::vector<std::vector<uint8_t>>;

int run_rank(const Options& o, int rank, const RootInfos& infos, PeerAbort* peers) {
  if (o.bind_cores) bind_to_core(rank);
  const size_t kinds = o.flags.size();
  std::vector<npg_comm_t> comms;
  int32_t mode = o.threads ? NPG_COMM_MULTI_THREAD : NPG_COMM_MULTI_PROCESS;
  // lccl's multi-process domain and thread uid come from the root info when comm_domain is "".
  const char* domain = o.on_devices() ? "" : "allgather-perf";
  npg_result_t r = NPG_SUCCESS;
  auto destroy_all = [&]() {
    int status = kExitOk;
    if (peers != nullptr) {
      std::lock_guard<std::mutex> lock(peers->mutex);
      for (size_t c = 0; c < kinds; ++c) peers->comms[rank * kinds + c] = nullptr;
    }
    for (npg_comm_t comm : comms) {
      npg_result_t d = npg_comm_destroy(comm);
      if (d != NPG_SUCCESS) {
        call_failed(rank, "npg_comm_destroy", d);
        status = kExitFailed;
      }
    }
    return status;
  };
  for (size_t c = 0; c < kinds; ++c) {
    npg_comm_t comm = nullptr;
    r = npg_comm_init(o.backend.c_str(), rank, o.ranks, 0, domain, mode, o.device_of(rank), nullptr, o.timeout_ms,
                      o.flags[c], infos[c].data(), infos[c].size(), &comm);
    if (r != NPG_SUCCESS) {
      call_failed(rank, "npg_comm_init", r);
      destroy_all();
      return kExitFailed;
    }
    comms.push_back(comm);
    if (peers != nullptr) {
      std::lock_guard<std::mutex> lock(peers->mutex);
      peers->comms[rank * kinds + c] = comm;
    }
  }
  auto fail_all = [&]() {
    if (peers == nullptr) return;
    std::lock_guard<std::mutex> lock(peers->mutex);
    for (size_t i = 0; i < peers->comms.size(); ++i) {
      if (static_cast<int>(i / kinds) != rank && peers->comms[i] != nullptr) npg_comm_abort(peers->comms[i]);
    }
  };

  const size_t width = npg_dtype_size(o.dtype);
  const uint64_t n = static_cast<uint64_t>(o.ranks);
  std::vector<uint8_t> send(o.max_bytes);
  std::vector<uint8_t> recv(o.max_bytes * n);
  std::fill(send.begin(), send.end(), 0);  // touch the pages before timing
  std::fill(recv.begin(), recv.end(), 0);

  const int total_iters = o.warmup + o.iters;
  // Per-rank report gathered after each size: iters times (ns), wrong bytes, device bytes.
  std::vector<int64_t> mine(o.iters + 2);
  std::vector<int64_t> all(mine.size() * n);
  const int64_t token = rank;
  std::vector<int64_t> tokens(n);
  int status = kExitOk;    // a failed call stops the sweep
  bool any_wrong = false;  // wrong bytes do not

  if (rank == 0) {
    std::string names;
    for (npg_comm_t comm : comms) names += (names.empty() ? "" : ",") + std::string(npg_comm_transport(comm));
    print_header(o, names);
  }
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes && status == kExitOk; bytes *= 2) {
    if (bytes % width != 0) break;  // cannot happen for power-of-two widths
    const uint64_t count = bytes / width;
    // Several communicators take turns at each size, so that they see the same load.
    for (size_t c = 0; c < kinds && status == kExitOk; ++c) {
      npg_comm_t comm = comms[c];
      for (int it = 0; it < total_iters; ++it) {
        fill_pattern(send.data(), bytes, rank, it);
        // Align the ranks' start so one rank's refill is not timed as another's wait.
        r = npg_all_gather(comm, &token, tokens.data(), 1, NPG_INT64);
        if (r != NPG_SUCCESS) {
          call_failed(rank, "npg_all_gather (barrier)", r);
          fail_all();
          status = kExitFailed;
          break;
        }
        auto t0 = std::chrono::steady_clock::now();
        r = npg_all_gather(comm, send.data(), recv.data(), count, o.dtype);
        auto t1 = std::chrono::steady_clock::now();
        if (r != NPG_SUCCESS) {
          call_failed(rank, "npg_all_gather", r);
          rank_error(rank, "while gathering %" PRIu64 " B/rank, iteration %d", bytes, it);
          fail_all();
          status = kExitFailed;
          break;
        }
        if (it >= o.warmup) {
          mine[it - o.warmup] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
        }
      }
      if (status != kExitOk) break;

      uint64_t wrong = 0;
      for (uint64_t src = 0; src < n; ++src) {
        wrong += count_wrong(recv.data() + src * bytes, bytes, static_cast<int>(src), total_iters - 1);
      }
      if (wrong != 0) {
        rank_error(rank, "%" PRIu64 " wrong bytes in the output at %" PRIu64 " B/rank", wrong, bytes);
      }
      mine[o.iters] = static_cast<int64_t>(wrong);
      uint64_t device_bytes = 0;  // of the last timed gather, before the timings' own gather
      r = npg_comm_device_bytes(comm, &device_bytes);
      if (r != NPG_SUCCESS) {
        call_failed(rank, "npg_comm_device_bytes", r);
        fail_all();
        status = kExitFailed;
        break;
      }
      mine[o.iters + 1] = static_cast<int64_t>(device_bytes);

      r = npg_all_gather(comm, mine.data(), all.data(), mine.size(), NPG_INT64);
      if (r != NPG_SUCCESS) {
        call_failed(rank, "npg_all_gather (timings)", r);
        fail_all();
        status = kExitFailed;
        break;
      }
      uint64_t wrong_total = 0;
      uint64_t device_most = 0;
      std::vector<double> slowest(o.iters, 0.0);
      for (uint64_t src = 0; src < n; ++src) {
        const int64_t* row = all.data() + src * mine.size();
        for (int i = 0; i < o.iters; ++i) slowest[i] = std::max(slowest[i], row[i] / 1e3);
        wrong_total += static_cast<uint64_t>(row[o.iters]);
        device_most = std::max(device_most, static_cast<uint64_t>(row[o.iters + 1]));
      }
      if (rank == 0) {
        const std::string label = o.flag_names[c] + ":" + npg_comm_transport(comm);
        print_row(o, bytes, count, median(slowest), wrong_total, device_most, label.c_str());
      }
      any_wrong = any_wrong || wrong_total != 0;
    }
    if (bytes > o.max_bytes / 2) break;  // next doubling would pass max (or overflow)
  }

  if (destroy_all() != kExitOk) status = kExitFailed;
  return any_wrong ? kExitFailed : status;
}

// ---- launchers --------------------------------------------------------------

// npg_get_root_info on rank 0's side: hccl and lccl make it on rank 0's device, and hccl also
// takes the timeout (HCCL reads its timeouts at the process's first HCCL call).
npg_result_t get_root_info(const Options& o, std::vector<uint8_t>* info, size_t* size) {
  std::string bind;
  if (o.on_devices()) bind = "device:" + std::to_string(o.device_of(0));
  if (o.backend == "hccl") bind += ",timeout_ms:" + std::to_string(o.timeout_ms);
  return npg_get_root_info(o.backend.c_str(), bind.empty() ? nullptr : bind.c_str(), info->data(), info->size(), size);
}

// One root info per --transport entry; none (after releasing any made) when one fails.
bool make_root_infos(const Options& o, RootInfos* infos) {
  infos->clear();
  for (size_t c = 0; c < o.flags.size(); ++c) {
    std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
    size_t size = 0;
    npg_result_t r = get_root_info(o, &info, &size);
    if (r != NPG_SUCCESS) {
      call_failed(0, "npg_get_root_info", r);
      for (const auto& made : *infos) npg_release_root_info(o.backend.c_str(), made.data(), made.size());
      infos->clear();
      return false;
    }
    info.resize(size);
    infos->push_back(std::move(info));
  }
  return true;
}

int launch_threads(const Options& o) {
  RootInfos infos;
  if (!make_root_infos(o, &infos)) return kExitFailed;
  PeerAbort peers;
  peers.comms.assign(o.ranks * o.flags.size(), nullptr);
  std::vector<int> status(o.ranks, kExitFailed);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < o.ranks; ++rank) {
    threads.emplace_back([&, rank]() {
      status[rank] = run_rank(o, rank, infos, &peers);
      if (status[rank] != kExitOk) {
        std::lock_guard<std::mutex> lock(peers.mutex);
        for (npg_comm_t c : peers.comms) {
          if (c != nullptr) npg_comm_abort(c);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s : status) {
    if (s != kExitOk) return kExitFailed;
  }
  return kExitOk;
}

bool write_all(int fd, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t w = write(fd, p, size);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    size -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  uint8_t* p = static_cast<uint8_t*>(data);
  while (size > 0) {
    ssize_t got = read(fd, p, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

// Root infos travel as a uint64 length then the bytes, one per communicator: rank 0 ->
// parent over one pipe, parent -> rank i over a pipe per child. A zero length means rank 0
// failed; the other ranks then exit quietly.
int child_main(const Options& o, int rank, int up_fd, int down_fd, const simulated::SimulatedHosts* net) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // do not outlive an interrupted run
  if (net != nullptr) {
    try {
      net->enter(rank % net->hosts());
    } catch (const std::exception& e) {
      rank_error(rank, "%s", e.what());
      return kExitFailed;
    }
  }
  RootInfos infos;
  if (rank == 0) {
    const bool made = make_root_infos(o, &infos);
    bool ok = true;
    for (size_t c = 0; c < o.flags.size() && ok; ++c) {
      uint64_t size = made ? infos[c].size() : 0;
      ok = write_all(up_fd, &size, sizeof size) && (size == 0 || write_all(up_fd, infos[c].data(), size));
    }
    close(up_fd);
    if (!ok) rank_error(rank, "cannot pass the root info to the parent: %s", strerror(errno));
    if (!made || !ok) return kExitFailed;
  } else {
    for (size_t c = 0; c < o.flags.size(); ++c) {
      uint64_t size = 0;
      std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
      if (!read_all(down_fd, &size, sizeof size) || size == 0 || size > info.size() ||
          !read_all(down_fd, info.data(), size)) {
        return kExitFailed;
      }
      info.resize(size);
      infos.push_back(std::move(info));
    }
    close(down_fd);
  }
  return run_rank(o, rank, infos, nullptr);
}

int launch_processes(const Options& o) {
  std::unique_ptr<simulated::SimulatedHosts> net;  // deleted after every rank was reaped
  if (o.hosts > 0) {
    std::string why = simulated::SimulatedHosts::unavailable_reason();
    if (!why.empty()) {
      std::fprintf(stderr, "allgather-perf: --hosts: %s\n", why.c_str());
      return kExitFailed;
    }
    try {
      net.reset(new simulated::SimulatedHosts(o.hosts));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "allgather-perf: --hosts: %s\n", e.what());
      return kExitFailed;
    }
  }
  int up[2];
  if (pipe(up) != 0) {
    std::fprintf(stderr, "allgather-perf: pipe: %s\n", strerror(errno));
    return kExitFailed;
  }
  std::vector<int> down_write(o.ranks, -1);
  std::vector<pid_t> pids(o.ranks, -1);
  std::fflush(stdout);
  std::fflush(stderr);
  for (int rank = 0; rank < o.ranks; ++rank) {
    int down[2] = {-1, -1};
    if (rank > 0 && pipe(down) != 0) {
      std::fprintf(stderr, "allgather-perf: pipe: %s\n", strerror(errno));
      return kExitFailed;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "allgather-perf: fork: %s\n", strerror(errno));
      for (int i = 0; i < rank; ++i) kill(pids[i], SIGKILL);
      return kExitFailed;
    }
    if (pid == 0) {
      // Keep only this rank's pipe ends so every EOF is seen.
      for (int fd : down_write) {
        if (fd >= 0) close(fd);
      }
      close(up[0]);
      if (rank != 0) close(up[1]);
      if (down[1] >= 0) close(down[1]);
      int rc = child_main(o, rank, rank == 0 ? up[1] : -1, down[0], net.get());
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);
    }
    pids[rank] = pid;
    if (rank > 0) {
      close(down[0]);
      down_write[rank] = down[1];
    }
  }
  close(up[1]);

  // Relay the root infos (or their absence) to ranks 1..N-1.
  signal(SIGPIPE, SIG_IGN);
  for (size_t c = 0; c < o.flags.size(); ++c) {
    std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
    uint64_t size = 0;
    if (!read_all(up[0], &size, sizeof size) || size > info.size() || !read_all(up[0], info.data(), size)) size = 0;
    for (int rank = 1; rank < o.ranks; ++rank) {
      write_all(down_write[rank], &size, sizeof size);
      if (size > 0) write_all(down_write[rank], info.data(), size);
    }
    if (size == 0) break;
  }
  close(up[0]);
  for (int rank = 1; rank < o.ranks; ++rank) close(down_write[rank]);

  // Reap. After the first failure the others get a grace period to notice it
  // through the library (and say why); then they are terminated rather than
  // left blocked until their timeout.
  constexpr auto kGrace = std::chrono::seconds(3);
  int status = kExitOk;
  int live = o.ranks;
  bool terminated = false;
  std::chrono::steady_clock::time_point kill_at{};
  while (live > 0) {
    int ws = 0;
    pid_t pid = waitpid(-1, &ws, status == kExitOk ? 0 : WNOHANG);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {  // failure seen, peers still running
      if (!terminated && std::chrono::steady_clock::now() >= kill_at) {
        for (pid_t other : pids) {
          if (other > 0) kill(other, SIGTERM);
        }
        terminated = true;
      }
      usleep(10000);
      continue;
    }
    int rank = static_cast<int>(std::find(pids.begin(), pids.end(), pid) - pids.begin());
    if (rank >= o.ranks) continue;
    pids[rank] = -1;
    --live;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) continue;
    if (WIFSIGNALED(ws)) {
      if (!(terminated && WTERMSIG(ws) == SIGTERM)) {
        std::fprintf(stderr, "allgather-perf: rank %d (pid %d) killed by signal %d\n", rank, static_cast<int>(pid),
                     WTERMSIG(ws));
      }
    } else {
      std::fprintf(stderr, "allgather-perf: rank %d (pid %d) exited with status %d\n", rank, static_cast<int>(pid),
                   WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    }
    if (status == kExitOk) kill_at = std::chrono::steady_clock::now() + kGrace;
    status = kExitFailed;
  }
  if (terminated) std::fprintf(stderr, "allgather-perf: terminated the remaining ranks\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  return o.threads ? launch_threads(o) : launch_processes(o);
}
