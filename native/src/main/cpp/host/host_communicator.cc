#include "host_communicator.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../core/error.h"
#include "bootstrap.h"
#include "hier_transport.h"
#include "host_identity.h"
#include "root_info.h"
#include "shm_segment.h"
#include "shm_transport.h"
#include "tcp_ring.h"

namespace npg {
namespace host {
namespace {

// Extra wait of non-root ranks so the root's explanation of a failure arrives first.
constexpr int64_t kRootGraceMs = 500;
// A live root's listener accepts at once; longer means no root holds this root info.
constexpr int64_t kClaimConnectMs = 1000;

// A communicator of one rank only moves its own block.
class SelfTransport final : public HostTransport {
 public:
  const char* name() const override { return "self"; }
  void all_gather_v(const GatherArgs& args, const Deadline&) override { args.write_own_block(); }
  void on_abort() noexcept override {}
  void on_failure() noexcept override {}
  void close() override {}
};

TransportKind choose_transport(const std::vector<RankInfo>& ranks, uint32_t flags) {
  bool same_host = true;
  bool same_process = true;
  for (const RankInfo& r : ranks) {
    same_host = same_host && r.identity == ranks[0].identity;
    same_process = same_process && r.pid == ranks[0].pid;
  }
  if (!same_host) {
    // Several hosts: the flat ring when forced or when the hosts' rank counts differ.
    if (!(flags & NPG_FLAG_FORCE_TCP) && HostLayout::of(ranks).suits_hierarchy()) return TransportKind::kHier;
    return TransportKind::kTcp;
  }
  if (flags & NPG_FLAG_FORCE_TCP) return TransportKind::kTcp;
  if (flags & NPG_FLAG_FORCE_STAGING) return TransportKind::kStaging;
  return same_process ? TransportKind::kThreads : TransportKind::kProcesses;
}

ShmTransport::Mode shm_mode(TransportKind kind) {
  switch (kind) {
    case TransportKind::kThreads:
      return ShmTransport::Mode::kThreads;
    case TransportKind::kCma:
      return ShmTransport::Mode::kCma;
    default:
      return ShmTransport::Mode::kStaging;
  }
}

std::vector<Endpoint> ring_endpoints(const RankTable& table) {
  std::vector<Endpoint> endpoints;
  for (const RankInfo& r : table.ranks) endpoints.push_back(r.ring);
  return endpoints;
}

bool uses_shared_segment(TransportKind kind) {
  return kind != TransportKind::kTcp && kind != TransportKind::kHier && kind != TransportKind::kHierStaging;
}

std::vector<int32_t> pids_of(const RankTable& table) {
  std::vector<int32_t> pids;
  for (const RankInfo& r : table.ranks) pids.push_back(r.pid);
  return pids;
}

bool probe_peers(const RankTable& table, int32_t rank) {
  for (const RankInfo& r : table.ranks) {
    if (r.rank != rank && !cma_probe(r.pid, r.canary_addr, r.canary_value)) return false;
  }
  return true;
}

}  // namespace

HostCommunicator::HostCommunicator(int32_t rank, int32_t size, int64_t timeout_ms)
    : rank_(rank), size_(size), timeout_ms_(timeout_ms) {
  fill_random(&canary_, sizeof(canary_));
}

std::unique_ptr<HostCommunicator> HostCommunicator::create(const CommConfig& config) {
  if (!config.rank_table_file.empty()) {
    throw_error(NPG_INVALID_USAGE,
                "rank_table_file is only supported by backend 'hccl'; backend 'host' joins "
                "through root_info");
  }
  const HostRootInfo info = HostRootInfo::parse(config.root_info, config.root_info_size);
  std::unique_ptr<HostCommunicator> comm(new HostCommunicator(config.rank, config.rank_size, config.timeout_ms));
  comm->join(config, info);
  return comm;
}

void HostCommunicator::join(const CommConfig& config, const HostRootInfo& info) {
  const bool is_root = config.rank == config.rank_root;
  const Deadline deadline = Deadline::after_ms(config.timeout_ms);
  const Deadline member_deadline =
      Deadline::after_ms(config.timeout_ms > INT64_MAX - kRootGraceMs ? INT64_MAX : config.timeout_ms + kRootGraceMs);
  UniqueFd root_listener;
  std::string claim;  // why this rank, rank_root by its arguments, cannot act as the root
  if (is_root) {
    try {
      root_listener = take_parked_listener(info);
    } catch (const Error& e) {
      if (size_ == 1 || e.code() != NPG_INVALID_USAGE) throw;
      claim = e.what();
    }
  } else if (size_ > 1) {
    // This thread made the root info, so it is the root by the contract, yet another rank is
    // rank_root by its arguments: nobody else will ever serve this listener.
    root_listener = take_listener_made_by_this_thread(info);
  }
  if (size_ == 1) {
    transport_.reset(new SelfTransport());
    return;
  }

  RankInfo self;
  self.rank = rank_;
  self.rank_size = size_;
  self.rank_root = config.rank_root;
  self.flags = config.flags;
  self.domain_hash = domain_hash(config.comm_domain);
  self.pid = static_cast<int32_t>(getpid());
  self.identity = host_identity();
  self.canary_addr = reinterpret_cast<uintptr_t>(&canary_);
  self.canary_value = canary_;

  if (!claim.empty()) join_claiming_root(info, self, claim, deadline);
  if (!is_root && root_listener) join_standing_in(info, std::move(root_listener), self, deadline);
  if (is_root) {
    join_as_root(config, info, std::move(root_listener), self, deadline);
  } else {
    join_as_member(config, info, self, deadline, member_deadline);
  }
}

void HostCommunicator::install(TransportKind kind, const RankTable& table, ShmSegment segment,
                               std::unique_ptr<FlatTcp> ring, HierTransport::Setup hier) {
  if (kind == TransportKind::kHier || kind == TransportKind::kHierStaging) {
    transport_.reset(new HierTransport(std::move(hier), table, rank_, kind, abort_));
  } else if (kind == TransportKind::kTcp) {
    int32_t on_this_host = 0;
    for (const RankInfo& r : table.ranks) on_this_host += r.identity == table.ranks[rank_].identity ? 1 : 0;
    ring->set_poll_spin(TcpRing::poll_spin_for(on_this_host));
    transport_ = std::move(ring);
  } else {
    transport_.reset(new ShmTransport(std::move(segment), shm_mode(kind), rank_, size_, table.staging_chunk,
                                      pids_of(table), abort_));
  }
}

void HostCommunicator::join_as_root(const CommConfig& config, const HostRootInfo& info, UniqueFd listener,
                                    RankInfo self, const Deadline& deadline) {
  Endpoint ring_bind = info.root;
  ring_bind.port = 0;
  UniqueFd ring_listener = listen_on(ring_bind, &self.ring);
  Bootstrap boot = Bootstrap::accept_ranks(std::move(listener), info, self, deadline);
  try {
    RankTable table;
    table.ranks = boot.ranks();
    table.transport = choose_transport(table.ranks, config.flags);
    ShmSegment segment;
    if (table.transport != TransportKind::kTcp) table.staging_chunk = staging_chunk_bytes_from_env();
    if (uses_shared_segment(table.transport)) {
      table.shm_name = shm_segment_name(getpid(), info.id_hex(8), config.comm_domain);
      // Separate processes may fall back to staging after the probe, so their segment
      // reserves the staging area up front; tmpfs commits its pages only when touched.
      size_t bytes =
          ShmTransport::segment_bytes(size_, table.transport != TransportKind::kThreads, table.staging_chunk);
      segment = ShmSegment::create(table.shm_name, bytes);  // unlinked by its destructor on any failure
      ShmTransport::format(segment.data(), size_, table.staging_chunk);
    }
    boot.send_table(table, deadline);
    bool cma_ok = table.transport == TransportKind::kProcesses && probe_peers(table, rank_);
    std::unique_ptr<FlatTcp> ring;
    if (table.transport == TransportKind::kTcp) {
      ring = FlatTcp::connect(rank_, size_, config.flags, ring_listener.get(), ring_endpoints(table), info, deadline,
                              -1, abort_);
    }
    HierTransport::Setup hier;
    if (table.transport == TransportKind::kHier) {
      hier = HierTransport::set_up(table, rank_, config.flags, ring_listener.get(), info, config.comm_domain, deadline,
                                   -1, abort_);
    }
    std::vector<SetupReport> reports = boot.collect_reports(deadline);
    TransportKind kind = table.transport;
    if (kind == TransportKind::kHier) {
      bool every_host_cma = hier.cma_ok && !(config.flags & NPG_FLAG_FORCE_STAGING);
      for (int32_t r = 0; r < size_; ++r) every_host_cma = every_host_cma && (r == rank_ || reports[r].cma_ok);
      kind = every_host_cma ? TransportKind::kHier : TransportKind::kHierStaging;
      // Every rank has attached to its host's segment.
      if (int err = hier.segment.unlink()) throw_system_error("shm_unlink of " + hier.segment.name(), err);
    }
    if (kind == TransportKind::kProcesses) {
      for (int32_t r = 0; r < size_; ++r) cma_ok = cma_ok && (r == rank_ || reports[r].cma_ok);
      kind = cma_ok ? TransportKind::kCma : TransportKind::kStaging;
    }
    // Every rank has attached: the name is no longer needed.
    if (int err = segment.unlink()) throw_system_error("shm_unlink of " + table.shm_name, err);
    boot.send_go(kind, deadline);
    install(kind, table, std::move(segment), std::move(ring), std::move(hier));
  } catch (const Error& e) {
    boot.fail_all(e.code(), e.what());
    throw;
  }
}

// This rank made the root info but another rank is rank_root by its arguments: the ranks that
// come to the listener wait in vain for a root, so this rank serves it in the root's place.
// The first rank to join makes it fail: with the same INVALID_USAGE on every rank, naming both
// rank_root values when they differ (Bootstrap::accept_ranks, which tells the later ranks too).
void HostCommunicator::join_standing_in(const HostRootInfo& info, UniqueFd listener, const RankInfo& self,
                                        const Deadline& deadline) {
  Bootstrap::accept_ranks(std::move(listener), info, self, deadline);
  throw_error(NPG_INTERNAL_ERROR, "rank " + std::to_string(rank_) + " was admitted in the root's place");
}

// This rank is rank_root by its arguments but did not make the root info. The rank that did
// may be waiting for it as the root: join it as a member, so that it refuses this rank's
// rank_root at once and every rank fails with the same INVALID_USAGE; when no root answers,
// the claim itself is the error.
void HostCommunicator::join_claiming_root(const HostRootInfo& info, const RankInfo& self, const std::string& claim,
                                          const Deadline& deadline) {
  std::unique_ptr<Bootstrap> boot;
  try {
    boot.reset(new Bootstrap(Bootstrap::connect_root(info, -1, deadline.earlier(kClaimConnectMs))));
    RankInfo hello = self;
    hello.ring = local_endpoint(boot->root_fd());  // never used: the root refuses this rank
    boot->send_hello(hello, deadline);
  } catch (const Error&) {
    throw_error(NPG_INVALID_USAGE, claim);
  }
  try {
    boot->recv_table(size_, deadline);
  } catch (const Error& e) {
    if (e.code() == NPG_INVALID_USAGE) throw;  // the root's verdict, the same on every rank
  }
  throw_error(NPG_INVALID_USAGE, claim);
}

void HostCommunicator::join_as_member(const CommConfig& config, const HostRootInfo& info, RankInfo self,
                                      const Deadline& deadline, const Deadline& member_deadline) {
  Bootstrap boot = Bootstrap::connect_root(info, config.rank_root, deadline);
  Endpoint ring_bind = local_endpoint(boot.root_fd());
  ring_bind.port = 0;
  UniqueFd ring_listener = listen_on(ring_bind, &self.ring);
  boot.send_hello(self, deadline);
  RankTable table = boot.recv_table(size_, member_deadline);
  if (table.transport != TransportKind::kTcp && (table.staging_chunk < 64 || table.staging_chunk > (1ull << 30))) {
    throw_error(NPG_REMOTE_ERROR, "root rank " + std::to_string(config.rank_root) + " sent a bad staging size");
  }
  SetupReport report;
  ShmSegment segment;
  std::unique_ptr<FlatTcp> ring;
  HierTransport::Setup hier;
  bool interrupted = false;
  try {
    if (uses_shared_segment(table.transport)) {
      size_t bytes =
          ShmTransport::segment_bytes(size_, table.transport != TransportKind::kThreads, table.staging_chunk);
      segment = ShmSegment::open(table.shm_name, bytes);
      ShmTransport::check_format(segment.data(), size_, table.staging_chunk);
    }
    report.cma_ok = table.transport == TransportKind::kProcesses && probe_peers(table, rank_);
    if (table.transport == TransportKind::kTcp) {
      // The root's connection doubles as a cancel signal: it only speaks on failure here.
      ring = FlatTcp::connect(rank_, size_, config.flags, ring_listener.get(), ring_endpoints(table), info, deadline,
                              boot.root_fd(), abort_);
      interrupted = ring == nullptr;
    }
    if (table.transport == TransportKind::kHier) {
      hier = HierTransport::set_up(table, rank_, config.flags, ring_listener.get(), info, config.comm_domain, deadline,
                                   boot.root_fd(), abort_);
      report.cma_ok = hier.cma_ok;
      interrupted = hier.interrupted;
    }
  } catch (const Error& e) {
    report.ok = false;
    report.code = e.code();
    report.text = e.what();
  }
  if (!interrupted) boot.send_report(report, deadline);
  TransportKind kind = boot.recv_go(member_deadline);
  if (!report.ok) throw_error(static_cast<npg_result_t>(report.code), report.text);
  if (interrupted) throw_error(NPG_REMOTE_ERROR, "root rank interrupted the ring set-up without an error");
  // Every rank has attached to its host's segment (a no-op unless this rank created it).
  if (int err = hier.segment.unlink()) throw_system_error("shm_unlink of " + hier.segment.name(), err);
  install(kind, table, std::move(segment), std::move(ring), std::move(hier));
}

void HostCommunicator::all_gather_v(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                                    const uint64_t* counts_bytes, const uint64_t* displs_bytes) {
  run(segments, segment_count, write_own, recv, counts_bytes, displs_bytes, false);
}

void HostCommunicator::reject(const std::string& reason) {
  // Nobody to tell, or no collective can run: the caller reports its own error.
  if (size_ == 1 || abort_.triggered() || !broken_.empty()) return;
  rejection_ = reason.substr(0, kMaxRejectionBytes);
  struct Clear {
    std::string* text;
    ~Clear() { text->clear(); }
  } clear{&rejection_};
  // Sends its text as its block and receives nothing; the verdict is the same on every rank.
  std::vector<uint64_t> counts(size_, 0), displs(size_, 0);
  counts[rank_] = rejection_.size();
  npg_segment_t segment{rejection_.data(), rejection_.size()};
  run(&segment, 1, false, nullptr, counts.data(), displs.data(), true);
  throw_error(NPG_INTERNAL_ERROR, "a collective that reported a rejection succeeded");
}

void HostCommunicator::fail_with_rejections(const std::vector<uint64_t>& lengths) {
  std::vector<uint64_t> displs(size_, 0);
  uint64_t total = 0;
  for (int32_t r = 0; r < size_; ++r) {
    if (lengths[r] > kMaxRejectionBytes) {
      throw_error(NPG_REMOTE_ERROR, "rank " + std::to_string(r) + " reported a rejection of " +
                                        std::to_string(lengths[r]) + " bytes (limit " +
                                        std::to_string(kMaxRejectionBytes) + ")");
    }
    displs[r] = total;
    total += lengths[r];
  }
  // Every rank runs the second collective with the same counts, whatever it reads.
  if (lengths[rank_] != rejection_.size()) rejection_.resize(lengths[rank_], '?');
  std::vector<char> texts(total);
  npg_segment_t own{rejection_.data(), lengths[rank_]};
  run(&own, lengths[rank_] ? 1 : 0, true, texts.data(), lengths.data(), displs.data(), false);
  std::string verdict;
  for (int32_t r = 0; r < size_; ++r) {
    if (lengths[r] == 0) continue;
    verdict += (verdict.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
               " rejected its arguments: " + std::string(texts.data() + displs[r], lengths[r]);
  }
  throw_error(NPG_INVALID_USAGE, verdict + "; no rank gathered anything");
}

void HostCommunicator::run(const npg_segment_t* segments, size_t segment_count, bool write_own, void* recv,
                           const uint64_t* counts_bytes, const uint64_t* displs_bytes, bool rejecting) {
  if (abort_.triggered()) throw_aborted();
  if (!broken_.empty()) {
    throw_error(NPG_INVALID_USAGE,
                "communicator is unusable after an earlier failure (" + broken_ + "); destroy it and create a new one");
  }
  std::vector<uint64_t> rejections(size_, 0);
  GatherArgs args;
  args.segments = segments;
  args.segment_count = segment_count;
  args.send_bytes = counts_bytes[rank_];
  args.write_own = write_own;
  args.recv = static_cast<uint8_t*>(recv);
  args.counts = counts_bytes;
  args.displs = displs_bytes;
  args.seq = ++seq_;
  args.digest = rejecting ? kRejectedDigest : counts_digest(size_, counts_bytes);
  args.rank = rank_;
  args.rejections = &rejections;
  const Deadline deadline = Deadline::after_ms(timeout_ms_);
  args.advise_huge_pages(size_);
  try {
    transport_->all_gather_v(args, deadline);
  } catch (const Error& e) {
    if (abort_.triggered()) throw_aborted();
    if (e.code() == NPG_INVALID_USAGE) {
      // All ranks agreed on the verdict; still usable.
      for (uint64_t length : rejections)
        if (length != 0) fail_with_rejections(rejections);
      throw;
    }
    broken_ = e.what();
    // A timed-out rank breaks no link: its peers time out on their own, or learn whom it
    // waited for (shared memory: its status; the TCP ring: an urgent byte), and name the real
    // laggard, not this rank.
    if (e.code() != NPG_TIMEOUT) transport_->on_failure();
    throw;
  } catch (...) {
    broken_ = "unexpected failure";
    transport_->on_failure();
    throw;
  }
}

void HostCommunicator::abort() noexcept {
  abort_.trigger();
  if (transport_) transport_->on_abort();
}

void HostCommunicator::close() {
  std::string first;
  npg_result_t code = NPG_SUCCESS;
  if (transport_) {
    // Peers waiting for this rank in a later collective learn it at once. After a failure or
    // an abort they have learnt what there is to learn (a timed-out rank stays silent).
    if (broken_.empty() && !abort_.triggered()) transport_->on_leave();
    try {
      transport_->close();
    } catch (const Error& e) {
      code = e.code();
      first = e.what();
    }
    transport_.reset();
  }
  int err = abort_.close();
  if (err != 0 && first.empty()) {
    code = NPG_SYSTEM_ERROR;
    first = "closing the abort eventfd: " + errno_text(err);
  }
  if (!first.empty()) throw_error(code, first);
}

}  // namespace host
}  // namespace npg
