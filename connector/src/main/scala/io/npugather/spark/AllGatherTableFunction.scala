package io.npugather.spark

import java.util.{LinkedHashMap => JLinkedHashMap}

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{
  Expression,
  ExpressionInfo,
  FunctionTableSubqueryArgumentExpression,
  NamedArgumentExpression
}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.SparkSession

/** `allGatherOnNpu` in SQL, for every client of a session with [[NpuGatherExtensions]] (classic,
  * Spark Connect, JDBC/Thrift):
  * {{{
  * SELECT * FROM all_gather_on_npu(TABLE(items), backend => 'host', timeout => '60s')
  * }}}
  * The one positional argument is the table to gather (`TABLE(name)` or `TABLE(SELECT ...)`);
  * options follow by name, the keys of `NpuGather.allGatherOnNpu(df, options)` (case-insensitive),
  * each a constant. The result is that call's: the same plan over the session's `spark.npugather.*`
  * defaults, the same errors, raised when the query is analyzed.
  */
object AllGatherTableFunction {

  /** The function's name in SQL. */
  val NAME = "all_gather_on_npu"

  /** The option names SQL takes, as `NpuGather.allGatherOnNpu` spells them. */
  private val optionNames: Seq[String] =
    AllGatherOptions.KEYS.asScala.toSeq.map(_.stripPrefix(AllGatherOptions.KEY_PREFIX))

  private val usage =
    s"$NAME(TABLE(t) [, option => value ...]) - Every row of every partition of `t` on every" +
      " rank: one rank per partition (or rankSize), partition r of the result holds all of" +
      " them in rank order, after an int column `source_rank`."

  private val arguments =
    s"""
    Arguments:
      * TABLE(t) - the table or query to gather: TABLE(name) or TABLE(SELECT ...)
      * option => value - by name, a constant: ${optionNames.mkString(", ")}; defaults from the
          session's spark.npugather.* settings
  """

  private val examples =
    s"""
    Examples:
      > SELECT source_rank, count(*) FROM $NAME(TABLE(SELECT id FROM range(0, 4, 1, 2)), timeout => '60s') GROUP BY source_rank;
       0	4
       1	4
  """

  /** What [[NpuGatherExtensions]] injects with `injectTableFunction`. */
  val description: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(NAME),
    new ExpressionInfo(
      getClass.getName.stripSuffix("$"),
      null,
      NAME,
      usage,
      arguments,
      examples,
      "",
      "table_funcs",
      "",
      "",
      "built-in"
    ),
    plan
  )

  /** The gather the arguments name, built by the session that analyzes the query.
    *
    * @throws IllegalArgumentException
    *   when the arguments are not one TABLE argument and named constants, or an option is refused
    *   (with the message of `NpuGather.allGatherOnNpu`)
    */
  def plan(arguments: Seq[Expression]): LogicalPlan = {
    val table = arguments.headOption match {
      case Some(t: FunctionTableSubqueryArgumentExpression) => t
      case _                                                =>
        throw new IllegalArgumentException(
          s"$NAME: its first argument must be the table to gather, TABLE(name) or TABLE(SELECT ...);" +
            s" got ${arguments.headOption.map(_.sql).getOrElse("no argument")}"
        )
    }
    if (table.hasRepartitioning || table.orderByExpressions.nonEmpty) {
      throw new IllegalArgumentException(
        s"$NAME: TABLE ... PARTITION BY, WITH SINGLE PARTITION and ORDER BY are not supported;" +
          " the ranks are the table's partitions, or rankSize => N of them (round-robin)"
      )
    }
    val options = new JLinkedHashMap[String, String]()
    for ((argument, index) <- arguments.zipWithIndex.drop(1)) {
      val (name, value) = option(argument, index + 1)
      if (options.containsKey(name)) {
        throw new IllegalArgumentException(s"$NAME: option $name is given twice")
      }
      options.put(name, value)
    }
    ClientGather.plan(SparkSession.active, table.plan, options)
  }

  /** A named argument as an option entry: its name as `NpuGather.allGatherOnNpu` spells it (an
    * unknown name as written, which the options refuse naming the nearest one) and its value.
    */
  private def option(argument: Expression, position: Int): (String, String) = argument match {
    case NamedArgumentExpression(written, value) =>
      val name = optionNames.find(_.equalsIgnoreCase(written)).getOrElse(written)
      if (!value.foldable) {
        throw new IllegalArgumentException(
          s"$NAME: option $name => ${value.sql} is invalid; allowed: a constant"
        )
      }
      val constant = value.eval()
      if (constant == null) {
        throw new IllegalArgumentException(
          s"$NAME: option $name => NULL is invalid; allowed: a value (omit it for the default)"
        )
      }
      (name, constant.toString)
    case _: FunctionTableSubqueryArgumentExpression =>
      throw new IllegalArgumentException(
        s"$NAME: it gathers one table; argument $position is" +
          " a second TABLE argument"
      )
    case other =>
      throw new IllegalArgumentException(
        s"$NAME: argument $position (${other.sql}) has no name; options are named," +
          s" as in backend => 'host'; allowed names: ${optionNames.mkString(", ")}"
      )
  }
}
