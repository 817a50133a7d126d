#include "bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "../core/error.h"
#include "handshake.h"
#include "host_identity.h"
#include "wire.h"

namespace npg {
namespace host {
namespace {

constexpr uint32_t kProtocolVersion = 3;  // 3: 64-byte block headers on the TCP links
constexpr size_t kMaxHelloBytes = 1024;
constexpr size_t kMaxReportBytes = 4096;
constexpr size_t kMaxGoBytes = 16;
constexpr size_t kTableEntryBytes = 4 + 2 + kMaxIdentityChars + 8 + 8 + 20;

std::string rank_name(int32_t r) { return "rank " + std::to_string(r); }

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) list += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) list += ", ...";
  return list;
}

// After the root refused the init with a verdict, the ranks that had not joined yet still come
// for it: its listener stays open, on a thread of its own, and every rank that proves the
// secret gets the same error frame, until every rank has had it or the root's deadline passes.
// Without this, a rank that comes late waits out its timeout (connection refused) or sees the
// connection close in the handshake, instead of failing with the verdict the others have.
struct VerdictService {
  UniqueFd listener;                // closed last
  std::unique_ptr<Admission> gate;  // pending handshakes continue; admitted ones are told first
  std::vector<uint8_t> frame;
  std::set<int32_t> told;
  int32_t rank_size = 0;
  Deadline deadline;

  void run() noexcept {
    try {
      while (static_cast<int32_t>(told.size()) < rank_size && !deadline.expired()) {
        AdmittedConnection c = gate->next(deadline, -1, nullptr, "telling late ranks the verdict");
        try {
          RankInfo hello = decode_hello(c.payload);
          if (hello.rank >= 0 && hello.rank < rank_size) told.insert(hello.rank);
        } catch (const Error&) {
          // Told all the same.
        }
        try {
          send_frame(c.fd.get(), FrameType::kError, frame, deadline.earlier(1000), "a rank that came late");
        } catch (const Error&) {
        }
      }
    } catch (...) {
      // The deadline passed, or the listener failed: nobody else is told.
    }
  }
};

// Starts a VerdictService for the ranks not told yet; false when no thread can be started (the
// caller tells what it can and closes the listener).
bool tell_late_ranks(UniqueFd* listener, std::unique_ptr<Admission>* gate, npg_result_t code, const std::string& text,
                     std::set<int32_t> told, int32_t rank_size, const Deadline& deadline) noexcept {
  std::shared_ptr<VerdictService> service;
  try {
    service = std::make_shared<VerdictService>();
    service->frame = encode_error(code, text);
    service->told = std::move(told);
    service->rank_size = rank_size;
    service->deadline = deadline;
  } catch (...) {
    return false;
  }
  service->listener = std::move(*listener);
  service->gate = std::move(*gate);
  try {
    std::thread([service] { service->run(); }).detach();
    return true;
  } catch (...) {
    *listener = std::move(service->listener);
    *gate = std::move(service->gate);
    return false;
  }
}

}  // namespace

std::vector<uint8_t> encode_hello(const RankInfo& self) {
  ByteWriter w;
  w.u32(kProtocolVersion);
  w.i32(self.rank);
  w.i32(self.rank_size);
  w.i32(self.rank_root);
  w.u32(self.flags);
  w.u64(self.domain_hash);
  w.i32(self.pid);
  w.str(self.identity);
  w.u64(self.canary_addr);
  w.u64(self.canary_value);
  w.endpoint(self.ring);
  return w.data();
}

RankInfo decode_hello(const std::vector<uint8_t>& body) {
  ByteReader r(body);
  uint32_t version = r.u32();
  if (version != kProtocolVersion) {
    throw_error(NPG_INVALID_USAGE, "bootstrap protocol version " + std::to_string(version) + ", this library speaks " +
                                       std::to_string(kProtocolVersion) + " (mixed library versions)");
  }
  RankInfo out;
  out.rank = r.i32();
  out.rank_size = r.i32();
  out.rank_root = r.i32();
  out.flags = r.u32();
  out.domain_hash = r.u64();
  out.pid = r.i32();
  out.identity = r.str(kMaxIdentityChars);
  out.canary_addr = r.u64();
  out.canary_value = r.u64();
  out.ring = r.endpoint();
  r.expect_end();
  return out;
}

