// Bad input is refused with an error that names it, the same on every rank and before any
// rank waits for the deadline: arguments of each call, counts the ranks disagree on, a rank
// root they disagree on, and strangers connecting during init.
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "npugather.h"
#include "support/host_test_support.h"

namespace {

using namespace npgtest;

// Rank `doubter` believes rank 0 sends `doubted` elements instead of 1000.
void expect_mismatch_on_every_rank(uint32_t flags, const char* transport, int n, int doubter, uint64_t doubted = 900) {
  auto info = make_root_info();
  std::vector<std::string> verdicts(n);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags);
    CHECK(std::string(npg_comm_transport(comm)) == transport);
    Layout l = equal_layout(n, 1000);
    if (rank == doubter) {
      l.counts[0] = doubted;
      l.recv_elems = 0;
      for (int r = 0; r < n; ++r) {
        l.displs[r] = l.recv_elems;
        l.recv_elems += l.counts[r];
      }
    }
    std::vector<uint8_t> send(l.counts[rank] * 4), recv(l.recv_elems * 4);
    npg_result_t rc =
        npg_all_gather_v(comm, send.data(), l.counts[rank], recv.data(), l.counts.data(), l.displs.data(), NPG_FLOAT32);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    std::string error = npg_last_error();
    CHECK(contains(error, "ranks disagree on receive counts"));
    CHECK(contains(error, "npg_all_gather_v(rank " + std::to_string(rank) + "/" + std::to_string(n) + ")"));
    verdicts[rank] = error.substr(error.find("ranks disagree"));
    // The verdict is shared, so the communicator stays usable.
    gather_and_verify(comm, rank, n, equal_layout(n, 5000), NPG_FLOAT32, false, false, 3);
    CHECK_OK(npg_comm_destroy(comm));
  });
  for (int r = 1; r < n; ++r) {
    if (verdicts[r] != verdicts[0]) throw TestFailure("rank " + std::to_string(r) + " says '" + verdicts[r] + "'");
  }
}

void test_mismatched_counts_give_invalid_usage_on_every_rank() {
  expect_mismatch_on_every_rank(0, "threads", 3, 2);
  // The ring drops a block whose size its receiver disputes and still forwards its header:
  // the doubter last in the chain, in the middle, and next to the sender.
  for (int doubter : {3, 2, 1}) expect_mismatch_on_every_rank(NPG_FLAG_FORCE_TCP, "tcp", 4, doubter);
}

void test_log_n_mismatched_counts_give_invalid_usage_on_every_rank() {
  const uint32_t flags = NPG_FLAG_FORCE_TCP | NPG_FLAG_FORCE_LOG_N;
  for (int doubter : {4, 2, 1}) expect_mismatch_on_every_rank(flags, "tcp-log-n", 5, doubter);
  // The doubter's output is large (the ring's) while the others' is small (log-N's).
  expect_mismatch_on_every_rank(NPG_FLAG_FORCE_TCP, "tcp", 4, 3, 400000);
}

void test_foreign_and_garbage_connections_during_init_are_dropped() {
  auto info = make_root_info();
  // Root endpoint from the root info: magic(4) version(4) id(16) secret(16) family(2) port(2) addr(16).
  uint16_t port = static_cast<uint16_t>(info[42] | (info[43] << 8));
  auto connect_root = [&]() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    memcpy(&sa.sin_addr, &info[44], 4);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) throw TestFailure("connect failed");
    return fd;
  };
  int garbage = connect_root();
  const char junk[] = "GET / HTTP/1.0\r\n\r\n\xff\xff\xff\xff";
  CHECK(send(garbage, junk, sizeof(junk), 0) > 0);
  int oversized = connect_root();
  uint8_t big[12] = {'N', 'P', 'G', 'F', 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f};
  CHECK(send(oversized, big, sizeof(big), 0) > 0);
  int wrong_secret = connect_root();
  std::vector<uint8_t> hello = {'N', 'P', 'G', 'F', 1, 0, 0, 0, 0, 0, 0, 0};
  std::vector<uint8_t> body = {1, 0, 0, 0};
  body.insert(body.end(), info.begin() + 8, info.begin() + 24);                            // the right id
  for (int i = 0; i < 16; ++i) body.push_back(static_cast<uint8_t>(info[24 + i] ^ 0x5a));  // a wrong secret
  body.resize(body.size() + 100, 0);
  hello[8] = static_cast<uint8_t>(body.size());
  hello.insert(hello.end(), body.begin(), body.end());
  CHECK(send(wrong_secret, hello.data(), hello.size(), 0) > 0);
  int silent = connect_root();  // connects and never speaks: costs at most the per-connection limit
  auto t0 = Clock::now();
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, 0, 10000);
    gather_and_verify(comm, rank, 2, equal_layout(2, 999), NPG_INT8, false, false, 1);
    CHECK_OK(npg_comm_destroy(comm));
  });
  CHECK(ms_since(t0) < 5000);
  close(garbage);
  close(oversized);
  close(wrong_secret);
  close(silent);
}

