// Misuse of the C ABI as a careless or racing caller would commit it: every case is an
// error code with a message, never a crash or a freed communicator still in use.
#include <limits.h>

#include <atomic>
#include <thread>

#include "support/host_test_support.h"

namespace {

using namespace npgtest;

void test_destroy_during_a_gather_on_another_thread_is_refused_and_frees_nothing() {
  auto info = make_root_info();
  std::atomic<bool> rank0_done{false};
  run_ranks(2, [&](int rank) {
    npg_comm_t comm = init_rank(rank, 2, info, 0, 20000);
    std::vector<uint8_t> send(4096, static_cast<uint8_t>(rank)), recv(8192);
    if (rank == 1) {  // never gathers: rank 0 stays blocked until it is aborted
      while (!rank0_done.load()) sleep_ms(2);
      CHECK_OK(npg_comm_destroy(comm));
      return;
    }
    npg_result_t gather_rc = NPG_SUCCESS;
    std::thread gatherer([&] { gather_rc = npg_all_gather(comm, send.data(), recv.data(), send.size(), NPG_UINT8); });
    sleep_ms(200);
    npg_result_t destroy_rc = npg_comm_destroy(comm);
    std::string destroy_error = npg_last_error();
    int32_t got = -1;
    npg_result_t rank_rc = npg_comm_rank(comm, &got);  // the communicator is intact
    npg_comm_abort(comm);
    gatherer.join();
    rank0_done.store(true);
    CHECK_RC(destroy_rc, NPG_INVALID_USAGE);
    CHECK(contains(destroy_error, "still running"));
    CHECK_OK(rank_rc);
    CHECK(got == 0);
    CHECK_RC(gather_rc, NPG_ABORTED);
    CHECK_OK(npg_comm_destroy(comm));
  });
}

void test_calls_on_a_destroyed_handle_are_invalid_usage() {
  auto info = make_root_info();
  npg_comm_t comm = init_rank(0, 1, info);
  CHECK_OK(npg_comm_destroy(comm));
  uint8_t send[4] = {1, 2, 3, 4};
  uint8_t recv[4] = {};
  int32_t value = 0;
  CHECK_RC(npg_all_gather(comm, send, recv, 4, NPG_UINT8), NPG_INVALID_USAGE);
  CHECK(contains(npg_last_error(), "not a live communicator"));
  CHECK_RC(npg_comm_destroy(comm), NPG_INVALID_USAGE);
  CHECK_RC(npg_comm_abort(comm), NPG_INVALID_USAGE);
  CHECK_RC(npg_comm_rank(comm, &value), NPG_INVALID_USAGE);
  CHECK_RC(npg_comm_size(comm, &value), NPG_INVALID_USAGE);
  uint64_t device_bytes = 0;
  CHECK_RC(npg_comm_device_bytes(comm, &device_bytes), NPG_INVALID_USAGE);
  CHECK(std::string(npg_comm_transport(comm)).empty());
  CHECK(contains(npg_last_error(), "not a live communicator"));
  // A new communicator never takes over the old handle.
  npg_comm_t next = init_rank(0, 1, make_root_info());
  CHECK(next != comm);
  CHECK_RC(npg_comm_rank(comm, &value), NPG_INVALID_USAGE);
  CHECK_OK(npg_comm_destroy(next));
}

void test_null_and_forged_handles_are_errors() {
  uint64_t counts[1] = {0};
  int32_t value = 0;
  CHECK_RC(npg_all_gather(nullptr, nullptr, nullptr, 0, NPG_UINT8), NPG_INVALID_ARGUMENT);
  CHECK(contains(npg_last_error(), "comm is NULL"));
  CHECK_RC(npg_all_gather_v(nullptr, nullptr, 0, nullptr, counts, counts, NPG_UINT8), NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_all_gather_v_segments(nullptr, nullptr, 0, nullptr, counts, counts), NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_comm_abort(nullptr), NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_comm_destroy(nullptr), NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_comm_rank(nullptr, &value), NPG_INVALID_ARGUMENT);
  static int not_a_communicator[64];
  auto forged = reinterpret_cast<npg_comm_t>(not_a_communicator);
  CHECK_RC(npg_comm_destroy(forged), NPG_INVALID_USAGE);
  CHECK_RC(npg_all_gather(forged, nullptr, nullptr, 0, NPG_UINT8), NPG_INVALID_USAGE);
}

void test_second_init_with_a_consumed_root_info_is_invalid_usage() {
  auto info = make_root_info();
  npg_comm_t first = init_rank(0, 1, info);
  npg_comm_t second = nullptr;
  CHECK_RC(npg_comm_init("host", 0, 1, 0, "hardening", NPG_COMM_MULTI_THREAD, -1, nullptr, 1000, 0, info.data(),
                         info.size(), &second),
           NPG_INVALID_USAGE);
  CHECK(second == nullptr);
  CHECK(contains(npg_last_error(), "already used"));
  CHECK_OK(npg_comm_destroy(first));
}

void test_concurrent_destroys_of_one_handle_release_it_once() {
  for (int round = 0; round < 20; ++round) {
    npg_comm_t comm = init_rank(0, 1, make_root_info());
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        if (npg_comm_destroy(comm) == NPG_SUCCESS) ok.fetch_add(1);
      });
    }
    for (auto& t : threads) t.join();
    CHECK(ok.load() == 1);
  }
}

