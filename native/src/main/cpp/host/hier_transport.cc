#include "hier_transport.h"

#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <map>
#include <regex>

#include "../core/error.h"

namespace npg {
namespace host {
namespace {

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return out;
}

// A digest no rank of the host shares: a rank whose ring across hosts found a layout
// disagreement posts it, so that its whole host fails the shared-memory layout check.
uint64_t disagreement_digest(uint64_t digest, int32_t local) {
  uint64_t x = digest + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(local) + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool same_process(const RankTable& table, const std::vector<int32_t>& ranks) {
  for (int32_t r : ranks) {
    if (table.ranks[r].pid != table.ranks[ranks[0]].pid) return false;
  }
  return true;
}

// The parts count ranks within the ring or the host ("rank i", "ranks i, j", "recv_counts[i]"
// mean ranks[i]); their texts name the global ranks instead.
std::string with_global_ranks(const std::string& text, const std::vector<int32_t>& ranks) {
  static const std::regex kRank("(ranks? |recv_counts\\[)(\\d+(?:, \\d+)*)");
  static const std::regex kNumber("\\d+");
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), kRank), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(last, m[0].first);
    out += m[1].str();
    const std::string list = m[2].str();
    auto at = list.cbegin();
    for (std::sregex_iterator n(list.begin(), list.end(), kNumber), none; n != none; ++n) {
      out.append(at, (*n)[0].first);
      const size_t i = std::stoul(n->str());
      out += i < ranks.size() ? std::to_string(ranks[i]) : n->str();
      at = (*n)[0].second;
    }
    out.append(at, list.cend());
    last = m[0].second;
  }
  out.append(last, text.cend());
  return out;
}

}  // namespace

HostLayout HostLayout::of(const std::vector<RankInfo>& ranks) {
  HostLayout layout;
  std::map<std::string, int32_t> index;
  for (const RankInfo& r : ranks) {
    auto it = index.find(r.identity);
    if (it == index.end()) {
      it = index.emplace(r.identity, static_cast<int32_t>(layout.hosts.size())).first;
      layout.hosts.emplace_back();
    }
    layout.host_of.push_back(it->second);
    layout.local_index.push_back(static_cast<int32_t>(layout.hosts[it->second].size()));
    layout.hosts[it->second].push_back(r.rank);
  }
  return layout;
}

bool HostLayout::suits_hierarchy() const {
  if (hosts.size() < 2 || hosts[0].size() < 2) return false;
  for (const auto& h : hosts) {
    if (h.size() != hosts[0].size()) return false;
  }
  return true;
}

std::string HierTransport::segment_name(const RankTable& table, const HostLayout& layout, int32_t host,
                                        const HostRootInfo& info, const std::string& comm_domain) {
  // Simulated hosts (network namespaces) may share /dev/shm: the host number keeps names apart.
  const int32_t leader = layout.hosts[host][0];
  return shm_segment_name(table.ranks[leader].pid, info.id_hex(8), comm_domain + "-host" + std::to_string(host));
}

size_t HierTransport::segment_bytes(const RankTable& table, const HostLayout& layout, int32_t host) {
  // The staging area is always reserved: the root's go may say staging (forced, or cross-memory
  // attach refused on some host) after the segments exist; tmpfs commits pages only when touched.
  return ShmTransport::segment_bytes(static_cast<int32_t>(layout.hosts[host].size()), true, table.staging_chunk);
}