void test_inconsistent_rank_size_fails_init_on_every_rank() {
  auto info = make_root_info();
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = nullptr;
    int size = rank == 0 ? 2 : 3;
    npg_result_t rc =
        npg_comm_init("host", rank, size, 0, "", 0, -1, nullptr, 5000, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(contains(npg_last_error(), "rank_size"));
  });
}

void test_argument_errors_name_the_argument() {
  std::vector<uint8_t> buf(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  expect_arg_error(npg_get_root_info("nccl", nullptr, buf.data(), buf.size(), &size), NPG_INVALID_ARGUMENT,
                   "backend 'nccl'");
  expect_arg_error(npg_get_root_info("host", "127.0.0.1", buf.data(), 8, &size), NPG_INVALID_ARGUMENT, "capacity");
  expect_arg_error(npg_advise_huge_pages(nullptr, 5), NPG_INVALID_ARGUMENT, "address is NULL but bytes is 5");
  CHECK_OK(npg_advise_huge_pages(nullptr, 0));
  CHECK_OK(npg_advise_huge_pages(buf.data(), buf.size()));  // under 4 MiB: left alone
  expect_arg_error(npg_get_root_info("host", "not an address!", buf.data(), buf.size(), &size), NPG_INVALID_ARGUMENT,
                   "bind_address");
  auto info = make_root_info();
  npg_comm_t comm = nullptr;
  auto init = [&](const char* backend, int rank, int n, int root, const char* domain, int64_t timeout, const void* ri,
                  size_t ri_size) {
    return npg_comm_init(backend, rank, n, root, domain, 0, -1, nullptr, timeout, 0, ri, ri_size, &comm);
  };
  expect_arg_error(init("lccl", 0, 1, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT,
                   "backend lccl needs a device id");
  expect_arg_error(init("host", 0, 0, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank_size 0");
  expect_arg_error(init("host", 2, 2, 0, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank 2");
  expect_arg_error(init("host", 0, 2, 5, "", 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT, "rank_root 5");
  expect_arg_error(init("host", 0, 1, 0, "", 0, info.data(), info.size()), NPG_INVALID_ARGUMENT, "timeout_ms 0");
  std::string long_domain(200, 'd');
  expect_arg_error(init("host", 0, 1, 0, long_domain.c_str(), 1000, info.data(), info.size()), NPG_INVALID_ARGUMENT,
                   "comm_domain");
  expect_arg_error(init("host", 0, 1, 0, "", 1000, info.data(), 7), NPG_INVALID_ARGUMENT, "root_info_size 7");
  std::vector<uint8_t> bad = info;
  bad[0] = 'X';
  expect_arg_error(init("host", 0, 1, 0, "", 1000, bad.data(), bad.size()), NPG_INVALID_ARGUMENT, "root_info");
  std::vector<uint8_t> foreign = info;
  foreign[10] ^= 1;  // an id this process never created
  expect_arg_error(init("host", 0, 1, 0, "", 1000, foreign.data(), foreign.size()), NPG_INVALID_USAGE,
                   "not created in this process");
  CHECK(comm == nullptr);
  CHECK_OK(init("host", 0, 1, 0, "", 1000, info.data(), info.size()));
  CHECK(std::string(npg_last_error()).empty());
  CHECK(std::string(npg_comm_transport(comm)) == "self");
  npg_comm_t kept = comm;
  expect_arg_error(init("host", 0, 1, 0, "", 1000, info.data(), info.size()), NPG_INVALID_USAGE,
                   "not created in this process");  // its listener was consumed by the first init
  CHECK(comm == nullptr);
  comm = kept;
  std::vector<uint8_t> send(16), recv(16);
  expect_arg_error(npg_all_gather(comm, send.data(), recv.data(), 4, static_cast<npg_dtype_t>(9)), NPG_INVALID_ARGUMENT,
                   "dtype 9");
  expect_arg_error(npg_all_gather(comm, nullptr, recv.data(), 4, NPG_INT32), NPG_INVALID_ARGUMENT, "send is NULL");
  expect_arg_error(npg_all_gather(comm, send.data(), nullptr, 4, NPG_INT32), NPG_INVALID_ARGUMENT, "recv is NULL");
  expect_arg_error(npg_all_gather(comm, send.data(), recv.data(), UINT64_MAX / 2, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "overflows");
  uint64_t counts[1] = {4};
  uint64_t displs[1] = {0};
  expect_arg_error(npg_all_gather_v(comm, send.data(), 3, recv.data(), counts, displs, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "send_count 3");
  expect_arg_error(npg_all_gather_v(comm, send.data(), 4, recv.data(), nullptr, displs, NPG_INT32),
                   NPG_INVALID_ARGUMENT, "recv_counts");
  expect_arg_error(npg_all_gather(nullptr, send.data(), recv.data(), 4, NPG_INT32), NPG_INVALID_ARGUMENT,
                   "comm is NULL");
  // One rank has nobody to tell: its own error, at once.
  expect_arg_error(npg_comm_reject(comm, "send: my reason"), NPG_INVALID_ARGUMENT, "send: my reason");
  expect_arg_error(npg_comm_reject(comm, nullptr), NPG_INVALID_ARGUMENT, "reason is NULL");
  CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), 4, NPG_INT32));
  CHECK(std::string(npg_last_error()).empty());
  CHECK_OK(npg_comm_destroy(comm));
  expect_arg_error(npg_comm_destroy(nullptr), NPG_INVALID_ARGUMENT, "comm is NULL");
  // Overlapping receive blocks are rejected before any communication.
  auto info2 = make_root_info();
  run_ranks(2, [&](int rank) {
    npg_comm_t c = init_rank(rank, 2, info2);
    uint64_t cnt[2] = {8, 8};
    uint64_t dsp[2] = {0, 4};
    std::vector<uint8_t> s(8), r(64);
    // Both ranks reject, tell each other, and fail with one verdict naming both.
    expect_arg_error(npg_all_gather_v(c, s.data(), 8, r.data(), cnt, dsp, NPG_UINT8), NPG_INVALID_USAGE,
                     "rank 0 rejected its arguments: recv_displs[1] = 4 makes rank 1's block overlap");
    CHECK(contains(npg_last_error(), "; rank 1 rejected its arguments: recv_displs[1] = 4"));
    CHECK(contains(npg_last_error(), "npg_all_gather_v(rank " + std::to_string(rank) + "/2)"));
    CHECK_OK(npg_comm_destroy(c));
  });
  CHECK(npg_dtype_size(NPG_BFLOAT16) == 2 && npg_dtype_size(NPG_INT64) == 8 &&
        npg_dtype_size(static_cast<npg_dtype_t>(6)) == 0);
  CHECK(std::string(npg_result_name(NPG_TIMEOUT)) == "NPG_TIMEOUT");
}

// Rank 1 passes a bad argument to one of the collectives, the others good ones: every rank
// fails at once with the same INVALID_USAGE naming rank 1 and its error, and the
// communicator still works afterwards.
void expect_local_rejection_reaches_every_rank(int n, uint32_t flags) {
  const int64_t timeout = 30000;
  auto info = make_root_info();
  std::mutex mutex;
  std::vector<std::string> errors(n * 3);
  run_ranks(n, [&](int rank) {
    npg_comm_t comm = init_rank(rank, n, info, flags, timeout);
    std::vector<uint8_t> send(64, static_cast<uint8_t>(rank)), recv(64 * n);
    std::vector<uint64_t> counts(n, 64), displs(n);
    for (int r = 0; r < n; ++r) displs[r] = 64 * r;
    for (int call = 0; call < 3; ++call) {
      const bool bad = rank == 1;
      auto t0 = Clock::now();
      npg_result_t rc;
      if (call == 0) {
        rc = npg_all_gather(comm, send.data(), recv.data(), 64, bad ? static_cast<npg_dtype_t>(99) : NPG_UINT8);
      } else if (call == 1) {
        rc = npg_all_gather_v(comm, send.data(), bad ? 63 : 64, recv.data(), counts.data(), displs.data(), NPG_UINT8);
      } else {
        npg_segment_t seg{bad ? nullptr : send.data(), 64};
        rc = npg_all_gather_v_segments(comm, &seg, 1, recv.data(), counts.data(), displs.data());
      }
      CHECK_RC(rc, NPG_INVALID_USAGE);
      CHECK(ms_since(t0) < timeout / 3);
      std::lock_guard<std::mutex> lock(mutex);
      errors[call * n + rank] = without_context(npg_last_error());
    }
    CHECK_OK(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8));
    for (int r = 0; r < n; ++r) CHECK(recv[64 * r] == r && recv[64 * r + 63] == r);
    CHECK_OK(npg_comm_destroy(comm));
  });
  const char* expected[3] = {"rank 1 rejected its arguments: dtype 99 is not a known dtype; allowed values: 0 (int8)",
                             "rank 1 rejected its arguments: send_count 63 must equal recv_counts[1] = 64",
                             "rank 1 rejected its arguments: send_segments[0].address is NULL but its bytes is 64"};
  for (int call = 0; call < 3; ++call) {
    for (int r = 0; r < n; ++r) {
      if (errors[call * n + r] != errors[call * n] || !contains(errors[call * n], expected[call]) ||
          !contains(errors[call * n], "; no rank gathered anything")) {
        throw TestFailure("flags " + std::to_string(flags) + ", rank " + std::to_string(r) + ": '" +
                          errors[call * n + r] + "' vs rank 0's '" + errors[call * n] + "'");
      }
    }
  }
}

void test_a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error() {
  expect_local_rejection_reaches_every_rank(3, 0);
  expect_local_rejection_reaches_every_rank(3, NPG_FLAG_FORCE_TCP);
  expect_local_rejection_reaches_every_rank(2, NPG_FLAG_FORCE_STAGING);
  // Processes (cross-memory attach or staging): rank 1 passes dtype 99.
  const int n = 3;
  const int64_t timeout = 30000;
  ProcShared* shared = map_shared();
  auto pids = fork_ranks(
      n, shared,
      [&](int r, npg_comm_t comm) {
        std::vector<uint8_t> send(64), recv(64 * n);
        auto t0 = Clock::now();
        shared->rc[r] =
            npg_all_gather(comm, send.data(), recv.data(), 64, r == 1 ? static_cast<npg_dtype_t>(99) : NPG_UINT8);
        shared->elapsed_ms[r] = ms_since(t0);
        snprintf(shared->error[r], sizeof(shared->error[r]), "%s", without_context(npg_last_error()).c_str());
        return 0;
      },
      0, timeout);
  auto codes = wait_children(pids, 2.0 * timeout);
  std::string report = child_report(shared, codes);
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    ok = ok && codes[r] == 0 && shared->rc[r] == NPG_INVALID_USAGE && shared->elapsed_ms[r] < timeout / 3 &&
         std::string(shared->error[r]) == shared->error[0] &&
         contains(shared->error[r], "rank 1 rejected its arguments: dtype 99 is not a known dtype");
  }
  munmap(shared, sizeof(ProcShared));
  if (!ok) throw TestFailure("processes:" + report);
}

void test_rank_root_mismatch_fails_every_rank_at_once_with_the_same_error() {
  // Rank 1 claims to be the root: it cannot take the root's listener, so it joins the real
  // root, which refuses its rank_root. Threads (either may take the listener first) and
  // processes; the timeout is long, the failure must not wait for it.
  const int64_t timeout = 30000;
  auto info = make_root_info();
  std::mutex mutex;
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    npg_result_t rc =
        npg_comm_init("host", rank, 2, rank, "", 0, -1, nullptr, timeout, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(ms_since(t0) < timeout / 3);
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = without_context(npg_last_error());
  });
  if (errors[0] != errors[1]) throw TestFailure("threads: '" + errors[0] + "' and '" + errors[1] + "'");
  if (!contains(errors[0], "passed rank_root 1 but root rank 0 passed rank_root 0") &&
      !contains(errors[0], "passed rank_root 0 but root rank 1 passed rank_root 1")) {
    throw TestFailure("threads: " + errors[0]);
  }
  make_root_info();  // nothing was left parked

  ProcShared* shared = map_shared();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pids.push_back(fork_child([&, r] {
      if (r == 0) {
        size_t size = 0;
        if (npg_get_root_info("host", "127.0.0.1", shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) return 91;
        shared->info_size = size;
        shared->info_ready.store(1);
      }
      while (shared->info_ready.load() == 0) usleep(1000);
      npg_comm_t comm = nullptr;
      auto t0 = Clock::now();
      shared->rc[r] = npg_comm_init("host", r, 2, r, "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout, 0,
                                    shared->info, shared->info_size, &comm);
      shared->elapsed_ms[r] = ms_since(t0);
      snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
      return 0;
    }));
  }
  auto codes = wait_children(pids, 2.0 * timeout);
  std::string report = child_report(shared, codes);
  bool same = without_context(shared->error[0]) == without_context(shared->error[1]);
  bool named = contains(shared->error[0], "rank 1 (pid ") &&
               contains(shared->error[0], "passed rank_root 1 but root rank 0 passed rank_root 0");
  bool fast = shared->elapsed_ms[0] < timeout / 3 && shared->elapsed_ms[1] < timeout / 3;
  bool usage = shared->rc[0] == NPG_INVALID_USAGE && shared->rc[1] == NPG_INVALID_USAGE;
  munmap(shared, sizeof(ProcShared));
  if (codes[0] != 0 || codes[1] != 0 || !same || !named || !fast || !usage) {
    throw TestFailure("processes:" + report);
  }
}

// Forks one process per rank, rank r passing rank_root roots[r]; maker's process makes the
// root info on the thread that then inits; late ranks wait until the others returned. Every
// child stays until all returned, so that what a failed rank left serving can still answer.
// Returns "" when every rank failed with NPG_INVALID_USAGE well within the timeout, else what
// went wrong; errors gets every rank's error text.
std::string run_rank_root_processes(const std::vector<int>& roots, int maker, const std::vector<bool>& late,
                                    int64_t timeout, std::vector<std::string>* errors) {
  const int n = static_cast<int>(roots.size());
  ProcShared* shared = map_shared();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(fork_child([&, r] {
      if (r == maker) {
        size_t size = 0;
        if (npg_get_root_info("host", "127.0.0.1", shared->info, sizeof(shared->info), &size) != NPG_SUCCESS) return 91;
        shared->info_size = size;
        shared->info_ready.store(1);
      }
      while (shared->info_ready.load() == 0) usleep(1000);
      if (late[r]) {
        while (shared->inited.load() < n - 1) usleep(1000);
        usleep(100 * 1000);  // the root has refused the others by now
      }
      npg_comm_t comm = nullptr;
      auto t0 = Clock::now();
      shared->rc[r] = npg_comm_init("host", r, n, roots[r], "proc", NPG_COMM_MULTI_PROCESS, -1, nullptr, timeout, 0,
                                    shared->info, shared->info_size, &comm);
      shared->elapsed_ms[r] = ms_since(t0);
      snprintf(shared->error[r], sizeof(shared->error[r]), "%s", npg_last_error());
      shared->inited.fetch_add(1);
      while (shared->inited.load() < n) usleep(1000);
      return 0;
    }));
  }
  auto codes = wait_children(pids, 2.0 * timeout);
  std::string problems;
  for (int r = 0; r < n; ++r) {
    errors->push_back(without_context(shared->error[r]));
    if (codes[r] != 0 || shared->rc[r] != NPG_INVALID_USAGE || shared->elapsed_ms[r] >= timeout / 3) {
      problems += " rank " + std::to_string(r) + " exited " + std::to_string(codes[r]) + " with rc " +
                  std::to_string(shared->rc[r]) + " after " + std::to_string(shared->elapsed_ms[r]) + " ms;";
    }
  }
  if (!problems.empty()) problems += child_report(shared, codes);
  munmap(shared, sizeof(ProcShared));
  return problems;
}

void expect_one_verdict(const std::string& where, const std::vector<std::string>& errors, const std::string& problems,
                        const std::vector<std::string>& words) {
  bool ok = problems.empty();
  for (const std::string& e : errors) ok = ok && e == errors[0];
  for (const std::string& w : words) ok = ok && contains(errors[0], w);
  if (!ok) {
    std::string all;
    for (const std::string& e : errors) all += " '" + e + "'";
    throw TestFailure(where + ":" + problems + all);
  }
}

void test_a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once() {
  // Rank 0 makes the root info (the root's job) but passes rank_root 1; rank 1 passes rank_root
  // 0. Nobody is the root by its arguments: rank 0 serves the listener in the root's place and
  // refuses the first rank that joins, naming both values, on every rank. The timeout is long;
  // the failure must not wait for it.
  const int64_t timeout = 30000;
  std::vector<uint8_t> info;
  std::atomic<int> ready{0};
  std::mutex mutex;
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    if (rank == 0) {
      info = make_root_info();
      ready.store(1);
    }
    while (ready.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    npg_result_t rc =
        npg_comm_init("host", rank, 2, 1 - rank, "", 0, -1, nullptr, timeout, 0, info.data(), info.size(), &comm);
    CHECK_RC(rc, NPG_INVALID_USAGE);
    CHECK(ms_since(t0) < timeout / 3);
    std::lock_guard<std::mutex> lock(mutex);
    errors[rank] = without_context(npg_last_error());
  });
  if (errors[0] != errors[1] ||
      !contains(errors[0], "rank 1 (pid " + std::to_string(getpid()) + ") passed rank_root 0 but rank 0 (pid ") ||
      !contains(errors[0], "), which made the root info, passed rank_root 1")) {
    throw TestFailure("threads: '" + errors[0] + "' and '" + errors[1] + "'");
  }

  std::vector<std::string> procs;
  std::string problems = run_rank_root_processes({1, 0}, 0, {false, false}, timeout, &procs);
  expect_one_verdict(
      "processes", procs, problems,
      {"rank 1 (pid ", ") passed rank_root 0 but rank 0 (pid ", "), which made the root info, passed rank_root 1"});
  // Three ranks, three roots: rank 1 names itself (and joins rank 0 to say so), rank 2 names
  // rank 0, rank 0 made the root info and names rank 2.
  procs.clear();
  problems = run_rank_root_processes({2, 1, 0}, 0, {false, false, false}, timeout, &procs);
  expect_one_verdict("processes 2, 1, 0", procs, problems,
                     {"), which made the root info, passed rank_root 2", "passed rank_root "});
}

void test_a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict() {
  // Rank 2 passes rank_root 1, so root rank 0 refuses the init; rank 1, which agrees with the
  // root, comes only after that: the root's listener tells it the verdict at once instead of
  // refusing its connection until its timeout.
  const int64_t timeout = 30000;
  std::vector<std::string> procs;
  std::string problems = run_rank_root_processes({0, 0, 1}, 0, {false, true, false}, timeout, &procs);
  expect_one_verdict("processes, rank 1 late", procs, problems,
                     {"rank 2 (pid ", ") passed rank_root 1 but root rank 0 passed rank_root 0"});
  // A late rank that names itself the root joins the root to say so, and hears the verdict too.
  procs.clear();
  problems = run_rank_root_processes({0, 0, 2}, 0, {false, true, false}, timeout, &procs);
  expect_one_verdict("processes, rank 1 late, rank 2 claims the root", procs, problems,
                     {"rank 2 (pid ", ") passed rank_root 2 but root rank 0 passed rank_root 0"});
  procs.clear();
  problems = run_rank_root_processes({0, 1, 0}, 0, {false, false, true}, timeout, &procs);
  expect_one_verdict("processes, rank 2 late", procs, problems,
                     {"rank 1 (pid ", ") passed rank_root 1 but root rank 0 passed rank_root 0"});
}

const TestCase kTests[] = {
    {"mismatched_counts_give_invalid_usage_on_every_rank", test_mismatched_counts_give_invalid_usage_on_every_rank},
    {"log_n_mismatched_counts_give_invalid_usage_on_every_rank",
     test_log_n_mismatched_counts_give_invalid_usage_on_every_rank},
    {"foreign_and_garbage_connections_during_init_are_dropped",
     test_foreign_and_garbage_connections_during_init_are_dropped},
    {"inconsistent_rank_size_fails_init_on_every_rank", test_inconsistent_rank_size_fails_init_on_every_rank},
    {"argument_errors_name_the_argument", test_argument_errors_name_the_argument},
    {"a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error",
     test_a_rank_rejecting_its_arguments_fails_every_rank_at_once_with_the_same_error},
    {"rank_root_mismatch_fails_every_rank_at_once_with_the_same_error",
     test_rank_root_mismatch_fails_every_rank_at_once_with_the_same_error},
    {"a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once",
     test_a_rank_that_made_the_root_info_but_names_another_root_fails_every_rank_at_once},
    {"a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict",
     test_a_rank_that_comes_after_the_root_refused_the_others_gets_the_same_verdict},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
