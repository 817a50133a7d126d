// A POSIX shared-memory segment mapped into this process.
#ifndef NPUGATHER_HOST_SHM_SEGMENT_H_
#define NPUGATHER_HOST_SHM_SEGMENT_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <string>

namespace npg {
namespace host {

// "/npugather.<creatorPid>.<commIdHex16>.<domain>.<suffix>": domain and suffix keep only
// [A-Za-z0-9_-]; an empty domain becomes "default"; an empty suffix leaves the name ending
// in "." so the five dot-separated fields are always present for the cleanup command.
std::string shm_segment_name(pid_t creator, const std::string& id_hex16, const std::string& comm_domain);

class ShmSegment {
 public:
  ShmSegment() = default;
  // O_CREAT|O_EXCL, mode 0600; stays linked until unlink() or destruction.
  static ShmSegment create(const std::string& name, size_t size);
  // Attaches an existing segment of at least size bytes.
  static ShmSegment open(const std::string& name, size_t size);
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment() { close(); }

  uint8_t* data() const { return base_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (creator only); returns errno or 0.
  int unlink() noexcept;
  // Unlinks if still linked, unmaps; returns the first errno or 0.
  int close() noexcept;

 private:
  std::string name_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;
};

}  // namespace host
}  // namespace npg

#endif  // NPUGATHER_HOST_SHM_SEGMENT_H_
