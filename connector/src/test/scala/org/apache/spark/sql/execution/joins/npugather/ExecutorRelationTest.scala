package org.apache.spark.sql.execution.joins.npugather

import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.AtomicReference

import org.apache.spark.sql.catalyst.plans.physical.IdentityBroadcastMode
import org.junit.jupiter.api.Assertions.{assertEquals, assertFalse, assertThrows, assertTrue}
import org.junit.jupiter.api.{Test, Timeout}

/** An executor's relation is built once, by the first task that asks; the tasks that wait for it
  * can be interrupted, and a failed build leaves the next task to build it.
  */
@Timeout(30)
class ExecutorRelationTest {

  @Test
  def aTaskWaitingForAnotherTasksBuildIsInterruptedAtOnce(): Unit = {
    val key = (-1, -101, IdentityBroadcastMode) // no gathered rdd: never forgotten by the test
    val source = new Object
    val building = new CountDownLatch(1)
    val finish = new CountDownLatch(1)
    val builder = new Thread(() => {
      ExecutorRelation.getOrBuild(
        key,
        source, {
          building.countDown()
          finish.await()
          "built"
        }
      )
      ()
    })
    builder.setDaemon(true)
    builder.start()
    try {
      assertTrue(building.await(10, TimeUnit.SECONDS))
      val failure = new AtomicReference[Throwable]()
      val waiter = new Thread(() =>
        try ExecutorRelation.getOrBuild(key, source, "built twice")
        catch { case e: Throwable => failure.set(e) }
      )
      waiter.setDaemon(true)
      waiter.start()
      // Waiting for the lock, however it waits.
      while (!Set(Thread.State.WAITING, Thread.State.BLOCKED).contains(waiter.getState)) {
        Thread.sleep(1)
      }
      waiter.interrupt()
      waiter.join(5000)
      assertFalse(waiter.isAlive, "the waiting task still waits for the build")
      assertTrue(failure.get.isInstanceOf[InterruptedException], s"${failure.get}")
    } finally {
      finish.countDown()
    }
    builder.join(10000)
    assertEquals("built", ExecutorRelation.getOrBuild(key, source, "built twice"))
  }

  @Test
  def aFailedBuildIsBuiltAgainByTheNextTask(): Unit = {
    val key = (-1, -102, IdentityBroadcastMode)
    val source = new Object
    assertThrows(
      classOf[IllegalStateException],
      () => ExecutorRelation.getOrBuild(key, source, throw new IllegalStateException("failed"))
    )
    assertEquals("built", ExecutorRelation.getOrBuild(key, source, "built"))
    assertEquals("built", ExecutorRelation.getOrBuild(key, source, "built twice"))
    val another = new Object // the gather ran again: built anew of its output
    assertEquals("rebuilt", ExecutorRelation.getOrBuild(key, another, "rebuilt"))
  }
}
