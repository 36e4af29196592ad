package zkserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotInstalled reports that java or the ZooKeeper jars are missing;
// `make deps` (run by `make test` and `make run`) installs the Debian
// `zookeeper` package, which brings both.
var ErrNotInstalled = errors.New("zookeeper is not installed")

// javaDir holds the Debian jars.
const javaDir = "/usr/share/java"

// requiredJars must exist. zookeeper.jar's manifest Class-Path names its
// runtime dependencies (zookeeper-jute, slf4j-api, netty, metrics-core,
// snappy, commons-cli, jackson, jetty) by absolute path, so the JVM loads
// them without listing them here; the two after it are listed anyway so a
// broken install fails here, with a clear error, rather than in the JVM.
var requiredJars = []string{"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar"}

// loggingJar is slf4j's simple binding (libslf4j-java, a dependency of the
// package): it logs at INFO to stderr, hence to zk.log. Without a binding
// slf4j 1.7 silently discards the server's log.
const loggingJar = "slf4j-simple.jar"

// mainClass is what zkServer.sh runs; given a zoo.cfg without server.N
// lines it runs a standalone server.
const mainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// jvmFlags keep each JVM small and quick to start on a 2-core CI machine.
var jvmFlags = []string{
	"-Xms16m", "-Xmx256m", "-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1", // C1 only: faster start, less JIT CPU
	"-XX:-UsePerfData",        // no /tmp/hsperfdata_* files
	"-Djava.awt.headless=true",
	"-Djava.net.preferIPv4Stack=true",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
}

// Installed reports whether java and the ZooKeeper jars are present; the
// error wraps ErrNotInstalled and names what is missing.
func Installed() error {
	_, _, err := command()
	return err
}

// command returns the java binary and the classpath.
func command() (java, classpath string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w: java not found in PATH", ErrNotInstalled)
	}
	var cp []string
	for _, jar := range requiredJars {
		p := filepath.Join(javaDir, jar)
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%w: %s missing", ErrNotInstalled, p)
		}
		cp = append(cp, p)
	}
	if p := filepath.Join(javaDir, loggingJar); fileExists(p) {
		cp = append(cp, p)
	}
	return java, strings.Join(cp, string(os.PathListSeparator)), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
