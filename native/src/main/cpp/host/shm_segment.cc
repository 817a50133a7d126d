#include "shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/error.h"
#include "socket_util.h"

namespace npg {
namespace host {
namespace {

std::string sanitize(const std::string& s, size_t max_len) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (ok) out += c;
    if (out.size() >= max_len) break;
  }
  return out;
}

uint8_t* map_fd(int fd, size_t size, const std::string& name) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_system_error("mmap of shared memory " + name, errno);
  return static_cast<uint8_t*>(p);
}

}  // namespace

std::string shm_segment_name(pid_t creator, const std::string& id_hex16, const std::string& comm_domain) {
  std::string domain = sanitize(comm_domain, 128);
  if (domain.empty()) domain = "default";
  const char* env = getenv("ATB_SHARE_MEMORY_NAME_SUFFIX");
  std::string suffix = sanitize(env ? env : "", 64);
  return "/npugather." + std::to_string(creator) + "." + id_hex16 + "." + domain + "." + suffix;
}

ShmSegment ShmSegment::create(const std::string& name, size_t size) {
  UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throw_system_error("shm_open(O_CREAT|O_EXCL) of " + name, errno);
  ShmSegment seg;
  seg.name_ = name;
  seg.linked_ = true;  // from here on the destructor unlinks on any failure
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    throw_system_error("ftruncate of shared memory " + name + " to " + std::to_string(size) + " bytes", errno);
  }
  seg.base_ = map_fd(fd.get(), size, name);
  seg.size_ = size;
  return seg;
}

ShmSegment ShmSegment::open(const std::string& name, size_t size) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throw_system_error("shm_open of " + name, errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) throw_system_error("fstat of shared memory " + name, errno);
  if (static_cast<uint64_t>(st.st_size) < size) {
    throw_error(NPG_REMOTE_ERROR, "shared memory " + name + " has " + std::to_string(st.st_size) + " bytes, expected " +
                                      std::to_string(size));
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.base_ = map_fd(fd.get(), size, name);
  seg.size_ = size;
  return seg;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    close();
    name_ = std::move(other.name_);
    base_ = other.base_;
    size_ = other.size_;
    linked_ = other.linked_;
    other.base_ = nullptr;
    other.size_ = 0;
    other.linked_ = false;
  }
  return *this;
}

int ShmSegment::unlink() noexcept {
  if (!linked_) return 0;
  linked_ = false;
  return shm_unlink(name_.c_str()) == 0 || errno == ENOENT ? 0 : errno;
}

int ShmSegment::close() noexcept {
  int err = unlink();
  if (base_ != nullptr) {
    if (munmap(base_, size_) != 0 && err == 0) err = errno;
    base_ = nullptr;
    size_ = 0;
  }
  return err;
}

}  // namespace host
}  // namespace npg
