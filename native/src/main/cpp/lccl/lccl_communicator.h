// The lccl backend's communicator: a DeviceCommunicator over one LCCL communicator.
#ifndef NPUGATHER_LCCL_LCCL_COMMUNICATOR_H_
#define NPUGATHER_LCCL_LCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "../cann/device_communicator.h"
#include "../core/backend.h"
#include "lcal_library.h"

namespace npg {
namespace lccl {

// How the LCCL communicator is made: one of the two. Multi-process communicators are always
// domain-based: LCAL's unique-id init cannot work (see lccl_backend.cc).
struct LcclInit {
  enum class Kind { kDomain, kThread };
  Kind kind = Kind::kDomain;
  int domain = 0;  // kDomain: LcalCommInitRankWithCustDomainSize(domain, buffer_mb, ...)
  int buffer_mb = kLcalMinBufferMb;
  std::string uid;  // kThread: LcalCommInitThread's uid, the same on every rank thread
  // kThread: where the uid came from, for messages: comm_domain "X", or the root info.
  std::string uid_origin;
};

// A thread-mode uid serves one communicator per process (ATB never forgets its devices): its
// reuse is NPG_INVALID_USAGE naming it. Blocks in LCAL's init, which only LCAL's own waits bound (clients of the domain
// bootstrap retry their connection for up to 30 minutes; the thread rendezvous waits up to 600 s): config.timeout_ms
// bounds the collectives, not the init.
std::unique_ptr<cann::DeviceCommunicator> create_lccl_communicator(const CommConfig& config, const LcclInit& init);

}  // namespace lccl
}  // namespace npg

#endif  // NPUGATHER_LCCL_LCCL_COMMUNICATOR_H_
