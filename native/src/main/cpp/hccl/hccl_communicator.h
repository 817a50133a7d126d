// The hccl backend's communicator: a DeviceCommunicator over one HcclComm.
#ifndef NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_
#define NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "../cann/device_communicator.h"
#include "../core/backend.h"
#include "hccl_library.h"
#include "hccl_timeouts.h"

namespace npg {
namespace hccl {

// root_info is HCCL's own 4108 bytes and root_timeouts the HCCL timeouts the root's process
// latched (every rank must run with them); both unused (root_info may be null) when
// rank_table_path (a checked, canonical path) is not empty: then the timeouts come from
// config.timeout_ms.
// Blocks in HcclCommInitRootInfo/HcclCommInitClusterInfo, which only HCCL_CONNECT_TIMEOUT
// bounds (at least 120 s + 20 s, so a shorter config.timeout_ms cannot cut one attempt
// short). With a rank table, retries HCCL_E_AGAIN/HCCL_E_UNAVAIL/EJ0001 with back-off until
// config.timeout_ms elapses; with a root info, which one attempt consumes, fails at once.
std::unique_ptr<cann::DeviceCommunicator> create_hccl_communicator(const CommConfig& config,
                                                                   const HcclRootInfo* root_info,
                                                                   const HcclTimeouts& root_timeouts,
                                                                   const std::string& rank_table_path);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_HCCL_COMMUNICATOR_H_
