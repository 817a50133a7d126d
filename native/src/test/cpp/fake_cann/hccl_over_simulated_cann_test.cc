// Tests of the hccl backend's binding through the C ABI, over the simulated CANN runtime in
// this folder (no NPU is involved: this proves the dlopen/dlsym binding, the staging, the
// error mapping and the fault handling, never anything about NPU hardware).
//
// Usage: hccl_over_simulated_cann_test SUITE [FILTER]
//   full     NPUGATHER_CANN_LIB_DIR holds the complete simulated libraries
//   minimal  NPUGATHER_CANN_LIB_DIR holds libraries without the optional symbols
//   split    communicator management in libhcomm.so, collectives in libhccl.so (newer CANN)
//   missing  NPUGATHER_CANN_LIB_DIR is an empty directory, no CANN anywhere
//   no-hccl  NPUGATHER_CANN_LIB_DIR holds libascendcl.so only
//   no-hcomm NPUGATHER_CANN_LIB_DIR holds the split libhccl.so without its libhcomm.so
// The last line of output is "N passed, N failed".
#include <sys/wait.h>

#include <fstream>

#include "../../../main/cpp/cann/device_rounds.h"
#include "../../../main/cpp/hccl/hccl_library.h"
#include "simulated_cann_test_support.h"

namespace {

// Suite "minimal" has no HcclGetErrorString and no aclGetRecentErrMsg.
bool has_vendor_text() { return selected_suite() != "minimal"; }

std::vector<uint8_t> hccl_root_info() {
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_RC(npg_get_root_info("hccl", nullptr, info.data(), info.size(), &size), NPG_SUCCESS);
  info.resize(size);
  return info;
}

npg_comm_t join(int rank, int n, const std::vector<uint8_t>& info, int64_t timeout_ms = 20000, int device = -2) {
  npg_comm_t comm = nullptr;
  CHECK_RC(npg_comm_init("hccl", rank, n, 0, "", NPG_COMM_MULTI_THREAD, device == -2 ? rank : device, nullptr,
                         timeout_ms, 0, info.data(), info.size(), &comm),
           NPG_SUCCESS);
  CHECK(std::string(npg_comm_transport(comm)) == "hccl");
  return comm;
}

// ---- tests ----

void test_timeouts_are_mapped_onto_hccl_environment() {
  // Runs first: the process's first HCCL call (the root info's) latches them (the test runner
  // leaves them unset), while other threads read the environment, as CANN and the JVM do.
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      while (!stop.load()) CHECK(getenv("PATH") != nullptr || true);
    });
  }
  CHECK_RC(npg_get_root_info("hccl", "timeout_ms:5000", info.data(), info.size(), &size), NPG_SUCCESS);
  info.resize(size);
  run_ranks(4, [&](int r) { CHECK_RC(npg_comm_destroy(join(r, 4, info, 5000)), NPG_SUCCESS); });
  stop.store(true);
  for (auto& t : readers) t.join();
  CHECK(getenv("HCCL_CONNECT_TIMEOUT") != nullptr && std::string(getenv("HCCL_CONNECT_TIMEOUT")) == "120");
  CHECK(getenv("HCCL_EXEC_TIMEOUT") != nullptr && std::string(getenv("HCCL_EXEC_TIMEOUT")) == "68");
  int connect = 0, exec = 0;
  CHECK(fake_symbol<bool (*)(int*, int*)>("libascendcl.so", "npgFakeCannHcclTimeouts")(&connect, &exec));
  CHECK(connect == 120 && exec == 68);
  expect_nothing_leaked();
}

// A rank of test_every_rank_runs_with_the_hccl_timeouts_of_the_root in a fresh process (HCCL
// latches its timeouts once per process): rank 0 makes the root info, its first HCCL call, for a
// timeout of 200 s and writes it to file; the others read it and join with a timeout of 20 s of
// their own. Every rank must run with the root's values, 200 s and 200 s; a rank whose user set
// another HCCL_EXEC_TIMEOUT (expect_refusal) is refused before it reaches HCCL.
int timeout_rank_main(int rank, int n, const std::string& file, bool expect_refusal) {
  try {
    std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
    size_t size = 0;
    if (rank == 0) {
      CHECK_RC(npg_get_root_info("hccl", "device:0,timeout_ms:200000", info.data(), info.size(), &size), NPG_SUCCESS);
      std::ofstream(file + ".partial", std::ios::binary).write(reinterpret_cast<const char*>(info.data()), size);
      CHECK(rename((file + ".partial").c_str(), file.c_str()) == 0);
    } else {
      for (auto t0 = Clock::now(); access(file.c_str(), F_OK) != 0 && ms_since(t0) < 10000;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::ifstream in(file, std::ios::binary);
      in.read(reinterpret_cast<char*>(info.data()), info.size());
      size = static_cast<size_t>(in.gcount());
    }
    info.resize(size);
    npg_comm_t comm = nullptr;
    npg_result_t rc = npg_comm_init("hccl", rank, n, 0, "", NPG_COMM_MULTI_PROCESS, rank, nullptr, 20000, 0,
                                    info.data(), info.size(), &comm);
    if (expect_refusal) {
      CHECK(rc == NPG_INVALID_USAGE);
      expect_text(npg_last_error(), {"HCCL timeouts differ", "HCCL_EXEC_TIMEOUT=300",
                                     "the root rank's with HCCL_CONNECT_TIMEOUT=200 HCCL_EXEC_TIMEOUT=200"});
      show("timeouts differ");
    } else {
      CHECK_RC(rc, NPG_SUCCESS);
      gather_checked(comm, rank, n, equal_layout(n, 1000), NPG_UINT8, false, 7);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
      int connect = 0, exec = 0;
      CHECK(fake_symbol<bool (*)(int*, int*)>("libascendcl.so", "npgFakeCannHcclTimeouts")(&connect, &exec));
      if (connect != 200 || exec != 200) {
        throw TestFailure("rank " + std::to_string(rank) + " latched HCCL_CONNECT_TIMEOUT=" + std::to_string(connect) +
                          " HCCL_EXEC_TIMEOUT=" + std::to_string(exec) + ", the root 200 and 200");
      }
    }
    expect_nothing_leaked();
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "timeout rank %d: %s\n", rank, e.what());
    return 1;
  }
}

void test_every_rank_runs_with_the_hccl_timeouts_of_the_root() {
  const std::string file = "/tmp/npugather-hccl-timeouts-" + std::to_string(getpid());
  unlink(file.c_str());
  const char* kinds[] = {"0", "1", "1"};  // ranks 0 and 1 of the group, and a rank whose user set 300 s
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    pids.push_back(fork_child([&, i] {
      std::vector<std::string> env;
      for (char** e = environ; *e != nullptr; ++e)
        if (strncmp(*e, "HCCL_", 5) != 0) env.push_back(*e);  // a fresh process, as a rank's is
      if (i == 2) env.push_back("HCCL_EXEC_TIMEOUT=300");
      std::vector<char*> envp;
      for (std::string& e : env) envp.push_back(&e[0]);
      envp.push_back(nullptr);
      // Under a user-mode emulator (NPUGATHER_TEST_EMULATOR, e.g. qemu-aarch64) this program
      // cannot exec itself: the emulator runs it again.
      const char* emulator = getenv("NPUGATHER_TEST_EMULATOR");
      char self[4096];
      ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
      if (n <= 0) return 126;
      self[n] = '\0';
      std::vector<const char*> args;
      if (emulator != nullptr && *emulator != '\0') args.push_back(emulator);
      for (const char* a :
           {static_cast<const char*>(self), "timeout-rank", kinds[i], "2", file.c_str(), i == 2 ? "refused" : "joins"})
        args.push_back(a);
      args.push_back(nullptr);
      execve(args[0], const_cast<char**>(args.data()), envp.data());
      return 127;
    }));
  }
  bool ok = true;
  for (int code : wait_children(pids, 60000)) ok = ok && code == 0;
  unlink(file.c_str());
  CHECK(ok);
}