void test_rank_size_above_the_bound_is_invalid_argument_before_anything_is_sized() {
  auto info = make_root_info();
  for (int32_t rank_size : {NPG_MAX_RANK_SIZE + 1, INT32_MAX}) {
    npg_comm_t comm = nullptr;
    auto t0 = Clock::now();
    CHECK_RC(npg_comm_init("host", 1, rank_size, 0, "", NPG_COMM_MULTI_THREAD, -1, nullptr, 2000, 0, info.data(),
                           info.size(), &comm),
             NPG_INVALID_ARGUMENT);
    CHECK(contains(npg_last_error(), "rank_size " + std::to_string(rank_size) + " is out of range [1, 65536]"));
    CHECK(ms_since(t0) < 100);
  }
  CHECK_OK(npg_release_root_info("host", info.data(), info.size()));
}

void test_a_root_info_released_or_consumed_by_a_failed_root_init_leaves_no_listener() {
  const int64_t before = open_fds();
  auto info = make_root_info();
  CHECK(open_fds() == before + 1);
  CHECK_OK(npg_release_root_info("host", info.data(), info.size()));
  CHECK(open_fds() == before);
  CHECK_OK(npg_release_root_info("host", info.data(), info.size()));  // nothing left to release
  // A root init that timed out consumed the root info; one refused for its arguments left it.
  auto next = make_root_info();
  npg_comm_t comm = nullptr;
  CHECK_RC(npg_comm_init("host", 0, 2, 0, "", 7, -1, nullptr, 100, 0, next.data(), next.size(), &comm),
           NPG_INVALID_ARGUMENT);
  CHECK(open_fds() == before + 1);
  CHECK_RC(
      npg_comm_init("host", 0, 2, 0, "", NPG_COMM_MULTI_THREAD, -1, nullptr, 100, 0, next.data(), next.size(), &comm),
      NPG_TIMEOUT);
  CHECK(open_fds() == before);
  CHECK_RC(npg_release_root_info("host", nullptr, 0), NPG_INVALID_ARGUMENT);
  CHECK_RC(npg_release_root_info("host", info.data(), info.size() - 1), NPG_INVALID_ARGUMENT);
}

const TestCase kTests[] = {
    {"destroy_during_a_gather_on_another_thread_is_refused_and_frees_nothing",
     test_destroy_during_a_gather_on_another_thread_is_refused_and_frees_nothing},
    {"calls_on_a_destroyed_handle_are_invalid_usage", test_calls_on_a_destroyed_handle_are_invalid_usage},
    {"null_and_forged_handles_are_errors", test_null_and_forged_handles_are_errors},
    {"second_init_with_a_consumed_root_info_is_invalid_usage",
     test_second_init_with_a_consumed_root_info_is_invalid_usage},
    {"concurrent_destroys_of_one_handle_release_it_once", test_concurrent_destroys_of_one_handle_release_it_once},
    {"rank_size_above_the_bound_is_invalid_argument_before_anything_is_sized",
     test_rank_size_above_the_bound_is_invalid_argument_before_anything_is_sized},
    {"a_root_info_released_or_consumed_by_a_failed_root_init_leaves_no_listener",
     test_a_root_info_released_or_consumed_by_a_failed_root_init_leaves_no_listener},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests, host_run_options()); }
