package io.npugather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AllGatherParamTest {

  private static AllGatherParam.Builder valid() {
    return AllGatherParam.builder().backend("host").rank(1).rankSize(4).rankRoot(0);
  }

  private static void assertRejected(AllGatherParam.Builder param, String field, String value) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> param.build().validate());
    String message = e.getMessage();
    assertTrue(message.contains("AllGatherParam." + field), message);
    assertTrue(message.contains(value), message);
    assertTrue(message.contains("allowed"), message);
  }

  @Test
  void defaultsAreThoseOfTheSpec() {
    AllGatherParam param = AllGatherParam.builder().build();
    assertEquals(0, param.rank());
    assertEquals(0, param.rankSize());
    assertEquals(0, param.rankRoot());
    assertEquals("hccl", param.backend());
    assertEquals(CommMode.COMM_MULTI_PROCESS, param.commMode());
    assertEquals("", param.rankTableFile());
    assertEquals("", param.commDomain());
    assertEquals(null, param.communicator());
  }

  @Test
  void validParamPasses() {
    valid().build().validate();
    valid().backend("lccl").commDomain("65535:200").build().validate();
    valid().backend("lccl").commDomain("7").build().validate();
    valid().backend("lccl").commDomain("").build().validate();
  }

  @Test
  void rankSizeBelowOneIsRejectedNamingTheField() {
    assertRejected(valid().rank(0).rankSize(0), "rankSize", "0");
    assertRejected(valid().rank(0).rankSize(-3), "rankSize", "-3");
  }

  @Test
  void rankOutsideRankSizeIsRejectedNamingTheField() {
    assertRejected(valid().rank(4), "rank", "4");
    assertRejected(valid().rank(-1), "rank", "-1");
  }

  @Test
  void rankRootOutsideRankSizeIsRejectedNamingTheField() {
    assertRejected(valid().rankRoot(4), "rankRoot", "4");
    assertRejected(valid().rankRoot(-1), "rankRoot", "-1");
  }

  @Test
  void unknownBackendIsRejectedListingTheAllowedOnes() {
    assertRejected(valid().backend("nccl"), "backend", "'nccl'");
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class, () -> valid().backend("gloo").build().validate());
    assertTrue(e.getMessage().contains("[hccl, lccl, host]"), e.getMessage());
  }

  @Test
  void boundsOfTheNativeCoreAreCheckedFirst() {
    valid().rankSize(AllGatherParam.MAX_RANK_SIZE).build().validate();
    assertRejected(valid().rankSize(AllGatherParam.MAX_RANK_SIZE + 1), "rankSize", "65537");
    assertRejected(valid().rankSize(Integer.MAX_VALUE), "rankSize", "<= 65536");
    assertRejected(valid().backend(null), "backend", "null");
    assertRejected(valid().commDomain("\u00e9".repeat(65)), "commDomain", "130 UTF-8 bytes");
    assertRejected(valid().commDomain("a\0b"), "commDomain", "NUL");
    assertRejected(valid().backend("lccl").commDomain("1:999999999"), "commDomain", "999999999");
  }

  @Test
  void commDomainLongerThan128IsRejected() {
    valid().commDomain("d".repeat(128)).build().validate();
    assertRejected(valid().commDomain("d".repeat(129)), "commDomain", "129");
  }

  @Test
  void lcclCommDomainMustBeIdAndSizeOfAtLeast200Mb() {
    assertRejected(valid().backend("lccl").commDomain("65536:200"), "commDomain", "65536");
    assertRejected(valid().backend("lccl").commDomain("1:199"), "commDomain", "199");
    assertRejected(valid().backend("lccl").commDomain("one:400"), "commDomain", "one:400");
    assertRejected(valid().backend("lccl").commDomain("1:"), "commDomain", "1:");
  }

  @Test
  void lcclSizeMbStopsWhereLcalsIntBufferSizeOverflows() {
    valid().backend("lccl").commDomain("1:2043").build().validate();
    for (String size : List.of("2044", "4091", "4092", "4295", "65536")) {
      assertRejected(
          valid().backend("lccl").commDomain("1:" + size), "commDomain", "SIZE_MB " + size);
      assertRejected(
          valid().backend("lccl").commDomain("1:" + size),
          "commDomain",
          "SIZE_MB in [200, 2043] (LCCL's buffer in MiB: LCAL sizes it in a 32-bit int");
    }
  }

  @Test
  void rankTableFileIsOnlyForHccl(@TempDir Path dir) throws Exception {
    Path table = Files.writeString(dir.resolve("rank_table.json"), "{}");
    valid().backend("hccl").rankTableFile(table.toString()).build().validate();
    assertRejected(
        valid().backend("host").rankTableFile(table.toString()),
        "rankTableFile",
        "only with backend 'hccl'");
  }

  @Test
  void rankTableFileMustExist(@TempDir Path dir) {
    String missing = dir.resolve("missing.json").toString();
    assertRejected(valid().backend("hccl").rankTableFile(missing), "rankTableFile", missing);
  }

  @Test
  void nullCommModeIsRejected() {
    assertRejected(valid().commMode(null), "commMode", "null");
  }
}