void test_all_gather_delivers_every_byte_for_2_3_4_thread_ranks() {
  for (int n = 2; n <= 4; ++n) {
    auto info = hccl_root_info();
    run_ranks(n, [&](int r) {
      npg_comm_t comm = join(r, n, info);
      gather_checked(comm, r, n, equal_layout(n, 4099), NPG_INT32, false, 10 + n);
      gather_checked(comm, r, n, equal_layout(n, 1), NPG_UINT8, false, 20 + n);
      gather_checked(comm, r, n, equal_layout(n, 300000), NPG_FLOAT16, false, 30 + n);
      gather_checked(comm, r, n, equal_layout(n, 777), NPG_INT64, false, 40 + n, /*in_place=*/true);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  expect_nothing_leaked();
}

// Ragged layouts go through HcclAllGatherV when the library has it, else through padded blocks.
void test_all_gather_v_delivers_equal_ragged_empty_and_gapped_blocks() {
  const std::string hccl = std::string(getenv("NPUGATHER_CANN_LIB_DIR")) + "/libhccl.so";
  void* lib = dlopen(hccl.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  int (*v_calls)() = nullptr;
  if (lib != nullptr) {
    CHECK((dlsym(lib, "HcclAllGatherV") == nullptr) == (selected_suite() == "minimal"));
    v_calls = reinterpret_cast<int (*)()>(dlsym(lib, "npgFakeCannAllGatherVCalls"));
    dlclose(lib);
  }
  CHECK(v_calls != nullptr);
  const int v_before = v_calls();
  for (int n = 2; n <= 4; ++n) {
    auto info = hccl_root_info();
    run_ranks(n, [&](int r) {
      npg_comm_t comm = join(r, n, info);
      gather_checked(comm, r, n, ragged_blocks(n, 50 + n), NPG_UINT8, true, 60 + n);
      gather_checked(comm, r, n, ragged_blocks(n, 70 + n), NPG_FLOAT32, true, 80 + n);
      gather_checked(comm, r, n, equal_layout(n, 1234), NPG_INT16, true, 90 + n);
      gather_checked(comm, r, n, equal_layout(n, 0), NPG_INT8, true, 95 + n);  // nothing to move
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  CHECK((v_calls() > v_before) == (selected_suite() != "minimal"));
  expect_nothing_leaked();
}

// HcclAllGatherV serves only some topologies (HCCL's HcclAllGatherV doc); elsewhere HCCL
// refuses it. Ragged gathers are right in each: through HcclAllGatherV where it is supported,
// padded HcclAllGather blocks elsewhere, decided up front from the SoC where that suffices,
// else after one refusal per communicator (the servers of a rank-info communicator are only
// HCCL's to know), never leaving the communicator unusable.
void test_ragged_gathers_are_right_in_every_topology() {
  struct Case {
    const char* soc;
    const char* servers;
    int n;
    bool v;        // HcclAllGatherV used
    bool refused;  // ... after HCCL refused it once per rank
  };
  const Case cases[] = {
      {"Ascend910B1", "", 3, true, false},       {"Ascend910B2", "0,0,1,1", 4, true, false},
      {"Ascend910B1", "0,0,1", 3, false, true},  {"Ascend910_9391", "", 2, true, false},
      {"Ascend910_9391", "0,1", 2, false, true}, {"Ascend910A", "", 2, false, false},
  };
  auto counter = [](const char* name) { return fake_symbol<int (*)()>("libhccl.so", name)(); };
  for (const Case& c : cases) {
    ScopedEnv soc("NPUGATHER_FAKE_CANN_SOC", c.soc);
    ScopedEnv servers("NPUGATHER_FAKE_CANN_SERVERS", c.servers);
    auto info = hccl_root_info();
    const int calls = counter("npgFakeCannAllGatherVCalls");
    const int refusals = counter("npgFakeCannAllGatherVRefusals");
    run_ranks(c.n, [&](int r) {
      npg_comm_t comm = join(r, c.n, info);
      gather_checked(comm, r, c.n, ragged_blocks(c.n, 700 + c.n), NPG_UINT8, true, 710);
      gather_checked(comm, r, c.n, ragged_blocks(c.n, 720 + c.n), NPG_FLOAT32, true, 730);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
    const int v_calls = counter("npgFakeCannAllGatherVCalls") - calls;
    const int v_refusals = counter("npgFakeCannAllGatherVRefusals") - refusals;
    if ((v_calls == 2 * c.n) != c.v || v_refusals != (c.refused ? c.n : 0)) {
      throw TestFailure(std::string(c.soc) + " servers \"" + c.servers + "\": " + std::to_string(v_calls) +
                        " HcclAllGatherV calls, " + std::to_string(v_refusals) + " refusals");
    }
  }
  expect_nothing_leaked();
}

// Many small segments (packed before the copy to the device) and a few large ones.
// An NPU's memory is finite: gathers larger than the device go through it in rounds, within
// half its free memory by default or within NPUGATHER_DEVICE_BUFFER_BYTES, through the
// all-gather-v (Atlas A2) and through padded blocks (the training series).
void test_gathers_larger_than_device_memory_go_through_it_in_rounds() {
  for (const char* soc : {"Ascend910B1", "Ascend910"}) {
    ScopedEnv training("NPUGATHER_FAKE_CANN_SOC", soc);
    auto info = hccl_root_info();
    expect_gathers_beyond_device_memory(
        3, [&](int r) { return join(r, 3, info); }, kSimulatedDeviceMemory / 2, 400);
  }
  ScopedEnv setting("NPUGATHER_DEVICE_BUFFER_BYTES", "200K");
  auto info = hccl_root_info();
  expect_gathers_beyond_device_memory(
      2, [&](int r) { return join(r, 2, info); }, 200 << 10, 500);
}

// HCCL refuses a call of more than SYS_MAX_COUNT elements per rank with HCCL_E_PARA, and so does
// the simulated HCCL; the rounds keep every call under it, whatever the device budget.
void test_every_call_stays_under_hccls_count_limit() {
  const uint64_t limit = npg::hccl::kHcclMaxCount;
  struct Case {
    uint64_t block;
    int32_t ranks;
    uint64_t budget;
  };
  const Case cases[] = {{40ull << 30, 1, 100ull << 30},  // a large budget set: one call would move 40 GiB
                        {limit + 1, 2, UINT64_MAX / 8},
                        {3 * limit + 7, 8, 1ull << 40},
                        {limit, 1, UINT64_MAX / 8}};
  for (const Case& c : cases) {
    const npg::cann::RoundPlan plan = npg::cann::plan_rounds(c.block, c.ranks, c.budget, limit);
    if (plan.chunk == 0 || plan.chunk > limit || plan.chunk * plan.rounds < c.block ||
        (plan.rounds - 1) * plan.chunk >= c.block || plan.device_bytes > c.budget) {
      throw TestFailure("block " + std::to_string(c.block) + " of " + std::to_string(c.ranks) + " ranks: chunk " +
                        std::to_string(plan.chunk) + " x " + std::to_string(plan.rounds) + " rounds, " +
                        std::to_string(plan.device_bytes) + " device bytes");
    }
  }
  CHECK(npg::cann::plan_rounds(limit, 1, UINT64_MAX / 8, limit).rounds == 1);

  // The simulated HCCL checks the count after the communicator and the stream, as HCCL does.
  hccl_root_info();  // loads the libraries
  auto set_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtSetDevice");
  auto reset_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtResetDevice");
  auto get_root_info = fake_symbol<int (*)(void*)>("libhccl.so", "HcclGetRootInfo");
  auto init = fake_symbol<int (*)(uint32_t, const void*, uint32_t, void**)>("libhccl.so", "HcclCommInitRootInfo");
  auto all_gather = fake_symbol<int (*)(void*, void*, uint64_t, int, void*, void*)>("libhccl.so", "HcclAllGather");
  auto destroy = fake_symbol<int (*)(void*)>("libhccl.so", "HcclCommDestroy");
  CHECK(set_device(0) == 0);
  std::vector<uint8_t> info(4108);
  void* comm = nullptr;
  CHECK(get_root_info(info.data()) == 0 && init(1, info.data(), 0, &comm) == 0);
  int stream_stand_in = 0;  // never reached: both calls fail their checks before enqueueing
  CHECK(all_gather(nullptr, nullptr, limit + 1, 7, comm, &stream_stand_in) == 1);  // HCCL_E_PARA
  CHECK(all_gather(nullptr, nullptr, limit, 7, comm, &stream_stand_in) == 2);      // HCCL_E_PTR: count passed
  CHECK(destroy(comm) == 0 && reset_device(0) == 0);
  expect_nothing_leaked();
}

void test_device_buffer_setting_is_checked_at_init() {
  ScopedEnv setting("NPUGATHER_DEVICE_BUFFER_BYTES", "12Q");
  auto info = hccl_root_info();
  npg_comm_t comm = nullptr;
  CHECK(npg_comm_init("hccl", 0, 1, 0, "", NPG_COMM_MULTI_THREAD, 0, nullptr, 5000, 0, info.data(), info.size(),
                      &comm) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"NPUGATHER_DEVICE_BUFFER_BYTES=\"12Q\"", "allowed", "512M"});
  show("device buffer setting");
  expect_nothing_leaked();
}

void test_segmented_sends_deliver_every_block() {
  const int n = 3;
  auto info = hccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info);
    for (size_t pieces : {size_t(3), size_t(100)}) {
      Layout l = ragged_blocks(n, 200 + pieces);
      std::vector<uint8_t> mine(l.counts[r]);
      fill(mine.data(), mine.size(), pieces, r);
      std::vector<npg_segment_t> segs;
      uint64_t at = 0;
      for (size_t i = 0; i < pieces; ++i) {
        uint64_t len = i + 1 == pieces ? mine.size() - at : std::min<uint64_t>(mine.size() - at, mine.size() / pieces);
        segs.push_back({mine.data() + at, len});
        at += len;
      }
      std::vector<uint8_t> recv(l.recv_elems, kUntouched);
      CHECK_RC(npg_all_gather_v_segments(comm, segs.data(), segs.size(), recv.data(), l.counts.data(), l.displs.data()),
               NPG_SUCCESS);
      std::vector<uint8_t> expected(l.recv_elems, kUntouched);
      for (int p = 0; p < n; ++p)
        if (p != r) fill(expected.data() + l.displs[p], l.counts[p], pieces, p);
      CHECK(recv == expected);  // the own block is not written
    }
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// Java calls from pooled threads: every call binds the device of its communicator.
void test_calls_from_threads_other_than_the_creator_bind_the_device() {
  const int n = 2;
  auto info = hccl_root_info();
  npg_comm_t comms[n];
  run_ranks(n, [&](int r) { comms[r] = join(r, n, info); });
  run_ranks(n, [&](int r) { gather_checked(comms[r], r, n, equal_layout(n, 5000), NPG_UINT8, false, 3); });
  run_ranks(n, [&](int r) { gather_checked(comms[r], r, n, ragged_blocks(n, 4), NPG_UINT8, true, 4); });
  run_ranks(n, [&](int r) { CHECK_RC(npg_comm_destroy(comms[r]), NPG_SUCCESS); });
  expect_nothing_leaked();
}

void test_two_process_ranks_gather_every_byte() {
  auto info = hccl_root_info();
  on_processes(2, [&](int r) {
    npg_comm_t comm = join(r, 2, info);
    gather_checked(comm, r, 2, equal_layout(2, 1 << 20), NPG_UINT8, false, 7);
    gather_checked(comm, r, 2, ragged_blocks(2, 8), NPG_INT32, true, 8);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
}

// Rank 1 is a process that joins, then dies without entering the collective.
void test_killed_process_rank_fails_its_peer_with_remote_error_promptly() {
  auto info = hccl_root_info();
  int ready[2];
  CHECK(pipe(ready) == 0);
  const pid_t victim = fork_child([&] {
    close(ready[0]);
    npg_comm_t comm = join(1, 2, info);
    (void)comm;
    CHECK(write(ready[1], "R", 1) == 1);
    pause();
    return 0;
  });
  close(ready[1]);
  npg_comm_t comm = join(0, 2, info, 10000);
  char c = 0;
  CHECK(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  std::thread killer([victim] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(victim, SIGKILL);
    wait_children({victim}, 10000);  // a zombie would still look alive to its peer
  });
  auto t0 = Clock::now();
  std::vector<uint8_t> send(256), recv(512);
  npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 256, NPG_UINT8);
  killer.join();
  CHECK(rc == NPG_REMOTE_ERROR);
  expect_text(npg_last_error(), {"ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", "rank 0"});
  CHECK(ms_since(t0) < 3000);
  CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  expect_nothing_leaked();
}

void test_rank_that_never_joins_makes_init_time_out() {
  ScopedEnv connect("NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS", "500");
  auto info = hccl_root_info();
  run_ranks(2, [&](int r) {  // ranks 0 and 1 of 3; rank 2 never comes
    npg_comm_t comm = nullptr;
    CHECK(npg_comm_init("hccl", r, 3, 0, "", 0, r, nullptr, 2000, 0, info.data(), info.size(), &comm) == NPG_TIMEOUT);
    expect_text(npg_last_error(), {"HcclCommInitRootInfo", "HCCL_E_TIMEOUT (9)"});
  });
  expect_nothing_leaked();
}

void test_ranks_that_disagree_on_counts_all_get_invalid_usage_and_can_go_on() {
  const int n = 3;
  auto info = hccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info);
    Layout l = equal_layout(n, 100);
    if (r == 2) l.counts[0] = 99;  // rank 2 expects less from rank 0
    std::vector<uint8_t> send(100), recv(300);
    npg_result_t rc =
        npg_all_gather_v(comm, send.data(), l.counts[r], recv.data(), l.counts.data(), l.displs.data(), NPG_UINT8);
    CHECK(rc == NPG_INVALID_USAGE);
    expect_text(npg_last_error(), {"ranks disagree on recv_counts", "npg_all_gather_v(rank " + std::to_string(r)});
    gather_checked(comm, r, n, equal_layout(n, 100), NPG_UINT8, true, 5);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

void test_injected_init_failure_is_a_named_system_error_on_every_rank() {
  ScopedEnv fail("NPUGATHER_FAKE_CANN_INIT_FAIL", "4");
  auto info = hccl_root_info();
  run_ranks(3, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK(npg_comm_init("hccl", r, 3, 0, "", 0, r, nullptr, 5000, 0, info.data(), info.size(), &comm) ==
          NPG_SYSTEM_ERROR);
    CHECK(comm == nullptr);
    std::vector<std::string> parts = {"HcclCommInitRootInfo", "HCCL_E_INTERNAL (4)", "rank " + std::to_string(r),
                                      "device " + std::to_string(r)};
    if (has_vendor_text()) parts.push_back("simulated HCCL error code 4");
    expect_text(npg_last_error(), parts);
    expect_vendor("HCCL", 4, "HCCL_E_INTERNAL", r, has_vendor_text() ? "simulated HCCL error code 4" : "");
    if (r == 0) show("init failure");
  });
  expect_nothing_leaked();
}

// Rank 1 fails its first init with HCCL_E_AGAIN (its device still held). HCCL consumed the root
// info at that attempt, so rank 1 is not retried with it: it fails at once saying a fresh root
// info is needed; its peers wait out the (short) connect timeout. A new round with a fresh root
// info then gathers on every rank.
void test_rank_whose_first_init_fails_needs_a_fresh_root_info() {
  ScopedEnv connect("NPUGATHER_FAKE_CANN_CONNECT_TIMEOUT_MS", "700");
  {
    ScopedEnv fail("NPUGATHER_FAKE_CANN_INIT_FAIL", "20");
    ScopedEnv only("NPUGATHER_FAKE_CANN_INIT_FAIL_RANK", "1");
    ScopedEnv times("NPUGATHER_FAKE_CANN_INIT_FAIL_TIMES", "1");
    auto info = hccl_root_info();
    run_ranks(3, [&](int r) {
      npg_comm_t comm = nullptr;
      auto t0 = Clock::now();
      npg_result_t rc = npg_comm_init("hccl", r, 3, 0, "", 0, r, nullptr, 10000, 0, info.data(), info.size(), &comm);
      CHECK(comm == nullptr);
      if (r == 1) {
        CHECK(rc == NPG_SYSTEM_ERROR && ms_since(t0) < 500);
        expect_text(npg_last_error(), {"HcclCommInitRootInfo returned HCCL_E_AGAIN (20)", "not retried",
                                       "a retry needs a fresh root info", "npugather.retryable=true"});
        show("first init failed");
      } else {
        CHECK(rc == NPG_TIMEOUT);
        expect_text(npg_last_error(), {"HcclCommInitRootInfo returned HCCL_E_TIMEOUT (9)"});
      }
    });
  }
  auto fresh = hccl_root_info();
  run_ranks(3, [&](int r) {
    npg_comm_t comm = join(r, 3, fresh, 10000);
    gather_checked(comm, r, 3, ragged_blocks(3, 41), NPG_UINT8, true, 42);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

void test_collective_that_never_completes_times_out_on_every_rank() {
  ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
  const int n = 3;
  auto info = hccl_root_info();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info, 800);
    std::vector<uint8_t> send(64), recv(64 * n);
    auto t0 = Clock::now();
    npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8);
    double took = ms_since(t0);
    CHECK(rc == NPG_TIMEOUT);
    expect_text(npg_last_error(),
                {"did not complete within the timeout of 800 ms", "aclrtStreamQuery", "rank " + std::to_string(r)});
    CHECK(took >= 700 && took < 2000);
    if (r == 0) show("timeout");
    CHECK(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8) == NPG_INVALID_USAGE);
    expect_text(npg_last_error(), {"unusable after an earlier failure"});
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// A gather whose collectives each take 300 ms on the stream (as a large one does on a device) is
// waited for without a single vendor error report: in the real runtime every expired
// aclrtSynchronizeStreamWithTimeout logs at ERROR and reports an error message, so waiting in
// slices would bury the vendor text a later real failure needs. The timeout path is silent too.
void test_long_gathers_are_waited_for_without_vendor_error_reports() {
  const int n = 2;
  auto info = hccl_root_info();  // loads the libraries
  const int reports = vendor_error_reports();
  {
    ScopedEnv slow("NPUGATHER_FAKE_CANN_COLLECTIVE_MS", "300");
    run_ranks(n, [&](int r) {
      npg_comm_t comm = join(r, n, info, 20000);
      gather_checked(comm, r, n, equal_layout(n, 70001), NPG_UINT8, false, 61);
      gather_checked(comm, r, n, ragged_blocks(n, 62), NPG_UINT8, true, 63);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  {
    ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
    auto hanging = hccl_root_info();
    run_ranks(n, [&](int r) {
      npg_comm_t comm = join(r, n, hanging, 300);
      std::vector<uint8_t> send(64), recv(64 * n);
      CHECK(npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8) == NPG_TIMEOUT);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  if (vendor_error_reports() != reports) {
    throw TestFailure("the stream waits made " + std::to_string(vendor_error_reports() - reports) +
                      " vendor error reports (expired stream synchronizes); expected none");
  }
  expect_nothing_leaked();
}

// A collective still in flight when it timed out: HcclCommDestroy would return HCCL_E_AGAIN, so
// the stream is force-destroyed first; then the communicator, the device buffers and the device
// go, on every rank, and the destroy itself succeeds.
void test_teardown_after_a_timed_out_collective_releases_everything() {
  ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
  const int n = 2;
  auto info = hccl_root_info();
  const int resets = device_resets();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info, 300);
    std::vector<uint8_t> send(4096), recv(4096 * n);
    CHECK(npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8) == NPG_TIMEOUT);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  CHECK(device_resets() - resets == n);
  expect_nothing_leaked();
  // The same after an abort from another thread while the ranks wait.
  auto info2 = hccl_root_info();
  npg_comm_t comms[n];
  run_ranks(n, [&](int r) { comms[r] = join(r, n, info2, 30000); });
  expect_abort_ends_blocked_gathers(comms, n);
}

// HCOMM's HcclCommDestroy returns HCCL_E_AGAIN only while another thread is inside an operation
// call on the communicator (its StateGuard holds INUSE for the call), not while work is queued on
// a stream. Such a destroy is retried until the call has returned, then succeeds.
void test_destroy_is_retried_while_another_thread_is_inside_an_operation_call() {
  auto info = hccl_root_info();
  npg_comm_t comm = join(0, 1, info, 5000, 2);
  gather_checked(comm, 0, 1, equal_layout(1, 1000), NPG_UINT8, false, 31);
  void* hccl_comm = fake_symbol<void* (*)(int)>("libhccl.so", "npgFakeCannHcclComm")(0);
  CHECK(hccl_comm != nullptr);
  auto all_gather = fake_symbol<int (*)(void*, void*, uint64_t, int, void*, void*)>("libhccl.so", "HcclAllGather");
  auto inside = fake_symbol<int (*)()>("libhccl.so", "npgFakeCannOpCallsInside");
  auto refusals = fake_symbol<int (*)()>("libhccl.so", "npgFakeCannDestroyRefusals");
  const int refused_before = refusals();
  int call_rc = -1;
  std::thread caller([&] {
    // Stays inside the call for 500 ms, then fails its pointer check (no stream): nothing is enqueued.
    ScopedEnv dwell("NPUGATHER_FAKE_CANN_OP_CALL_MS", "500");
    call_rc = all_gather(nullptr, nullptr, 1, 7, hccl_comm, nullptr);
  });
  for (auto t0 = Clock::now(); inside() == 0 && ms_since(t0) < 5000;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(inside() == 1);
  npg_result_t rc = npg_comm_destroy(comm);
  const std::string text = npg_last_error();
  caller.join();
  if (rc != NPG_SUCCESS) throw TestFailure("npg_comm_destroy gave " + std::string(npg_result_name(rc)) + ": " + text);
  CHECK(call_rc == 2);                      // HCCL_E_PTR
  CHECK(refusals() - refused_before >= 1);  // HCCL_E_AGAIN at least once, then retried
  expect_nothing_leaked();

  // Work queued on a stream does not hold the communicator: HcclCommDestroy succeeds at once and
  // the queued collective is cancelled.
  ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
  const AclEntryPoints acl;
  const auto [set_device, reset_device, create_stream, destroy_stream, synchronize, malloc_device, free_device] = acl;
  auto get_root_info = fake_symbol<int (*)(void*)>("libhccl.so", "HcclGetRootInfo");
  auto init = fake_symbol<int (*)(uint32_t, const void*, uint32_t, void**)>("libhccl.so", "HcclCommInitRootInfo");
  auto destroy = fake_symbol<int (*)(void*)>("libhccl.so", "HcclCommDestroy");
  CHECK(set_device(2) == 0);
  std::vector<uint8_t> root(4108);
  void* queued_comm = nullptr;
  void* stream = nullptr;
  void* buffer = nullptr;
  CHECK(get_root_info(root.data()) == 0 && init(1, root.data(), 0, &queued_comm) == 0);
  CHECK(create_stream(&stream) == 0 && malloc_device(&buffer, 64, 0) == 0);
  CHECK(all_gather(buffer, static_cast<uint8_t*>(buffer) + 32, 32, 7, queued_comm, stream) == 0);
  CHECK(destroy(queued_comm) == 0);  // not HCCL_E_AGAIN: the collective is only queued
  CHECK(synchronize(stream) != 0);   // the queued collective was cancelled
  CHECK(destroy_stream(stream) == 0 && free_device(buffer) == 0 && reset_device(2) == 0);
  expect_nothing_leaked();
}

void test_rank_whose_collective_fails_makes_every_peer_fail_with_remote_error() {
  ScopedEnv fail_rank("NPUGATHER_FAKE_CANN_FAIL_RANK", "1");
  const int n = 3;
  auto info = hccl_root_info();
  auto t0 = Clock::now();
  run_ranks(n, [&](int r) {
    npg_comm_t comm = join(r, n, info, 5000);
    std::vector<uint8_t> send(64), recv(64 * n);
    npg_result_t rc = npg_all_gather(comm, send.data(), recv.data(), 64, NPG_UINT8);
    if (r == 1) {
      CHECK(rc == NPG_SYSTEM_ERROR);
      expect_text(npg_last_error(), {"HcclAllGather", "HCCL_E_INTERNAL (4)", "rank 1"});
      expect_vendor("HCCL", 4, "HCCL_E_INTERNAL", 1);
    } else {
      CHECK(rc == NPG_REMOTE_ERROR);
      expect_text(npg_last_error(),
                  {"ACL_ERROR_RT_SUSPECT_REMOTE_ERROR (507057)", "HcclAllGather", "rank " + std::to_string(r)});
      expect_vendor("ACL", 507057, "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", r,
                    has_vendor_text() ? "simulated CANN: a task on the stream failed" : "");
      if (r == 0) show("peer of the failed rank");
    }
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  CHECK(ms_since(t0) < 3000);
  expect_nothing_leaked();
}

void test_abort_from_another_thread_ends_a_blocked_gather_promptly() {
  ScopedEnv hang("NPUGATHER_FAKE_CANN_HANG", "allgather");
  const int n = 2;
  auto info = hccl_root_info();
  npg_comm_t comms[n];
  run_ranks(n, [&](int r) { comms[r] = join(r, n, info, 30000); });
  expect_abort_ends_blocked_gathers(comms, n);
}

void test_abort_of_an_idle_communicator_fails_later_calls() {
  auto info = hccl_root_info();
  npg_comm_t comm = join(0, 1, info);
  CHECK_RC(npg_comm_abort(comm), NPG_SUCCESS);
  uint8_t b[4] = {1, 2, 3, 4}, out[4];
  CHECK(npg_all_gather(comm, b, out, 4, NPG_UINT8) == NPG_ABORTED);
  CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  expect_nothing_leaked();
}

void test_second_communicator_on_a_busy_device_is_refused() {
  auto info = hccl_root_info();
  npg_comm_t first = join(0, 1, info, 5000, 3);
  npg_comm_t second = nullptr;
  auto info2 = hccl_root_info();
  CHECK(npg_comm_init("hccl", 0, 1, 0, "", 0, 3, nullptr, 5000, 0, info2.data(), info2.size(), &second) ==
        NPG_INVALID_USAGE);
  expect_text(npg_last_error(), {"device 3 is already used", "destroy that communicator first"});
  CHECK_RC(npg_comm_destroy(first), NPG_SUCCESS);
  second = join(0, 1, info2, 5000, 3);  // free again
  uint8_t b[3] = {9, 8, 7}, out[3] = {};
  CHECK_RC(npg_all_gather(second, b, out, 3, NPG_UINT8), NPG_SUCCESS);
  CHECK(memcmp(b, out, 3) == 0);
  CHECK_RC(npg_comm_destroy(second), NPG_SUCCESS);
  expect_nothing_leaked();
}

void test_argument_errors_name_the_problem() {
  auto info = hccl_root_info();
  npg_comm_t comm = nullptr;
  CHECK(npg_comm_init("hccl", 0, 1, 0, "", 0, -1, nullptr, 1000, 0, info.data(), info.size(), &comm) ==
        NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"backend hccl needs a device id"});
  expect_no_vendor();
  CHECK(npg_comm_init("hccl", 0, 1, 0, "", 0, 99, nullptr, 1000, 0, info.data(), info.size(), &comm) ==
        NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"aclrtSetDevice", "ACL_ERROR_RT_INVALID_DEVICEID (107001)"});
  expect_vendor("ACL", 107001, "ACL_ERROR_RT_INVALID_DEVICEID", 0, "device 99 does not exist");
  CHECK(npg_comm_size(nullptr, nullptr) == NPG_INVALID_ARGUMENT);
  expect_no_vendor();  // the next error without a vendor part clears it
  std::vector<uint8_t> host(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK_RC(npg_get_root_info("host", "127.0.0.1", host.data(), host.size(), &size), NPG_SUCCESS);
  CHECK(npg_comm_init("hccl", 0, 1, 0, "", 0, 0, nullptr, 1000, 0, host.data(), size, &comm) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"not a root info of backend hccl"});
  std::vector<uint8_t> small(100);
  CHECK(npg_get_root_info("hccl", nullptr, small.data(), small.size(), &size) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"too small"});
  // A thread without a current device takes the root's device from NPUGATHER_DEVICE_ID.
  for (const char* value : {"99", "abc"}) {
    npg_result_t rc = NPG_SUCCESS;
    std::string text;
    std::thread([&] {
      ScopedEnv device("NPUGATHER_DEVICE_ID", value);
      rc = npg_get_root_info("hccl", nullptr, host.data(), host.size(), &size);
      text = npg_last_error();
    }).join();
    CHECK(rc == NPG_INVALID_ARGUMENT);
    expect_text(text, {value[0] == '9' ? "(device 99)" : "NPUGATHER_DEVICE_ID=\"abc\""});
  }
  // bind_address names the root's device for hccl; a host address is refused.
  CHECK(npg_get_root_info("hccl", "device:98", host.data(), host.size(), &size) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"aclrtSetDevice", "(device 98)"});
  CHECK(npg_get_root_info("hccl", "127.0.0.1", host.data(), host.size(), &size) == NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"not valid for backend hccl", "device:N"});
  CHECK(npg_get_root_info("hccl", "device:98", host.data(), host.size(), &size) == NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_get_root_info("hccl", "device:2", host.data(), host.size(), &size), NPG_SUCCESS);
  expect_no_vendor();  // a successful call clears the vendor part
  expect_nothing_leaked();
}

// A file in a fresh temporary directory, both removed when it goes out of scope.
struct TempFile {
  std::string dir;
  std::string path;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/npg-rank-table-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw TestFailure("mkdtemp failed");
    dir = tmpl;
    path = dir + "/ranks.json";
    std::ofstream(path) << text;
  }
  ~TempFile() {
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
};

std::string table_json(const std::string& version, const std::string& status, const std::vector<std::string>& ids) {
  std::string devices;
  for (size_t i = 0; i < ids.size(); ++i) {
    devices += std::string(i ? "," : "") + "{\"device_id\": \"" + std::to_string(i) +
               "\", \"device_ip\": \"192.168.1." + std::to_string(8 + i) + "\", \"rank_id\": " + ids[i] + "}";
  }
  return "{\"status\": \"" + status + "\", \"version\": \"" + version +
         "\", \"server_count\": \"1\",\n \"server_list\": [{\"server_id\": \"node_0\", \"device\": [" + devices +
         "]}]}";
}

// Init from a rank table fails twice on every rank with code (and CANN text message), then
// succeeds: the ranks retry with back-off (each attempt reads the table afresh) and gather.
void expect_init_retried_until_the_device_frees_up(const char* code, const char* message) {
  ScopedEnv fail("NPUGATHER_FAKE_CANN_INIT_FAIL", code);
  ScopedEnv times("NPUGATHER_FAKE_CANN_INIT_FAIL_TIMES", "2");
  ScopedEnv text("NPUGATHER_FAKE_CANN_INIT_FAIL_MESSAGE", message);
  TempFile file(table_json("1.0", "completed", {"\"0\"", "\"1\""}));
  auto t0 = Clock::now();
  run_ranks(2, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK_RC(npg_comm_init("hccl", r, 2, 0, "", 0, r, file.path.c_str(), 10000, 0, nullptr, 0, &comm), NPG_SUCCESS);
    gather_checked(comm, r, 2, equal_layout(2, 10), NPG_UINT8, false, 1);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  CHECK(ms_since(t0) >= 250);  // two failed attempts, backing off 100 ms then 200 ms
  expect_nothing_leaked();
}

void test_busy_device_at_rank_table_init_is_retried_until_it_frees_up() {
  expect_init_retried_until_the_device_frees_up("20", "");  // HCCL_E_AGAIN
}

// CANN reports a device still held by an earlier job's HCCP process as EJ0001 in its recent
// error text, with a code of no "busy" class: retried too.
void test_device_held_by_an_earlier_hccp_process_at_rank_table_init_is_retried() {
  expect_init_retried_until_the_device_frees_up(
      "4", "EJ0001: Failed to initialize the HCCP process. Reason: Maybe the last training process is running.");
}

void test_device_that_stays_busy_fails_rank_table_init_within_the_timeout() {
  ScopedEnv fail("NPUGATHER_FAKE_CANN_INIT_FAIL", "7");
  TempFile file(table_json("1.0", "completed", {"\"0\"", "\"1\""}));
  auto t0 = Clock::now();
  run_ranks(2, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK(npg_comm_init("hccl", r, 2, 0, "", 0, r, file.path.c_str(), 1500, 0, nullptr, 0, &comm) == NPG_TIMEOUT);
    expect_text(npg_last_error(), {"HCCL_E_UNAVAIL (7)", "attempts", "rank " + std::to_string(r)});
    expect_vendor("HCCL", 7, "HCCL_E_UNAVAIL", r);
  });
  CHECK(ms_since(t0) < 2500);
  expect_nothing_leaked();
}

void test_rank_table_file_initialises_every_rank() {
  TempFile file(table_json("1.0", "completed", {"\"0\"", "\"1\""}));
  const std::string& path = file.path;
  run_ranks(2, [&](int r) {
    npg_comm_t comm = nullptr;
    CHECK_RC(npg_comm_init("hccl", r, 2, 0, "", 0, r, path.c_str(), 10000, 0, nullptr, 0, &comm), NPG_SUCCESS);
    gather_checked(comm, r, 2, ragged_blocks(2, 11), NPG_UINT8, true, 12);
    CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
  });
  expect_nothing_leaked();
}

// HCCL's parser of rank tables 1.0 and 1.2 (HCOMM's TopoinfoRanktableConcise::GetServerList)
// takes server_count as optional and counts server_list without it: such a table initialises
// every rank. The simulated HcclCommInitClusterInfo reads the table as HCCL does: a number where
// HCCL wants a string is HCCL_E_PARA ("is not string"), a missing server_count is fine.
void test_rank_tables_are_read_as_hccl_reads_them() {
  auto table = [](const std::string& version, const std::string& count, const std::string& rank0) {
    return "{\"status\": \"completed\", \"version\": \"" + version + "\"" +
           (count.empty() ? std::string() : ", \"server_count\": " + count) +
           ", \"server_list\": [{\"server_id\": \"node_0\", \"device\": [{\"device_id\": \"0\", \"rank_id\": " + rank0 +
           "}, {\"device_id\": \"1\", \"rank_id\": \"1\"}]}]}";
  };
  for (const char* version : {"1.0", "1.2"}) {
    TempFile file(table(version, "", "\"0\""));
    run_ranks(2, [&](int r) {
      npg_comm_t comm = nullptr;
      CHECK_RC(npg_comm_init("hccl", r, 2, 0, "", 0, r, file.path.c_str(), 10000, 0, nullptr, 0, &comm), NPG_SUCCESS);
      gather_checked(comm, r, 2, ragged_blocks(2, 13), NPG_UINT8, true, 14);
      CHECK_RC(npg_comm_destroy(comm), NPG_SUCCESS);
    });
  }
  hccl_root_info();  // loads the libraries
  auto set_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtSetDevice");
  auto reset_device = fake_symbol<int (*)(int32_t)>("libascendcl.so", "aclrtResetDevice");
  auto init = fake_symbol<int (*)(const char*, uint32_t, void**)>("libhccl.so", "HcclCommInitClusterInfo");
  auto recent = fake_symbol<const char* (*)()>("libascendcl.so", "aclGetRecentErrMsg");
  CHECK(set_device(1) == 0);
  const std::pair<std::string, std::string> refused[] = {
      {table("1.0", "\"1\"", "0"), "Name[rank_id] is not string"},
      {table("1.0", "1", "\"0\""), "Name[server_count] is not string"},
      {table("1.2", "\"2\"", "\"0\""), "neq server num"}};
  for (const auto& c : refused) {
    TempFile file(c.first);
    void* comm = nullptr;
    CHECK(init(file.path.c_str(), 1, &comm) == 1);  // HCCL_E_PARA, before any rendezvous
    expect_text(recent(), {c.second});
  }
  CHECK(reset_device(1) == 0);
  expect_nothing_leaked();
}

// Checked before CANN is touched: runs in every suite, also without any CANN library.
void test_malformed_rank_tables_are_rejected_with_the_reason() {
  struct Case {
    std::string text;
    std::string reason;
  };
  const Case cases[] = {
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_list\": [", "is not valid JSON"},
      {table_json("2.0", "completed", {"\"0\"", "\"1\""}), "version \"2.0\" is not supported"},
      {table_json("1.2", "initializing", {"\"0\"", "\"1\""}), "usable only when status is \"completed\""},
      {table_json("1.0", "completed", {"\"0\"", "\"0\""}), "rank_id 0 appears more than once"},
      {table_json("1.0", "completed", {"\"0\"", "\"2\""}), "rank_id 2 is out of range [0, 1]"},
      {table_json("1.0", "completed", {"\"0\"", "\"1\"", "\"2\""}), "lists 3 devices but rank_size is 2"},
      {table_json("1.0", "completed", {"\"0\"", "\"x1\""}), "is not a non-negative integer"},
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_list\": []}", "server_list is empty"},
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_list\": [{\"server_id\": \"a\"}]}",
       "has no \"device\""},
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_list\": [{\"device\": [{\"rank_id\": \"0\"}]}]}",
       "has no \"device_id\""},
      // HCCL reads rank_id, device_id and server_count as JSON strings: a number is HCCL_E_PARA.
      {table_json("1.0", "completed", {"\"0\"", "1"}),
       "\"rank_id\" of server_list[0].device[1] must be a JSON string such as \"1\", found a number (1)"},
      {"{\"status\": \"completed\", \"version\": \"1.2\", \"server_list\": [{\"server_id\": \"a\", \"device\": "
       "[{\"device_id\": 0, \"rank_id\": \"0\"}, {\"device_id\": \"1\", \"rank_id\": \"1\"}]}]}",
       "\"device_id\" of server_list[0].device[0] must be a JSON string"},
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_count\": 1, \"server_list\": [{\"server_id\": "
       "\"a\", \"device\": [{\"device_id\": \"0\", \"rank_id\": \"0\"}, {\"device_id\": \"1\", \"rank_id\": \"1\"}]}]}",
       "\"server_count\" of the top level must be a JSON string such as \"1\", found a number (1)"},
      {"{\"status\": \"completed\", \"version\": \"1.0\", \"server_list\": [{\"server_id\": \"a\", \"device\": []}]}",
       "server_list[0].device is empty"},
  };
  for (const Case& c : cases) {
    TempFile file(c.text);
    npg_comm_t comm = nullptr;
    npg_result_t rc = npg_comm_init("hccl", 1, 2, 0, "", 0, 1, file.path.c_str(), 1000, 0, nullptr, 0, &comm);
    if (rc != NPG_INVALID_ARGUMENT) throw TestFailure("expected NPG_INVALID_ARGUMENT for: " + c.text);
    expect_text(npg_last_error(), {"rank table", c.reason});
    if (&c == &cases[3]) show("duplicate rank id");
    if (&c == &cases[10]) show("rank_id as a number");
  }
  // What HCCL requires of the servers, and each rank's device (rank 1 of 4 on device 1).
  auto server = [](const std::string& id, const std::vector<std::pair<int, int>>& rank_device) {
    std::string devices;
    for (const auto& rd : rank_device) {
      devices += std::string(devices.empty() ? "" : ", ") + "{\"device_id\": \"" + std::to_string(rd.second) +
                 "\", \"rank_id\": \"" + std::to_string(rd.first) + "\"}";
    }
    return std::string("{") + (id.empty() ? "" : "\"server_id\": \"" + id + "\", ") + "\"device\": [" + devices + "]}";
  };
  auto table = [](const std::string& count, const std::string& a, const std::string& b) {
    return "{\"status\": \"completed\", \"version\": \"1.0\"" +
           (count.empty() ? std::string() : ", \"server_count\": \"" + count + "\"") + ", \"server_list\": [" + a +
           ", " + b + "]}";
  };
  const std::string a = server("node_a", {{0, 0}, {1, 1}});
  const std::string b = server("node_b", {{2, 0}, {3, 1}});
  const Case server_cases[] = {
      {table("3", a, b), "server_count \"3\" does not match server_list, which lists 2 server(s)"},
      {table("2", a, server("", {{2, 0}, {3, 1}})), "server_list[1] has no \"server_id\""},
      {table("2", a, server("node_a", {{2, 0}, {3, 1}})), "server_list[1].server_id \"node_a\" is the same as"},
      {table("2", server("node_a", {{0, 0}, {2, 1}}), server("node_b", {{1, 0}, {3, 1}})),
       "rank ids interleave across servers: server \"node_a\" has 2 ranks between rank_id 0 and 2"},
      {table("2", server("node_a", {{0, 0}, {1, 5}}), b),
       "rank_id 1 on server \"node_a\" has device_id \"5\", but this rank binds device_id 1"},
  };
  for (const Case& c : server_cases) {
    TempFile file(c.text);
    npg_comm_t comm = nullptr;
    npg_result_t rc = npg_comm_init("hccl", 1, 4, 0, "", 0, 1, file.path.c_str(), 1000, 0, nullptr, 0, &comm);
    if (rc != NPG_INVALID_ARGUMENT) throw TestFailure("expected NPG_INVALID_ARGUMENT for: " + c.text);
    expect_text(npg_last_error(), {"rank table " + file.path, c.reason});
    if (&c == &server_cases[3]) show("interleaved ranks");
  }
  npg_comm_t comm = nullptr;
  CHECK(npg_comm_init("hccl", 0, 2, 0, "", 0, 0, "/nonexistent/ranks.json", 1000, 0, nullptr, 0, &comm) ==
        NPG_INVALID_ARGUMENT);
  expect_text(npg_last_error(), {"/nonexistent/ranks.json", "No such file"});
}

void test_missing_cann_gives_an_actionable_message() {
  const std::string dir = getenv("NPUGATHER_CANN_LIB_DIR");
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK(npg_get_root_info("hccl", nullptr, info.data(), info.size(), &size) == NPG_SYSTEM_ERROR);
  expect_text(
      npg_last_error(),
      {"cannot load libascendcl.so", dir + "/libascendcl.so (NPUGATHER_CANN_LIB_DIR): no such file",
       "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so", "/usr/local/Ascend/cann/lib64/libascendcl.so",
       "source /usr/local/Ascend/ascend-toolkit/set_env.sh", "ASCEND_HOME_PATH"});
  show("no CANN");
  npg_comm_t comm = nullptr;
  std::vector<uint8_t> fake(4132, 0);  // header, timeouts, HCCL's bytes
  CHECK(npg_comm_init("hccl", 0, 2, 0, "", 0, 0, nullptr, 1000, 0, fake.data(), fake.size(), &comm) ==
        NPG_INVALID_ARGUMENT);  // the root info is checked before the libraries are loaded
  memcpy(fake.data(), "NPGHCCL", 8);
  fake[8] = 2;
  fake[12] = 4108 & 0xff;
  fake[13] = 4108 >> 8;
  CHECK(npg_comm_init("hccl", 0, 2, 0, "", 0, 0, nullptr, 1000, 0, fake.data(), fake.size(), &comm) ==
        NPG_SYSTEM_ERROR);
  expect_text(npg_last_error(), {"npg_comm_init(rank 0/2)", "cannot load libascendcl.so", "set_env.sh"});
}

// NPUGATHER_CANN_LIB_DIR holds libascendcl.so only.
void test_missing_libhccl_names_the_file_and_every_path_tried() {
  const std::string dir = getenv("NPUGATHER_CANN_LIB_DIR");
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK(npg_get_root_info("hccl", nullptr, info.data(), info.size(), &size) == NPG_SYSTEM_ERROR);
  expect_text(npg_last_error(), {"loaded " + dir + "/libascendcl.so but cannot load libhccl.so",
                                 dir + "/libhccl.so (next to libascendcl.so): no such file",
                                 "/usr/local/Ascend/cann/lib64/libhccl.so", "set_env.sh"});
  show("no libhccl.so");
}

// A newer CANN's libhccl.so without its libhcomm.so: the management symbols are missing.
void test_missing_required_symbol_names_the_symbol_and_the_files() {
  const std::string dir = getenv("NPUGATHER_CANN_LIB_DIR");
  std::vector<uint8_t> info(NPG_ROOT_INFO_MAX_BYTES);
  size_t size = 0;
  CHECK(npg_get_root_info("hccl", nullptr, info.data(), info.size(), &size) == NPG_SYSTEM_ERROR);
  expect_text(npg_last_error(), {"required symbol HcclGetRootInfo was not found in " + dir + "/libhccl.so",
                                 "no libhcomm.so found", "set_env.sh"});
  show("no libhcomm.so");
}

const TestCase kTests[] = {
    {"timeouts_are_mapped_onto_hccl_environment", test_timeouts_are_mapped_onto_hccl_environment, "full minimal split"},
    {"every_rank_runs_with_the_hccl_timeouts_of_the_root", test_every_rank_runs_with_the_hccl_timeouts_of_the_root,
     "full"},
    {"all_gather_delivers_every_byte_for_2_3_4_thread_ranks",
     test_all_gather_delivers_every_byte_for_2_3_4_thread_ranks, "full minimal split"},
    {"all_gather_v_delivers_equal_ragged_empty_and_gapped_blocks",
     test_all_gather_v_delivers_equal_ragged_empty_and_gapped_blocks, "full minimal split"},
    {"ragged_gathers_are_right_in_every_topology", test_ragged_gathers_are_right_in_every_topology, "full"},
    {"gathers_larger_than_device_memory_go_through_it_in_rounds",
     test_gathers_larger_than_device_memory_go_through_it_in_rounds, "full"},
    {"every_call_stays_under_hccls_count_limit", test_every_call_stays_under_hccls_count_limit, "full"},
    {"device_buffer_setting_is_checked_at_init", test_device_buffer_setting_is_checked_at_init, "full"},
    {"segmented_sends_deliver_every_block", test_segmented_sends_deliver_every_block, "full minimal"},
    {"calls_from_threads_other_than_the_creator_bind_the_device",
     test_calls_from_threads_other_than_the_creator_bind_the_device, "full"},
    {"two_process_ranks_gather_every_byte", test_two_process_ranks_gather_every_byte, "full minimal split"},
    {"killed_process_rank_fails_its_peer_with_remote_error_promptly",
     test_killed_process_rank_fails_its_peer_with_remote_error_promptly, "full"},
    {"rank_that_never_joins_makes_init_time_out", test_rank_that_never_joins_makes_init_time_out, "full"},
    {"ranks_that_disagree_on_counts_all_get_invalid_usage_and_can_go_on",
     test_ranks_that_disagree_on_counts_all_get_invalid_usage_and_can_go_on, "full"},
    {"injected_init_failure_is_a_named_system_error_on_every_rank",
     test_injected_init_failure_is_a_named_system_error_on_every_rank, "full minimal split"},
    {"rank_whose_first_init_fails_needs_a_fresh_root_info", test_rank_whose_first_init_fails_needs_a_fresh_root_info,
     "full"},
    {"busy_device_at_rank_table_init_is_retried_until_it_frees_up",
     test_busy_device_at_rank_table_init_is_retried_until_it_frees_up, "full"},
    {"device_held_by_an_earlier_hccp_process_at_rank_table_init_is_retried",
     test_device_held_by_an_earlier_hccp_process_at_rank_table_init_is_retried, "full"},
    {"device_that_stays_busy_fails_rank_table_init_within_the_timeout",
     test_device_that_stays_busy_fails_rank_table_init_within_the_timeout, "full"},
    {"collective_that_never_completes_times_out_on_every_rank",
     test_collective_that_never_completes_times_out_on_every_rank, "full"},
    {"long_gathers_are_waited_for_without_vendor_error_reports",
     test_long_gathers_are_waited_for_without_vendor_error_reports, "full"},
    {"teardown_after_a_timed_out_collective_releases_everything",
     test_teardown_after_a_timed_out_collective_releases_everything, "full"},
    {"destroy_is_retried_while_another_thread_is_inside_an_operation_call",
     test_destroy_is_retried_while_another_thread_is_inside_an_operation_call, "full"},
    {"rank_whose_collective_fails_makes_every_peer_fail_with_remote_error",
     test_rank_whose_collective_fails_makes_every_peer_fail_with_remote_error, "full minimal"},
    {"abort_from_another_thread_ends_a_blocked_gather_promptly",
     test_abort_from_another_thread_ends_a_blocked_gather_promptly, "full"},
    {"abort_of_an_idle_communicator_fails_later_calls", test_abort_of_an_idle_communicator_fails_later_calls, "full"},
    {"second_communicator_on_a_busy_device_is_refused", test_second_communicator_on_a_busy_device_is_refused, "full"},
    {"argument_errors_name_the_problem", test_argument_errors_name_the_problem, "full"},
    {"rank_table_file_initialises_every_rank", test_rank_table_file_initialises_every_rank, "full split"},
    {"rank_tables_are_read_as_hccl_reads_them", test_rank_tables_are_read_as_hccl_reads_them, "full"},
    {"malformed_rank_tables_are_rejected_with_the_reason", test_malformed_rank_tables_are_rejected_with_the_reason,
     "full missing"},
    {"missing_cann_gives_an_actionable_message", test_missing_cann_gives_an_actionable_message, "missing"},
    {"missing_libhccl_names_the_file_and_every_path_tried", test_missing_libhccl_names_the_file_and_every_path_tried,
     "no-hccl"},
    {"missing_required_symbol_names_the_symbol_and_the_files",
     test_missing_required_symbol_names_the_symbol_and_the_files, "no-hcomm"},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "timeout-rank") {
    return timeout_rank_main(atoi(argv[2]), atoi(argv[3]), argv[4], std::string(argv[5]) == "refused");
  }
  return run_simulated_cann_tests(argc, argv, kTests, "full|minimal|split|missing|no-hccl|no-hcomm");
}