RankTable decode_table(const std::vector<uint8_t>& body, int32_t rank_size, const std::string& root) {
  ByteReader r(body);
  RankTable table;
  uint8_t kind = r.u8();
  if (kind < static_cast<uint8_t>(TransportKind::kThreads) ||
      kind > static_cast<uint8_t>(TransportKind::kHierStaging)) {
    throw_error(NPG_REMOTE_ERROR, root + " sent an unknown transport " + std::to_string(kind));
  }
  table.transport = static_cast<TransportKind>(kind);
  table.shm_name = r.str(255);
  table.staging_chunk = r.u64();
  uint32_t count = r.u32();
  if (count != static_cast<uint32_t>(rank_size)) throw_error(NPG_REMOTE_ERROR, root + " sent a table of wrong size");
  for (uint32_t i = 0; i < count; ++i) {
    RankInfo e;
    e.rank = static_cast<int32_t>(i);
    e.pid = r.i32();
    e.identity = r.str(kMaxIdentityChars);
    e.canary_addr = r.u64();
    e.canary_value = r.u64();
    e.ring = r.endpoint();
    table.ranks.push_back(std::move(e));
  }
  r.expect_end();
  return table;
}

uint64_t domain_hash(const std::string& comm_domain) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : comm_domain) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Bootstrap Bootstrap::accept_ranks(UniqueFd listener, const HostRootInfo& info, const RankInfo& self,
                                  const Deadline& deadline) {
  Bootstrap b;
  b.info_ = info;
  b.root_rank_ = self.rank;
  const int32_t n = self.rank_size;
  // A rank that made the root info but passed another rank_root serves in the root's place
  // (take_listener_made_by_this_thread): the first rank to join learns the disagreement.
  const bool stand_in = self.rank != self.rank_root;
  const std::string me = stand_in ? "rank " + std::to_string(self.rank) + " (pid " + std::to_string(self.pid) +
                                        "), which made the root info,"
                                  : "root rank " + std::to_string(self.rank);
  // Sized by the ranks that joined, not by rank_size, until all of them have.
  std::map<int32_t, std::pair<RankInfo, UniqueFd>> joined;
  std::vector<UniqueFd> offenders;  // authenticated but inconsistent: told about the failure too
  std::set<int32_t> told{self.rank};
  npg_result_t fatal_code = NPG_SUCCESS;
  std::string fatal;
  auto fail = [&](const std::string& text) {
    if (fatal.empty()) {
      fatal_code = NPG_INVALID_USAGE;
      fatal = text;
    }
  };
  const std::string root_name = stand_in ? "rank " + std::to_string(self.rank) + " (in the root's place)"
                                         : "root rank " + std::to_string(self.rank);
  auto gate =
      std::make_unique<Admission>(listener.get(), info, HandshakePurpose::kBootstrap, kMaxHelloBytes, root_name);
  try {
    while (static_cast<int32_t>(joined.size()) + 1 < n && fatal.empty()) {
      AdmittedConnection c;
      try {
        c = gate->next(deadline, -1, nullptr, "waiting for ranks to join");
      } catch (const Error& e) {
        if (e.code() != NPG_TIMEOUT) throw;
        break;
      }
      RankInfo hello;
      try {
        hello = decode_hello(c.payload);
      } catch (const Error& e) {
        // Proved the secret, so it belongs to this communicator: its failure is everyone's.
        fail(std::string("a rank at ") + c.peer.to_string() + " sent a hello this rank cannot read: " + e.what());
        offenders.push_back(std::move(c.fd));
        break;
      }
      const int32_t r = hello.rank;
      if (r >= 0 && r < n) told.insert(r);
      std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(hello.pid) + ")";
      auto twin = joined.find(r);
      if (hello.rank_size != n) {
        fail(who + " passed rank_size " + std::to_string(hello.rank_size) + " but " + me + " passed " +
             std::to_string(n));
      } else if (hello.pid <= 0) {
        fail(who + " sent an invalid process id");
      } else if (r < 0 || r >= n) {
        fail(who + " is out of range [0, " + std::to_string(n - 1) + "]");
      } else if (r == self.rank || twin != joined.end()) {
        int32_t other_pid = r == self.rank ? self.pid : twin->second.first.pid;
        fail("two ranks claim rank " + std::to_string(r) + " (pids " + std::to_string(other_pid) + " and " +
             std::to_string(hello.pid) + ")");
      } else if (hello.rank_root != self.rank_root) {
        fail(who + " passed rank_root " + std::to_string(hello.rank_root) + " but " + me + " passed rank_root " +
             std::to_string(self.rank_root));
      } else if (stand_in) {
        fail(who + " passed rank_root " + std::to_string(hello.rank_root) + " and so did " + me +
             " but the root info must be made by rank_root itself (npg_get_root_info on rank " +
             std::to_string(self.rank_root) + ")");
      } else if (hello.domain_hash != self.domain_hash) {
        fail(who + " passed a different comm_domain than the root");
      } else if (hello.flags != self.flags) {
        fail(who + " passed flags " + std::to_string(hello.flags) + " but the root passed flags " +
             std::to_string(self.flags));
      } else {
        joined.emplace(r, std::make_pair(std::move(hello), std::move(c.fd)));
        continue;
      }
      offenders.push_back(std::move(c.fd));
    }
    if (static_cast<int32_t>(joined.size()) + 1 < n && fatal.empty()) {
      std::vector<int32_t> missing;
      for (int32_t r = 0; r < n && missing.size() <= 16; ++r)
        if (r != self.rank && joined.count(r) == 0) missing.push_back(r);
      fatal_code = NPG_TIMEOUT;
      fatal = "timed out after " + std::to_string(deadline.budget_ms()) + " ms waiting for rank" +
              (missing.size() > 1 ? "s " : " ") + rank_list(missing) + " to join at " + info.root.to_string() +
              gate->drop_summary();
      if (stand_in) {
        fatal_code = NPG_INVALID_USAGE;
        fatal = "rank " + std::to_string(self.rank) + " made the root info but passed rank_root " +
                std::to_string(self.rank_root) + ": the root info must be made by rank_root itself; " + fatal;
      }
    }
  } catch (const Error& e) {
    fatal_code = e.code();
    fatal = e.what();
  }
  b.members_.resize(n);
  b.ranks_.resize(n);
  b.ranks_[self.rank] = self;
  for (auto& entry : joined) {
    b.ranks_[entry.first] = std::move(entry.second.first);
    b.members_[entry.first] = std::move(entry.second.second);
  }
  if (!fatal.empty()) {
    // Ranks that are still to come, or whose hello was admitted but not read yet, get the
    // verdict from the listener, kept open for them; without that, only those admitted.
    const bool for_late_ranks = fatal_code == NPG_INVALID_USAGE && !deadline.expired() &&
                                tell_late_ranks(&listener, &gate, fatal_code, fatal, told, n, deadline);
    if (!for_late_ranks) {
      for (auto& fd : gate->take_admitted()) offenders.push_back(std::move(fd));
    }
    for (auto& fd : offenders) {
      try {
        send_frame(fd.get(), FrameType::kError, encode_error(fatal_code, fatal), deadline.earlier(1000), "offender");
      } catch (const Error&) {
      }
    }
    b.fail_all(fatal_code, fatal);
    throw_error(fatal_code, fatal);
  }
  if (stand_in) throw_error(NPG_INTERNAL_ERROR, "rank " + std::to_string(self.rank) + " served in the root's place");
  return b;
}

