// The HCCL rank table file (cluster info JSON, versions 1.0 and 1.2), checked before it
// reaches HcclCommInitClusterInfo so that a bad file fails with a clear message.
#ifndef NPUGATHER_HCCL_RANK_TABLE_H_
#define NPUGATHER_HCCL_RANK_TABLE_H_

#include <stdint.h>

#include <string>
#include <vector>

namespace npg {
namespace hccl {

struct RankTableDevice {
  int32_t rank_id = -1;
  std::string device_id;
  std::string server_id;
  int32_t server_index = -1;  // in server_list
};

struct RankTableFile {
  std::string path;  // canonical (realpath)
  std::string version;
  std::vector<std::string> server_ids;   // in server_list order
  std::vector<RankTableDevice> devices;  // indexed by rank_id
};

// Parses text (the content of path) and checks what HCCL's parser of versions 1.0 and 1.2
// (HCOMM's TopoinfoRanktableConcise) requires: version "1.0" or "1.2", status "completed", a
// non-empty server_list whose entries each have a unique server_id of 1 to 64 characters and a
// non-empty device list with device_id and rank_id, both decimal integers in JSON strings (a
// number is refused, as HCCL refuses it); server_count optional, and when present a string equal
// to the number of servers; rank ids exactly 0..rank_size-1 without duplicates (so `rank` is
// present), a contiguous range of them per server (no interleaving). Throws NPG_INVALID_ARGUMENT
// naming the file and the field.
RankTableFile parse_rank_table(const std::string& path, const std::string& text, int32_t rank, int32_t rank_size);

// Checks that the table's device_id of rank is device_id, the device the rank binds (mapped to
// the physical id through ASCEND_RT_VISIBLE_DEVICES when that is set). Throws as above.
void check_rank_device(const RankTableFile& table, int32_t rank, int32_t device_id);

// Reads the file (realpath first) and parses it as above.
RankTableFile load_rank_table(const std::string& path, int32_t rank, int32_t rank_size);

}  // namespace hccl
}  // namespace npg

#endif  // NPUGATHER_HCCL_RANK_TABLE_H_