HierTransport::Setup HierTransport::set_up(const RankTable& table, int32_t rank, uint32_t flags, int listener,
                                           const HostRootInfo& info, const std::string& comm_domain,
                                           const Deadline& deadline, int cancel_fd, AbortSignal& abort) {
  const HostLayout layout = HostLayout::of(table.ranks);
  const int32_t host = layout.host_of[rank];
  const int32_t local = layout.local_index[rank];
  const auto& mine = layout.hosts[host];
  const int32_t host_size = static_cast<int32_t>(mine.size());
  const std::string name = segment_name(table, layout, host, info, comm_domain);
  const size_t bytes = segment_bytes(table, layout, host);
  Setup setup;
  if (local == 0) {
    setup.segment = ShmSegment::create(name, bytes);  // unlinked by its destructor on any failure
    ShmTransport::format(setup.segment.data(), host_size, table.staging_chunk);
  } else {
    // The host's lowest rank creates the segment at the same time: wait until it is formatted.
    std::string last;
    for (;;) {
      try {
        ShmSegment segment = ShmSegment::open(name, bytes);
        ShmTransport::check_format(segment.data(), host_size, table.staging_chunk);
        setup.segment = std::move(segment);
        break;
      } catch (const Error& e) {
        last = e.what();
      }
      if (deadline.expired()) {
        throw_error(NPG_TIMEOUT, "timed out after " + std::to_string(deadline.budget_ms()) + " ms waiting for rank " +
                                     std::to_string(mine[0]) + " to create its host's shared memory (" + last + ")");
      }
      pollfd p{cancel_fd, POLLIN, 0};
      int rc = poll(&p, cancel_fd >= 0 ? 1 : 0, 1);
      if (rc < 0 && errno != EINTR) throw_system_error("poll", errno);
      if (rc > 0) {
        setup.interrupted = true;
        return setup;
      }
    }
  }
  setup.cma_ok = same_process(table, mine);
  if (!setup.cma_ok) {
    setup.cma_ok = true;
    for (int32_t r : mine) {
      const RankInfo& peer = table.ranks[r];
      if (r != rank && !cma_probe(peer.pid, peer.canary_addr, peer.canary_value)) setup.cma_ok = false;
    }
  }
  const int32_t hosts = static_cast<int32_t>(layout.hosts.size());
  std::vector<Endpoint> column;  // the endpoints of this rank's ring, by host
  for (const auto& h : layout.hosts) column.push_back(table.ranks[h[local]].ring);
  setup.ring = FlatTcp::connect(host, hosts, flags, listener, column, info, deadline, cancel_fd, abort);
  setup.interrupted = setup.ring == nullptr;
  return setup;
}

HierTransport::HierTransport(Setup setup, const RankTable& table, int32_t rank, TransportKind go, AbortSignal& abort)
    : layout_(HostLayout::of(table.ranks)),
      host_(layout_.host_of[rank]),
      local_(layout_.local_index[rank]),
      ring_(std::move(setup.ring)) {
  for (const auto& h : layout_.hosts) ring_ranks_.push_back(h[local_]);
  const auto& mine = layout_.hosts[host_];
  std::vector<int32_t> pids;
  for (int32_t r : mine) pids.push_back(table.ranks[r].pid);
  ShmTransport::Mode mode = go == TransportKind::kHierStaging ? ShmTransport::Mode::kStaging
                            : same_process(table, mine)       ? ShmTransport::Mode::kThreads
                                                              : ShmTransport::Mode::kCma;
  shm_.reset(new ShmTransport(std::move(setup.segment), mode, local_, static_cast<int32_t>(mine.size()),
                              table.staging_chunk, pids, abort));
  name_ = std::string("tcp-hier+") + shm_->name();
  // This host's ranks all run a ring at once: when they outnumber its CPUs, the spin yields.
  ring_->set_poll_spin(TcpRing::poll_spin_for(static_cast<int32_t>(mine.size())));
}

void HierTransport::rethrow_named(const Error& e, const std::vector<int32_t>& ranks, const std::string& where) const {
  throw_error(e.code(), where + ": " + with_global_ranks(e.what(), ranks));
}

