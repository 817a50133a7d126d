package io.npugather.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Simulated hosts on this machine: one network namespace per host, each with a veth pair to a
 * bridge in the root namespace and an address of its own in a private 10.x.y.0/24 subnet. The
 * bridge holds the subnet's .1 (the address of the Master and the driver); host i has .(i+2).
 *
 * <p>Names carry this JVM's pid ({@code npgit-<pid>-<tag>-h<i>}, bridge {@code npgb<tag>}, veths
 * {@code npgv<tag><i>}), so {@link #create} first removes what a killed earlier run left behind;
 * the tag is random and never repeats within a JVM. {@link #close()} deletes the namespaces (the
 * veth pairs go with them) and the bridge, and waits (at most 10 s) until the kernel, which removes
 * a deleted namespace's devices after {@code ip netns del} returns, has done so; it is idempotent
 * and never throws.
 */
final class NetworkNamespaces implements AutoCloseable {
  private static final String PREFIX = "npgit-";
  private static final Pattern OURS = Pattern.compile("^npgit-(\\d+)-([0-9a-f]{6})-h\\d+$");
  private static final Set<String> USED_TAGS = new HashSet<>();
  private static final long REMOVAL_WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final String tag;
  private final String subnet;
  private final List<String> namespaces = new ArrayList<>();
  private boolean closed;

  private NetworkNamespaces(String tag, String subnet) {
    this.tag = tag;
    this.subnet = subnet;
  }

  /**
   * Why namespaces cannot be made here, or null when they can: they need root, the {@code ip}
   * command (iproute2) and a kernel that allows {@code ip netns add}.
   */
  static String unavailableReason() {
    if (!isRoot()) {
      return "network namespaces need root (ip netns); this JVM runs as uid " + uid();
    }
    if (ipCommand().equals("ip")) {
      return "the ip command (Debian package iproute2) is not installed";
    }
    String probe = PREFIX + ProcessHandle.current().pid() + "-probe";
    Result add = ip("netns", "add", probe);
    ip("netns", "del", probe);
    if (add.code != 0) {
      return "ip netns add fails here: " + add.output.strip();
    }
    return null;
  }

  /** {@code hosts} namespaces, each linked to a new bridge; undone on any failure. */
  static NetworkNamespaces create(int hosts) {
    removeLeftovers();
    String tag = freshTag();
    NetworkNamespaces net = new NetworkNamespaces(tag, freeSubnet());
    try {
      String bridge = net.bridge();
      run("link", "add", bridge, "type", "bridge");
      run("addr", "add", net.bridgeAddress() + "/24", "dev", bridge);
      run("link", "set", bridge, "up");
      for (int i = 0; i < hosts; i++) {
        String ns = PREFIX + ProcessHandle.current().pid() + "-" + tag + "-h" + i;
        String veth = net.veth(i);
        run("netns", "add", ns);
        net.namespaces.add(ns);
        run("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns);
        run("link", "set", veth, "master", bridge, "up");
        run("-n", ns, "addr", "add", net.hostAddress(i) + "/24", "dev", "eth0");
        run("-n", ns, "link", "set", "eth0", "up");
        run("-n", ns, "link", "set", "lo", "up");
      }
      return net;
    } catch (RuntimeException | Error e) {
      net.close();
      throw e;
    }
  }

  /** The bridge's address in the root namespace: where the Master and the driver listen. */
  String bridgeAddress() {
    return subnet + ".1";
  }

  /** Host i's address, on its namespace's eth0. */
  String hostAddress(int i) {
    return subnet + "." + (i + 2);
  }

  String namespace(int i) {
    return namespaces.get(i);
  }

  /** The command prefix that runs a program in host i's namespace. */
  List<String> exec(int i) {
    return List.of(ipCommand(), "netns", "exec", namespace(i));
  }

  private String bridge() {
    return "npgb" + tag;
  }

  private String veth(int i) {
    return "npgv" + tag + i;
  }

  /** A tag no earlier set of this JVM had, so that no name of it is still being removed. */
  private static String freshTag() {
    synchronized (USED_TAGS) {
      for (; ; ) {
        String tag = String.format("%06x", ThreadLocalRandom.current().nextInt(1 << 24));
        if (USED_TAGS.add(tag)) {
          return tag;
        }
      }
    }
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    for (String ns : namespaces) {
      killProcessesIn(ns);
      ip("netns", "del", ns);
    }
    ip("link", "del", bridge());
    List<String> links = new ArrayList<>();
    for (int i = 0; i < namespaces.size(); i++) {
      links.add(veth(i));
    }
    links.add(bridge());
    awaitRemoval(namespaces, links);
  }

  /**
   * Polls {@code ip netns list} and {@code ip -o link show} until none of these names is listed, at
   * most 10 s (the kernel's cleanup of a deleted namespace runs after {@code ip netns del} returns,
   * slowly on a busy machine); says on stderr what is left after that.
   */
  private static void awaitRemoval(List<String> namespaces, List<String> links) {
    long deadline = System.nanoTime() + REMOVAL_WAIT_NANOS;
    for (; ; ) {
      Set<String> listed = new HashSet<>();
      for (String line : ip("netns", "list").output.split("\n")) {
        listed.add(line.strip().split(" ")[0]);
      }
      for (String line : ip("-o", "link", "show").output.split("\n")) {
        String[] fields = line.split(":", 3);
        if (fields.length >= 2) {
          listed.add(fields[1].strip().split("@")[0]);
        }
      }
      List<String> left = new ArrayList<>();
      for (String name : namespaces) {
        if (listed.contains(name)) {
          left.add(name);
        }
      }
      for (String name : links) {
        if (listed.contains(name)) {
          left.add(name);
        }
      }
      if (left.isEmpty()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        System.err.println("NetworkNamespaces: still present 10 s after their removal: " + left);
        return;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** Namespaces (and their bridges) of JVMs that are gone. */
  private static void removeLeftovers() {
    Result list = ip("netns", "list");
    Set<String> bridges = new TreeSet<>();
    for (String line : list.output.split("\n")) {
      String name = line.strip().split(" ")[0];
      Matcher m = OURS.matcher(name);
      if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
        killProcessesIn(name);
        ip("netns", "del", name);
        bridges.add("npgb" + m.group(2));
      }
    }
    bridges.forEach(b -> ip("link", "del", b));
  }

  private static void killProcessesIn(String ns) {
    Result pids = ip("netns", "pids", ns);
    for (String pid : pids.output.split("\\s+")) {
      if (pid.matches("\\d+")) {
        ProcessHandle.of(Long.parseLong(pid)).ifPresent(ProcessHandle::destroyForcibly);
      }
    }
  }

  /** A 10.x.y.0/24 subnet that no interface of this host uses. */
  private static String freeSubnet() {
    String addresses = ip("-4", "-o", "addr", "show").output;
    for (int attempt = 0; attempt < 50; attempt++) {
      String subnet =
          "10."
              + ThreadLocalRandom.current().nextInt(100, 250)
              + "."
              + ThreadLocalRandom.current().nextInt(1, 250);
      if (!addresses.contains(" " + subnet + ".")) {
        return subnet;
      }
    }
    throw new IllegalStateException("no free 10.x.y.0/24 subnet found: " + addresses);
  }

  private static void run(String... args) {
    Result result = ip(args);
    if (result.code != 0) {
      throw new IllegalStateException(
          "ip "
              + String.join(" ", args)
              + " failed (exit "
              + result.code
              + "): "
              + result.output.strip());
    }
  }

  private record Result(int code, String output) {}

  private static Result ip(String... args) {
    List<String> command = new ArrayList<>();
    command.add(ipCommand());
    command.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(30, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return new Result(-1, "timed out: " + command);
      }
      return new Result(p.exitValue(), output);
    } catch (IOException e) {
      return new Result(-1, e.toString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Result(-1, "interrupted");
    }
  }

  private static String ipCommand() {
    for (String dir : List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin")) {
      Path ip = Path.of(dir, "ip");
      if (Files.isExecutable(ip)) {
        return ip.toString();
      }
    }
    return "ip";
  }

  private static boolean isRoot() {
    return uid().equals("0");
  }

  private static String uid() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("Uid:")) {
          return line.substring(4).strip().split("\\s+")[0];
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return "?";
  }
}
