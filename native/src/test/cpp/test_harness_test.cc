// The harness itself (support/test_harness.h) can fail a test: a false CHECK, a failing rank
// thread or process, a child that overruns its limit, and a test that hangs.
#include "support/test_harness.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

using namespace npgtest;

// What fn threw, or "" if it returned.
std::string failure_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const TestFailure& e) {
    return e.what();
  }
  return "";
}

void test_a_false_check_fails_naming_the_file_line_and_condition() {
  const int two = 2;
  const std::string what = failure_of([&] { CHECK(two + two == 5); });
  CHECK(contains(what, "test_harness_test.cc:") && contains(what, "CHECK(two + two == 5)"));
  const std::string rc = failure_of([] { CHECK_OK(npg_comm_destroy(nullptr)); });
  CHECK(contains(rc, "returned NPG_INVALID_ARGUMENT, expected NPG_SUCCESS") && contains(rc, "comm is NULL"));
  CHECK(failure_of([] { CHECK(1 + 1 == 2); }).empty());
}

void test_a_failing_rank_thread_fails_the_run_naming_its_rank() {
  const std::string what = failure_of([] {
    run_ranks(4, [](int r) {
      if (r == 2) throw TestFailure("bad byte");
    });
  });
  CHECK(what == "rank 2: bad byte");
}

void test_a_failing_or_overrunning_rank_process_fails_the_run() {
  const std::string failed = failure_of([] {
    run_processes(3, [](int r) {
      if (r == 1) throw TestFailure("bad byte");
    });
  });
  CHECK(contains(failed, " rank 1 (exit 1)") && !contains(failed, "rank 0") && !contains(failed, "rank 2"));
  const auto t0 = Clock::now();
  const std::string overran = failure_of([] {
    run_processes(
        2, [](int r) { sleep(r == 0 ? 60 : 0); }, 300);
  });
  CHECK(contains(overran, " rank 0 (exit -9)") && !contains(overran, "rank 1"));
  CHECK(ms_since(t0) < 30000);
}

// The output and exit code of a program whose one test hangs, run with a limit of 1 s.
void test_a_test_that_hangs_fails_by_name_within_its_limit() {
  int out[2];
  CHECK(pipe(out) == 0);
  const pid_t pid = fork_child([&] {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    setenv("NPUGATHER_TEST_LIMIT_SECONDS", "1", 1);
    static const TestCase kHanging[] = {{"passes", [] {}}, {"hangs", [] { sleep(60); }}};
    char name[] = "hanging";
    char* argv[] = {name, nullptr};
    run_tests(1, argv, kHanging);
    return 0;  // not reached: the time limit ends the program
  });
  close(out[1]);
  std::string output;
  char buf[256];
  for (ssize_t k; (k = read(out[0], buf, sizeof buf)) > 0;) output.append(buf, static_cast<size_t>(k));
  close(out[0]);
  const std::vector<int> codes = wait_children({pid}, 30000);
  if (codes[0] != 1 || !contains(output, "FAIL hangs: still running after its limit of 1 s") ||
      !contains(output, "1 passed, 1 failed\n")) {
    throw TestFailure("exit " + std::to_string(codes[0]) + ", output: " + output);
  }
}

const TestCase kTests[] = {
    {"a_false_check_fails_naming_the_file_line_and_condition",
     test_a_false_check_fails_naming_the_file_line_and_condition},
    {"a_failing_rank_thread_fails_the_run_naming_its_rank", test_a_failing_rank_thread_fails_the_run_naming_its_rank},
    {"a_failing_or_overrunning_rank_process_fails_the_run", test_a_failing_or_overrunning_rank_process_fails_the_run},
    {"a_test_that_hangs_fails_by_name_within_its_limit", test_a_test_that_hangs_fails_by_name_within_its_limit},
};

}  // namespace

int main(int argc, char** argv) { return run_tests(argc, argv, kTests); }
