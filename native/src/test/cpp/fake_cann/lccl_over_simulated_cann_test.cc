// Tests of the lccl backend's binding through the C ABI, over the simulated CANN runtime in
// this folder (libascendcl.so and liblcal.so on host memory; no NPU is involved: this proves
// the dlopen/dlsym binding, the three ways LCCL makes a communicator, the staging, the error
// mapping and the fault handling, never anything about NPU hardware).
//
// Usage: lccl_over_simulated_cann_test SUITE [FILTER]
//   full     NPUGATHER_CANN_LIB_DIR holds the simulated libascendcl.so, libhccl.so and liblcal.so
//   no-lcal  NPUGATHER_CANN_LIB_DIR holds libascendcl.so only
// The last line of output is "N passed, N failed".
#include <array>

#include "simulated_cann_test_support.h"

namespace {

std::vector<uint8_t> lccl_root_info(const char* bind = nullptr) {
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_RC(npg_get_root_info("lccl", bind, info.data(), info.size(), &size), NPG_SUCCESS);
  info.resize(size);
  return info;
}

npg_comm_t join(int rank, int n, const std::vector<uint8_t>& info, const std::string& domain = "",
                int32_t mode = NPG_COMM_MULTI_THREAD, int64_t timeout_ms = 20000) {
  npg_comm_t comm = nullptr;
  CHECK_RC(npg_comm_init("lccl", rank, n, 0, domain.c_str(), mode, rank, nullptr, timeout_ms, 0,
                         info.empty() ? nullptr : info.data(), info.size(), &comm),
           NPG_SUCCESS);
  CHECK(std::string(npg_comm_transport(comm)) == "lccl");
  return comm;
}

// A domain id of this test run: LCCL domains are host-wide, like LCCL's bootstrap port.
std::string run_domain(int k, const std::string& size_mb = "") {
  return std::to_string(30000 + (getpid() * 7 + k) % 20000) + (size_mb.empty() ? "" : ":" + size_mb);
}

void gather_matrix(npg_comm_t comm, int r, int n, uint64_t seed) {
  gather_checked(comm, r, n, equal_layout(n, 4099), NPG_INT32, false, seed);
  gather_checked(comm, r, n, equal_layout(n, 70000), NPG_BFLOAT16, false, seed + 1);
  gather_checked(comm, r, n, equal_layout(n, 777), NPG_INT64, false, seed + 2, /*in_place=*/true);
  gather_checked(comm, r, n, ragged_blocks(n, seed + 3), NPG_UINT8, true, seed + 4);  // padded: no all-gather-v
  gather_checked(comm, r, n, ragged_blocks(n, seed + 5), NPG_FLOAT32, true, seed + 6);
  gather_checked(comm, r, n, equal_layout(n, 0), NPG_INT8, true, seed + 7);
}

// ---- tests ----

void test_thread_ranks_of_one_root_info_gather_every_byte() {
  for (int n = 2; n <= 4; ++n) {
    auto info = lccl_root_info();
    run_ranks(n, [&](int r) {
      npg_comm_t comm = join(r, n, info);
      gather_matrix(comm, r, n, 10 * n);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  expect_nothing_leaked();
}

void test_thread_ranks_meet_on_the_comm_domain_as_uid() {
  const int n = 3;
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, {}, "threads-" + std::to_string(getpid()));
    gather_matrix(comm, r, n, 100);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// ATB's thread mode remembers a uid's devices for the life of the process (LcalComm::GetDevThread
// never forgets them): a second communicator with the uid, here on other devices, would pair its
// ranks with the first one's devices. The backend refuses the reuse on every rank, naming the uid
// and what to do, for a comm_domain and for a root info used twice; a fresh uid works.
void test_thread_uid_serves_one_communicator_per_process() {
  const int n = 2;
  const std::string uid = "reused-" + std::to_string(getpid());
  auto info = lccl_root_info();
  auto init = [&](int r, int device, const std::string& domain, const std::vector<uint8_t>& root, npg_comm_t* comm) {
    return npg_comm_init("lccl", r, n, 0, domain.c_str(), NPG_COMM_MULTI_THREAD, device, nullptr, 20000, 0,
                         root.empty() ? nullptr : root.data(), root.size(), comm);
  };
  for (const std::string& domain : {uid, std::string()}) {
    const std::vector<uint8_t> root = domain.empty() ? info : std::vector<uint8_t>();
    run_ranks(n, [&](int r) {
      npg_comm_t comm = nullptr;
      CHECK_RC(init(r, r, domain, root, &comm), NPG_SUCCESS);
      gather_checked(comm, r, n, equal_layout(n, 3000), NPG_UINT8, false, 800);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
    run_ranks(n, [&](int r) {  // the same uid again, on devices 2 and 3
      npg_comm_t comm = nullptr;
      CHECK(init(r, r + 2, domain, root, &comm) == NPG_INVALID_USAGE);
      CHECK(comm == nullptr);
      expect_text(npg_last_error(), {domain.empty() ? "the root info (LCCL's thread-mode uid npugather-"
                                                    : "comm_domain \"" + uid + "\" (LCCL's thread-mode uid)",
                                     "was already used by a communicator of 2 ranks in this process",
                                     "give every communicator its own comm_domain"});
      if (r == 0 && !domain.empty()) show("uid reused");
    });
  }
  run_ranks(n, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK_RC(init(r, r + 2, uid + "-next", {}, &comm), NPG_SUCCESS);
    gather_checked(comm, r, n, ragged_blocks(n, 801), NPG_UINT8, true, 802);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// The simulated LCAL reuses a uid's devices as ATB does: the second communicator's collectives
// fail on the stream (what the backend's refusal above prevents).
void test_simulated_lcal_remembers_a_thread_uids_devices() {
  lccl_root_info();  // loads the libraries
  using InitThread = int (*)(int, int, const char*, void**);
  auto init_thread = fake_symbol<InitThread>("liblcal.so", "LcalCommInitThread");
  auto all_gather = fake_symbol<int (*)(void*, void*, int64_t, int, void*, void*)>("liblcal.so", "LcclAllGather");
  auto destroy = fake_symbol<int (*)(void*)>("liblcal.so", "LcclCommDestroy");
  const AclEntryPoints acl;
  const auto [set_device, reset_device, create_stream, destroy_stream, synchronize, malloc_device, free_device] = acl;
  const std::string uid = "remembered-" + std::to_string(getpid());
  for (int first_device : {0, 4}) {  // the second time on devices 4 and 5
    std::atomic<int> failed{0};
    run_ranks(2, [&](int r) {
      CHECK(set_device(first_device + r) == 0);
      void* comm = nullptr;
      void* stream = nullptr;
      void* buffer = nullptr;
      CHECK(init_thread(r, 2, uid.c_str(), &comm) == 0);  // ATB does not refuse the reuse
      CHECK(create_stream(&stream) == 0 && malloc_device(&buffer, 64, 0) == 0);
      CHECK(all_gather(buffer, static_cast<uint8_t*>(buffer) + 16, 8, 0, comm, stream) == 0);
      const int rc = synchronize(stream);
      CHECK(rc == 0 || rc == 507015);  // ACL_ERROR_RT_AICORE_EXCEPTION
      failed += rc != 0;
      CHECK(destroy(comm) == 0 && destroy_stream(stream) == 0 && free_device(buffer) == 0);
      CHECK(reset_device(first_device + r) == 0);
    });
    CHECK((failed.load() > 0) == (first_device != 0));  // a rank that read its peer's old device fails
  }
  expect_nothing_leaked();
}

// An NPU's memory is finite: gathers larger than the device go through it in rounds of padded
// blocks, within half its free memory.
void test_gathers_larger_than_device_memory_go_through_it_in_rounds() {
  auto info = lccl_root_info();
  expect_gathers_beyond_device_memory(
      3, [&](int r) { return join(r, 3, info); }, kSimulatedDeviceMemory / 2, 600);
}

void test_segmented_sends_deliver_every_block() {
  const int n = 3;
  auto info = lccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info);
    Layout l = ragged_blocks(n, 300);
    std::vector<uint8_t> mine(l.counts[r]);
    fill(mine.data(), mine.size(), 9, r);
    std::vector<npg_segment_t> segs;
    for (uint64_t at = 0; at < mine.size(); at += 1000)
      segs.push_back({mine.data() + at, std::min<uint64_t>(1000, mine.size() - at)});
    std::vector<uint8_t> recv(l.recv_elems, kUntouched);
    CHECK_RC(npg_all_gather_v_segments(comm, segs.data(), segs.size(), recv.data(), l.counts.data(), l.displs.data()),
             NPG_SUCCESS);
    std::vector<uint8_t> expected(l.recv_elems, kUntouched);
    for (int p = 0; p < n; ++p)
      if (p != r) fill(expected.data() + l.displs[p], l.counts[p], 9, p);
    CHECK(recv == expected);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

void test_process_ranks_gather_in_the_domain_of_the_root_info() {
  auto info = lccl_root_info(("domain:" + run_domain(1)).c_str());
  on_processes(3, [&](int r) {
    npg_comm_t comm = join(r, 3, info, "", NPG_COMM_MULTI_PROCESS);
    gather_matrix(comm, r, 3, 200);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
}

// Every root info names a domain of its own: two jobs of one host at once, each of two process
// ranks, both gather every byte (LCAL's unique id would put both on domain 0's port).
void test_two_jobs_on_one_host_at_once_both_gather_every_byte() {
  const std::vector<uint8_t> infos[2] = {lccl_root_info(), lccl_root_info()};
  on_processes(4, [&](int p) {
    const int job = p / 2;
    const int r = p % 2;
    npg_comm_t comm = nullptr;
    CHECK_RC(npg_comm_init("lccl", r, 2, 0, "", NPG_COMM_MULTI_PROCESS, p, nullptr, 20000, 0, infos[job].data(),
                           infos[job].size(), &comm),
             NPG_SUCCESS);
    gather_checked(comm, r, 2, equal_layout(2, 30000), NPG_UINT8, false, 500 + job);
    gather_checked(comm, r, 2, ragged_blocks(2, 510 + job), NPG_INT32, true, 520 + job);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
}

// The simulated liblcal.so behaves as ATB's: what the backend must not rely on.
void test_simulated_lcal_has_atbs_unique_id_bootstrap_and_kernel_types() {
  using GetUniqueId = int (*)(void*, int);
  using InitRank = int (*)(std::array<char, 128>, int, int, void**);
  using InitDomain = int (*)(int, int, int, void**);
  using InitThread = int (*)(int, int, const char*, void**);
  using AllGather = int (*)(void*, void*, int64_t, int, void*, void*);
  using Destroy = int (*)(void*);
  lccl_root_info();  // loads the libraries
  auto get_unique_id = fake_symbol<GetUniqueId>("liblcal.so", "LcalGetUniqueId");
  auto init_rank = fake_symbol<InitRank>("liblcal.so", "LcalCommInitRank");
  auto init_domain = fake_symbol<InitDomain>("liblcal.so", "LcalCommInitRankWithDomain");
  auto init_thread = fake_symbol<InitThread>("liblcal.so", "LcalCommInitThread");
  auto all_gather = fake_symbol<AllGather>("liblcal.so", "LcclAllGather");
  auto destroy = fake_symbol<Destroy>("liblcal.so", "LcclCommDestroy");
  auto set_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtSetDevice");
  CHECK(set_device(0) == 0);
  std::array<char, 128> id;
  id.fill('\x5a');
  CHECK(get_unique_id(id.data(), 0) == 0);
  for (char c : id) CHECK(c == '\x5a');  // never written
  void* comm = nullptr;
  CHECK(init_rank(id, 2, 1, &comm) == -4);  // a filled-in id: every rank but 0 fails
  expect_text(fake_symbol<const char* (*)()>("libascendcl.so", "aclGetRecentErrMsg")(), {"Multi-machine"});
  // A domain's port is held by its root for the length of the init: a second root of it fails.
  const int domain = 20000 + getpid() % 20000;
  std::thread first([&] {
    void* c = nullptr;
    CHECK(set_device(1) == 0);
    CHECK(init_domain(domain, 2, 0, &c) == 0);
    CHECK(destroy(c) == 0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(init_domain(domain, 2, 0, &comm) == -4);
  expect_text(fake_symbol<const char* (*)()>("libascendcl.so", "aclGetRecentErrMsg")(), {"bind"});
  void* second = nullptr;
  CHECK(init_domain(domain, 2, 1, &second) == 0);
  first.join();
  CHECK(destroy(second) == 0);
  // No AllGather kernel for UINT8 (7): LCAL_ERROR_MKIRT on two ranks.
  const std::string uid = "kernel-types-" + std::to_string(getpid());
  run_ranks(2, [&](int r) {
    CHECK(set_device(r) == 0);
    void* c = nullptr;
    CHECK(init_thread(r, 2, uid.c_str(), &c) == 0);
    void* stream = nullptr;
    CHECK(fake_symbol<int (*)(void**)>("libascendcl.so", "aclrtCreateStream")(&stream) == 0);
    void* buf = nullptr;
    CHECK(fake_symbol<int (*)(void**, size_t, int)>("libascendcl.so", "aclrtMalloc")(&buf, 64, 0) == 0);
    CHECK(all_gather(buf, static_cast<uint8_t*>(buf) + 16, 8, 7, c, stream) == -2);
    CHECK(all_gather(buf, static_cast<uint8_t*>(buf) + 16, 8, 0, c, stream) == 0);  // INT8
    CHECK(fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtSynchronizeStream")(stream) == 0);
    CHECK(destroy(c) == 0);
    CHECK(fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtDestroyStream")(stream) == 0);
    CHECK(fake_symbol<int (*)(void*)>("libascendcl.so", "aclrtFree")(buf) == 0);
  });
  expect_nothing_leaked();
}

void test_process_ranks_gather_through_an_id_and_size_domain() {
  const std::string domain = run_domain(2, "256");
  on_processes(3, [&](int r) {
    npg_comm_t comm = join(r, 3, {}, domain, NPG_COMM_MULTI_PROCESS);  // no root info needed
    gather_matrix(comm, r, 3, 300);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  const std::string id_only = run_domain(3);
  on_processes(2, [&](int r) {
    npg_comm_t comm = join(r, 2, {}, id_only, NPG_COMM_MULTI_PROCESS);
    gather_checked(comm, r, 2, equal_layout(2, 5000), NPG_UINT8, false, 400);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
}

void test_invalid_comm_domains_are_refused_with_the_rule() {
  const std::pair<std::string, std::string> cases[] = {
      {"7:199", "(SIZE_MB \"199\")"},     {"65536", "(ID \"65536\")"},      {"job-1", "(ID \"job-1\")"},
      {"3:", "(SIZE_MB \"\")"},           {"-1:400", "(ID \"-1\")"},        {"1:999999999", "(SIZE_MB \"999999999\")"},
      {"1:65537", "(SIZE_MB \"65537\")"}, {"1:2044", "(SIZE_MB \"2044\")"}, {"1:4092", "(SIZE_MB \"4092\")"},
      {"1:4295", "(SIZE_MB \"4295\")"}};
  for (const auto& c : cases) {
    npg_comm_t comm = nullptr;
    CHECK(npg_comm_init("lccl", 0, 2, 0, c.first.c_str(), NPG_COMM_MULTI_PROCESS, 0, nullptr, 1000, 0, nullptr, 0,
                        &comm) == NPG_INVALID_ARGUMENT);
    expect_text(npg_last_error(),
                {"comm_domain \"" + c.first + "\"", c.second,
                 "SIZE_MB in [200, 2043] (LCCL's buffer in MiB: LCAL sizes it in a 32-bit int", "[0, 65535]"});
    expect_no_vendor();
  }
  show("bad domain");
  npg_comm_t comm = nullptr;
  CHECK(npg_comm_init("lccl", 0, 2, 0, "", NPG_COMM_MULTI_PROCESS, 0, nullptr, 1000, 0, nullptr, 0, &comm) ==
        NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"root_info is NULL and comm_domain is \"\""});
  expect_nothing_leaked();
}

// LCAL sizes its buffer as SIZE_MB MiB + 4 MiB in a 32-bit int: 2044 to 4092 MiB fail at init
// (aclrtMalloc of the wrapped size), as the simulated LCAL does, and 2043 is the largest that works.
void test_simulated_lcal_fails_buffer_sizes_past_its_int() {
  auto set_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtSetDevice");
  auto init =
      fake_symbol<int (*)(int, int, int, int, void**, bool)>("liblcal.so", "LcalCommInitRankWithCustDomainSize");
  CHECK(set_device(0) == 0);
  for (int mb : {2044, 3000, 4091, 4092}) {
    void* comm = nullptr;
    CHECK(init(1, mb, 1, 0, &comm, false) == -6);  // LCAL_ERROR_OUT_OF_MEMORY
  }
  const std::string domain = run_domain(5, "2043");
  run_ranks(1, [&](int r) {
    npg_comm_t comm = join(r, 1, {}, domain, NPG_COMM_MULTI_PROCESS);
    gather_checked(comm, r, 1, equal_layout(1, 4096), NPG_UINT8, false, 700);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

void test_ranks_on_another_node_and_rank_tables_are_refused() {
  auto info = lccl_root_info();
  auto foreign = info;
  memcpy(foreign.data() + 32, "00000000-another-host-boot-id-0000000", 37);  // the root's boot id
  npg_comm_t comm = nullptr;
  CHECK(npg_comm_init("lccl", 1, 2, 0, "", NPG_COMM_MULTI_PROCESS, 1, nullptr, 1000, 0, foreign.data(), foreign.size(),
                      &comm) == NPG_INVALID_USAGE);
  expect_text(npg_last_error(), {"backend lccl runs on one node only", "rank 1", "use backend hccl"});
  show("another node");
  CHECK(npg_comm_init("lccl", 0, 2, 0, "", NPG_COMM_MULTI_PROCESS, 0, "/tmp/ranks.json", 1000, 0, info.data(),
                      info.size(), &comm) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"is for backend hccl only"});
  CHECK(npg_comm_init("lccl", 0, 1, 0, "", NPG_COMM_MULTI_PROCESS, -1, nullptr, 1000, 0, info.data(), info.size(),
                      &comm) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"backend lccl needs a device id"});
  std::vector<uint8_t> hccl(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_RC(npg_get_root_info("hccl", nullptr, hccl.data(), hccl.size(), &size), NPG_SUCCESS);
  CHECK(npg_comm_init("lccl", 0, 1, 0, "", NPG_COMM_MULTI_PROCESS, 0, nullptr, 1000, 0, hccl.data(), size, &comm) ==
        NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"not a root info of backend lccl"});
  CHECK(npg_get_root_info("lccl", "127.0.0.1", hccl.data(), hccl.size(), &size) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"not valid for backend lccl", "device:N,domain:ID"});
  expect_nothing_leaked();
}

void test_injected_init_failure_is_a_vendor_error_on_every_rank() {
  ScopedEnv fail("NPUGATHER_FAKE_CANN_INIT_FAIL", "-5");
  auto info = lccl_root_info();
  run_ranks(3, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK(npg_comm_init("lccl", r, 3, 0, "", NPG_COMM_MULTI_THREAD, r, nullptr, 5000, 0, info.data(), info.size(),
                        &comm) == NPG_TIMEOUT);
    CHECK(comm == nullptr);
    expect_text(npg_last_error(), {"LcalCommInitThread returned LCAL_ERROR_TIMEOUT (-5)", "rank " + std::to_string(r),
                                   "simulated LCAL: injected init failure"});
    expect_vendor("LCAL", -5, "LCAL_ERROR_TIMEOUT", r, "simulated LCAL: injected init failure");
    if (r == 0) show("init failure");
  });
  expect_nothing_leaked();
}

void test_rank_whose_collective_fails_makes_every_peer_fail() {
  ScopedEnv fail_rank("NPUGATHER_FAKE_CANN_FAIL_RANK", "1");
  const int n = 3;
  auto info = lccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info, "", NPG_COMM_MULTI_THREAD, 5000);
    std::vector<uint8_t> send(64), recv(64 * n);
    npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8);
    if (r == 1) {
      CHECK(rc == NPG_SYSTEM_ERROR);
      expect_text(npg_last_error(), {"LcclAllGather", "LCAL_ERROR_INTERNAL (-4)", "rank 1"});
      expect_vendor("LCAL", -4, "LCAL_ERROR_INTERNAL", 1);
    } else {
      CHECK(rc == NPG_REMOTE_ERROR);
      expect_vendor("ACL", 507057, "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", r);
    }
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

void test_collective_that_never_completes_times_out_and_abort_ends_it() {
  ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
  const int n = 2;
  auto info = lccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info, "", NPG_COMM_MULTI_THREAD, 600);
    std::vector<uint8_t> send(64), recv(64 * n);
    auto t0 = Clock::now();
    CHECK(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8) == NPG_TIMEOUT);
    CHECK(ms_since(t0) >= 500 && ms_since(t0) < 2000);
    expect_text(npg_last_error(), {"LcclAllGather (layout check) did not complete within the timeout of 600 ms"});
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  auto info2 = lccl_root_info();
  npg_comm_t comms[n];
  run_ranks(n, [&](int r) { comms[r] = join(r, n, info2, "", NPG_COMM_MULTI_THREAD, 30000); });
  expect_abort_ends_blocked_gathers(comms, n);
}

// One communicating operation per device, whichever backend holds it.
void test_device_held_by_an_hccl_communicator_is_refused_to_lccl() {
  std::vector<uint8_t> hccl(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_RC(npg_get_root_info("hccl", "device:5", hccl.data(), hccl.size(), &size), NPG_SUCCESS);
  npg_comm_t first = nullptr;
  CHECK_RC(npg_comm_init("hccl", 0, 1, 0, "", 0, 5, nullptr, 5000, 0, hccl.data(), size, &first), NPG_SUCCESS);
  auto info = lccl_root_info();
  npg_comm_t second = nullptr;
  CHECK(npg_comm_init("lccl", 0, 1, 0, "", NPG_COMM_MULTI_THREAD, 5, nullptr, 5000, 0, info.data(), info.size(),
                      &second) == NPG_INVALID_USAGE);
  expect_text(npg_last_error(), {"backend lccl: device 5 is already used", "rank 0 of 1, backend hccl"});
  show("device taken");
  CHECK_RC(npg_comm_destroy(first), NPG_SUCCESS);
  second = join(0, 1, info);  // device 0 of a one-rank group
  gather_checked(second, 0, 1, equal_layout(1, 100), NPG_UINT8, false, 1);
  CHECK_RC(npg_comm_destroy(second), NPG_SUCCESS);
  expect_nothing_leaked();
}

void test_missing_liblcal_names_the_file_and_the_fix() {
  const std::string dir = getenv("NPUGATHER_CANN_LIB_DIR");
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK(npg_get_root_info("lccl", nullptr, info.data(), info.size(), &size) == NPG_SYSTEM_ERROR);
  expect_text(npg_last_error(), {"backend lccl: loaded " + dir + "/libascendcl.so but cannot load liblcal.so",
                                 dir + "/liblcal.so (NPUGATHER_CANN_LIB_DIR): no such file",
                                 "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/liblcal.so",
                                 "source /usr/local/Ascend/nnal/atb/set_env.sh"});
  show("no liblcal.so");
}

const TestCase kTests[] = {
    {"thread_ranks_of_one_root_info_gather_every_byte", test_thread_ranks_of_one_root_info_gather_every_byte, "full"},
    {"thread_ranks_meet_on_the_comm_domain_as_uid", test_thread_ranks_meet_on_the_comm_domain_as_uid, "full"},
    {"thread_uid_serves_one_communicator_per_process", test_thread_uid_serves_one_communicator_per_process, "full"},
    {"simulated_lcal_remembers_a_thread_uids_devices", test_simulated_lcal_remembers_a_thread_uids_devices, "full"},
    {"gathers_larger_than_device_memory_go_through_it_in_rounds",
     test_gathers_larger_than_device_memory_go_through_it_in_rounds, "full"},
    {"segmented_sends_deliver_every_block", test_segmented_sends_deliver_every_block, "full"},
    {"process_ranks_gather_in_the_domain_of_the_root_info", test_process_ranks_gather_in_the_domain_of_the_root_info,
     "full"},
    {"two_jobs_on_one_host_at_once_both_gather_every_byte", test_two_jobs_on_one_host_at_once_both_gather_every_byte,
     "full"},
    {"simulated_lcal_has_atbs_unique_id_bootstrap_and_kernel_types",
     test_simulated_lcal_has_atbs_unique_id_bootstrap_and_kernel_types, "full"},
    {"process_ranks_gather_through_an_id_and_size_domain", test_process_ranks_gather_through_an_id_and_size_domain,
     "full"},
    {"invalid_comm_domains_are_refused_with_the_rule", test_invalid_comm_domains_are_refused_with_the_rule, "full"},
    {"simulated_lcal_fails_buffer_sizes_past_its_int", test_simulated_lcal_fails_buffer_sizes_past_its_int, "full"},
    {"ranks_on_another_node_and_rank_tables_are_refused", test_ranks_on_another_node_and_rank_tables_are_refused,
     "full"},
    {"injected_init_failure_is_a_vendor_error_on_every_rank",
     test_injected_init_failure_is_a_vendor_error_on_every_rank, "full"},
    {"rank_whose_collective_fails_makes_every_peer_fail", test_rank_whose_collective_fails_makes_every_peer_fail,
     "full"},
    {"collective_that_never_completes_times_out_and_abort_ends_it",
     test_collective_that_never_completes_times_out_and_abort_ends_it, "full"},
    {"device_held_by_an_hccl_communicator_is_refused_to_lccl",
     test_device_held_by_an_hccl_communicator_is_refused_to_lccl, "full"},
    {"missing_liblcal_names_the_file_and_the_fix", test_missing_liblcal_names_the_file_and_the_fix, "no-lcal"},
};

}  // namespace

int main(int argc, char** argv) { return run_simulated_cann_tests(argc, argv, kTests, "full|no-lcal"); }
