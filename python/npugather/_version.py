"""Versions of this package and of the JVM artifacts it needs (the project's pom.xml; a test
checks that they agree).

The package's version is the PEP 440 form of the Maven project's version, which the jars in the
wheel carry: ``X.Y.Z-SNAPSHOT`` is ``X.Y.Z.dev0`` (a development release before ``X.Y.Z``),
a release ``X.Y.Z`` is ``X.Y.Z``. Literals, so that setuptools reads them without importing.
"""

__version__ = "0.1.0.dev0"
CONNECTOR_VERSION = "0.1.0-SNAPSHOT"
JAVACPP_VERSION = "1.5.14"
SPARK_VERSION = "4.2.0"
