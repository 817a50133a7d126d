"""Versions of this package and of the JVM artifacts it needs (the project's pom.xml; a test
checks that they agree)."""

__version__ = "0.1.0"
CONNECTOR_VERSION = "0.1.0-SNAPSHOT"
JAVACPP_VERSION = "1.5.14"
SPARK_VERSION = "4.2.0"