void HierTransport::all_gather_v(const GatherArgs& args, const Deadline& deadline) {
  const int32_t hosts = static_cast<int32_t>(layout_.hosts.size());
  const auto& mine = layout_.hosts[host_];
  const int32_t host_size = static_cast<int32_t>(mine.size());

  // 1. Across hosts: the ranks with this rank's local index all-gather their own blocks,
  // each straight to its place in recv.
  std::vector<uint64_t> counts(static_cast<size_t>(std::max(hosts, host_size)));
  std::vector<uint64_t> displs(counts.size());
  for (int32_t h = 0; h < hosts; ++h) {
    counts[h] = args.counts[ring_ranks_[h]];
    displs[h] = args.displs[ring_ranks_[h]];
  }
  GatherArgs ring = args;
  ring.write_own = false;
  ring.counts = counts.data();
  ring.displs = displs.data();
  ring.rank = host_;
  std::string ring_verdict;
  try {
    ring_->all_gather_v(ring, deadline);
  } catch (const Error& e) {
    if (e.code() != NPG_INVALID_USAGE) {
      rethrow_named(e, ring_ranks_, "across hosts, in the ring of ranks " + rank_list(ring_ranks_));
    }
    // Every member of the ring holds this verdict; the exchange on each host spreads it.
    ring_verdict = with_global_ranks(e.what(), ring_ranks_);
  }

  // 2. On this host: one shared-memory all-gather per host h, in which each rank here
  // contributes the block of h that its ring brought (its own block for this host). The
  // first one also settles the layout verdict: every rank fails it if any rank disagrees,
  // because every ring has a member on every host.
  const std::string local_where = "among the ranks " + rank_list(mine) + " of this host";
  for (int32_t h = 0; h < hosts; ++h) {
    const auto& theirs = layout_.hosts[h];
    for (int32_t i = 0; i < host_size; ++i) {
      counts[i] = args.counts[theirs[i]];
      displs[i] = args.displs[theirs[i]];
    }
    const int32_t origin = theirs[local_];
    npg_segment_t brought{args.recv + args.displs[origin], args.counts[origin]};
    GatherArgs local = args;
    if (h != host_) {
      local.segments = &brought;
      local.segment_count = 1;
      local.write_own = false;
    }
    local.send_bytes = args.counts[origin];
    local.counts = counts.data();
    local.displs = displs.data();
    local.seq = ++local_seq_;
    local.rank = local_;
    if (h == 0 && !ring_verdict.empty()) local.digest = disagreement_digest(args.digest, local_);
    try {
      shm_->all_gather_v(local, deadline);
    } catch (const Error& e) {
      if (e.code() != NPG_INVALID_USAGE) rethrow_named(e, mine, local_where);
      if (!ring_verdict.empty()) {
        throw_error(NPG_INVALID_USAGE,
                    "across hosts, in the ring of ranks " + rank_list(ring_ranks_) + ": " + ring_verdict);
      }
      throw_error(NPG_INVALID_USAGE, "ranks disagree on receive counts: the ranks of this host (" + rank_list(mine) +
                                         ") or of one of the rings across hosts pass different recv_counts");
    }
  }
}

void HierTransport::on_abort() noexcept {
  if (ring_) ring_->on_abort();
  if (shm_) shm_->on_abort();
}

void HierTransport::on_failure() noexcept {
  if (ring_) ring_->on_failure();
  if (shm_) shm_->on_failure();
}

void HierTransport::on_leave() noexcept {
  if (ring_) ring_->on_leave();
  if (shm_) shm_->on_leave();
}

void HierTransport::close() {
  std::string first;
  npg_result_t code = NPG_SUCCESS;
  for (HostTransport* part : {static_cast<HostTransport*>(ring_.get()), static_cast<HostTransport*>(shm_.get())}) {
    if (part == nullptr) continue;
    try {
      part->close();
    } catch (const Error& e) {
      if (first.empty()) {
        code = e.code();
        first = e.what();
      }
    }
  }
  ring_.reset();
  shm_.reset();
  if (!first.empty()) throw_error(code, first);
}

}  // namespace host
}  // namespace npg
