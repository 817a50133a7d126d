package io.npugather.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.npugather.AllGatherParam;
import io.npugather.Backend;
import io.npugather.CommMode;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RankGroupCommDomainTest {
  private static void assertValidLcclDomain(String domain) {
    AllGatherParam.builder()
        .backend("lccl")
        .rank(0)
        .rankSize(2)
        .commMode(CommMode.COMM_MULTI_PROCESS)
        .commDomain(domain)
        .build()
        .validate();
    int id = Integer.parseInt(domain.substring(0, domain.indexOf(':')));
    assertTrue(id >= 0 && id <= RankGroup.MAX_LCCL_DOMAIN_ID && 10067 + id <= 65535, domain);
    assertTrue(domain.endsWith(":200"), domain);
  }

  @Test
  void lcclGetsAValidIdAndSizeDomainOfItsOwnForEveryRunStageAndAttempt() {
    Set<String> seen = new HashSet<>();
    for (String run : new String[] {"npugather-run-1", "npugather-run-2", "job-a", "job-b"}) {
      for (int stage = 0; stage < 5; stage++) {
        for (int attempt = 0; attempt < 3; attempt++) {
          String domain = RankGroup.commDomain(Backend.LCCL, run, stage, attempt);
          assertValidLcclDomain(domain);
          assertEquals(
              domain,
              RankGroup.commDomain(Backend.LCCL, run, stage, attempt),
              "same on every rank");
          seen.add(domain);
        }
      }
    }
    assertEquals(60, seen.size(), "these runs, stages and attempts all get their own LCCL port");
  }

  @Test
  void otherBackendsNameTheStageAttempt() {
    assertEquals("run-7-s3a1", RankGroup.commDomain(Backend.HCCL, "run-7", 3, 1));
    assertEquals("run-7-s3a2", RankGroup.commDomain(Backend.HOST, "run-7", 3, 2));
  }
}