Bootstrap Bootstrap::connect_root(const HostRootInfo& info, int32_t root_rank, const Deadline& deadline) {
  Bootstrap b;
  b.info_ = info;
  b.root_rank_ = root_rank;
  b.root_ = connect_with_retry(info.root, deadline, "root rank " + std::to_string(root_rank));
  return b;
}

void Bootstrap::send_hello(const RankInfo& self, const Deadline& deadline) {
  ClientHandshake handshake(std::move(root_), info_.root, info_, HandshakePurpose::kBootstrap, encode_hello(self),
                            "root rank " + std::to_string(root_rank_));
  handshake.finish(deadline, -1);
  root_ = handshake.take_fd();
}

void Bootstrap::send_table(const RankTable& table, const Deadline& deadline) {
  ByteWriter w;
  w.u8(static_cast<uint8_t>(table.transport));
  w.str(table.shm_name);
  w.u64(table.staging_chunk);
  w.u32(static_cast<uint32_t>(table.ranks.size()));
  for (const RankInfo& r : table.ranks) {
    w.i32(r.pid);
    w.str(r.identity);
    w.u64(r.canary_addr);
    w.u64(r.canary_value);
    w.endpoint(r.ring);
  }
  for (size_t r = 0; r < members_.size(); ++r) {
    if (members_[r]) send_frame(members_[r].get(), FrameType::kTable, w.data(), deadline, rank_name(r));
  }
}

