// Package zkserver runs a real Apache ZooKeeper server (the Debian
// `zookeeper` package, 3.8) as a child JVM, for tests and the local demo
// cluster: a standalone server on 127.0.0.1 (Start, ForTest) or a small
// ensemble (StartEnsemble on 127.0.0.1; StartEnsembleOn with each member
// on its own address and, optionally, under a command prefix such as
// `ip netns exec`, for fault injection). A killed or stopped ensemble
// member can be started again with its data (Ensemble.Restart).
//
// The JVM is started directly (java -cp ... QuorumPeerMain zoo.cfg, not
// zkServer.sh) with a zoo.cfg written into a caller-given directory; its
// stdout and stderr go to zk.log in that directory, and start errors quote
// the log's last lines. A server is ready when the `srvr` four-letter
// command reports a Mode.
//
// Contracts. Each JVM runs in its own process group, which Stop and Kill
// signal and then reap; the JVM also gets SIGKILL if this process dies
// (Pdeathsig), so none is left behind. Stop and Kill are idempotent and
// safe for concurrent use. The package is Linux-only, like the rest of
// tebis. Never call it from production paths: it is a test and demo aid.
package zkserver
