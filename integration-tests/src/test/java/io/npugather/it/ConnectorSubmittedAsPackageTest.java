package io.npugather.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.abort;

import io.npugather.Communicator;
import io.npugather.bridge.NativeCore;
import io.npugather.examples.FeatureSharding;
import io.npugather.spark.NpuGather;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Set;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * NpuGather the way a user adds it to a Spark distribution that does not have it: the example job
 * (its own jar holds only the example) submitted to a standalone cluster whose Spark home is
 * Spark's jars alone, once with {@code --packages io.npugather:npugather-spark_2.13:VERSION
 * --repositories file:REPO} and once with {@code --jars npugather-spark_2.13-VERSION-all.jar}.
 *
 * <p>REPO is a Maven repository this test lays out from the build's own artifacts (the parent,
 * native, core and connector poms and jars) and from the local one (JavaCPP, JUnit's BOM). Ivy is
 * given settings without any remote resolver and a cache of its own, so nothing comes from the
 * network or from a stale {@code ~/.m2}: what resolves is what the poms declare.
 */
class ConnectorSubmittedAsPackageTest {
  private static final String VERSION = System.getProperty("npugather.version");
  private static final Path PROJECT = Path.of(System.getProperty("user.dir")).getParent();
  private static final List<String> JOB =
      List.of(
          "--ranks",
          "2",
          "--items",
          "2000",
          "--dim",
          "16",
          "--queries",
          "100",
          "--top-k",
          "5",
          "--check",
          "10",
          "--seed",
          "5");

  private static final String CROSS_COMPILER = "aarch64-linux-gnu-g++";

  /** What native/build-core.sh prints when it skips linux-arm64. */
  private static final String NO_CROSS_COMPILER =
      CROSS_COMPILER
          + " not found: the jar carries no linux-arm64 library (install g++-aarch64-linux-gnu)";

  @AutoClose private static SparkCluster cluster;

  @BeforeAll
  static void startSparkOnlyCluster() {
    assertTrue(VERSION != null && !VERSION.isBlank(), "npugather.version not set");
    cluster =
        SparkCluster.builder("ConnectorSubmittedAsPackageTest")
            .executors(2)
            .sparkJarsOnly()
            .start();
  }

  @Test
  void packagesCoordinateResolvesOnlyWhatSparkDoesNotShipAndTheJobMatchesPlainSpark() {
    cluster.explainFailure(
        () -> {
          Path work = freshDirectory("packages");
          Path repository = localRepository(work.resolve("repository"));
          Path settings = work.resolve("ivysettings.xml");
          // No remote resolver: --repositories is the only place anything can come from.
          Files.writeString(
              settings,
              "<ivysettings><settings defaultResolver=\"none\"/>"
                  + "<resolvers><chain name=\"none\"/></resolvers></ivysettings>\n");
          Path ivy = work.resolve("ivy");
          String out =
              FeatureShardingSubmittedToClusterTest.runJob(
                  cluster,
                  work,
                  FeatureShardingSubmittedToClusterTest.submitCommand(
                      cluster,
                      List.of(
                          "--packages",
                          "io.npugather:npugather-spark_2.13:" + VERSION,
                          "--repositories",
                          repository.toUri().toString(),
                          "--conf",
                          "spark.jars.ivySettings=" + settings,
                          "--conf",
                          "spark.jars.ivy=" + ivy),
                      exampleJar(work),
                      job(work)));
          assertJobPassed(out);
          try (Stream<Path> jars = Files.list(ivy.resolve("jars"))) {
            assertEquals(
                Set.of(
                    "io.npugather_npugather-spark_2.13-" + VERSION + ".jar",
                    "io.npugather_npugather-core-" + VERSION + ".jar",
                    "io.npugather_npugather-native-" + VERSION + ".jar",
                    "org.bytedeco_javacpp-" + javacppVersion() + ".jar"),
                jars.map(p -> p.getFileName().toString()).collect(Collectors.toSet()));
          }
        });
  }

  @Test
  void selfContainedJarCarriesTheNativeLibraryAndNothingSparkShipsAndTheJobMatchesPlainSpark() {
    cluster.explainFailure(
        () -> {
          Path work = freshDirectory("jars");
          Path all = selfContainedJar();
          try (JarFile jar = new JarFile(all.toFile())) {
            Set<String> names = jar.stream().map(e -> e.getName()).collect(Collectors.toSet());
            assertTrue(names.contains(library("linux-x86_64")), "linux-x86_64");
            assertTrue(names.contains("org/bytedeco/javacpp/Loader.class"));
            assertTrue(names.contains("io/npugather/Communicator.class"), "the operator API");
            assertTrue(names.contains("io/npugather/spark/NpuGather.class"));
            // The connector's own classes include org.apache.spark.npugather (Spark-internal APIs)
            // and its joins, where Spark's join internals are visible.
            List<String> foreign =
                names.stream()
                    .filter(
                        n ->
                            n.endsWith(".class")
                                && !n.startsWith("io/npugather/")
                                && !n.startsWith("org/apache/spark/npugather/")
                                && !n.startsWith("org/apache/spark/sql/execution/joins/npugather/")
                                && !n.startsWith("org/bytedeco/javacpp/"))
                    .toList();
            assertEquals(List.of(), foreign, "classes the jar should not carry");
          }
          String out =
              FeatureShardingSubmittedToClusterTest.runJob(
                  cluster,
                  work,
                  FeatureShardingSubmittedToClusterTest.submitCommand(
                      cluster, List.of("--jars", all.toString()), exampleJar(work), job(work)));
          assertJobPassed(out);
        });
  }

  /**
   * The Kunpeng library beside the x86_64 one. The build cross-compiles it only where Debian's
   * aarch64-linux-gnu-g++ is (native/build-core.sh): without that compiler this test is skipped
   * with the build's message, unless -Dnpugather.arm64=required (CI), which makes it fail, as the
   * native module's linux-arm64 tests do.
   */
  @Test
  void selfContainedJarCarriesTheLinuxArm64Library() throws Exception {
    boolean carried;
    try (JarFile jar = new JarFile(selfContainedJar().toFile())) {
      carried = jar.getEntry(library("linux-arm64")) != null;
    }
    boolean compiler = onPath(CROSS_COMPILER);
    if (!carried && !compiler && !"required".equals(System.getProperty("npugather.arm64"))) {
      abort(NO_CROSS_COMPILER + "; linux-arm64 not tested");
    }
    assertTrue(
        carried,
        compiler
            ? "the jar carries no linux-arm64 library, though " + CROSS_COMPILER + " is installed"
            : NO_CROSS_COMPILER);
  }

  private static String library(String platform) {
    return "io/npugather/bridge/" + platform + "/libjniNativeCore.so";
  }

  private static boolean onPath(String command) {
    String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
    return Stream.of(path.split(File.pathSeparator))
        .anyMatch(dir -> !dir.isEmpty() && Files.isExecutable(Path.of(dir, command)));
  }

  private static void assertJobPassed(String out) {
    assertTrue(out.contains("check: 10/10 queries match plain Spark"), out);
    assertTrue(out.contains("recommendations     500 rows (100 queries x top-5)"), out);
    assertTrue(out.contains("master " + cluster.masterUrl()), "not on the cluster:\n" + out);
  }

  private static List<String> job(Path work) {
    return Stream.concat(JOB.stream(), Stream.of("--output", work.resolve("output").toString()))
        .toList();
  }

  private static Path freshDirectory(String name) throws Exception {
    Path dir = cluster.logDirectory().resolve(name);
    Files.createDirectories(dir);
    return dir;
  }

  /** The example's jar (example classes only), copied so the job names a file of its own. */
  private static Path exampleJar(Path work) throws Exception {
    Path jar = jarOf(FeatureSharding.class);
    assertTrue(jar.toString().endsWith(".jar"), "examples not packaged: " + jar);
    return Files.copy(jar, work.resolve(jar.getFileName()), StandardCopyOption.REPLACE_EXISTING);
  }

  /**
   * The connector's "all" jar, beside its plain jar (target/ in a build, the same folder in ~/.m2).
   */
  private static Path selfContainedJar() throws Exception {
    Path connector = jarOf(NpuGather.class);
    Path all =
        connector.resolveSibling(connector.getFileName().toString().replace(".jar", "-all.jar"));
    assertTrue(Files.isRegularFile(all), "missing " + all);
    return all;
  }

  private static String javacppVersion() throws Exception {
    return jarOf(Loader.class).getParent().getFileName().toString();
  }

  /** A Maven repository with NpuGather's artifacts (from this build) and JavaCPP's. */
  private static Path localRepository(Path root) throws Exception {
    put(root, "io.npugather", "npugather-parent", VERSION, null, PROJECT.resolve("pom.xml"));
    put(
        root,
        "io.npugather",
        "npugather-native",
        VERSION,
        jarOf(NativeCore.class),
        PROJECT.resolve("native/pom.xml"));
    put(
        root,
        "io.npugather",
        "npugather-core",
        VERSION,
        jarOf(Communicator.class),
        PROJECT.resolve("core/pom.xml"));
    put(
        root,
        "io.npugather",
        "npugather-spark_2.13",
        VERSION,
        jarOf(NpuGather.class),
        PROJECT.resolve("connector/pom.xml"));
    Path javacpp = jarOf(Loader.class);
    put(
        root,
        "org.bytedeco",
        "javacpp",
        javacppVersion(),
        javacpp,
        javacpp.resolveSibling(javacpp.getFileName().toString().replace(".jar", ".pom")));
    // The parent's dependencyManagement imports JUnit's BOM, which Ivy reads too.
    Path jupiter = jarOf(Test.class);
    String junit = jupiter.getParent().getFileName().toString();
    Path m2 = jupiter.getParent().getParent().getParent().getParent().getParent().getParent();
    put(
        root,
        "org.junit",
        "junit-bom",
        junit,
        null,
        m2.resolve("org/junit/junit-bom/" + junit + "/junit-bom-" + junit + ".pom"));
    return root;
  }

  private static void put(
      Path root, String group, String artifact, String version, Path jar, Path pom)
      throws Exception {
    Path dir =
        Files.createDirectories(
            root.resolve(group.replace('.', '/')).resolve(artifact).resolve(version));
    String base = artifact + "-" + version;
    Files.copy(pom, dir.resolve(base + ".pom"), StandardCopyOption.REPLACE_EXISTING);
    if (jar != null) {
      assertTrue(jar.toString().endsWith(".jar"), "not a jar: " + jar);
      Files.copy(jar, dir.resolve(base + ".jar"), StandardCopyOption.REPLACE_EXISTING);
    }
  }

  private static Path jarOf(Class<?> type) throws Exception {
    return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI());
  }
}