RankTable Bootstrap::recv_table(int32_t rank_size, const Deadline& deadline) {
  const std::string root = "root rank " + std::to_string(root_rank_);
  size_t max_len = 1024 + static_cast<size_t>(rank_size) * kTableEntryBytes;
  auto body = recv_frame(root_.get(), FrameType::kTable, max_len, deadline, -1, root);
  return decode_table(body, rank_size, root);
}

void Bootstrap::send_report(const SetupReport& report, const Deadline& deadline) noexcept {
  try {
    ByteWriter w;
    w.u8(report.ok ? 1 : 0);
    w.u8(report.cma_ok ? 1 : 0);
    w.u32(report.code);
    w.str(report.text.substr(0, kMaxReportBytes - 64));
    send_frame(root_.get(), FrameType::kReport, w.data(), deadline, "root");
  } catch (...) {
    // The root learns about a lost rank from the closed connection.
  }
}

std::vector<SetupReport> Bootstrap::collect_reports(const Deadline& deadline) {
  const int32_t n = static_cast<int32_t>(members_.size());
  std::vector<SetupReport> reports(n);
  std::vector<bool> pending(n, false);
  int32_t remaining = 0;
  for (int32_t r = 0; r < n; ++r) {
    if (members_[r]) {
      pending[r] = true;
      ++remaining;
    }
  }
  try {
    while (remaining > 0) {
      std::vector<pollfd> fds;
      std::vector<int32_t> who;
      for (int32_t r = 0; r < n; ++r) {
        if (pending[r]) {
          fds.push_back({members_[r].get(), POLLIN, 0});
          who.push_back(r);
        }
      }
      int rc = poll(fds.data(), fds.size(), deadline.poll_timeout_ms());
      if (rc < 0 && errno != EINTR) throw_system_error("poll", errno);
      if (rc <= 0) {
        if (deadline.expired()) {
          std::string list;
          for (size_t i = 0; i < who.size() && i < 16; ++i) list += (i ? ", " : "") + std::to_string(who[i]);
          throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) +
                                       " ms waiting for ranks " + list + " to attach to the transport");
        }
        continue;
      }
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        int32_t r = who[i];
        auto body = recv_frame(members_[r].get(), FrameType::kReport, kMaxReportBytes, deadline, -1, rank_name(r));
        ByteReader rd(body);
        SetupReport& rep = reports[r];
        rep.ok = rd.u8() != 0;
        rep.cma_ok = rd.u8() != 0;
        rep.code = rd.u32();
        rep.text = rd.str(kMaxReportBytes);
        rd.expect_end();
        if (!rep.ok) {
          npg_result_t code = rep.code >= NPG_INVALID_ARGUMENT && rep.code <= NPG_INTERNAL_ERROR
                                  ? static_cast<npg_result_t>(rep.code)
                                  : NPG_REMOTE_ERROR;
          throw_error(code, rank_name(r) + " failed to set up the transport: " + rep.text);
        }
        pending[r] = false;
        --remaining;
      }
    }
  } catch (const Error& e) {
    fail_all(e.code(), e.what());
    throw;
  }
  return reports;
}

void Bootstrap::send_go(TransportKind kind, const Deadline& deadline) {
  std::vector<uint8_t> body{static_cast<uint8_t>(kind)};
  for (size_t r = 0; r < members_.size(); ++r) {
    if (members_[r]) send_frame(members_[r].get(), FrameType::kGo, body, deadline, rank_name(r));
  }
}

TransportKind Bootstrap::recv_go(const Deadline& deadline) {
  const std::string root = "root rank " + std::to_string(root_rank_);
  auto body = recv_frame(root_.get(), FrameType::kGo, kMaxGoBytes, deadline, -1, root);
  ByteReader r(body);
  uint8_t kind = r.u8();
  r.expect_end();
  if (kind < static_cast<uint8_t>(TransportKind::kThreads) ||
      kind > static_cast<uint8_t>(TransportKind::kHierStaging)) {
    throw_error(NPG_REMOTE_ERROR, root + " sent an unknown transport " + std::to_string(kind));
  }
  return static_cast<TransportKind>(kind);
}

void Bootstrap::fail_all(npg_result_t code, const std::string& text) noexcept {
  try {
    auto body = encode_error(code, text);
    Deadline d = Deadline::after_ms(1000);
    for (size_t r = 0; r < members_.size(); ++r) {
      if (!members_[r]) continue;
      try {
        send_frame(members_[r].get(), FrameType::kError, body, d, rank_name(r));
      } catch (const Error&) {
      }
    }
  } catch (...) {
  }
}

}  // namespace host
}  // namespace npg
